#!/bin/bash
# session 14, call 8 (nvidia-h200-x2): the all-gather after AdamW in pieces (embedding, layers, norm_f) that the next
# forward waits for on the device (overlapped with its first layers): dev/dist/run_2gpu.sh's correctness check,
# side-queue check (now also with the collectives held back ~1 ms after each fence, PM_FENCE_HOLD=1: bit for bit)
# and scaling (370m, 130m B8 per GPU); then the side-queue check alone with a mutant binary whose forward does not
# wait for the pieces (build-dist-mut: its held run must differ)
R=$OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/dist CHECK_STEPS=20 STEPS=8 SCALE="370m 8,130m 8" NO_OVERLAP_ROW="" \
    PM_BIN=$PWD/build-dist-cuda/packmamba bash dev/dist/run_2gpu.sh > $R/dist.log 2>&1
tail -15 $R/dist/summary.txt
echo "== mutant (the forward does not wait for the all-gather's pieces)"
OUT=$R/mut CHECK_STEPS=2 SCALE="" NO_OVERLAP_ROW="" \
    PM_BIN=$PWD/build-dist-mut/packmamba bash dev/dist/run_2gpu.sh > $R/mut.log 2>&1
grep -A4 "side work held back" $R/mut/summary.txt
