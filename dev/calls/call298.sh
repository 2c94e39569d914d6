#!/bin/bash
# Thirty-seventh session, fifth and sixth calls: can byte-bound work run beside the 2-thread backward, on the 4 SMs
# its one-block-an-SM grid (128 blocks at B8·D2048) leaves free? `scan_lab beside` times src's backward alone, a
# copy kernel with the 370m recompute's bytes (131 MB read, 160 MB written) alone, and both on two streams (the
# backward launched first, or the copy first). Call five ran `prod` (no kept states: a checkpoint pass, then the
# backward: two kernels); call six `prod+st` (the training path: the forward's states kept, one kernel).
# Build: nvcc -O3 -gencode arch=compute_90a,code=sm_90a -Isrc -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu
#        -o .gpu/scan/scan_lab. Carry .gpu/scan.
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
for v in prod prod+st; do for r in 1 2; do .gpu/scan/scan_lab beside $v 2>&1 | tail -5; done; done | tee "$OUT/beside.txt"
