#!/bin/bash
# Thirty-ninth session, first call: the CUDA op tests on the thirty-eighth session's review commit (af3393e: model.c
# without PM_RECOMPUTE_AHEAD's part forms; energy_lab on bench_cost.c), then call312 as prepared (the bench's energy
# from the counter's rate, three identical 370m runs; the refactored energy_lab). Carry .gpu/bin .gpu/lib.
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 PM_PTX_CHECK=0 bash dev/gpu.sh run >"$OUT/gpu_run.txt" 2>&1
tail -15 "$OUT/gpu_run.txt"
mkdir -p "$OUT/c312" && OUT="$OUT/c312" bash dev/calls/call312.sh
cd "$OUT" && tar czf ops.tgz --remove-files $(ls | grep -v -e '^ops.tgz$' -e '^c312$')
