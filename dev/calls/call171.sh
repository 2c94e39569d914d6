#!/bin/bash
# session 23, call 4: v65 with the producers as the first warps (PM_SCAN_WS_PFIRST=1): p4 (4 walker threads a channel,
# cp.async), p2a and p2b (2 walker threads, 4 or 8 producer warps a 128-wide block), twice.
# Needs .gpu/scan/scan_lab_{prev,p4,p2a,p2b}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096,8x2048x3072
for v in prev p4 p2a p2b prev p4 p2a p2b; do
    n=$((n + 1)); echo "== $v"
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$n.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$n.log" | head -12
done
