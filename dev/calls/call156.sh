#!/bin/bash
# session 21, call 6: where the weight copy goes in the budget's order. call155 measured --cast-weights at 1.4b B4
# (with --recompute-scan) at ~1 ms a step for 2.3 GiB, much less than dropping the states (1.3 ms a GiB), so the
# budget now casts the weights right after the default, before dropping any layer's states. NEW's op tests; then,
# interleaved twice, 1.4b B4 at 37.2 GiB (the official peak) on PREV (.gpu/prev: the order of call154/155, states
# first) and NEW (cast first), and 370m B8 by default and with --cast-weights (the cast's cost at 370m).
# Needs `dev/gpu.sh pack` (NEW) and the previous build copied to .gpu/prev/bin; carry .gpu/bin .gpu/lib .gpu/prev.
# Result: at 37.2 GiB the two orders ran within 0.1% of each other, and the cast cost 370m 0.82% (1.2 ms for 0.57
# GiB): the order went back to states first (docs/perf.md); NEW's build is not in the tree.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "1.4b B4 in|cast" "$OUT/t/test_cuda_ops.log"
for i in 1 2; do
    PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/prev .gpu" "--preset 1.4b --batch 4 --memory-budget 37.2" | grep -v "^mean"
    PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu" "--preset 370m --batch 8" "--preset 370m --batch 8 --cast-weights" \
        | grep -v "^mean"
done
