#!/bin/bash
# session 17, call 6: v54's backward order 5 (each warp stores its own channels' outputs right after its walk, from
# swizzled staged tiles, with no block barrier; the dB/dC partials summed in the next chunk's pass; two barriers a
# chunk) against the default (order 2 at 128-wide blocks, 3 at 64-wide) in the lab, K2 = default, K5 = order 5 in
# the 2-thread kernel, interleaved three times; then end to end at 370m and 1.4b (the 2-thread kernel's shapes),
# the default build against one with -DPM_SCAN_BWD_ORDER=5, interleaved twice
# (.gpu/ab/base and .gpu/ab/k5 hold the two builds' packmamba alone, .gpu/ab/lib their libraries: the carry limit)
# (its lab loop, as run, is now dev/kernels/lab_rounds.sh: the same commands)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/ab/lib; cp -r .gpu/ab/lib .gpu/ab/base/lib; cp -r .gpu/ab/lib .gpu/ab/k5/lib
LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096 bash dev/kernels/lab_rounds.sh 3 "K2 K5"
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/base .gpu/ab/k5 .gpu/ab/base .gpu/ab/k5" "--preset 370m --batch 8" "--preset 1.4b --batch 4"
