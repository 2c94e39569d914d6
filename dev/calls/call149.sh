#!/bin/bash
# session 20, call 2: where a step's time goes now (v63), op by op, at 370m B8 (the unmet end-to-end
# target), by default and keeping activations, and at 1.4b B4: the bench's per-op profile (ops_ms, GPU events)
# beside tok/s. Needs `dev/gpu.sh pack` here first (carry .gpu/bin .gpu/lib).
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed --no-plots"
i=0
for cfg in "--preset 370m --batch 8" "--preset 370m --batch 8 --keep-activations" "--preset 1.4b --batch 4" \
           "--preset 130m --batch 8 --keep-activations"; do
    i=$((i + 1)); .gpu/bin/packmamba bench $A $cfg --out "$OUT/b$i" >"$OUT/b$i.log" 2>&1 || tail -5 "$OUT/b$i.log"
    python3 dev/bench_profile.py "$OUT/b$i/results.json" "$cfg"
done
