#!/bin/bash
# session 13, call 7: the same machine as call82 (warm; its GPU measured 801 TFLOP/s there): 130m keeping activations
# and with --memory-budget 14.24, twice each, and the GEMM ceiling again
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
OUT=$R bash dev/ab_bench.sh PM_DW_PAIR "1 1" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8 --memory-budget 14.24"
grep -h "GEMM" $R/ab_last.log | head -2
