#!/bin/bash
# Thirty-first session, second call: `packmamba bench` per-op profiles on scan v81's build (the last recorded
# breakdown was v73's, call199): 370m B8 T2048 and 1.4b B4 T2048, each op against its floor under the four
# measured ceilings. Carry .gpu/bin .gpu/lib.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --steps 8 --warmup 2 --policy fixed --no-plots"
i=0
for cfg in "--preset 370m --batch 8 --seq-len 2048" "--preset 1.4b --batch 4 --seq-len 2048"; do
    i=$((i + 1)); timeout 180 .gpu/bin/packmamba bench $A $cfg --out "$OUT/b$i" >"$OUT/b$i.log" 2>&1 || tail -5 "$OUT/b$i.log"
    grep -h 'ceilings\|vector' "$OUT/b$i.log" | head -2
    python3 dev/bench_profile.py "$OUT/b$i/results.json" "$cfg"
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
