#!/bin/bash
# session 8, call 10: v38 (the forward's cooperative pass of chunk k+1 inside chunk k's recurrence) vs v36; op tests; bench
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v36+st,prod+st,v36+st0,prod+st0 LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096,1x16384x1536 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=90 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch" $R/lab.txt | tail -24
grep -E " vs " $R/lab.txt | awk '{for(i=1;i<=NF;i++) if ($i ~ /e[+-]/ && $i != "0.0e+00") bad=1} END {print bad ? "== cross-check: differences" : "== cross-check: all 0"}'
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
A="--device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed --no-plots"
for a in "--preset 130m --batch 8" "--preset 130m --batch 8 --keep-activations" "--preset 370m --batch 8" "--preset 1.4b --batch 4"; do
  rm -rf /tmp/pb; timeout 200 .gpu/bin/packmamba bench $A $a --out /tmp/pb > $R/b.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print(r['label'], '$a', 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'scan', r.get('scan_ms'), 'peak', round(float(r['mem_peak_bytes'])/2**30,2))"; done
cd $R && tar czf all.tgz t lab.txt 2>/dev/null; rm -rf t
