#!/bin/bash
# session 17, call 2: v54's backward orders in the lab (call119: order 1, the flush before the next chunk's pass,
# was slower): G0 = order 0 (v52's backward; the forward's two barriers, kept), G2 = order 2 (the tiles issued after
# the opening barrier, three barriers a chunk), G3 = order 3 (the flush after the next chunk's pass), each for both
# backward kernels; the 130m, 370m and B2 D4096 L8192 shapes, v43 frozen beside each, interleaved twice
R=$OUT
for r in 1 2; do for v in G0 G2 G3; do
  LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 150 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
cd $R && tar czf labs.tgz lab_*.log && rm -f lab_*.log
