#!/bin/bash
# session 10, call 11: scan v42 = 64-token forward chunks (FT 64: half the chunks, so half the per-chunk barriers
# and phases) vs v36 (FT 32): lab checks, timing at the 130m and 370m widths, sanitizers
R=$OUT
SCAN_LAB_VERSIONS=v36+st,prod+st LAB_BIGS=8x2048x1536,8x2048x2048,8x2048x1536 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=70 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch|all PASS" $R/lab.txt | tail -16
cd $R && tar czf all.tgz lab.txt cs_*.log 2>/dev/null; rm -f cs_*.log
