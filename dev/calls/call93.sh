#!/bin/bash
# session 14, call 4 (nvidia-h200-x2): data parallelism on two GPUs after eight sessions without a GPU run of it
# (side queue, reduction queue, gradients written, layer groups turned off before planning): the CUDA op tests on
# GPU 0, then dev/dist/run_2gpu.sh's correctness check (2 ranks x B2 vs 1 x B4, 20 steps) and scaling (370m B8
# and 130m B8 per GPU). Binaries: dev/gpu.sh pack (.gpu) and build-dist-cuda/packmamba.
R=$OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 CUDA_VISIBLE_DEVICES=0 bash dev/gpu.sh run > $R/optests.log 2>&1
tail -6 $R/t/summary.txt
OUT=$R/dist CHECK_STEPS=20 STEPS=8 SCALE="370m 8,130m 8" NO_OVERLAP_ROW="" \
    PM_BIN=$PWD/build-dist-cuda/packmamba bash dev/dist/run_2gpu.sh > $R/dist.log 2>&1
cat $R/dist/summary.txt | tail -20
