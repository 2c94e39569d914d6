#!/bin/bash
# v77's summary split, wider: PM_SCAN_BSUMM_SUB=4 and 8 (quarter and eighth segments; 768 and 1792 summary blocks
# at B2·D4096·L8192) against v77's 2, three interleaved lab rounds at the shapes v76/v77 changed.
# Carry .gpu/scan/scan_lab_v77 .gpu/scan/scan_lab_v77s4 .gpu/scan/scan_lab_v77s8.
LAB_TIMEOUT=90 LAB_BIGS=2x8192x4096,4x2048x2048,1x2048x2048,2x4096x2048 \
    SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v77 v77s4 v77s8"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
