#!/bin/bash
# v75: v74's order (the flush of chunk k + 2 after chunk k's pass) with four tile slots, so chunk k - 1's copies go
# out right after chunk k's pass as v73's do (v74, three slots, had to issue them after the flush and lost 5.9%);
# R and the staged output in three slots of their own; 230,176 bytes of shared memory, of 232,448. The op tests on
# its build, two lab rounds against v73's lab (scan_lab_v72c), memcheck and racecheck on v75's lab, then 370m end
# to end interleaved against v73's build (.gpu/v73). Carry .gpu/bin .gpu/lib .gpu/v73/bin
# .gpu/scan/scan_lab_v72c .gpu/scan/scan_lab_v75.
[ -e .gpu/v73/lib ] || ln -s ../lib .gpu/v73/lib
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=60 timeout 80 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -E "warp-specialized:|FAIL" "$OUT/t/test_cuda_ops.log" | sort | uniq -c
LAB_TIMEOUT=30 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v72c v75"
SAN_TOOLS=memcheck SAN_S=40 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v75 prod+st
SAN_TOOLS=racecheck SAN_S=90 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v75 prod+st
echo "e2e from $SECONDS s"
PM_AB_TIMEOUT=60 bash dev/ab_bench.sh BIN ".gpu/v73 .gpu .gpu/v73 .gpu" "--preset 370m --batch 8"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
