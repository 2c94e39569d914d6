#!/bin/bash
# session 10, call 7: our small-inner-dimension GEMM kernel (src/cuda_skinny.cu: the dt_proj forward and the x_proj
# input gradient) vs cuBLASLt (PM_SKINNY=0): op tests, sanitizers on test_matmul, A/B benches interleaved with the
# per-op times of the two ops
R=$OUT; mkdir -p $R/t; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
grep -E "small-inner|matmul.*FAIL|rel err [0-9.e-]+ \(tol" $R/t/test_cuda_ops.log | grep -E "small-inner|FAIL" | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
PM_TEST_FILTER=test_matmul timeout 120 $CS --tool $tool --print-limit 5 .gpu/bin/test_cuda_ops > $R/t/cs_$tool.log 2>&1
echo "== $tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t/cs_$tool.log | tail -1) $(grep -c skinny $R/t/cs_$tool.log) skinny lines"; done
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8"; do
 for sk in 0 1 0 1; do
  rm -rf /tmp/pb; PM_SKINNY=$sk timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv,json; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
j=json.load(open('/tmp/pb/results.json'))['configs'][0]; ops={o['region']:o['ms'] for o in j['ops']}
print('sk $sk', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'fwd.dt_proj', round(ops.get('fwd.dt_proj',0),3), 'bwd.x_proj', round(ops.get('bwd.x_proj',0),3), 'bwd.recompute', round(ops.get('bwd.recompute',0),3))"
 done
done
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
