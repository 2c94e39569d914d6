#!/bin/bash
# Thirty-third session: v88 (lab), the forward producers woken to refill a stage when the walkers are 8 (mid8)
# or 4 (mid4) tokens into the next chunk (-DPM_SCAN_WS_MIDJ, a third ring of mbarriers) instead of when they finish
# the stage's chunk, so the producers' special-function bursts (call264: a producer exp costs the forward ~3x a
# walker exp) fall inside the walkers' chunk rather than at its start. Order v85 mid8 mid4 v85c, three rounds;
# carry .gpu/scan42. Prediction: fwd -1 to -3% at the 2-thread shapes if the bursts at chunk starts are the cost;
# within +-0.5% if not.
mkdir -p .gpu/scan && cp .gpu/scan42/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_v85 .gpu/scan/scan_lab_v85c
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 mid8 mid4 v85c" | grep -v "^prod+st\|^==" | tail -22
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
