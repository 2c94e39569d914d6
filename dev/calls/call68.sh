#!/bin/bash
# session 11, call 13: the final commit's CUDA op tests (test_cuda_ops after its wide-model configs were shared)
R=$OUT; mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/t/run.txt 2>&1
head -1 $R/t/summary.txt; grep -E "grads written|FAIL" $R/t/test_cuda_ops.log | head -8
