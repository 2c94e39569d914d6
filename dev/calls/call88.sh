#!/bin/bash
# session 13, call 12: the op tests on the last code commit's build (38a48a9's review mends: the group batch's
# function renamed, Model.dw_copies checked)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "side queue|kept activations|matmul_dw_batch dW  " $R/t/test_cuda_ops.log | head -6; grep "test_cuda_ops " $R/optests.txt
