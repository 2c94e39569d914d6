#!/bin/bash
# session 18, call 4: v58b (v58 with the pair-swapped copy of B/C 4 floats further in the banks, so a quarter
# warp's loads from the two copies do not share banks: v58 in call131 ran +9% fwd+bwd at B8 D2048) against v57
LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096 bash dev/kernels/lab_rounds.sh 2 "v57 v58b"
