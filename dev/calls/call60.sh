#!/bin/bash
# session 11, call 5: v44b = v44 with clusters of 2 (all fit at once) and the cluster reduction deferred by one chunk
# (after the next chunk's tile wait): lab at the 130m shape, clusters of 2 / 4 / none; sanitizers; op tests; A/B benches
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for c in 0 2 4 0 2; do
  echo "== PM_SCAN_CLUSTER=$c"
  PM_SCAN_CLUSTER=$c PM_SCAN_CLUSTER_INFO=1 SCAN_LAB_VERSIONS=prod+st,prod+st0 LAB_BIGS=8x2048x1536 timeout 100 .gpu/scan/scan_lab 2>&1 \
    | grep -E "clusters of|timed|FAIL|all PASS" | sort -u
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 60 $CS --tool $tool --print-limit 5 .gpu/scan/scan_lab small prod+st > $R/cs_$tool.log 2>&1
  echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|correctness' $R/cs_$tool.log | paste -sd' ')"
done
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -1 $R/t/summary.txt
grep -E "clusters: dB" $R/t/test_cuda_ops.log | head -4
bash dev/ab_bench.sh PM_SCAN_CLUSTER "0 2 0 2" "--preset 130m --batch 8 --keep-activations"
cd $R && tar czf all.tgz cs_*.log t 2>/dev/null; rm -rf cs_*.log t
