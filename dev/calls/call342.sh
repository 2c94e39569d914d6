#!/bin/bash
# Forty-fourth session, its last code on the GPU (start_mask lost its unused token parameter): the CUDA op tests and
# the 370m headline bench (`packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed
# --steps 16`).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1
echo "test_cuda_ops rc $?"
grep -E "^\[  (PASSED|FAILED)|FAIL" "$OUT/test_cuda_ops.log" | head -20
timeout 240 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16 \
    --out "$OUT/b370" --no-plots >"$OUT/b370.log" 2>&1 || tail -3 "$OUT/b370.log"
bench_line "$OUT/b370/results.json"
