#!/bin/bash
# Thirty-seventh session, third call. Calls one and two ran the lab alone (carry .gpu/gemm, built as gemm_lab.cu's
# header says): `.gpu/gemm/gemm_lab layout`, then `for s in 370m 1.4b; do .gpu/gemm/gemm_lab $s; done`; their outputs
# are docs/bench/gemm_lab_layout.txt and docs/bench/gemm_lab_370m_1.4b.txt. The GEMM tuner now also times up to 16 configurations
# of the first choice's algorithm (CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID), which the lab found 4.8-7.6% faster than
# the best of 8 on 370m's out_proj input gradient, logits and dwte. Here: the CUDA op tests; the lab's cluster-shape
# and swizzle variants of the big 370m GEMMs; then 370m B8 with the by-ID candidates (PM_GEMM_BY_ID=1, the default)
# against without (0), interleaved twice, and 130m once each, the tuner's picks logged for 370m.
# Prediction: 370m -0.5 to -0.7 ms a step (+0.4-0.6%), 130m within 0.3%. Carry .gpu/bin .gpu/lib .gpu/gemm.
# (The tuner here is the by-ID half of dev/experiments/gemm_tune_variants.patch, not in src.)
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
timeout 150 .gpu/gemm/gemm_lab variants370m > "$OUT/variants370m.txt" 2>&1; echo "variants rc=$?"
grep -E "^370m|variants:" "$OUT/variants370m.txt"
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --batch 8 --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
for r in 1 2; do
    for x in 1 0; do
        for p in 370m $([ $r = 1 ] && echo 130m); do
            V=""; [ $r = 1 ] && V="PM_CUDA_VERBOSE=1"
            env $V PM_GEMM_BY_ID=$x timeout 100 .gpu/bin/packmamba bench $A --preset $p --out "$OUT/b_${p}_${x}_$r" >"$OUT/b_${p}_${x}_$r.log" 2>&1 || tail -3 "$OUT/b_${p}_${x}_$r.log"
            echo "by_id=$x r$r $(grep -E '\[1/1\]' "$OUT/b_${p}_${x}_$r.log" | sed 's/.*\] //')"
        done
    done
done
grep -h "GEMM m=" "$OUT/b_370m_1_1.log" | sort -u | head -40
for x in 1 0; do python3 dev/bench_profile.py "$OUT/b_370m_${x}_2/results.json" "370m by_id=$x"; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
