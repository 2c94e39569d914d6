#!/bin/bash
# v72b (lab, sm_90a): v72 with the inputs in their own two buffers (the walkers read u from the pass arrays), so
# each chunk's copies are issued right after the pass of the chunk before; producers at 48 registers. Its checks under
# memcheck and racecheck, then b90a (HEAD), bws (v72a) and bws2 (v72b) interleaved twice. Carry .gpu/scan.
SAN_TOOLS=memcheck SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_bws2 prod+st
LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "b90a bws bws2"
SAN_TOOLS=racecheck SAN_S=200 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_bws2 prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
