#!/bin/bash
# Thirty-first session, last call: lab variants of v83's warp-specialized forward, two interleaved rounds against
# v83 itself (HEAD 42a4daa's lab). Carry .gpu/scan31.
#   nosel  -DPM_SCAN_WS_LENSEL_OFF=1 (a patch, not in src): the producers' pass without its two selects a channel
#          pair for tokens past the row's end (nothing after them is stored in the forward)
#   s5, s3 -DPM_SCAN_WS_S=5 / 3: five or three stages in the ring instead of four
#   pw2    -DPM_SCAN_WS_PW64=2: two producer warps a 64-wide block instead of four (v65 measured it slower; v83's
#          producers are lighter)
# Prediction: nosel -0.5 to -1% fwd; s5, s3 within +-1%; pw2 slower at B8·D2048 (+2 to +5%).
mkdir -p .gpu/scan && cp .gpu/scan31/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v83 nosel s5 s3 pw2" | tail -30
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
