#!/bin/bash
# Thirty-sixth session, ninth call: the conv backward's xi window in fp32, widened once as a token enters (now the
# production kernel, "new"), against the bf16 window widened at every use ("V4 xb16", production until now), and
# the SiLU derivative's sigmoid as one tanh ("V4 tanh", lab only). The small checks first (every K, odd shapes,
# against the CPU reference), then two timing rounds. Prediction: new 3-6% under xb16; tanh another 2-4%.
# Carry .gpu/conv.
timeout 200 .gpu/conv/conv_lab check > "$OUT/check.txt" 2>&1; echo "check rc=$?"; tail -2 "$OUT/check.txt"
for r in 1 2; do
    timeout 300 .gpu/conv/conv_lab time "new,V4 xb16,V4 tanh" > "$OUT/lab$r.txt" 2>&1
    echo "rc=$?"; grep -E "^(130m|370m) +bwd|PASSED|FAIL" "$OUT/lab$r.txt"
done
