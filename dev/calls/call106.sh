#!/bin/bash
# session 15, call 7: PM_SCAN_NARROW (narrower scan blocks where they tie with 128-wide ones on the busiest SM, so one
# block's barriers do not idle a whole SM): lab at B8 D2048 and B4 D4096 with it off, =64 and =32 (v43 frozen
# beside prod as the cross-check), then 370m end to end, =0 against =64, interleaved
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for n in 0 64 32; do
    echo "== PM_SCAN_NARROW=$n"
    PM_SCAN_NARROW=$n LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 80 .gpu/scan/scan_lab \
        > $R/lab$n.log 2>&1; echo "rc $?"
    grep -E "^(v43|prod)|correctness|FAIL|differ" $R/lab$n.log | head -8
done
OUT=$R PM_AB_TIMEOUT=90 bash dev/ab_bench.sh PM_SCAN_NARROW "0 64 0 64" "--preset 370m --batch 8"
