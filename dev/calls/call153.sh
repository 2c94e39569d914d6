#!/bin/bash
# session 21, call 2: activations kept per layer (--activations-layers N; --memory-budget now keeps them for as
# many whole weight-gradient groups of layers as fit before falling back to the default). NEW's CUDA op tests
# (test_model_scan_states: the top two layers keeping activations, bit-identical to none), then, interleaved twice,
# 370m B8 by default and with --memory-budget 29.5 (the official peak: NEW keeps activations for as many layers as
# fit; the old picker chose the default there), and 130m B8 by default and with --memory-budget 11.5 (between the
# default's 9.5 GiB and keeping every layer's 13.2).
# Needs `dev/gpu.sh pack` (NEW, .gpu) here; carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "activations kept|in_proj kept" "$OUT/t/test_cuda_ops.log"
for i in 1 2; do
    for a in "--preset 370m --batch 8" "--preset 370m --batch 8 --memory-budget 29.5" \
             "--preset 130m --batch 8" "--preset 130m --batch 8 --memory-budget 11.5"; do
        PM_AB_TIMEOUT=150 bash dev/ab_bench.sh RUN "$i" "$a" | grep -v "^mean"
    done
done
