#!/bin/bash
# v80: the 4-thread backward warp-specialized, 96-wide blocks one an SM (the 130m width's plan), against the same
# build with PM_SCAN_BWD4_WS=0 (32-wide staged blocks, three an SM: v78c's kernel), two interleaved rounds; then
# compute-sanitizer on v80's checks (its B16·D520·L200 check shape runs the new kernel with a partial block and
# chunk). Carry .gpu/scan29.
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x1536,6x2048x2048,16x1024x1536,8x2048x2048 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "b32 v80"
SAN_S=60 timeout 200 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v80 prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
