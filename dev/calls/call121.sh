#!/bin/bash
# session 17, call 2: v54's backward orders in the lab (call119: order 1, the flush before the next chunk's pass,
# was slower): G0 = order 0 (v52's backward; the forward's two barriers, kept), G2 = order 2 (the tiles issued after
# the opening barrier, three barriers a chunk), G3 = order 3 (the flush after the next chunk's pass), each for both
# backward kernels; the 130m, 370m and B2 D4096 L8192 shapes, v43 frozen beside each, interleaved twice
# (its lab loop, as run, is now dev/kernels/lab_rounds.sh: the same commands)
R=$OUT
LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "G0 G2 G3"
