#!/bin/bash
# session 9, call 4: bf16 logits in src (Backend.classifier's bf16_logits, Model.fp32_logits): the op and model tests
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=240 timeout 250 bash dev/gpu.sh run > $R/t/run.txt 2>&1
head -3 $R/t/summary.txt; grep -hE 'classifier (loss|dx|dwte)|bf16=|FAIL|model .*rel|loss rel' $R/t/test_cuda_ops.log | head -60
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
PM_TEST_FILTER=test_classifier timeout 120 $CS --tool memcheck --print-limit 5 .gpu/bin/test_cuda_ops > $R/cs_cls.txt 2>&1
echo "== memcheck classifier rc $? : $(grep -E 'ERROR SUMMARY' $R/cs_cls.txt)"
cd $R && tar czf t.tgz t cs_cls.txt && rm -rf t cs_cls.txt
