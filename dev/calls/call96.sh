#!/bin/bash
# session 14, call 7: the recompute of xn/u/dpre on the side queue ahead of out_proj's input gradient
# (PM_SIDE_RECOMPUTE=1, the new default) against on the main queue after it (=0): op tests (the side-queue test
# holds side work back, so a missing wait would change bits), then interleaved A/B at 130m and 370m by default
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "side queue|kept activations" $R/t/test_cuda_ops.log | head -4; tail -4 $R/optests.txt | head -1
OUT=$R bash dev/ab_bench.sh PM_SIDE_RECOMPUTE "0 1 0 1 0 1" "--preset 130m --batch 8" "--preset 370m --batch 8"
grep -h "GEMM" $R/ab_last.log | head -1
cd $R && tar czf all.tgz optests.txt t 2>/dev/null; rm -rf t
