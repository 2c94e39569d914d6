#!/bin/bash
# session 21, call 1: the in_proj dial (--in-proj-layers N; --memory-budget now drops every layer's scan states
# first, then in_proj outputs one layer at a time, where it used to recompute every in_proj output and keep states
# for as many layers as fit). NEW's CUDA op tests (test_model_scan_states now also keeps only the last layer's
# in_proj output), then 1.4b B4 with --memory-budget 29.76 (0.8x the official peak) on BASE (HEAD d195028's build:
# the old pick) and NEW, interleaved twice (dev/ab_bench.sh prints each pick and peak).
# Needs `dev/gpu.sh pack` (NEW, .gpu) and HEAD's build copied to .gpu/base (bin, lib) here; carry .gpu/bin .gpu/lib .gpu/base.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL|in_proj" "$OUT/t/summary.txt" "$OUT"/t/*.log 2>/dev/null | head -12
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/base .gpu .gpu/base .gpu" "--preset 1.4b --batch 4 --memory-budget 29.76"
