#!/bin/bash
# (1) The newer-GPU fallback, never run before: the CUDA op tests with CUDA_FORCE_PTX_JIT=1, so the driver compiles
# the build's compute_90 PTX (CMake's 90-virtual) instead of loading its sm_90a code; the warp-specialized backward
# must then not run (test_scan asserts it) and every comparison must pass. (2) v73 profiled: ncu's warp-state,
# scheduler and per-SASS views of scan_bwd_ws_kernel at B8·D2048 from HEAD's lab built with -lineinfo for sm_90a
# (.gpu/scan/scan_lab; producers warps 0-3, walkers 4-11). Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab.
s=$SECONDS
OUT=$OUT/jit CUDA_FORCE_PTX_JIT=1 PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=280 timeout 300 bash dev/gpu.sh run \
    >"$OUT/optests_jit.log" 2>&1
echo "== op tests (PTX JIT) rc $? in $((SECONDS - s)) s"; grep -E "ok,|FAIL" "$OUT/jit/summary.txt"
grep -E "warp-specialized:|FAIL" "$OUT/jit/test_cuda_ops.log" | sort | uniq -c
PROF_KERNELS="scan_bwd_ws" SASS_KERNEL="scan_bwd_ws" SASS_TOP=30 PROF_S=70 bash dev/kernels/scan_prof.sh prod
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
