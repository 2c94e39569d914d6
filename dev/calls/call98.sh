#!/bin/bash
# session 14, call 9 (nvidia-h200-x2): the data-parallel checks with gradient accumulation (--grad-accum 2: 2 ranks x
# B2 x 2 against 1 GPU x B4 x 2; buckets only in the last micro-batch, the all-gather's pieces waited for by both
# forwards) and 1.4b's scaling (B4 per GPU), on the final build
R=$OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/dist CHECK_STEPS=10 STEPS=6 SCALE="1.4b 4" NO_OVERLAP_ROW="" CHECK_ARGS="--lr 6e-4 --grad-accum 2" \
    PM_BIN=$PWD/build-dist-cuda/packmamba bash dev/dist/run_2gpu.sh > $R/dist.log 2>&1
tail -12 $R/dist/summary.txt
