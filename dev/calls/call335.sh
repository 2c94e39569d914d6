#!/bin/bash
# Forty-second session, last: the session's code on the GPU (no training kernel changed, but the checkpoint, data
# and generation paths did): the CUDA op tests, test_cuda_decode, and the 370m bench row as call320 measured it.
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops, test_cuda_decode) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
timeout 240 .gpu/bin/test_cuda_ops 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests? (run|skipped)" | tail -4
PM_BIN=.gpu/bin/packmamba timeout 120 .gpu/bin/test_cuda_decode 2>&1 | grep -E "^\[  (PASSED|FAILED)" | tail -2
timeout 200 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16 \
    --out "$OUT/b370" --no-plots >"$OUT/b370.log" 2>&1 || tail -3 "$OUT/b370.log"
bench_line "$OUT/b370/results.json"
