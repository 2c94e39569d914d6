#!/bin/bash
# session 23, call 7: v65 with 2 walker threads a channel (r2 of call173) against HEAD (prev), and four variants:
# r2b (8 producer warps beside 128-wide blocks, 4 beside 64-wide), r2s5 (5 stages), r2u (the walk's token groups
# unrolled by 2 only: less code), r2p (r2 built with PM_SCAN_LAB_PLANS, run with the 128-wide plan forced).
# Twice, interleaved. Needs .gpu/scan/scan_lab_{prev,r2,r2b,r2s5,r2u,r2p}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,8x2048x3072,4x2048x4096,4x2048x5120,8x2048x5120
for r in 1 2; do for v in prev r2 r2b r2s5 r2u r2p; do
    echo "== $v round $r"
    if [ $v = r2p ]; then export PM_SCAN_FWD_PLAN=128,1,1; else unset PM_SCAN_FWD_PLAN; fi
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -12
done; done
