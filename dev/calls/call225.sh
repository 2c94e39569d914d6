#!/bin/bash
# v78b: call224's v78 with the 4-thread backward forming both chain orders and selecting (no spills; v78 made it
# 10% slower at B8·D1536). HEAD's lab (base, v77) against v78b, three interleaved rounds, at call224's shapes and
# B16·D1536·L1024; then compute-sanitizer on v78b's lab (memcheck, racecheck). Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78b .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x4096x2048,16x1024x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 3 "base v78b"
SAN_S=60 timeout 240 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v78b prod+st
ls -la "$OUT"
