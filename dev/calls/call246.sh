#!/bin/bash
# The review's candidate mends (both 4-thread backwards through Bwd4Lane, bwd4_load_ck/slots, bwd4_store_bc,
# bwd4_put_pass, bwd4_put_params: not kept, dev/experiments/scan_bwd4_lane_helpers.patch; both walks' per-state step
# through walk_state, kept, PTX unchanged): (1) the CUDA op tests from
# both builds; (2) HEAD's lab before the mends (f96) against after (rev), one round. Carry .gpu/bin .gpu/lib
# .gpu/scan29.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 130 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=40 LAB_BIGS=8x2048x1536,8x2048x2048 SCAN_LAB_VERSIONS=prod+st timeout 90 bash dev/kernels/lab_rounds.sh 1 "f96 rev"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
