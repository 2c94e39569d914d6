#!/bin/bash
# Thirty-seventh session, eighth call (the first try was refused: no machine). call299 kept the recompute ahead
# (370m +1.3% tok/s, median step -2.1%; 130m
# +1.7%; 1.4b +1.4%). Here: which part of the recompute is
# worth running ahead: all of it (PM_RECOMPUTE_AHEAD=1, the default) against the norm and conv alone, dt_proj's
# GEMM left on the main stream after the wait (=2): a cuBLASLt kernel may not start on the 4 free SMs; 370m B8,
# interleaved twice. Then README's headline rows (`PM_TABLE=key bash dev/readme_table.sh`, now with 1.4b at
# --memory-budget 29.76). Carry .gpu/bin .gpu/lib.
# Prediction: =2 within ±0.5% of =1 (dt_proj fwd is 25 of the ~100 us a layer).
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
for r in 1 2; do
    for x in 1 2; do
        PM_RECOMPUTE_AHEAD=$x timeout 150 .gpu/bin/packmamba bench $A --preset 370m --batch 8 --out "$OUT/b_${x}_$r" >"$OUT/b_${x}_$r.log" 2>&1 || tail -3 "$OUT/b_${x}_$r.log"
        echo "ahead=$x r$r $(grep -E '\[1/1\]' "$OUT/b_${x}_$r.log" | sed 's/.*\] //')"
    done
done
PM_TABLE=key bash dev/readme_table.sh 2>&1 | tail -9
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
