#!/bin/bash
# session 13, call 1: scan v47 (src) = v45 with the 2-thread backward's dB/dC butterfly reordered (lane bit 3 a
# second select-free state level through pair-swapped slots; 6 selects a token instead of 14), against v43 (v45's
# backward kernels); and v46 (lab only): the 4-thread backward's type split moved last (4 selects fewer a token,
# but its y no longer the forward's bits: timed without the output rewrite, +st0). Lab at the 130m/370m/1.4b
# widths and B2 D4096 L8192; sanitizers on prod+st; the CUDA op tests.
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v43+st,prod+st,v46+st,v43+st0,prod+st0,v46+st0 \
  LAB_BIGS=8x2048x1536,8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536,8x2048x2048 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=70 LAB_S=240 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch|DIFFERS|all PASS" $R/lab.txt | tail -30
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 120 bash dev/gpu.sh run > $R/optests.txt 2>&1; tail -4 $R/optests.txt
cd $R && tar czf all.tgz lab.txt optests.txt cs_*.log t 2>/dev/null; rm -rf cs_*.log t
