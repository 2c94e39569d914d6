#!/bin/bash
# session 9, call 9: the GEMM lab (dev/kernels/gemm_lab.cu) at the 130m shapes: best of the heuristic's 8 against its per-algorithm-ID configurations
# (built: nvcc -O3 -arch=sm_90 dev/kernels/gemm_lab.cu -lcublasLt -o .gpu/gemm/gemm_lab)
timeout 250 .gpu/gemm/gemm_lab 130m > $OUT/gemm130.txt 2>&1; echo rc $?; cat $OUT/gemm130.txt | cut -c1-260
