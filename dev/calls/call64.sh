#!/bin/bash
# session 11, call 9: scan v45 = v43 with the 32-wide forward's token loop over the whole chunk at a compile-time
# bound (as the 128-wide one since v22): it now fits in 128 registers (4 blocks an SM) without spills; lab against
# v43 at the 130m widths, twice; sanitizers
R=$OUT
SCAN_LAB_VERSIONS=v43+st,prod+st,prod,v43+st0,prod+st0 LAB_BIGS=8x2048x1536,4x2048x1536,8x2048x1536 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=70 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch|all PASS" $R/lab.txt | tail -20
cd $R && tar czf all.tgz lab.txt cs_*.log 2>/dev/null; rm -f cs_*.log
