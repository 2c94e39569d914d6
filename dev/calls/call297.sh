#!/bin/bash
# Thirty-seventh session, fourth call. call296's lab: the big GEMMs' 3 fastest configurations with the cluster shape
# set (2x1 or 1x2 instead of the heuristic's "auto") and the CTA swizzle varied ran 7.6-12.5% faster on in_proj's
# three GEMMs and out_proj's forward, 3.5-3.9% on dwte and dx; and call296's tuner timed no by-ID candidates (its log:
# "8 candidates" at every shape). The tuner now also times those variants of its 3 fastest candidates, and its log
# says how many candidates came from each source. Here: the CUDA op tests; 370m B8 tuned with both additions (the
# default) against neither (PM_GEMM_BY_ID=0 PM_GEMM_VARIANTS=0), interleaved three times; 130m B8 and 1.4b B4 once
# each way; the tuner logging every run. Carry .gpu/bin .gpu/lib.
# Prediction: 370m -3 to -4 ms a step (in_proj 25.5 -> ~23, out_proj fwd -0.35, classifier -0.3): ~+3%;
# 1.4b (GEMMs ~98 ms a step) ~+5%; 130m +1-2%.
# (The tuner here is dev/experiments/gemm_tune_variants.patch, not in src: see docs/perf.md, thirty-seventh session.)
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
run() {  # run <round> <new 1|0> <preset> <batch>
    local tag="$3_$2_$1" env="PM_GEMM_BY_ID=0 PM_GEMM_VARIANTS=0"
    [ "$2" = 1 ] && env="PM_GEMM_BY_ID=1"
    env="$env PM_CUDA_VERBOSE=1"
    env $env timeout 150 .gpu/bin/packmamba bench $A --preset $3 --batch $4 --out "$OUT/b_$tag" >"$OUT/b_$tag.log" 2>&1 || tail -3 "$OUT/b_$tag.log"
    echo "new=$2 r$1 $(grep -E '\[1/1\]' "$OUT/b_$tag.log" | sed 's/.*\] //')"
}
for r in 1 2 3; do
    for x in 1 0; do
        run $r $x 370m 8
        [ $r = 1 ] && run $r $x 130m 8
        [ $r = 2 ] && run $r $x 1.4b 4
    done
done
echo "--- 370m tuner log (new)"; grep -h "GEMM m=" "$OUT/b_370m_1_1.log" | sort -u | sed 's/packmamba: GEMM //' | head -40
for x in 1 0; do python3 dev/bench_profile.py "$OUT/b_370m_${x}_3/results.json" "370m new=$x"; done
echo "--- 1.4b tuner log (new)"; grep -h "GEMM m=" "$OUT/b_1.4b_1_2.log" | sort -u | sed 's/packmamba: GEMM //' | head -40
for x in 1 0; do python3 dev/bench_profile.py "$OUT/b_1.4b_${x}_2/results.json" "1.4b new=$x" | head -2; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
