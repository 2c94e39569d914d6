#!/bin/bash
# session 15, call 6 (nvidia-h200-x2): data parallelism with the new default (one reduce-scatter after the backward)
# on 2 GPUs: correctness against 1 GPU (default, all F32 masters gathered, the overlap), the overlap's side check,
# and 370m scaling by default and with the overlap
export LD_LIBRARY_PATH=$PWD/.gpu/lib
CHECK_STEPS=20 STEPS=8 SCALE="370m 8" bash dev/dist/run_2gpu.sh > /dev/null 2>&1
cat $OUT/summary.txt | grep -v "^GPU\|^\s*GPU\|^mpirun\|libnccl\|libmpi" | tail -25
