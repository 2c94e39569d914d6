#!/bin/bash
# Thirty-ninth session, third call: the CUDA op tests on cbc77e4's build (test_matmul_each_candidate, the lab's GEMM
# pick, new; AdamW's range check moved into adamw_segment_range), then one 370m B8 bench through dev/calls/common.sh.
# Carry .gpu/bin .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 PM_PTX_CHECK=0 bash dev/gpu.sh run >"$OUT/gpu_run.txt" 2>&1
tail -12 "$OUT/gpu_run.txt"; grep -A3 "each_candidate" "$OUT/test_cuda_ops.log" | head -14
A="--device cuda --seq-len 2048 --policy fixed --warmup 2 --steps 16 --no-plots --time-limit 100 --preset 370m --batch 8"
timeout 100 .gpu/bin/packmamba bench $A --out "$OUT/b370" >"$OUT/b370.log" 2>&1 || tail -3 "$OUT/b370.log"
bench_line "$OUT/b370/results.json"
pack_out
