#!/bin/bash
# session 10, calls 4 and 5 (the same script twice: before and after the opt-in fix, docs/perf.md v40): scan v40a (the
# v40b = prod (v40a + the y/P/Z transposed reduction through shared memory) vs v36 at the 130m shape; sanitizers;
# op tests; 130m benches (default, keep-activations)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v36+st,v40a+st,prod+st,v36+st0,v40a+st0,prod+st0 LAB_BIGS=8x2048x1536,8x2048x1536 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=120 LAB_S=200 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch" $R/lab.txt | tail -24
grep -E " vs " $R/lab.txt | head -30 > $R/xcheck.txt
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations"; do
  rm -rf /tmp/pb; timeout 150 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print(r['label'], '$a', 'tok/s', round(float(r['tok_per_s'])), 'step', r['step_ms_median'], 'scan', r.get('scan_ms'), 'peak', round(float(r['mem_peak_bytes'])/2**30,2))"; done
cd $R && tar czf all.tgz t lab.txt xcheck.txt cs_*.log 2>/dev/null; rm -rf t
