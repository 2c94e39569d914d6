#!/bin/bash
# session 16, call 7: v52 in the lab: the 2-thread backward's walk with its output and dB/dC stores held to the end
# of groups of PM_SCAN_WALK_DEFER tokens (D0 = v51's order, D1 = each token's after its butterfly, D2 = pairs),
# at the 370m and 1.4b shapes, v43 frozen beside each, interleaved three times
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for r in 1 2 3; do for v in D0 D1 D2; do
  LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
