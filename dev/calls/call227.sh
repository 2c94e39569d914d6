#!/bin/bash
# v78c: quad_dot in the plan's order (a chain of multiply-adds, pairs where the backward's plan is the 4-thread
# kernel; the forward asks scan_bwd_plan). (1) The CUDA op tests from both builds (the forced-kernel checks now run
# the forward under the same switch). (2) HEAD's lab (base, v77) against v78c's, two interleaved rounds, at the
# headline and the 4-thread shapes. (3) compute-sanitizer on v78c's lab. Carry .gpu/bin .gpu/lib .gpu/scan28.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78c .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x4096x2048,6x2048x2048 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "base v78c"
SAN_S=60 timeout 240 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v78c prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
