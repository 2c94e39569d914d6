#!/bin/bash
# session 10, call 9: programmatic dependent launch for every kernel of ours (pm_launch, pm_pdl_prologue) vs
# without (PM_PDL=0): op tests, memcheck of the op tests, A/B benches interleaved
R=$OUT; mkdir -p $R/t; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -3 $R/t/summary.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
PM_SKIP_MODEL=1 timeout 150 $CS --tool memcheck --print-limit 5 .gpu/bin/test_cuda_ops > $R/t/cs.log 2>&1
echo "== memcheck rc $? $(grep -E 'ERROR SUMMARY' $R/t/cs.log | tail -1)"
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8"; do
 for v in 0 1 0 1; do
  rm -rf /tmp/pb; PM_PDL=$v timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('pdl $v', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'prof', r['profiled_step_ms'])"
 done
done
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
