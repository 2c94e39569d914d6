#!/bin/bash
# Forty-first session, sixth call: test_cuda_decode on 7d62474 (the odd-width refusal is new), the sampling's
# timing on the GPU machine's host (PM_BENCH=1 test_generate's test_sampling_speed), and generate at 370m with
# the sampling's buffers kept. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/bin/test_generate .gpu/lib
# .gpu/data (test_generate copied into .gpu/bin by hand: dev/gpu.sh packs only the CUDA tests).
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|worst|differ|error|packmamba" "$OUT/test_cuda_decode.log" | head -12
PM_BENCH=1 timeout 200 .gpu/bin/test_generate >"$OUT/test_generate.log" 2>&1
echo "test_generate rc $?: $(grep -c '\[       OK \]' "$OUT/test_generate.log") ok"
grep -E "sample:" "$OUT/test_generate.log"
PROMPT=$(python3 -c "print(' '.join(['The kernel schedules tasks on every CPU.'] * 100))")
rm -rf /tmp/r
timeout 240 .gpu/bin/packmamba train --device cuda --data .gpu/data --out /tmp/r --preset 370m --seq-len 256 \
    --batch 1 --steps 2 --log-every 0 >"$OUT/train_370m.log" 2>&1 || echo "370m: train failed"
for k in 0 40; do
    timeout 200 .gpu/bin/packmamba generate --checkpoint /tmp/r --device cuda --prompt "$PROMPT" --tokens 1024 \
        --no-stop --temperature 0.8 --top-k $k >"$OUT/gen_k$k.txt" 2>"$OUT/gen_k$k.log"
    echo "370m top-k $k rc $?: $(grep 'packmamba: prefill' "$OUT/gen_k$k.log")"
done
pack_out
