#!/bin/bash
# session 16, call 8: v52 (the scan backward walks' output and dB/dC stores held to the end of each pair of
# tokens): lab E0 = the 2-thread backward only, E2 = the 4-thread one too, at B8 D1536 and B8 D2048, v43 frozen
# beside each, interleaved three times; then end to end v51 (.gpu/v51, b2b5db6) against v52 (.gpu, E2) interleaved
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; mkdir -p .gpu/v51 && cp -r .gpu/lib .gpu/v51/lib
for r in 1 2 3; do for v in E0 E2; do
  LAB_BIGS=8x2048x1536,8x2048x2048 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/v51 .gpu .gpu/v51 .gpu" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations" "--preset 1.4b --batch 4"
cd $R && tar czf labs.tgz lab_*.log && rm -f lab_*.log
