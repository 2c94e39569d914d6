#!/bin/bash
# session 19, call 8: two old variants measured again on v63. wg4: the 4-thread backward's walk stores held for
# groups of 4 tokens (PM_SCAN_WALK_GROUP4=4; v52 measured 4 as spilling 60-200 bytes, now 12); b64: the 2-thread
# backward at B8 D2048 in 64-wide blocks two an SM (order 3 since v54) instead of one 128-wide block (measured +5%
# in call106, before v54's orders). Lab, interleaved twice; then, for wg4, the CUDA op tests, compute-sanitizer and
# end to end against v63 (.gpu/ab/v63) at 130m keeping activations and by default, interleaved twice
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
LAB_BIGS=8x2048x1536,8x2048x2048 bash dev/kernels/lab_rounds.sh 2 "v63 wg4 b64"
SAN_S=45 bash dev/confirm_build.sh .gpu/ab/wg4 .gpu/ab/v63 .gpu/scan/scan_lab_wg4 \
  "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8"
