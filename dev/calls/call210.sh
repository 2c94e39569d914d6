#!/bin/bash
# Twenty-seventh session, first call. (1) HEAD's op tests (412f651: the review mends, never run on the GPU), through
# dev/gpu.sh run with its new PTX-only step (ptx_test_cuda_ops with PM_TEST_PTX_ONLY=1). (2) call209's question:
# two lab rounds of v73 (scan_lab_v72c) against v73pad (the same kernel asking for v75's 230,176 bytes of shared
# memory), whether v74/v75 lost to their larger shared-memory request (a smaller L1) or to their order of work.
# Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab_v72c .gpu/scan/scan_lab_v73pad.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 300 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; cat "$OUT/t/summary.txt" | head -30
grep -h -E "warp-specialized:|sm_90a probe|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
LAB_TIMEOUT=30 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v72c v73pad"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
