#!/bin/bash
# session 9, call 11 (review): the classifier's fp32 and bf16 paths in one chunk loop (same GEMM calls); the bf16
# op test cases also check that the bf16 path ran (its losses differ from the fp32 path's); op tests, memcheck
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=200 timeout 220 bash dev/gpu.sh run > $R/t/run.txt 2>&1
head -2 $R/t/summary.txt; grep -hE 'bf16=|differs from|FAIL' $R/t/test_cuda_ops.log | head -30
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
PM_TEST_FILTER=test_classifier timeout 120 $CS --tool memcheck --print-limit 5 .gpu/bin/test_cuda_ops > $R/cs.txt 2>&1
echo "== memcheck classifier rc $? : $(grep -E 'ERROR SUMMARY' $R/cs.txt)"
cd $R && tar czf t.tgz t cs.txt && rm -rf t cs.txt
