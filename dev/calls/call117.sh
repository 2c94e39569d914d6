#!/bin/bash
# session 16, call 10: v53 (the forward's output stores two groups at a time) in the lab, G1 = v52, G2 = v53, at
# B8 D1536 and B8 D2048, v43 frozen beside each, interleaved twice; then end to end v52 (.gpu/v52) against v53
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/v52/lib
for r in 1 2; do for v in G1 G2; do
  LAB_BIGS=8x2048x1536,8x2048x2048 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/v52 .gpu .gpu/v52 .gpu" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations"
cd $R && tar czf labs.tgz lab_*.log && rm -f lab_*.log
