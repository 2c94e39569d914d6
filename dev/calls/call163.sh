#!/bin/bash
# session 22, call 6: two plan changes of the scan backward (call162's data): the 2-thread kernel instead of the
# 4-thread one where its 64-wide blocks make one wave at most 11/8 an SM, and time segments for 128-wide blocks
# where they are more than the SMs (the 790m and 2.8b widths: B4·D5120 makes 160 of them on 132 SMs, a second wave
# 21% full). The lab, PREV (HEAD, .gpu/scan/scan_lab_prev) and NEW interleaved twice at the shapes whose plans
# change and three that must not; the op tests; end to end 2.8b B4 and 790m B8 on PREV (.gpu/prev) and NEW,
# interleaved twice. Needs both labs and both packs; carry .gpu/bin .gpu/lib .gpu/prev/bin .gpu/prev/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=4x2048x5120,8x2048x3072,8x2048x5120,6x2048x1536,2x2048x5120,5x2048x2048,8x2048x2048,8x2048x1536,2x8192x4096
for r in 1 2; do for v in prev prod; do
    echo "== $v round $r"
    timeout 200 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_${v}_$r.log"
done; done
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/prev .gpu .gpu/prev .gpu" "--preset 2.8b --batch 4" "--preset 790m --batch 8"
