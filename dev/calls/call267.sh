#!/bin/bash
# Thirty-third session: the warp-specialized forward with 4 walker threads a channel at every width
# (-DPM_SCAN_WS_WG=4: the 64-wide instances too, whose walkers then also form the output, v82's ws_outw), against
# v85, at B2·D4096·L8192 (one 64-wide block an SM: two walker warps a scheduler instead of one) and B8·D2048.
# call186 measured this on v70 (no change); since then v82 made the 4-thread instances' producers lighter.
# Order v85 wg4 v85c, two rounds; carry .gpu/scan43. Timing only where the forward's y order differs from the
# 2-thread backward's (the lab's output-rewrite check may fail there).
# Prediction: B2·D4096·L8192 fwd -2 to -4%; B8·D2048 +5 to +15% (call245's 128-wide 4-thread blocks: +16%).
mkdir -p .gpu/scan && cp .gpu/scan43/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_v85 .gpu/scan/scan_lab_v85c
LAB_TIMEOUT=120 LAB_BIGS=2x8192x4096,8x2048x2048 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v85 wg4 v85c" | grep -v "^prod+st\|^==" | tail -12
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
