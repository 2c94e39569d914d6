#!/bin/bash
# session 10, call 6: the bf16 softmax's prefetching kernel (softmax_xent_bf16_pf_kernel) vs one block a row
# (PM_CLS_PREFETCH=0): op tests (the two kernels' bits equal), memcheck of the classifier test, A/B benches interleaved
R=$OUT; mkdir -p $R/t; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
grep -E "one block a row|prefetching" $R/t/test_cuda_ops.log | sort | uniq -c | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
PM_TEST_FILTER=test_classifier timeout 200 $CS --tool $tool --print-limit 5 .gpu/bin/test_cuda_ops > $R/t/cs_$tool.log 2>&1
echo "== $tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t/cs_$tool.log | tail -1)"; done
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 370m --batch 8"; do
 for pf in 0 1 0 1; do
  rm -rf /tmp/pb; PM_CLS_PREFETCH=$pf timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('pf $pf', r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'cls', r.get('classifier_ms'), 'peak', round(float(r['mem_peak_bytes'])/2**30,2))"
 done
done
cd $R && tar czf all.tgz t 2>/dev/null; rm -rf t
