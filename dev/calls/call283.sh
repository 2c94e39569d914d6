#!/bin/bash
# Thirty-sixth session, first call: x_proj's input gradient fused into the conv backward (dev/kernels/conv_xp_lab.cu;
# src/cuda_conv.cu's XP kernels). Small checks against the CPU, then the 130m / 370m / 1.4b shapes: every fused
# version checked against the unfused path (cuBLAS GEMM accumulating into du, then the production conv backward)
# and timed beside it; memcheck and racecheck on the small checks. Carry .gpu/conv.
# Prediction: the unfused pair ~0.13 ms at 370m (GEMM ~0.055, conv ~0.077); fused 0.080-0.095 ms.
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 240 .gpu/conv/conv_xp_lab > "$OUT/lab.txt" 2>&1; echo "lab rc=$?"
for tool in memcheck racecheck; do
    timeout 120 "$CS" --tool $tool .gpu/conv/conv_xp_lab check > "$OUT/$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -c 'FAIL' "$OUT/$tool.txt") FAIL lines; $(tail -2 "$OUT/$tool.txt" | tr '\n' ' ')"
done
grep -c '^check.* ok$' "$OUT/lab.txt"; grep 'FAIL' "$OUT/lab.txt" | head -20
sed -n '/== table/,$p' "$OUT/lab.txt"
