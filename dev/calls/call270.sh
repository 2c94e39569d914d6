#!/bin/bash
# Thirty-fourth session, second call: the production build with bf2_pack as one packed convert (call269's bf2,
# same bits): the CUDA op tests (also from the PTX-only build), the whole-model GPU checks, and `packmamba bench`
# at 130m and 370m B8 (fixed rows) as a sanity check against README's ranges. Carry .gpu/bin .gpu/lib.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_BENCH_ARGS="--device cuda --preset 130m --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2;--device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2" \
    bash dev/gpu.sh run 2>&1 | tail -30
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
