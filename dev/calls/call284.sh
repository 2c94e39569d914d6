#!/bin/bash
# Thirty-sixth session, second call: conv_xp_lab again with the A fragments loaded a tile ahead (pf) and three
# timing-only ablations of the fused backward (noldg: no A loads; nomma: no mma; none: neither), to see what the
# fused kernels' ~45 us over the conv alone (call283) is made of. Carry .gpu/conv.
# Prediction: noldg -5 to -10 us, nomma -10 to -15 us against xp1 w4 minb4; pf -5 us.
timeout 300 .gpu/conv/conv_xp_lab > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep -c ' ok$'
grep '^check' "$OUT/lab.txt" | grep -v 'noldg\|nomma\|none' | grep FAIL | head
sed -n '/== table/,$p' "$OUT/lab.txt"
