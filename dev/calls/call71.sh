#!/bin/bash
# session 12, call 2: the bf16 softmax over a cluster of two blocks a row (softmax_xent_bf16_pair_kernel): CUDA op
# tests (test_classifier runs both kernels), then interleaved A/B on PM_CLS_PAIR at 130m keeping activations and
# 370m; the classifier's profiled ms shows the kernel's share
R=$OUT; cd "$(dirname "$0")/../.." || exit 1
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/tests.txt 2>&1; head -1 $R/t/summary.txt
grep -E "differ between|FAIL" $R/t/test_cuda_ops.log | head -8
P="--preset 130m --batch 8"
bash dev/ab_bench.sh PM_CLS_PAIR "0 1 0 1 0 1" "$P --keep-activations"
bash dev/ab_bench.sh PM_CLS_PAIR "0 1 0 1" "--preset 370m --batch 8"
