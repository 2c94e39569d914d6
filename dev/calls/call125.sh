#!/bin/bash
# session 17, call 7: v54's backward order 6 (order 2 with each chunk's dB/dC sums over the warps moved from the
# flush into the next chunk's pass phase, so only the output tiles' stores remain between the walk's barrier and
# the next chunk) in both backward kernels, against the default: lab L2 = default, L6 = order 6, at the 370m,
# 130m and B2 D4096 L8192 shapes, interleaved three times; then end to end, the default build against one with
# -DPM_SCAN_BWD_ORDER=6 -DPM_SCAN_BWD_ORDER4=6, interleaved twice
# (.gpu/ab/base and .gpu/ab/o6 hold the two builds' packmamba alone, .gpu/ab/lib their libraries: the carry limit)
# (its lab loop, as run, is now dev/kernels/lab_rounds.sh: the same commands)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/ab/lib; cp -r .gpu/ab/lib .gpu/ab/base/lib; cp -r .gpu/ab/lib .gpu/ab/o6/lib
LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096 bash dev/kernels/lab_rounds.sh 3 "L2 L6"
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/base .gpu/ab/o6 .gpu/ab/base .gpu/ab/o6" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations"
