#!/bin/bash
# session 12, call 8 (review mends): the conv backward's partial-row epilogue shared with the lab's v8, the matmul
# bias gradient through the reduction queue, the scan workspace's parameter rows sized by one function: CUDA op
# tests and the conv lab's checks (production bit-identical to the old kernels, v8 against the reference)
R=$OUT; cd "$(dirname "$0")/../.." || exit 1
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/tests.txt 2>&1; head -1 $R/t/summary.txt
grep -E "reductions|gradients, run|FAIL" $R/t/test_cuda_ops.log | head -12
timeout 200 .gpu/conv/conv_lab > $R/conv_lab.txt 2>&1; echo "== conv lab rc $?"; tail -2 $R/conv_lab.txt
grep -E "^130m +bwd +(new|v8) " $R/conv_lab.txt
