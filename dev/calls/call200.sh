#!/bin/bash
# v73 (lab v72c promoted: the warp-specialized backward's tiles in three slots): the CUDA op tests on its build
# (.gpu/bin, CMake's default targets), interleaved end to end against HEAD's build (.gpu/prev: v72 with the
# launch-count hook) twice at 370m B8 and 1.4b B4, then racecheck on the v72c lab (the one call199 ran out of time
# for), in what time is left. Carry .gpu/bin .gpu/lib .gpu/prev .gpu/scan/scan_lab_v72c.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 120 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -E "warp-specialized:|FAIL" "$OUT/t/test_cuda_ops.log" | sort | uniq -c
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh BIN ".gpu/prev .gpu .gpu/prev .gpu" "--preset 370m --batch 8" \
    "--preset 1.4b --batch 4"
echo "racecheck gets $((575 - SECONDS)) s"
SAN_TOOLS=racecheck SAN_S=$((575 - SECONDS)) bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v72c prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
