#!/bin/bash
# Thirty-sixth session, third call: conv_xp_lab again with the odd warps' tiles 8 tokens off the even ones' (st), at 4 and 8
# warps a block, against call284's best (xp1 w8 minb2 0.1227 ms at 370m; unfused 0.1306). Carry .gpu/conv.
# Prediction: st -5 to -15 us at 370m (the tensor phases of a block's warps no longer all at once).
timeout 300 .gpu/conv/conv_xp_lab > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep -c ' ok$'
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep FAIL | head
sed -n '/== table/,$p' "$OUT/lab.txt"
