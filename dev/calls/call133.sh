#!/bin/bash
# session 18, call 5: the backward kernels' chunk ordering through one helper (BwdChunkSync; v57r, PTX differs from
# v57 in a few predicate moves at a chunk's opening) against v57 (the previous commit's cuda_scan.cu), and v59
# (v57r with delta log2 e kept in the 2-thread backward's free pass-array slot: two multiplies a thread and token
# fewer, one an item more in the pass), three shapes, interleaved twice
LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536 bash dev/kernels/lab_rounds.sh 2 "v57 v57r v59"
