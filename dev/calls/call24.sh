#!/bin/bash
# session 8, call 1: v36 (backward dB/dC butterfly one token later) vs v35 in the lab; memcheck; op tests; E2E 130m/370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v35+st,prod+st,v35+st0,prod+st0 LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096,1x16384x1536 \
  SAN=prod+st SAN_TOOLS="memcheck" SAN_S=60 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch" $R/lab.txt | tail -24
A="--device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed"
mkdir -p $R/gpu
OUT=$R/gpu PM_SANITIZE=0 PM_BENCH=0 PM_TEST_TIMEOUT=300 PM_BENCH_ARGS="$A --preset 130m --batch 8;$A --preset 130m --batch 8 --keep-activations;$A --preset 370m --batch 8" bash dev/gpu.sh run > $R/gpu/run.txt 2>&1
head -3 $R/gpu/summary.txt
python3 - $R/gpu/bench_results.csv <<'PY'
import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["label"], "tok/s", r.get("tok_per_s"), "step", r["step_ms_median"], "prof", r["profiled_step_ms"], "scan", r.get("scan_ms"))
PY
cd $R && tar czf all.tgz gpu lab.txt *.log 2>/dev/null; rm -rf gpu
