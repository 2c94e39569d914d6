#!/bin/bash
# Thirty-fifth session, third call: conv_xdt (the conv forward with x_proj and dt_proj fused, cuda_conv.cu) in
# src. The CUDA op tests (test_conv_xdt: against the CPU and the GPU's three ops, u bit-identical, the recompute's
# bits; test_model_vs_cpu and test_model_conv_xdt with it forced), memcheck on test_conv_xdt, then end to end, 370m
# and 130m B8 T2048, fused (default) against PM_CONV_XDT=0, interleaved, with the per-op profile of the fused runs.
# Carry .gpu/bin .gpu/lib.
# Source: dev/experiments/conv_xdt_fused_forward.patch (not kept).
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=" | head -4
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PM_TEST_FILTER="test_conv_xdt" .gpu/bin/test_cuda_ops 2>&1 | grep -E "conv_xdt|FAIL|PASSED|FAILED" | head -30
PM_TEST_FILTER="test_model_conv_xdt" .gpu/bin/test_cuda_ops 2>&1 | grep -E "fused|conv_xdt|FAIL|PASSED|FAILED" | head
PM_TEST_FILTER="test_model_vs_cpu" .gpu/bin/test_cuda_ops 2>&1 | grep -E "model loss|all gradients|fused|FAIL" | head
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PM_TEST_FILTER="test_conv_xdt" timeout 120 $CS --tool memcheck --print-limit 3 .gpu/bin/test_cuda_ops 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | head -3
A="--device cuda --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
for r in 1 2; do
    for x in 1 0; do
        for p in 370m 130m; do
            PM_CONV_XDT=$x timeout 100 .gpu/bin/packmamba bench $A --preset $p --out "$OUT/b_${p}_${x}_$r" >"$OUT/b_${p}_${x}_$r.log" 2>&1 || tail -3 "$OUT/b_${p}_${x}_$r.log"
            echo "xdt=$x r$r $(grep -E '\[1/1\]' "$OUT/b_${p}_${x}_$r.log" | sed 's/.*\] //')"
        done
    done
done
for p in 370m 130m; do python3 dev/bench_profile.py "$OUT/b_${p}_1_2/results.json" "$p fused"; python3 dev/bench_profile.py "$OUT/b_${p}_0_2/results.json" "$p unfused"; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
