#!/bin/bash
# session 9, call 3: EXPERIMENT bf16 logits in the classifier (PM_CLS_BF16=1: bf16 GEMM output, register-resident
# softmax, dlogits in place): A/B alternating at 130m keep-activations and 370m; op test errors against the CPU
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
PM_CLS_BF16=1 PM_TEST_FILTER=test_classifier timeout 60 .gpu/bin/test_cuda_ops > $R/cls_test.txt 2>&1; grep -E 'classifier|FAIL|PASS' $R/cls_test.txt | head -20
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
run() { rm -rf /tmp/pb; env $1 timeout 100 .gpu/bin/packmamba bench $A $2 --out /tmp/pb > $R/b_$3.log 2>&1
  python3 -c "
import csv,json; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]; j=json.load(open('/tmp/pb/results.json'))
j=j['results'][0] if 'results' in j else j
print('$1'.ljust(14), r['label'], 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'prof', r['profiled_step_ms'], 'cls', r.get('classifier_ms'), 'loss', j.get('loss_first'), j.get('loss_last'))" || echo "$1 $2 failed"; }
i=0
for cfg in "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8"; do
  for s in PM_CLS_BF16=0 PM_CLS_BF16=1 PM_CLS_BF16=0 PM_CLS_BF16=1; do i=$((i+1)); run "$s" "$cfg" $i; done
done
