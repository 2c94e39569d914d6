#!/bin/bash
# The forward at the 370m and 1.4b widths in 128-wide warp-specialized blocks one an SM (the lab built with
# -DPM_SCAN_WS_128=1, run with PM_SCAN_NARROW=0: w128) against v81 (64-wide blocks two an SM; lab f96 = v81's
# src), two interleaved rounds. Carry .gpu/scan29.
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "f96 w128"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
