#!/bin/bash
# Forty-first session, fifth call: the session's commit on the H200: the CUDA op tests (no training kernel changed),
# test_cuda_decode with PM_BENCH=1 (decoder v3 after its row-prologue helper), and generate at 370m on the GPU with
# the sampling's bucket prefix. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/bin/test_cuda_ops .gpu/lib
# .gpu/data.
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
echo "op tests rc $?: $(grep -c '\[       OK \]' "$OUT/ops.log") ok, $(grep -c '^\[  SKIPPED \] test' "$OUT/ops.log") skip lines"
grep -E "FAILED|ERROR|model loss|all gradients" "$OUT/ops.log" | head -5
PM_BENCH=1 timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|worst|decode .*(graph\+pdl|eager)|differ|error" "$OUT/test_cuda_decode.log" | head -16
generate_370m
pack_out
