#!/bin/bash
# session 15, call 9: CUDA op tests with scan v50 and the new 370m-width scan case (the forward's 64-wide blocks
# two an SM against the CPU; the backward's copy of the output bit for bit)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 90 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -A12 "scan B=8 T=40 Cd=2048" $R/t/test_cuda_ops.log | head -14; grep -c "FAIL" $R/t/test_cuda_ops.log; tail -4 $R/optests.txt | head -2
