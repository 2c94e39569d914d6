#!/bin/bash
# session 9, call 6: the end-to-end table with bf16 logits in training (README), --memory-budget picks, training checks; op tests
R=$OUT; mkdir -p $R/gpu
export LD_LIBRARY_PATH=$PWD/.gpu/lib
A="--device cuda --seq-len 2048 --steps 8 --warmup 2"; B="$A --policy fixed"
OUT=$R/gpu PM_SANITIZE=0 PM_BENCH=0 PM_TEST_TIMEOUT=200 PM_BENCH_ARGS="$A --policy fixed,pack --preset 130m --batch 8;\
$A --policy fixed,pack --preset 370m --batch 8;$A --policy fixed,pack --preset 1.4b --batch 4;\
$B --preset 130m --batch 8 --keep-activations;$B --preset 370m --batch 8 --keep-activations;\
$B --preset 370m --batch 8 --scan-states-layers 28;$B --preset 370m --batch 8 --recompute-scan;\
$B --preset 370m --batch 8 --recompute-in-proj;$B --preset 1.4b --batch 4 --recompute-scan;\
$B --preset 1.4b --batch 4 --recompute-scan --recompute-in-proj;$B --preset 130m --batch 8 --memory-budget 14.24;\
$B --preset 370m --batch 8 --memory-budget 23.6;$B --preset 1.4b --batch 4 --memory-budget 29.76;\
$B --preset 130m --batch 8 --keep-activations --fp32-logits" bash dev/gpu.sh run > $R/gpu/run.txt 2>&1
tail -18 $R/gpu/run.txt
python3 - $R/gpu/bench_results.csv <<'PY'
import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["label"], "tok/s", r.get("tok_per_s"), "step", r["step_ms_median"], "prof", r["profiled_step_ms"], "peak", r.get("peak_mem_gib") or r.get("mem_peak_gib"), "scan", r.get("scan_ms"))
PY
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
cd $R && tar czf all.tgz gpu train_check* && rm -rf gpu train_check
