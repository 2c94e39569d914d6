#!/bin/bash
# session 10, call 3: the optimizer overlap (PM_OPT_OVERLAP) x the main stream at the highest priority
# (PM_STREAM_PRIO), 130m default and keep-activations, interleaved
R=$OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations"; do
 for rep in 1 2; do for pr in 0 1; do for ov in 0 1; do
  rm -rf /tmp/pb; PM_STREAM_PRIO=$pr PM_OPT_OVERLAP=$ov timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('prio $pr ov $ov', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'])"
 done; done; done
done
