#!/bin/bash
# session 17, call 9: scan v55 in the lab: the 2-thread backward's recompute keeps the decay factors of the chunk's
# last PM_SCAN_BWD_KEEP_A tokens in shared memory for the walk; M0 = v54 (the committed source), M4 / M8 / M12 =
# 4 / 8 / 12 tokens, at the 370m, 1.4b and B2 D4096 L8192 shapes, interleaved twice; then end to end at 370m and
# 1.4b, v54 against a build with -DPM_SCAN_BWD_KEEP_A=8, interleaved twice
# (.gpu/ab/base and .gpu/ab/a8 hold the two builds' packmamba alone, .gpu/ab/lib their libraries: the carry limit)
# (its lab loop, as run, is now dev/kernels/lab_rounds.sh: the same commands)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/ab/lib; cp -r .gpu/ab/lib .gpu/ab/base/lib; cp -r .gpu/ab/lib .gpu/ab/a8/lib
LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "M0 M4 M8 M12"
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/base .gpu/ab/a8 .gpu/ab/base .gpu/ab/a8" "--preset 370m --batch 8" \
  "--preset 1.4b --batch 4"
