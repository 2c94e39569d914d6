#!/bin/bash
# The twenty-sixth session's final build (v73): (1) the newer-GPU fallback, never run before: the CUDA op tests
# from a build of compute_90 PTX alone (cmake -DCMAKE_CUDA_ARCHITECTURES=90-virtual, test_cuda_ops in .gpu/ptx/bin;
# the driver compiles it at load, as a GPU newer than Hopper would the default build's PTX), with PM_TEST_PTX_ONLY=1
# so test_scan requires the staged backward there; (2) the op tests and README's headline rows (PM_TABLE=key) on
# the default build. Carry .gpu/bin .gpu/lib .gpu/ptx/bin.
[ -e .gpu/ptx/lib ] || ln -s ../lib .gpu/ptx/lib
s=$SECONDS
OUT=$OUT/ptx PM_GPU_DIR=.gpu/ptx PM_TEST_PTX_ONLY=1 PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=240 \
    timeout 260 bash dev/gpu.sh run >"$OUT/optests_ptx.log" 2>&1
echo "== op tests (PTX only) rc $? in $((SECONDS - s)) s"; grep -E "ok,|FAIL" "$OUT/ptx/summary.txt"
grep -E "warp-specialized:|FAIL|no GPU" "$OUT/ptx/test_cuda_ops.log" | sort | uniq -c
PM_TABLE=key bash dev/readme_table.sh
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
