#!/bin/bash
# session 23, call 2: v65 (the warp-specialized forward) measured 50% slower than HEAD in call168 (wsa). Which side
# bounds it: abl1 (producers skip the pass: the walkers' pace) and abl2 (walkers skip the walk: the producers'
# pace), both on wsa's register path; wsc: the producers' inputs by cp.async two chunks ahead (PM_SCAN_WS_CPA=1, no
# spills). One round each, prev (HEAD) first and last. Needs .gpu/scan/scan_lab_{prev,wsa,wsc,abl1,abl2}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096
for v in prev wsa wsc abl1 abl2 prev; do
    echo "== $v"
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_$v.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_$v.log" | head -12
done
