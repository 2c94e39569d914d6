#!/bin/bash
# Why `single` (one document a step, 617 tokens on average) runs at 11.5K tok/s at 370m (call206) where an earlier
# build ran 15.4K: the same bench with each of the step's environment switches off in turn (GEMM tuning, the side
# stream, layer-pair weight gradients, deferred reductions, gradients written), plus nvidia-smi's view of the
# host. Carry .gpu/bin/packmamba .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nproc; grep -m1 "model name" /proc/cpuinfo
for e in NONE=1 PM_GEMM_TUNE=0 PM_SIDE_STREAM=0 PM_DW_GROUP=1 PM_DEFER_REDUCTIONS=0 PM_GRADS_WRITE=0 NONE=1; do
    env $e timeout 60 .gpu/bin/packmamba bench --device cuda --preset 370m --seq-len 4096 --batch 8 --policy single \
        --steps 6 --warmup 2 --no-plots --out "$OUT/s" >"$OUT/s.log" 2>&1
    echo "$e: $(grep -o 'single: .*' "$OUT/s.log")"
done
python3 dev/bench_profile.py "$OUT/s/results.json" "single (last run)"
PM_CUDA_VERBOSE=1 timeout 60 .gpu/bin/packmamba bench --device cuda --preset 370m --seq-len 4096 --batch 8 \
    --policy single --steps 6 --warmup 2 --no-plots --out "$OUT/v" >"$OUT/v.log" 2>&1
grep -c "tun" "$OUT/v.log"; grep -i "tun\|plan" "$OUT/v.log" | head -5
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
