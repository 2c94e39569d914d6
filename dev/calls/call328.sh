#!/bin/bash
# Forty-first session, eighth call: test_cuda_decode with its new command-level test (greedy `generate --device
# cuda` against `--decode host` through every prefill path, on a tiny model trained on the CPU). Carry
# .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
PM_BIN=$PWD/.gpu/bin/packmamba timeout 300 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "OK|FAILED|SKIPPED|differ|error|packmamba" "$OUT/test_cuda_decode.log" | head -20
