#!/bin/bash
# session 22, call 1: the optimizer's update queued on the side stream in parts (embedding, each layer, final norm)
# so that the next forward waits only for the part it reads next (model.c, model_optimizer_step; PM_OPT_OVERLAP=0
# runs it on the main queue in one piece, as before). The op tests (test_model_side_stream now also checks the
# update on a held-back side queue), then PM_OPT_OVERLAP 0/1 interleaved at 130m B8 (keeping activations), 370m B8
# and 1.4b B4. Needs `dev/gpu.sh pack`; carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "side queue|in parts" "$OUT/t/test_cuda_ops.log"
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh PM_OPT_OVERLAP "0 1 0 1" "--preset 370m --batch 8" "--preset 1.4b --batch 4" \
    "--preset 130m --batch 8 --keep-activations"
