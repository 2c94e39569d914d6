#!/bin/bash
# Forty-first session, second call: the GPU decoder's step alone (test_cuda_decode with PM_BENCH=1: 130m, 370m,
# 1.4b shapes, graph and eager), and generate at 370m again with sampling by radix sort (qsort took ~6 ms a token
# at a 50K vocabulary). Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/lib .gpu/data.
. dev/calls/common.sh
pm_gpu_env
export OMP_NUM_THREADS=16
PM_BENCH=1 timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|worst|decode " "$OUT/test_cuda_decode.log" | head -14
PROMPT=$(python3 -c "print(' '.join(['The kernel schedules tasks on every CPU.'] * 100))")
for p in 370m; do
    rm -rf /tmp/r
    timeout 240 .gpu/bin/packmamba train --device cuda --data .gpu/data --out /tmp/r --preset $p --seq-len 256 \
        --batch 1 --steps 2 --log-every 0 >"$OUT/train_$p.log" 2>&1 || { echo "$p: train failed"; continue; }
    for mode in device host; do
        n=1024; [ $mode = host ] && n=64
        timeout 200 .gpu/bin/packmamba generate --checkpoint /tmp/r --device cuda --decode $mode \
            --prompt "$PROMPT" --tokens $n --no-stop --temperature 0.8 >"$OUT/gen_${p}_$mode.txt" 2>"$OUT/gen_${p}_$mode.log"
        echo "$p $mode rc $?: $(grep 'packmamba: prefill' "$OUT/gen_${p}_$mode.log")"
    done
done
pack_out
