#!/bin/bash
# session 14, call 6: the final build (data parallelism's fence and hook_orders_itself; the backward's norm regions
# now flush held-back reductions only under such a hook): op tests, GPU training checks, and 130m keeping
# activations, 130m by default and 370m by default, interleaved twice
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "side queue|kept activations" $R/t/test_cuda_ops.log | head -4; tail -4 $R/optests.txt | head -1
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; grep -E "PASS|FAIL|GPU vs CPU|pack data" $R/train_check.txt
OUT=$R bash dev/ab_bench.sh PM_DW_GROUP "2 2" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 370m --batch 8"
grep -h "GEMM" $R/ab_last.log | head -1
cd $R && tar czf all.tgz optests.txt t train_check* 2>/dev/null; rm -rf t train_check
