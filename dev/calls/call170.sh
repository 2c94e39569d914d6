#!/bin/bash
# session 23, call 3: v65 with 2 walker threads a channel (8 states each: fewer instructions a state, fewer
# warps, 109-121 registers) beside 4 producer warps a 128-wide block (w2a) or 8 (w2b); abl2c: wsc's producers
# alone (the walkers skip the walk; cp.async path): the producers' pace. Needs .gpu/scan/scan_lab_{prev,wsc,w2a,w2b,abl2c}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096,8x2048x3072
for v in prev wsc w2a w2b abl2c prev; do
    echo "== $v"
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_$v.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_$v.log" | head -12
done
