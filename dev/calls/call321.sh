#!/bin/bash
# Forty-first session, first call: decoding on the GPU (src/cuda_decode.cu). test_cuda_decode (GPU decoder against
# the host decoder: steps with and without the CUDA graph, the prefill's state rebuild, reset), then generate's
# speed for 130m, 370m and 1.4b checkpoints (random weights after two training steps; GPT-2 BPE, vocab 50257):
# decoded on the GPU (graph, and PM_DECODE_GRAPH=0) and on the host, after a ~1,000-token prompt prefilled on the
# GPU. Carry .gpu/bin .gpu/lib .gpu/data.
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
timeout 120 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|differ|worst|SKIP" "$OUT/test_cuda_decode.log" | head -12
PROMPT=$(zcat /usr/share/doc/linux-doc-6.1/Documentation/admin-guide/README.rst.gz 2>/dev/null | head -c 3500)
[ -n "$PROMPT" ] || PROMPT=$(python3 -c "print(' '.join(['The kernel schedules tasks on every CPU.'] * 120))")
for p in 130m 370m 1.4b; do
    rm -rf /tmp/r
    timeout 240 .gpu/bin/packmamba train --device cuda --data .gpu/data --out /tmp/r --preset $p --seq-len 256 \
        --batch 1 --steps 2 --log-every 0 >"$OUT/train_$p.log" 2>&1 || { echo "$p: train failed"; tail -2 "$OUT/train_$p.log"; continue; }
    for mode in device graph0 host; do
        n=512; env=""; dec=device
        [ $mode = graph0 ] && env="PM_DECODE_GRAPH=0"
        [ $mode = host ] && { dec=host; [ $p = 1.4b ] && n=32 || n=64; }
        env $env timeout 200 .gpu/bin/packmamba generate --checkpoint /tmp/r --device cuda --decode $dec \
            --prompt "$PROMPT" --tokens $n --no-stop --temperature 0.8 >"$OUT/gen_${p}_$mode.txt" 2>"$OUT/gen_${p}_$mode.log"
        echo "$p $mode rc $?: $(grep 'packmamba: prefill' "$OUT/gen_${p}_$mode.log")"
    done
done
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
pack_out
