#!/bin/bash
# session 21, call 7: the review's mends (test_convert into a cleared buffer each pass, the budget's candidate loop
# and the layer span written once) through the CUDA op tests. Needs `dev/gpu.sh pack`; carry .gpu/bin .gpu/lib.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "from element|1.4b B4 in|cast when used" "$OUT/t/test_cuda_ops.log"
