#!/bin/bash
# Thirty-fourth session, prepared and not run (the device time was spent): 370m B8 T2048 end to end on scan v91
# (src's build), to see what v91's ~2.5% faster forward at the 370m width is worth in a step (predicted ~+0.2%,
# inside the spread between GPUs); and, after v91's lesson (a BRA.DIV before the walkers' shuffles split their
# unrolled chunk), the BRA.DIV count of every kernel in the production binary that has any, for the next places to
# look. First the CUDA op tests: the review after v91 moved the YH choice into scan_fwd_ws_launch (host code only,
# the same instances and plans), which no GPU has run yet. Rebuild with `dev/gpu.sh pack`; carry .gpu/bin .gpu/lib.
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=" | head -4
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
timeout 100 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 8 \
    --warmup 2 --no-plots --time-limit 80 --out "$OUT/b370" >"$OUT/b370.log" 2>&1 || tail -5 "$OUT/b370.log"
grep -E "tok/s|ceilings|vector" "$OUT/b370.log" | tail -4
python3 dev/bench_profile.py "$OUT/b370/results.json" "370m B8 T2048"
cuobjdump -sass .gpu/bin/packmamba 2>/dev/null | awk '/Function :/ {f = $3} /BRA.DIV/ {n[f]++} END {for (k in n) print n[k], k}' |
    sort -rn | head -20
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
