#!/bin/bash
# session 10, call 2: the optimizer step's update on the side queue, overlapping the next forward (model.c):
# op tests (test_model_side_stream: same bits, tickets, zeroed gradients), A/B benches PM_OPT_OVERLAP=0/1
# interleaved, training checks (deterministic, save/resume bit for bit, GPU vs CPU eval)
R=$OUT; mkdir -p $R/t
export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=200 bash dev/gpu.sh run > $R/t/run.txt 2>&1; tail -5 $R/t/run.txt
grep -E "side|FAIL|fail" $R/t/*.log 2>/dev/null | grep -v "^.*: *$" | head -8
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8"; do
 for ov in 0 1 0 1; do
  rm -rf /tmp/pb; PM_OPT_OVERLAP=$ov timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('ov $ov', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'peak', round(float(r['mem_peak_bytes'])/2**30,2))"
 done
done
OUT=$R timeout 200 bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
cd $R && tar czf all.tgz t train_check* b.log 2>/dev/null; rm -rf t train_check
