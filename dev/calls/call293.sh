#!/bin/bash
# Thirty-sixth session, eleventh call: the conv pre-activation's four taps as two chains of two and an add
# (-DCONV_PRE_TREE=1, lab build conv_lab_tree) against conv v10 (conv_lab_v10), both lab binaries of the same
# source otherwise: conv v10 showed the kernels bound by their dependency chain through the sigmoid (call291-292),
# and the taps' chain of 4 FFMAs opens it. The tree build's small checks, then two interleaved timing rounds of
# production ("new") in each. Prediction: fwd and bwd -1 to -3%. Carry .gpu/conv2.
timeout 200 .gpu/conv2/conv_lab_tree check > "$OUT/check.txt" 2>&1; echo "tree check rc=$?"; tail -1 "$OUT/check.txt"
for r in 1 2; do
    for b in v10 tree; do
        timeout 300 .gpu/conv2/conv_lab_$b time new > "$OUT/lab_${b}_$r.txt" 2>&1
        echo "$b r$r rc=$?"; grep -E "^(130m|370m) " "$OUT/lab_${b}_$r.txt"
    done
done
