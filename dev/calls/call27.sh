#!/bin/bash
# session 8, call 4: v37 (the 32-wide forward held to 3 blocks per SM, its chunk unrolled) vs v36
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v36+st,prod+st,v36+st0,prod+st0 LAB_BIGS=8x2048x1536,8x2048x2048,1x16384x1536,4x2048x1536 \
  SAN=prod+st SAN_TOOLS="memcheck" SAN_S=60 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch" $R/lab.txt | tail -24
grep -E " vs " $R/lab.txt | awk '{for(i=1;i<=NF;i++) if ($i ~ /e[+-]/ && $i != "0.0e+00") bad=1} END {print bad ? "== cross-check: differences" : "== cross-check: all 0"}'
