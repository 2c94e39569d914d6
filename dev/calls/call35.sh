#!/bin/bash
# session 9, call 1: scan v39 (dB/dC with vector atomics in fast mode) and recorded steps (CUDA graphs):
# op tests (test_model_recorded_steps), lab prod vs fast, memcheck; bench A/B of both switches, alternating
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=240 timeout 250 bash dev/gpu.sh run > $R/t/run.txt 2>&1
head -3 $R/t/summary.txt; grep -hE 'replayed steps|recorded|FAIL' $R/t/*.log | head -8
SCAN_LAB_VERSIONS=prod+st,fast+st,prod+st0,fast+st0 LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096 \
  SAN=fast+st SAN_TOOLS=memcheck SAN_S=50 LAB_S=110 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed" $R/lab.txt | tail -14; echo "lab FAIL lines: $(grep -cE 'FAIL|DISAGREE' $R/lab.txt)"
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
run() { rm -rf /tmp/pb; env $1 timeout 100 .gpu/bin/packmamba bench $A $2 --out /tmp/pb > $R/b_$3.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('$1'.ljust(40), r['label'], 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'prof', r['profiled_step_ms'], 'scan', r.get('scan_ms'))" || echo "$1 $2 failed"; }
i=0
for cfg in "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 370m --batch 8"; do
  for s in "PM_RECORD=0 PM_SCAN_BC_ATOMIC=0" "PM_RECORD=1 PM_SCAN_BC_ATOMIC=0" "PM_RECORD=0 PM_SCAN_BC_ATOMIC=1" "PM_RECORD=1 PM_SCAN_BC_ATOMIC=1" "PM_RECORD=0 PM_SCAN_BC_ATOMIC=0"; do
    i=$((i+1)); run "$s" "$cfg" $i
  done
done
