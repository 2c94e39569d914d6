#!/bin/bash
# The review mends (special-function helpers shared through cuda_common.h, the bench's ceilings through one timing
# helper, scan_quad_pairs named, one summary launch call): the CUDA op tests (test_spin_rates and the scan's
# kernels included; the PTX-only build not made: the device code's PTX is unchanged). Carry .gpu/bin .gpu/lib.
OUT=$OUT/t PM_PTX_CHECK=0 PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 120 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "spin |FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
