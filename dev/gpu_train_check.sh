#!/usr/bin/env bash
# dev/gpu_train_check.sh — training-level checks of the CUDA backend, run on the GPU machine after dev/gpu.sh:
#   1. deterministic mode: two fresh runs give bit-identical losses;
#   2. save/resume on the GPU: 3 steps + --resume to 6 gives the same losses bit for bit;
#   3. the same checkpoint evaluated on the GPU and on the CPU gives the same loss (within bf16 error);
#   4. packed vs single vs pad tokens/s on real documents (the carried corpus).
# Needs .gpu/bin/packmamba (dev/gpu.sh pack) and a prepared corpus in .gpu/data (packmamba prepare). Prints a table.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/.gpu/bin/packmamba"
DATA="${PM_DATA:-$ROOT/.gpu/data}"
OUTDIR="${OUT:-/tmp}/train_check"
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$ROOT/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
W=/tmp/pm_train_check
rm -rf "$W"
mkdir -p "$W"
COMMON=(--device cuda --deterministic --data "$DATA" --preset 130m --seq-len 1024 --batch 4 --warmup 2 --lr 1e-3
        --log-every 1)
losses() { python3 -c "import json,sys; print(' '.join(repr(json.loads(l)['loss']) for l in open(sys.argv[1])))" "$1"; }

"$BIN" train "${COMMON[@]}" --out "$W/a" --steps 6 >"$OUTDIR/a.log" 2>&1; ra=$?
"$BIN" train "${COMMON[@]}" --out "$W/b" --steps 6 >"$OUTDIR/b.log" 2>&1; rb=$?
"$BIN" train "${COMMON[@]}" --out "$W/c" --steps 3 >"$OUTDIR/c1.log" 2>&1
"$BIN" train "${COMMON[@]}" --out "$W/c" --steps 6 --resume >"$OUTDIR/c2.log" 2>&1; rc=$?
la=$(losses "$W/a/metrics.jsonl" 2>/dev/null); lb=$(losses "$W/b/metrics.jsonl" 2>/dev/null)
lc=$(losses "$W/c/metrics.jsonl" 2>/dev/null)
{
echo "run a: $la"; echo "run b: $lb"; echo "run c (3 + resume 3): $lc"
"$BIN" eval --device cuda --checkpoint "$W/a" --data "$DATA" --split val --seq-len 1024 --batch 4 --json
OMP_NUM_THREADS=16 "$BIN" eval --device cpu --checkpoint "$W/a" --data "$DATA" --split val --seq-len 1024 --batch 4 --json
} >"$OUTDIR/summary.txt" 2>&1
g=$(sed -n 4p "$OUTDIR/summary.txt"); c=$(sed -n 5p "$OUTDIR/summary.txt")
cmp=$(python3 -c "
import json,sys
g=json.loads(sys.argv[1]); c=json.loads(sys.argv[2])
print('gpu %.6f cpu %.6f rel %.2e' % (g['mean_loss'], c['mean_loss'], abs(g['mean_loss']-c['mean_loss'])/c['mean_loss']))" "$g" "$c" 2>&1)

# real-document throughput by policy (370m, T=2048 rows; single and pad run at the documents' own lengths)
"$BIN" bench --device cuda --preset 370m --data "$DATA" --seq-len 2048 --batch 8 --policy single,pad,pack --steps 8 \
    --warmup 2 --no-plots --out "$W/policies" >"$OUTDIR/policies.log" 2>&1
cp "$W/policies/results.csv" "$OUTDIR/policies.csv" 2>/dev/null

echo "=== GPU training checks ==="
printf '%-44s %s\n' "deterministic: run a == run b (6 steps)" "$([ -n "$la" ] && [ "$la" = "$lb" ] && echo PASS || echo "FAIL (rc $ra $rb)")"
printf '%-44s %s\n' "save/resume: 3 + 3 == 6 (bit for bit)" "$([ -n "$la" ] && [ "$la" = "$lc" ] && echo PASS || echo "FAIL (rc $rc)")"
printf '%-44s %s\n' "eval of one checkpoint, GPU vs CPU" "$cmp"
echo "--- policies on real documents (370m) ---"
tail -n 8 "$OUTDIR/policies.log"
