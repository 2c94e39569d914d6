#!/bin/bash
# Fortieth session, second call: the CUDA op tests (the lab's GEMM pick now keeps its candidates outside the plans:
# test_matmul_each_candidate), then test_dist on the H200 (its CPU-backend cases through mpirun, and its GPU case: two
# ranks on a one-GPU host refused at once, where NCCL had failed with "invalid usage" in call318). Carry .gpu/bin
# .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=4
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
echo "op tests rc $?: $(grep -c '\[       OK \]' "$OUT/ops.log") ok"
grep -E "FAILED|ERROR|each_candidate" "$OUT/ops.log" | head -5
PM_BIN=$PWD/.gpu/bin/packmamba PM_FAKE_NVML=$PWD/.gpu/bin/libfake_nvml.so PM_KEEP_TMP=1 timeout 300 \
    .gpu/bin/test_dist >"$OUT/test_dist.log" 2>&1
echo "rc $?"
grep -E "^\[|ERROR|rc " "$OUT/test_dist.log" | tail -16
cat /tmp/pm_test_dist_*/shared_gpu.log 2>/dev/null | head -5
