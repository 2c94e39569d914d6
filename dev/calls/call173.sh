#!/bin/bash
# session 23, call 6: v65 without the chunk loop unrolled over the stages (call172: instruction-fetch stalls first):
# r4 (4 walker threads a channel) and r2 (2), both with cp.async producers first, twice; prev = HEAD.
# Needs .gpu/scan/scan_lab_{prev,r4,r2}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096,8x2048x3072
for v in prev r4 r2 prev r4 r2; do
    n=$((n + 1)); echo "== $v"
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$n.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$n.log" | head -12
done
