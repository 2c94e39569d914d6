#!/bin/bash
# The sm_90a probe fixed (call203: a build of compute_90 PTX alone ran the warp-specialized backward, its probe
# reading 16 bytes of static shared memory; now 2 KB in sm_90a code against 4 bytes elsewhere, threshold 2 KB, and
# PM_CUDA_VERBOSE prints what it read): the CUDA op tests from the PTX-only build (PM_TEST_PTX_ONLY=1, .gpu/ptx/bin)
# and from the default build (.gpu/bin). Carry .gpu/bin .gpu/lib .gpu/ptx/bin.
[ -e .gpu/ptx/lib ] || ln -s ../lib .gpu/ptx/lib
for b in ptx default; do
    d=.gpu/ptx; x=1; [ $b = default ] && d=.gpu && x=0
    OUT=$OUT/$b PM_GPU_DIR=$d PM_TEST_PTX_ONLY=$x PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=240 \
        timeout 260 bash dev/gpu.sh run >"$OUT/optests_$b.log" 2>&1
    echo "== op tests ($b) rc $?"; grep -E "ok,|FAIL" "$OUT/$b/summary.txt"
    grep -E "warp-specialized:|FAIL|sm_90a probe" "$OUT/$b/test_cuda_ops.log" | sort | uniq -c
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
