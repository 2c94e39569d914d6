#!/bin/bash
# session 12, call 3: the whole-batch classifier (Model.classifier_whole, --whole-batch-classifier, picked by
# --memory-budget when it fits): CUDA op tests (test_model_classifier_whole), interleaved runs with and without it
# at 130m keeping activations, and what the README budgets pick now (130m 14.24, 370m 23.6, 1.4b 29.76)
R=$OUT; cd "$(dirname "$0")/../.." || exit 1
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 bash dev/gpu.sh run > $R/tests.txt 2>&1; head -1 $R/t/summary.txt
grep -E "whole batch|wte gradient|FAIL" $R/t/test_cuda_ops.log | head -8
P="--preset 130m --batch 8 --keep-activations"
for i in 1 2 3; do
  bash dev/ab_bench.sh X 1 "$P"; bash dev/ab_bench.sh X 1 "$P --whole-batch-classifier"
done
for a in "--preset 130m --batch 8 --memory-budget 14.24" "--preset 370m --batch 8 --memory-budget 23.6" \
         "--preset 1.4b --batch 4 --memory-budget 29.76"; do
  bash dev/ab_bench.sh X 1 "$a"; grep -h "memory-budget" $R/ab_last.log | head -1
done
cp /tmp/pm_ab/ops.csv $R/ops_1.4b.csv 2>/dev/null
