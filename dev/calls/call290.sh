#!/bin/bash
# Thirty-sixth session, eighth call: the conv lab with runs of 96 tokens in the backward and 48 / 96 in the forward
# (production picks 128 / 64 at 130m: grids of 73% of the resident warps; 11.3 warps an SM achieved in the
# backward under ncu, call289). Prediction: 130m bwd -10 to -20%, fwd -5 to -10%. Carry .gpu/conv.
timeout 300 .gpu/conv/conv_lab time "new,V4 L96,V4 L48,V4 L64,V4 L128 minb4" > "$OUT/lab.txt" 2>&1
echo "rc=$?"; grep -E "^(130m|370m) |PASSED|FAIL" "$OUT/lab.txt"
timeout 300 .gpu/conv/conv_lab time "new,V4 L96,V4 L48,V4 L64,V4 L128 minb4" > "$OUT/lab2.txt" 2>&1
grep -E "^(130m|370m) " "$OUT/lab2.txt"
