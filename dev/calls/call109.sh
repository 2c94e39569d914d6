#!/bin/bash
# session 16, call 2: scan v51 (the cooperative passes load every item's inputs before the first item's stores):
# lab at the 130m, 370m and 1.4b shapes (v43 frozen beside it: outputs must be bit-identical), then end to end,
# the a0a1906 build (.gpu/a0) against v51 (.gpu) interleaved, 370m by default and 130m keeping activations
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/a0/lib  # the same libraries (not carried twice)
LAB_BIGS=8x2048x1536,8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab > $R/lab.log 2>&1
echo "lab rc $?"; grep -E "^(v43|prod)|correctness|agree|FAIL|worst" $R/lab.log | grep -v "^  " | head -12
OUT=$R PM_AB_TIMEOUT=90 bash dev/ab_bench.sh BIN ".gpu/a0 .gpu .gpu/a0 .gpu" "--preset 370m --batch 8" "--preset 130m --batch 8 --keep-activations"
