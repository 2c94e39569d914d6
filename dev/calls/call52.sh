#!/bin/bash
# session 10, call 8: the small-inner-dimension GEMM, second version (64-row tiles, 4 blocks an SM, stores straight
# from the accumulators) vs cuBLASLt (PM_SKINNY=0): test_matmul, memcheck, A/B benches with the two ops' times
R=$OUT; mkdir -p $R/t; export LD_LIBRARY_PATH=$PWD/.gpu/lib
PM_TEST_FILTER=test_matmul timeout 100 .gpu/bin/test_cuda_ops > $R/t/tm.log 2>&1; echo "test_matmul rc $?"; grep -E "small-inner|FAIL" $R/t/tm.log | head -5
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
PM_TEST_FILTER=test_matmul timeout 120 $CS --tool memcheck --print-limit 5 .gpu/bin/test_cuda_ops > $R/t/cs.log 2>&1
echo "== memcheck rc $? $(grep -E 'ERROR SUMMARY' $R/t/cs.log | tail -1)"
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations"; do
 for sk in 0 1 0 1; do
  rm -rf /tmp/pb; PM_SKINNY=$sk timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv,json; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
j=json.load(open('/tmp/pb/results.json'))['configs'][0]; ops={o['region']:o['ms'] for o in j['ops']}
print('sk $sk', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'fwd.dt_proj', round(ops.get('fwd.dt_proj',0),3), 'bwd.x_proj', round(ops.get('bwd.x_proj',0),3), 'bwd.recompute', round(ops.get('bwd.recompute',0),3))"
 done
done
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
