#!/bin/bash
# session 18, call 10: the 4-thread backward's cooperative pass without the branch on the row's end, its items'
# inputs loaded in groups of G before their stores (G = 1, 2, 4; g0 = the branch, v57's kernel; G = 4 is v51's
# loads-first, measured +0.7% then). B8 D1536 (the 4-thread kernel), interleaved three times
LAB_BIGS=8x2048x1536 bash dev/kernels/lab_rounds.sh 3 "g0 g1 g2 g4"
