#!/bin/bash
# Thirty-third session: the forward's y summed over a channel's walker threads 2 or 4 groups after its own
# (-DPM_SCAN_WS_YDELAY=2 / 4; v35's one group is v85's), so the butterfly's shuffle latency has more of the walk
# to hide behind: call264 measured y at 12% of the forward at B2·D4096·L8192, where one walker warp a scheduler
# hides nothing. Order v85 yd2 yd4 v85c (v85c the same binary), three rounds; carry .gpu/scan41.
# Prediction: B2·D4096·L8192 fwd -1 to -3% (yd2, yd4), B8·D2048 within +-1%.
mkdir -p .gpu/scan && cp .gpu/scan41/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_v85 .gpu/scan/scan_lab_v85c
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 yd2 yd4 v85c" | grep -v "^prod+st\|^==" | tail -22
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
