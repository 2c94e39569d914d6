#!/bin/bash
# session 8, call 6: GEMM tuning over 32 candidates vs 8 (PM_GEMM_CANDS), 130m keep-act and 370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
A="--device cuda --seq-len 2048 --steps 8 --warmup 3 --policy fixed --no-plots"
run() { rm -rf /tmp/pb; env $1 PM_CUDA_VERBOSE=1 timeout 200 .gpu/bin/packmamba bench $A $2 --out /tmp/pb > $R/b_$3.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('$1', r['label'], '$2'.split('--batch')[-1], 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'gemm-ish', r.get('in_proj_ms'), r.get('out_proj_ms'), r.get('x_proj_ms'), r.get('dt_proj_ms'), r.get('classifier_ms'))"; }
i=0; for s in PM_GEMM_CANDS=8 PM_GEMM_CANDS=32 PM_GEMM_CANDS=8 PM_GEMM_CANDS=32; do i=$((i+1)); run $s "--preset 130m --batch 8 --keep-activations" $i; done
for s in PM_GEMM_CANDS=8 PM_GEMM_CANDS=32; do i=$((i+1)); run $s "--preset 370m --batch 8" $i; done
grep -h "GEMM m=" $R/b_2.log | sort | uniq | head -40
