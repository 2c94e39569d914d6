#!/usr/bin/env bash
# The README's main job: prepare the default corpus (Linux kernel documentation + fortunes, both Debian
# packages), train the tiny model on it on the CPU, then sample from it.
#   usage: scripts/demo.sh [PACKMAMBA_BINARY]   (env: STEPS, DEVICE, OUT)
set -euo pipefail
PM=${1:-build/packmamba}
STEPS=${STEPS:-300}
DEVICE=${DEVICE:-cpu}
OUT=${OUT:-runs/demo}
DATA=data/default
DOCS=/usr/share/doc/linux-doc-6.1/Documentation
FORTUNES=/usr/share/games/fortunes
for p in "$DOCS" "$FORTUNES"; do
    [ -e "$p" ] || { echo "demo: $p is missing (run: make deps)" >&2; exit 1; }
done
if [ ! -f "$DATA/data.pms" ]; then
    "$PM" prepare --out "$DATA" --ext rst "$DOCS" "$FORTUNES"
fi
"$PM" stats "$DATA" --seq-len 256 --batch 8 | tail -6
"$PM" train --data "$DATA" --out "$OUT" --preset tiny --device "$DEVICE" --packing pack --seq-len 256 --batch 8 \
    --steps "$STEPS" --log-every 25 --val-every 100 --val-batches 8 --save-every 100 --resume
echo
"$PM" eval --checkpoint "$OUT" --data "$DATA" --split val --seq-len 256 --batch 8
echo "--- sample (temperature 0.8) ---"
"$PM" generate --checkpoint "$OUT" --prompt "The kernel " --tokens 300 --temperature 0.8 --seed 7
echo
