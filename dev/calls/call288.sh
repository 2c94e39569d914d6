#!/bin/bash
# Thirty-sixth session, sixth call: the conv lab with deeper load rings (P = 16 tokens in the backward, 16 and 32 in
# the forward; production P = 8), checked against the reference at the model shapes and timed beside production.
# Question: does a step wait for its token's copy (DRAM latency spread over P - 1 steps)? Then twice the depth
# shortens the steps. Prediction: bwd 370m 0.060-0.068 ms against 0.077 if so, within 2% if not. Carry .gpu/conv.
timeout 300 .gpu/conv/conv_lab time "new,V4 L128 minb4,V4 L128 P16,V4 L64 P16,V4 L64,V4 L128,V4 L64 P16,V4 L128 P16,V4 L64 P32" > "$OUT/lab.txt" 2>&1
echo "rc=$?"; tail -40 "$OUT/lab.txt"
