#!/bin/bash
# Thirty-seventh session, tenth call: the CUDA op tests with the update ahead's own test (test_model_update_ahead:
# three optimizer steps with the update ahead and without, the side queue held back 0.3 ms a piece; losses,
# parameters and second moments bit-identical) and the AdamW call sites' new fields. Carry .gpu/bin .gpu/lib.
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
grep -E "update ahead|side queue|FAIL|pending" "$OUT"/test_cuda_ops.log | head -12
