#!/bin/bash
# session 13, call 3: the weight-gradient GEMMs with K cut in 2-4 by hand (one strided-batched GEMM writing S
# partials + a reduce kernel), against the single GEMM (cuBLASLt's own split-K and its reduce): gemm_lab dwk
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 400 .gpu/gemm/gemm_lab dwk > $R/gemm_dwk.txt 2>&1; echo "rc $?"
grep -E "dW|best:" $R/gemm_dwk.txt | grep -v "first:"
