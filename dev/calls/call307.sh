#!/bin/bash
# Thirty-eighth session, fourth call: the GEMM tuner at the tenth step by default (GEMM_TUNE_AFTER_STEPS,
# backend_cuda.cu; the bench warms up past it). (1) The CUDA op tests (test_matmul_tuned now steps
# backend_cuda_gemm_tune_after() times before its tuned calls). (2) The default (10) against PM_GEMM_TUNE_AFTER=1
# (the old behaviour), both timed after 14 warm-up steps: 370m B8 twice, 130m B8 and 1.4b B4 once, interleaved;
# and 370m with 4, to see whether it is the step count or the card's state. (3) README's command as it stands
# (--warmup 2, now raised to 11 by the bench) at 370m. Carry .gpu/bin .gpu/lib.
mkdir -p "$OUT/tests"
OUT="$OUT/tests" PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 PM_PTX_CHECK=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
grep -E "GEMM shapes tuned|FAIL" "$OUT"/tests/test_cuda_ops.log | head -5
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --warmup 14 --steps 12 --no-plots --time-limit 150"
each() { python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['configs'][0]; s=c['step_ms']; n=c['nvml']; print('median %.2f mean %.2f tok/s %.0f SM %.0f MHz %.0f W' % (s['median'], s['mean'], c['tok_per_s'], n['sm_mhz']['mean'], n['power_w']['mean']))" "$1"; }
run() {  # label preset batch after
    PM_CUDA_VERBOSE=1 PM_GEMM_TUNE_AFTER=$4 timeout 200 .gpu/bin/packmamba bench $A --preset $2 --batch $3 --out "$OUT/$1" >"$OUT/$1.log" 2>&1 || tail -3 "$OUT/$1.log"
    echo "$1 $(each "$OUT/$1/results.json")"
}
for r in 1 2; do
    run m370_t10_$r 370m 8 10
    run m370_t1_$r 370m 8 1
done
run m370_t4 370m 8 4
run m130_t10 130m 8 10
run m130_t1 130m 8 1
run m14_t10 1.4b 4 10
run m14_t1 1.4b 4 1
timeout 200 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --preset 370m --batch 8 --out "$OUT/readme370" > "$OUT/readme370.log" 2>&1
grep -a 'warm-up' "$OUT/readme370.log"; echo "readme370 $(each "$OUT/readme370/results.json")"
for f in "$OUT"/*.log; do echo "== $f"; grep 'GEMM m=' "$f" | head -40; done > "$OUT/tuning.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
