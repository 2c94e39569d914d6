#!/bin/bash
# session 11, call 8: compute-sanitizer memcheck of the CUDA op tests on the final build (scan v43, the bf16
# classifier's 8192-token chunks)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
PM_SKIP_MODEL=1 timeout 300 $CS --tool memcheck --print-limit 5 .gpu/bin/test_cuda_ops > $R/cs.log 2>&1
echo "== memcheck rc $? $(grep -E 'ERROR SUMMARY' $R/cs.log | tail -1)"; grep -E '^\[  (PASSED|FAILED) ' $R/cs.log | head -4
