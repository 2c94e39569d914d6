#!/bin/bash
# session 11, call 6: model_zero_grad's clearing on the side queue beside the next forward (PM_ZERO_SIDE=0: on the
# main queue): op tests (test_model_side_stream holds side work back 0.3 ms: a missing wait shows as other bits);
# A/B benches, interleaved
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -3 $R/t/summary.txt
bash dev/ab_bench.sh PM_ZERO_SIDE "0 1 0 1" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 370m --batch 8"
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
