#!/bin/bash
# session 8, call 2: the side stream for the backward's weight gradients: its test (and two mutants that drop a
# wait: they must fail), all op tests, then bench A/B (PM_SIDE_STREAM=0 / 1) at 130m, 130m keep-act, 370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for b in .gpu/bin/test_cuda_ops .gpu/mut/test_mutA .gpu/mut/test_mutB; do
  PM_TEST_FILTER=test_model_side_stream timeout 120 $b > $R/side_$(basename $b).log 2>&1
  echo "== $b rc $? : $(grep -E 'OK|FAILED|differ|mismatch|tickets' $R/side_$(basename $b).log | head -4 | paste -sd' ')"
done
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
A="--device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed --no-plots"
run() { rm -rf /tmp/pb; PM_SIDE_STREAM=$1 timeout 200 .gpu/bin/packmamba bench $A $2 --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('side=$1', r['label'], '$2'.split('--batch 8')[-1], 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'prof', r['profiled_step_ms'], 'peak', round(float(r['mem_peak_bytes'])/2**30,2))"; }
for s in 0 1 0 1; do run $s "--preset 130m --batch 8"; done
for s in 0 1; do run $s "--preset 130m --batch 8 --keep-activations"; done
for s in 0 1; do run $s "--preset 370m --batch 8"; done
for s in 0 1; do run $s "--preset 1.4b --batch 4"; done
cd $R && tar czf all.tgz t side_*.log b.log 2>/dev/null; rm -rf t
