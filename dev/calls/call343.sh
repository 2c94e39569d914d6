#!/bin/bash
# Forty-fourth session, its final commit (the checkpoint interval one constant): the CUDA op tests, and the carried
# state end to end (carry_eval).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1
echo "test_cuda_ops rc $?"
grep -E "^\[  (PASSED|FAILED)|FAIL" "$OUT/test_cuda_ops.log" | head -20
carry_eval
