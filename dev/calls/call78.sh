#!/bin/bash
# session 13, call 2: the weight-gradient GEMMs alone and as strided batches over 2 and 4 layers (gemm_lab dw):
# would batching the layers' dW (no split-K reduction, fuller waves) beat the split-K GEMM + reduce per layer?
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 400 .gpu/gemm/gemm_lab dw > $R/gemm_dw.txt 2>&1; echo "rc $?"
grep -E "dW|batch" $R/gemm_dw.txt
