#!/bin/bash
# session 17, call 1: v54 in the lab: F0 = v52 (every -DPM_SCAN_LATE_FLUSH*=0, -DPM_SCAN_FWD_TWO_BARRIERS=0),
# F1 = the backward kernels' flush beside the next chunk's pass (two barriers a chunk), F2 = F1 and the forward's
# two barriers a chunk; at the 130m, 370m and B2 D4096 L8192 shapes, v43 frozen beside each, interleaved twice
# (its lab loop, as run, is now dev/kernels/lab_rounds.sh: the same commands)
R=$OUT
LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "F0 F1 F2"
