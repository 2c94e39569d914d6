#!/bin/bash
# Thirty-eighth session, third call: does the GEMM tuner pick differently once the card sits at its power limit?
# Tuning runs in the step after a shape's plan is made, when the card is still at its maximum SM clock (1980 MHz);
# from the second second of a run every configuration is power-capped (call305: 100% of samples; mean SM clock
# 1873 MHz at 130m, 1775 at 370m, 1652 at 1.4b). PM_GEMM_TUNE_AFTER=12 tunes at the twelfth step instead.
# Both arms: 14 warm-up steps (so the timed steps are in the capped state either way), 12 timed; interleaved
# twice at 370m B8 and once at 1.4b B4; the tuner's log (first choice and best, per shape) kept for each arm.
# Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --warmup 14 --steps 12 --no-plots --time-limit 150"
each() { python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['configs'][0]; s=c['step_ms']; n=c['nvml']; print('median %.2f mean %.2f tok/s %.0f SM %.0f MHz %.0f W capped %s' % (s['median'], s['mean'], c['tok_per_s'], n['sm_mhz']['mean'], n['power_w']['mean'], n.get('power_capped')))" "$1"; }
run() {  # label preset batch after
    PM_CUDA_VERBOSE=1 PM_GEMM_TUNE_AFTER=$4 timeout 200 .gpu/bin/packmamba bench $A --preset $2 --batch $3 --out "$OUT/$1" >"$OUT/$1.log" 2>&1 || tail -3 "$OUT/$1.log"
    echo "$1 $(each "$OUT/$1/results.json")"
}
for r in 1 2; do
    run m370_t1_$r 370m 8 1
    run m370_t12_$r 370m 8 12
done
run m14_t1 1.4b 4 1
run m14_t12 1.4b 4 12
for f in "$OUT"/*.log; do echo "== $f"; grep 'GEMM m=' "$f" | head -40; done > "$OUT/tuning.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
