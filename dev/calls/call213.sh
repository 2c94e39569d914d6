#!/bin/bash
# v77: the summaries of v76's segments in two halves a segment (twice the summary blocks: two an SM where v76 had
# one), folded by the walkers; both backward kernels take the same summaries, so the staged one still gives the
# warp-specialized one's bits. (1) Op tests on HEAD + v77 (and PTX-only). (2) Two interleaved lab rounds: v76 (call212's
# lab), v77s1 (v77 with PM_SCAN_BSUMM_SUB=1: v76's summaries, v77's even segment lengths), v77, at the shapes v76
# changed. (3) memcheck and racecheck on v77's lab checks. Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab_v76
# .gpu/scan/scan_lab_v77 .gpu/scan/scan_lab_v77s1.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 300 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "warp-specialized:|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
LAB_TIMEOUT=90 LAB_BIGS=2x8192x4096,4x2048x2048,1x2048x2048,2x4096x2048,1x16384x1536,4x2048x1536 \
    SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v76 v77s1 v77"
SAN_S=100 timeout 230 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v77 prod+st 2>&1 | tail -4
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
