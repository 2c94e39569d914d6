#!/bin/bash
# session 13, call 13 (review mends): matmul_bwd's weight gradient through the batch path (a batch of one: the
# same plan key, so the same algorithm and bits), cuda_conv_silu_bwd_ex folded away: the op tests, and one 130m
# bench keeping activations against call86's 327.5K
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "side queue, default|kept activations: params|matmul_bwd dW  " $R/t/test_cuda_ops.log | head -5; grep "test_cuda_ops " $R/optests.txt
OUT=$R bash dev/ab_bench.sh PM_DW_GROUP "2" "--preset 130m --batch 8 --keep-activations"
