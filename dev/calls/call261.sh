#!/bin/bash
# Thirty-second session, last call: v85 against v84 with the positions balanced (call260 found a round's first
# position reading 0.5-1% slower; v84 ran first in call254 and call255): order v85 v84 v85c v84c (c = the same
# binary again), three rounds. Carry .gpu/scan37 (call255's v84 and call256's v85 lab builds, each twice).
# Prediction: v85 -1 to -1.5% fwd at B8·D2048 against v84, position for position.
mkdir -p .gpu/scan && cp .gpu/scan37/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 v84 v85c v84c" | tail -20
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
