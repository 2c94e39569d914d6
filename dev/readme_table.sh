#!/bin/bash
# dev/readme_table.sh — on the GPU machine: the op tests and README's end-to-end table (T=2048; 130m/370m B8,
# 1.4b B4; fixed and packed rows, the memory flags, the --memory-budget picks) through dev/gpu.sh, into $OUT/gpu;
# prints gpu.sh's summary, then one line per configuration (tok/s, median step, MFU, peak GiB, scan ms, fill), and
# the bench's measured ceilings (copy GB/s, bf16 GEMM TFLOP/s), which differ from call to call.
# Needs `dev/gpu.sh pack` here first (carry .gpu/bin and .gpu/lib).
R=${OUT:?set OUT}; mkdir -p "$R/gpu"
cd "$(dirname "$0")/.." || exit 1
A="--device cuda --seq-len 2048 --steps 8 --warmup 2"; B="$A --policy fixed"
ARGS=(
  "$A --policy fixed,pack --preset 130m --batch 8" "$A --policy fixed,pack --preset 370m --batch 8"
  "$A --policy fixed,pack --preset 1.4b --batch 4"
  "$B --preset 130m --batch 8 --keep-activations" "$B --preset 370m --batch 8 --keep-activations"
  "$B --preset 370m --batch 8 --scan-states-layers 28" "$B --preset 370m --batch 8 --recompute-scan"
  "$B --preset 370m --batch 8 --recompute-in-proj" "$B --preset 1.4b --batch 4 --recompute-scan"
  "$B --preset 1.4b --batch 4 --recompute-scan --recompute-in-proj" "$B --preset 130m --batch 8 --memory-budget 14.24"
  "$B --preset 370m --batch 8 --memory-budget 23.6" "$B --preset 370m --batch 8 --memory-budget 29.5"
  "$B --preset 1.4b --batch 4 --memory-budget 29.76" "$B --preset 1.4b --batch 4 --recompute-scan --cast-weights"
  "$B --preset 130m --batch 8 --keep-activations --fp32-logits")
# PM_TABLE=key: only the headline rows (fixed rows by default, 130m keeping activations and with the budget, 1.4b
# with the budget that holds it to 0.8x the official peak)
[ "${PM_TABLE:-}" = key ] && ARGS=("$B --preset 130m --batch 8" "$B --preset 370m --batch 8" "$B --preset 1.4b --batch 4"
  "$B --preset 130m --batch 8 --keep-activations" "$B --preset 130m --batch 8 --memory-budget 14.24"
  "$B --preset 1.4b --batch 4 --memory-budget 29.76")
joined=$(printf '%s;' "${ARGS[@]}")
OUT=$R/gpu PM_SANITIZE=0 PM_BENCH=0 PM_TEST_TIMEOUT=200 PM_BENCH_ARGS="${joined%;}" bash dev/gpu.sh run >"$R/gpu/run.txt" 2>&1
tail -18 "$R/gpu/run.txt"
python3 - "$R/gpu/bench_results.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["label"], "tok/s", r.get("tok_per_s"), "step", r["step_ms_median"], "mfu", r.get("mfu"),
          "peak", round(float(r.get("mem_peak_bytes") or 0) / 2**30, 2), "scan", r.get("scan_ms"), "fill", r.get("fill"),
          "SM MHz", r.get("sm_mhz_mean"), "W", r.get("power_w_mean"), "power-capped", r.get("power_capped"))
PY
grep -h 'GEMM .*TFLOP' "$R/gpu/bench.log" | sort -u | head -3
