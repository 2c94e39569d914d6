#!/bin/bash
# The review's refactor (one launch per backward kernel kind, the summaries' index and count in one place; the
# unsegmented kernels' PTX unchanged, the segmented ones' only in address arithmetic): the CUDA op tests (PTX-only
# build skipped: the device time left), and the lab's correctness checks on its lab build with v77's plans.
# Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab_rev.
OUT=$OUT/t PM_PTX_CHECK=0 PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=60 timeout 90 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "warp-specialized:|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -6
timeout 40 .gpu/scan/scan_lab_rev small prod+st 2>&1 | grep -E "correctness|FAIL" | head -5
