#!/bin/bash
# session 11, call 2: scan v44 = v43 with the 4-thread backward in clusters of 4 blocks summing their dB/dC terms
# through distributed shared memory (a quarter of the partials); lab vs v43 at the 130m shape, sanitizers; op tests
# (with the bf16 classifier's 2x chunks); A/B benches PM_SCAN_CLUSTER=0/1 at 130m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v43+st,prod+st,v43+st0,prod+st0 LAB_BIGS=8x2048x1536 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=70 LAB_S=150 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch|all PASS" $R/lab.txt | tail -12
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -3 $R/t/summary.txt
grep -E "clusters|FAIL" $R/t/*.log 2>/dev/null | head -8
bash dev/ab_bench.sh PM_SCAN_CLUSTER "0 1 0 1" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8"
cd $R && tar czf all.tgz lab.txt cs_*.log t 2>/dev/null; rm -rf cs_*.log t
