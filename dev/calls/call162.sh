#!/bin/bash
# session 22, call 5: call161 found the 2-thread backward (one wave, no time segments) faster than the 4-thread one
# where the plan takes the latter at 288 and 320 32-wide blocks (B6·D1536 -8.5%, B2·D5120 -3.2% fwd+bwd). Is it
# also at B8·D1536, the 130m model's shape (384 blocks; the 4-thread kernel was chosen there in the fifth session
# against the 2-thread kernel *with time segments*)? PM_SCAN_BWD4=0 against the plan, interleaved twice, at the
# shapes whose 32-wide blocks make one wave of more than two an SM. Needs .gpu/scan/scan_lab_prod (HEAD's src).
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x1536,6x2048x1536,7x2048x1536,2x2048x5120,3x2048x4096,6x2048x2048,5x2048x2048,8x4096x1536
for r in 1 2; do for f in 0 1; do
    echo "== PM_SCAN_BWD4=$f round $r"
    PM_SCAN_BWD4=$f timeout 200 .gpu/scan/scan_lab_prod > "$OUT/lab_${f}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_${f}_$r.log"
done; done
