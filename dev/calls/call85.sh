#!/bin/bash
# session 13, call 9: weight-gradient groups of 4 layers at 130m (Model.dw_group, model_dw_group: 4 up to d_inner
# 1536, 2 up to 2048): the op tests (the side-queue test with PM_DW_GROUP=2), then interleaved A/B of
# PM_DW_GROUP=2/4 at 130m keeping activations and by default, and the --memory-budget 14.24 pick
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "matmul_dw_batch|side queue|side tickets|FAIL" $R/t/test_cuda_ops.log | head -12; tail -4 $R/optests.txt | head -1
OUT=$R bash dev/ab_bench.sh PM_DW_GROUP "2 4 2 4 2 4" "--preset 130m --batch 8 --keep-activations" \
  "--preset 130m --batch 8"
OUT=$R bash dev/ab_bench.sh PM_DW_GROUP "4" "--preset 130m --batch 8 --memory-budget 14.24"
grep -h "memory-budget\|GEMM" $R/ab_last.log | head -3
cd $R && tar czf all.tgz optests.txt t 2>/dev/null; rm -rf t
