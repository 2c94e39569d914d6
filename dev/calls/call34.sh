#!/bin/bash
# session 8, call 11 (review): the forward's NS/4 loop folded and the 4-thread backward's R slot named again
# (same values; PTX differs in the R slot's address arithmetic only): lab cross-checks against frozen v36 must be
# 0; op tests (test_model_side_stream covers model.c's matmul_bwd_split)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v36+st,prod+st,v36+st0,prod+st0 LAB_BIGS=8x2048x1536,8x2048x2048 \
  SAN=prod+st SAN_TOOLS="memcheck" SAN_S=60 LAB_S=120 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed" $R/lab.txt | tail -12
grep -cE "FAIL|mismatch" $R/lab.txt
grep -E " vs " $R/lab.txt | awk '{for(i=1;i<=NF;i++) if ($i ~ /e[+-]/ && $i != "0.0e+00") bad=1} END {print bad ? "== cross-check: differences" : "== cross-check: all 0"}'
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -2 $R/t/summary.txt
