#!/bin/bash
# Forty-first session, sixth call: test_cuda_decode on 7d62474 (the odd-width refusal is new), the sampling's
# timing on the GPU machine's host (PM_BENCH=1 test_generate's test_sampling_speed), and generate at 370m with
# the sampling's buffers kept. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/bin/test_generate .gpu/lib
# .gpu/data (test_generate copied into .gpu/bin by hand: dev/gpu.sh packs only the CUDA tests).
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|worst|differ|error|packmamba" "$OUT/test_cuda_decode.log" | head -12
PM_BENCH=1 timeout 200 .gpu/bin/test_generate >"$OUT/test_generate.log" 2>&1
echo "test_generate rc $?: $(grep -c '\[       OK \]' "$OUT/test_generate.log") ok"
grep -E "sample:" "$OUT/test_generate.log"
generate_370m
pack_out
