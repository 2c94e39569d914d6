#!/bin/bash
# session 11, call 11: gradients written by the step's first backward instead of a cleared buffer
# (Backend.grads_write; PM_GRADS_WRITE=0 clears as before): op tests (test_model_grads_written, the side-stream
# test) and A/B benches, interleaved
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -1 $R/t/summary.txt
grep -E "grads written|side queue|FAIL" $R/t/test_cuda_ops.log | head -12
bash dev/ab_bench.sh PM_GRADS_WRITE "0 1 0 1" "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8"
bash dev/ab_bench.sh PM_GRADS_WRITE "0 1" "--preset 1.4b --batch 4"
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
