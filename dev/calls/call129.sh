#!/bin/bash
# session 18, call 1: v57 (the backward's r = ds a_t s_{t-1} as the new carry times the previous token's state:
# one multiply a state and token fewer) in the lab. v54 = HEAD's cuda_scan.cu; v57a: the new form in both backward
# kernels (at a chunk's first token the old one); v57b: the 2-thread kernel keeps the checkpoint and uses the new
# form at every token, the 4-thread kernel the old form; v57c: 2-thread as v57a, 4-thread old. 130m, 370m and
# B2 D4096 L8192 shapes, v43 frozen beside each, interleaved twice.
LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "v54 v57a v57b v57c"
