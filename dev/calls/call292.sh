#!/bin/bash
# Thirty-sixth session, tenth call: both conv kernels with the sigmoid as one tanh (conv_sigmoid, src). The CUDA op
# tests (and the PTX-only build's), the conv lab's small checks (every K, odd shapes, against the CPU) and two
# timing rounds of production against "V4 ex2rcp" (the form before), then 370m and 130m B8 once each (a check that
# the step runs as before; the change is ~0.2% of a step, under the call-to-call spread).
# Prediction: bwd -2.5% (370m) / -3.3% (130m) as call291's lab row; fwd -1 to -3%. Carry .gpu/bin .gpu/lib .gpu/conv.
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
timeout 200 .gpu/conv/conv_lab check > "$OUT/check.txt" 2>&1; echo "conv check rc=$?"; tail -1 "$OUT/check.txt"
for r in 1 2; do
    timeout 300 .gpu/conv/conv_lab time "new,V4 ex2rcp" > "$OUT/lab$r.txt" 2>&1
    echo "rc=$?"; grep -E "^(130m|370m) " "$OUT/lab$r.txt"
done
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
for p in 370m 130m; do
    timeout 100 .gpu/bin/packmamba bench $A --preset $p --out "$OUT/b_$p" >"$OUT/b_$p.log" 2>&1 || tail -3 "$OUT/b_$p.log"
    echo "$(grep -E '\[1/1\]' "$OUT/b_$p.log" | sed 's/.*\] //')"
    python3 dev/bench_profile.py "$OUT/b_$p/results.json" "$p" | grep -E "tok/s|conv"
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
