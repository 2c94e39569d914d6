#!/bin/bash
# v84 in src (the warp-specialized forward's pass without its select for tokens past the row's end): the CUDA op
# tests from both builds (partial last chunks compare the forward's outputs and checkpoints with the staged
# kernels'). Carry .gpu/bin .gpu/lib. Prediction: 23 ok from each build.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
