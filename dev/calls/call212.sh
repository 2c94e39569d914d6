#!/bin/bash
# v76 as planned in src: the warp-specialized backward with time segments (summaries in 64-wide blocks) wherever
# 128-wide blocks fill at most half the SMs. (1) The CUDA op tests on its build (a new scan case: B2·T600·Cd2000,
# four segments, bit-identical to the staged kernel's segments), the PTX-only build too. (2) Two interleaved lab
# rounds, v76 (its plans) against v76off (PM_SCAN_BWD_WS_SEG=0: the plans before it), at the shapes the rule
# changes (B2·D4096·L8192, B4·D2048, B1·D2048, B2·D2048·L4096, B4·D1536, B1·D1536·L16384) and B8·D2048 (unchanged).
# (3) memcheck and racecheck on v76's lab checks. Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab_v76 .gpu/scan/scan_lab_v76off.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 300 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "warp-specialized:|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
LAB_TIMEOUT=90 LAB_BIGS=2x8192x4096,4x2048x2048,1x2048x2048,2x4096x2048,4x2048x1536,1x16384x1536,8x2048x2048 \
    SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v76off v76"
SAN_S=100 timeout 230 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v76 prod+st 2>&1 | tail -4
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
