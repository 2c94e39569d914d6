#!/bin/bash
# session 19, call 7: the 2-thread backward in order 3 at every width (o3) against v63 (order 2 at 128-wide blocks),
# interleaved twice at B8 D2048 and B2 D4096 L8192; then the final build (scan v63): the lab at the sizes
# and README's whole end-to-end table with the op tests (dev/readme_table.sh)
R=$OUT
LAB_BIGS=8x2048x2048,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "v63 o3"
LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x2048x4096,1x16384x1536 SCAN_LAB_VERSIONS=v43+st,prod+st \
  timeout 150 .gpu/scan/scan_lab > $R/lab.log 2>&1; echo "== lab rc $?"; grep -E "^(v43|prod|floor)|correctness" $R/lab.log
bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu
