#!/bin/bash
# Thirty-sixth session, thirteenth call: conv v10 with the SiLU and its derivative formed from t = tanh(v/2) in one
# FMA each (lab switch -DCONV_SILU_CHAIN=1, build conv_lab_chain: silu = a + a t, dsilu = (g (1/2 + t/2)) ((1 + a)
# - a t) with a = v/2; the chains after t 1 and 3 deep instead of 2 and 4) against conv v10 (conv_lab_v10). The
# chain build's small checks, then two interleaved rounds of production ("new"). Prediction: fwd -1 to -3%, bwd
# -1 to -2% (call293: a shorter chain that cost 12 registers lost 8%; this one costs 3 in the backward).
# Carry .gpu/conv3.
timeout 200 .gpu/conv3/conv_lab_chain check > "$OUT/check.txt" 2>&1; echo "chain check rc=$?"; tail -1 "$OUT/check.txt"
for r in 1 2; do
    for b in v10 chain; do
        timeout 300 .gpu/conv3/conv_lab_$b time new > "$OUT/lab_${b}_$r.txt" 2>&1
        echo "$b r$r rc=$?"; grep -E "^(130m|370m) " "$OUT/lab_${b}_$r.txt"
    done
done
