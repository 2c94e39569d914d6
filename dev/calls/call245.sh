#!/bin/bash
# The forward at the 370m and 1.4b widths in 128-wide warp-specialized blocks one an SM with 4 walker threads a
# channel and 4 producer warps (v81's 130m recipe one size up; lab built with -DPM_SCAN_WS_128=1 -DPM_SCAN_WS_WG=4
# -DPM_SCAN_WS_PW128=4, run with PM_SCAN_NARROW=0: g4) against v81 (lab f96 = v81's src), two interleaved rounds.
# Carry .gpu/scan29.
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "f96 g4"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
