#!/bin/bash
# The final build of the session (v77: summaries over quarter segments where they fit, else halves). (1) Op tests,
# PTX-only too. (2) Two interleaved lab rounds, v77 (halves, call213's lab) against v77q (this build). (3) The lab's
# default sizes on v77q (official ratios: B8·D2048, B2·D4096·L8192; B8·D1536; B1·D1536·L16384). (4) memcheck and
# racecheck on v77q. (5) `single` at 370m (rows of one document; those of >= 1024 tokens take v76's plan).
# Carry .gpu/bin .gpu/lib .gpu/scan/scan_lab_v77 .gpu/scan/scan_lab_v77q.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 300 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "warp-specialized:|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
LAB_TIMEOUT=90 LAB_BIGS=2x8192x4096,4x2048x2048,1x2048x2048,2x4096x2048,1x16384x1536 \
    SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v77 v77q"
timeout 120 .gpu/scan/scan_lab_v77q >"$OUT/lab_default.log" 2>&1; echo "== default sizes rc $?"
grep -E "^(prod|v43|floor|ver)|correctness" "$OUT/lab_default.log"
SAN_S=100 timeout 230 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v77q prod+st 2>&1 | tail -4
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 200 .gpu/bin/packmamba bench --device cuda --preset 370m --seq-len 4096 --batch 8 --policy single \
    --steps 6 --warmup 2 --no-plots --out "$OUT/single" >"$OUT/single.log" 2>&1
echo "== single rc $?"; grep -E "tok/s" "$OUT/single.log" | grep -v "^==" | head -4
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
