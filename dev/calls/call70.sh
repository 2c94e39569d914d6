#!/bin/bash
# session 12, call 1: the reduction queue (Backend.defer_reductions): CUDA op tests (with the new
# test_model_deferred_reductions), then interleaved A/B on PM_DEFER_REDUCTIONS at 130m (keeping activations and by
# default) and 370m, and the --memory-budget picks with the ring counted in the estimate
R=$OUT; cd "$(dirname "$0")/../.." || exit 1
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/tests.txt 2>&1; tail -4 $R/tests.txt
grep -E "reductions|gradients, run" $R/t/*.log 2>/dev/null | head -12
P="--preset 130m --batch 8"
bash dev/ab_bench.sh PM_DEFER_REDUCTIONS "0 1 0 1 0 1" "$P --keep-activations" "$P"
bash dev/ab_bench.sh PM_DEFER_REDUCTIONS "0 1 0 1" "--preset 370m --batch 8"
bash dev/ab_bench.sh PM_DEFER_REDUCTIONS "1" "$P --memory-budget 14.24" "--preset 1.4b --batch 4 --memory-budget 29.76"
grep -h "memory-budget" $OUT/ab_last.log | head -3
