#!/bin/bash
# Thirty-sixth session, fourth call: conv_xp_lab again with runs of 160, 176, 192 tokens for the 12-warp
# versions (one wave at 370m and 1.4b from 176 on; call285: 1.29 waves at L128, 0.1545 ms). Carry .gpu/conv.
# Prediction: xp2 w4 minb3 pf L176 0.105-0.115 ms at 370m (130m, one wave: 1.43x the conv alone).
timeout 300 .gpu/conv/conv_xp_lab > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep -c ' ok$'
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep FAIL | head
sed -n '/== table/,$p' "$OUT/lab.txt"
