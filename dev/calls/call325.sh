#!/bin/bash
# Forty-first session, fifth call: the session's commit on the H200: the CUDA op tests (no training kernel changed),
# test_cuda_decode with PM_BENCH=1 (decoder v3 after its row-prologue helper), and generate at 370m on the GPU with
# the sampling's bucket prefix. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/bin/test_cuda_ops .gpu/lib
# .gpu/data.
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
echo "op tests rc $?: $(grep -c '\[       OK \]' "$OUT/ops.log") ok, $(grep -c '^\[  SKIPPED \] test' "$OUT/ops.log") skip lines"
grep -E "FAILED|ERROR|model loss|all gradients" "$OUT/ops.log" | head -5
PM_BENCH=1 timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|worst|decode .*(graph\+pdl|eager)|differ|error" "$OUT/test_cuda_decode.log" | head -16
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
