#!/bin/bash
# session 17, call 1: v54 in the lab: F0 = v52 (every -DPM_SCAN_LATE_FLUSH*=0, -DPM_SCAN_FWD_TWO_BARRIERS=0),
# F1 = the backward kernels' flush beside the next chunk's pass (two barriers a chunk), F2 = F1 and the forward's
# two barriers a chunk; at the 130m, 370m and B2 D4096 L8192 shapes, v43 frozen beside each, interleaved twice
R=$OUT
for r in 1 2; do for v in F0 F1 F2; do
  LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 150 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
cd $R && tar czf labs.tgz lab_*.log && rm -f lab_*.log
