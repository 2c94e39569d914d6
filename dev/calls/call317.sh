#!/bin/bash
# Thirty-ninth session, fifth call: the CUDA op tests on the review mends (720173b: algo_tile_split in the tuner's
# log and the lab's pick; nvml_interval_energy_j), then energy_lab's main mode for 1 s an op (its energy through the
# shared helper). Carry .gpu/bin .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 PM_PTX_CHECK=0 bash dev/gpu.sh run >"$OUT/gpu_run.txt" 2>&1
grep -E "test_cuda_ops|GEMM m=|candidate" "$OUT/gpu_run.txt" "$OUT/test_cuda_ops.log" | head -14
timeout 60 .gpu/bin/energy_lab 1 2>&1 | tail -10
pack_out
