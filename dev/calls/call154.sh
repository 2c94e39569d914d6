#!/bin/bash
# session 21, call 3 (and call 4, after f32_to_act moved 8 values a thread: its scalar kernel made the casts cost more than predicted): the layers' bf16 weight copy given up under a memory budget (--cast-weights: each layer's
# weights cast from the fp32 masters into one of two slots when it runs; --memory-budget tries it after dropping
# every layer's scan states, before dropping in_proj outputs). NEW's CUDA op tests (the cast model bit-identical
# over three optimizer steps; the budget's pick and bytes at 1.4b), then 1.4b B4 at 29.76 GiB (0.8x the official
# peak), interleaved twice: BASE (d195028: states for 17 layers, no in_proj output), NEW with the last commit's pick
# given as flags (no states, in_proj outputs for 17 layers) and NEW's budget pick.
# Needs `dev/gpu.sh pack` (NEW, .gpu) and d195028's build in .gpu/base here; carry .gpu/bin .gpu/lib .gpu/base.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "cast|1.4b B4 in" "$OUT/t/test_cuda_ops.log"
for i in 1 2; do
    PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/base" "--preset 1.4b --batch 4 --memory-budget 29.76" | grep -v "^mean"
    PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu" "--preset 1.4b --batch 4 --recompute-scan --in-proj-layers 17" \
        "--preset 1.4b --batch 4 --memory-budget 29.76" | grep -v "^mean"
done
