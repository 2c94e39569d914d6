#!/bin/bash
# session 11, call 14: the review commit's CUDA op tests (model_zero_grad through grads_settle; test_model_grads_written checks the write path ran)
R=$OUT; mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/t/run.txt 2>&1
head -1 $R/t/summary.txt; grep -E "grads written|FAIL" $R/t/test_cuda_ops.log | head -8
