#!/bin/bash
# Fortieth session, first call: train's energy report across ranks, and NVML opening the card CUDA computes on by
# its UUID. Written for nvidia-h200-x2 (not lent when asked); runs on one GPU too. Carry .gpu/bin .gpu/lib
# .gpu/data (the admin-guide byte corpus, as call316).
#   1. the CUDA op tests (backend_cuda_device_uuid is new in backend_cuda.cu);
#   2. 370m B8 T2048 on one GPU, 40 steps: the closing line names the H200 and its ~700 W;
#   3. the same with CUDA_VISIBLE_DEVICES set to the last GPU's UUID (with two GPUs, the old lookup read index 0
#      then: the idle card);
#   4. two ranks (mpirun, B8 each): on two GPUs the closing line sums the 2 cards (~2 x 700 W); on one GPU both
#      ranks share the card and it counts once; beside nvidia-smi's readings.
. dev/calls/common.sh
pm_gpu_env
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi -L
echo "== op tests"
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
echo "rc $?: $(grep -c '\[       OK \]' "$OUT/ops.log") ok, $(grep -c '\[  FAILED  \]' "$OUT/ops.log") failed lines"
grep -E "FAILED|ERROR" "$OUT/ops.log" | head -5
train() {  # name, then the environment or launcher before the binary
    local name=$1
    shift
    timeout 200 "$@" .gpu/bin/packmamba train --device cuda --data .gpu/data --out "$OUT/$name" --preset 370m \
        --seq-len 2048 --batch 8 --steps 40 --log-every 10 --save-every 0 >"$OUT/$name.log" 2>&1 ||
        echo "train $name failed"
    echo "-- $name"
    tr '\r' '\n' <"$OUT/$name.log" | grep -v '^\s*$' | grep -E '^step|GPU|note|error|rank' | tail -4
    rm -rf "$OUT/$name/checkpoints"
}
echo "== one GPU"
train one env
uuid1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | tail -1 | tr -d ' ')
echo "== CUDA_VISIBLE_DEVICES=$uuid1 (the last GPU by UUID)"
train by_uuid env CUDA_VISIBLE_DEVICES="$uuid1"
echo "== two ranks"
(sleep 12; nvidia-smi --query-gpu=index,power.draw,power.limit --format=csv,noheader) >"$OUT/smi.txt" 2>&1 &
train two mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH -np 2
wait
echo "nvidia-smi mid-run:"; cat "$OUT/smi.txt"
pack_out
