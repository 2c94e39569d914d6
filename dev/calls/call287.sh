#!/bin/bash
# Thirty-sixth session, fifth call: x_proj's input gradient fused into the conv backward (Backend.conv_silu_bwd_xp,
# cuda_conv.cu: fp32 staging, 4 warps a block, three blocks an SM, runs of up to 176 tokens) in src, wired through
# the model (the CPU backend keeps the unfused pair). The CUDA op tests as they are (the model-vs-CPU checks now
# run the fused path), the fused launches counted, then end to end, 370m and 130m B8 T2048, fused (default) against
# PM_CONV_XP=0 (the unfused pair), interleaved twice, with the per-op profiles of the second round.
# Prediction (lab, call286): 370m -0.4 to -0.5 ms a step (+0.3-0.4%), 130m -0.3 ms (+0.6%). Carry .gpu/bin .gpu/lib.
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PM_TEST_FILTER="test_model_vs_cpu" .gpu/bin/test_cuda_ops 2>&1 | grep -E "model loss|all gradients|conv_xp|FAIL" | head
A="--device cuda --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
for r in 1 2; do
    for x in 1 0; do
        for p in 370m 130m; do
            PM_CONV_XP=$x timeout 100 .gpu/bin/packmamba bench $A --preset $p --out "$OUT/b_${p}_${x}_$r" >"$OUT/b_${p}_${x}_$r.log" 2>&1 || tail -3 "$OUT/b_${p}_${x}_$r.log"
            echo "xp=$x r$r $(grep -E '\[1/1\]' "$OUT/b_${p}_${x}_$r.log" | sed 's/.*\] //')"
        done
    done
done
for p in 370m 130m; do python3 dev/bench_profile.py "$OUT/b_${p}_1_2/results.json" "$p fused"; python3 dev/bench_profile.py "$OUT/b_${p}_0_2/results.json" "$p unfused"; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
