#!/bin/bash
# session 22, call 2: does the 4-thread backward (v63's, no time segments) beat the 2-thread one with two time
# segments at the second shape, B2·D4096·L8192 (2.49x the official fwd+bwd against the 3x)? The
# plan takes the 2-thread kernel there (scan_use_bwd4 wants at least two 32-wide blocks per SM: 256 blocks < 264);
# PM_SCAN_BWD4=2 forces the 4-thread one wherever one wave holds its blocks. The lab's production kernels (prod+st)
# at long-row shapes, default and forced, interleaved twice. Needs .gpu/scan/scan_lab_prod (HEAD's src).
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=2x8192x4096,4x4096x2048,2x8192x2048,1x16384x4096
for r in 1 2; do for f in 1 2; do
    echo "== PM_SCAN_BWD4=$f round $r"
    PM_SCAN_BWD4=$f timeout 150 .gpu/scan/scan_lab_prod > "$OUT/lab_bwd4_${f}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_bwd4_${f}_$r.log"
done; done
