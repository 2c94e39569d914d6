#!/bin/bash
# session 16, call 4: v51 as kept (the 2-thread backward's and the forward's cooperative passes load first; the
# 4-thread backward's pass as before): lab at the 130m, 370m and 1.4b shapes (v43 frozen beside it), then end to
# end, the a0a1906 build (.gpu/a0) against v51 (.gpu) interleaved: 370m, 130m keeping activations, 130m, 1.4b
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/a0/lib  # the same libraries (not carried twice)
for i in 1 2; do
  LAB_BIGS=8x2048x1536,8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab > $R/lab$i.log 2>&1
  echo "lab rc $?"; grep -E "^(v43|prod)|correctness" $R/lab$i.log
done
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/a0 .gpu .gpu/a0 .gpu" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 1.4b --batch 4"
