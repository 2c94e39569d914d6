#!/bin/bash
# v74: the warp-specialized backward's flush of chunk k + 2 after chunk k's pass (R and the staged output moved into
# the three chunk slots; 208.7 KB of shared memory), so the pass the walkers wait for next follows the end of the
# walk two chunks back (call201's ncu of v73: the walkers' full-barrier wait 6.1% of samples, the producers often
# waiting on the walkers). The op tests on its build, two lab rounds against v73's lab (scan_lab_v72c is v73's
# code), memcheck and racecheck on v74's lab, then end to end interleaved against v73's build (.gpu/v73) at 370m
# and 1.4b. Carry .gpu/bin .gpu/lib .gpu/v73/bin .gpu/scan/scan_lab_v72c .gpu/scan/scan_lab_v74 (the libraries
# are the same: .gpu/v73/lib is linked to .gpu/lib there, for the 64 MiB carry limit).
[ -e .gpu/v73/lib ] || ln -s ../lib .gpu/v73/lib
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 120 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -E "warp-specialized:|FAIL" "$OUT/t/test_cuda_ops.log" | sort | uniq -c
LAB_TIMEOUT=40 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v72c v74"
SAN_TOOLS=memcheck SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v74 prod+st
SAN_TOOLS=racecheck SAN_S=150 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v74 prod+st
echo "e2e from $SECONDS s"
PM_AB_TIMEOUT=80 bash dev/ab_bench.sh BIN ".gpu/v73 .gpu .gpu/v73 .gpu" "--preset 370m --batch 8" \
    "--preset 1.4b --batch 4"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
