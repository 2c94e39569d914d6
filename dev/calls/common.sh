#!/bin/bash
# dev/calls/common.sh — what device calls share (from the thirty-ninth session on; the earlier calls each carry
# their own copies and stay as run). Source it at the top of a call: `. dev/calls/common.sh`.
#
#   pm_gpu_env               the libraries `dev/gpu.sh pack` put in .gpu/lib (carry .gpu/bin .gpu/lib)
#   bench_line RESULTS [i]   one line of a bench's results.json (configuration i, default 0): its label, tok/s,
#                            median and mean step, mean SM clock and power, power-capped share, J a step, tokens/J
#   pack_out                 everything under $OUT into $OUT/all.tgz (the device tool returns at most 8 files)
#   generate_370m [ARGS]     a 370m checkpoint after two training steps (.gpu/data), then `generate --device cuda`
#                            after an 800-token prompt, 1024 tokens at top-k 0 and 40: its closing line each
#                            (calls 325 and 326, which ran these lines in place); ARGS: more flags for generate
#   carry_eval               eval --carry-state against unbroken documents, GPU and CPU (call336 ran these lines
#                            in place)
#   op_tests                 the CUDA op tests, their log in $OUT/test_cuda_ops.log and their summary lines
#   carry_resume             a tiny --carry-state --deterministic run of 20 steps against 10 resumed to 20: the
#                            losses bit for bit (call340 ran these lines in place; needs carry_eval's corpus)
#   carry_profile_130m       the bench's per-op profile of 130m T=512 B8 pack and pack+carry on carry_eval's corpus,
#                            and the ops that differ (call344)
pm_gpu_env() {
    export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

bench_line() {
    python3 - "$1" "${2:-0}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['configs'][int(sys.argv[2])]
s, n, e = c['step_ms'], c.get('nvml') or {}, c.get('energy') or {}
mean = lambda k: (n.get(k) or {}).get('mean', float('nan'))
print('%s: %.1fK tok/s, median %.2f mean %.2f ms, %.0f MHz %.0f W, power-capped %.0f%%, %.2f J a step, %.1f tokens/J'
      % (c['label'], c['tok_per_s'] / 1e3, s['median'], s['mean'], mean('sm_mhz'), mean('power_w'),
         100 * (n.get('power_capped') or 0), e.get('j_per_step') or float('nan'), e.get('tokens_per_j') or float('nan')))
PY
}

pack_out() {
    (cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$'))
}

generate_370m() {
    PROMPT=$(python3 -c "print(' '.join(['The kernel schedules tasks on every CPU.'] * 100))")
    rm -rf /tmp/r
    timeout 240 .gpu/bin/packmamba train --device cuda --data .gpu/data --out /tmp/r --preset 370m --seq-len 256 \
        --batch 1 --steps 2 --log-every 0 >"$OUT/train_370m.log" 2>&1 || echo "370m: train failed"
    for k in 0 40; do
        timeout 200 .gpu/bin/packmamba generate --checkpoint /tmp/r --device cuda --prompt "$PROMPT" --tokens 1024 \
            --no-stop --temperature 0.8 --top-k $k "$@" >"$OUT/gen_k$k.txt" 2>"$OUT/gen_k$k.log"
        echo "370m top-k $k $* rc $?: $(grep 'packmamba: prefill' "$OUT/gen_k$k.log")"
    done
}

carry_eval() {
    # the carried state's exactness end to end (call336, then call337): a tiny corpus of generated documents, some
    # longer than T = 64 (to ~9000 tokens); eval --carry-state at T = 64 against eval at T = 16384 (documents whole),
    # per document, on the GPU and on the CPU, and the restarted pieces (no carry) for contrast. Leaves the corpus
    # in /tmp/c/data for a training run.
local P=$PWD/.gpu/bin/packmamba
mkdir -p /tmp/c && cd /tmp/c
python3 - <<'PY'
import os, random
random.seed(5)
os.makedirs('corpus', exist_ok=True)
w = "the cat a dog river sees follows paints the hill long road window market stone".split()
for i in range(60):
    n = random.choice([5, 20, 60, 200, 700, 2500, 9000])
    open('corpus/d%02d.txt' % i, 'w').write(' '.join(random.choice(w) for _ in range(n // 4 + 1)) + '\n')
PY
$P prepare --out data corpus >/dev/null 2>&1 || echo "prepare failed"
$P train --data data --out base --preset tiny --seq-len 64 --batch 2 --steps 30 --log-every 0 >/dev/null 2>&1 || echo "train failed"
for dev in cuda cpu; do
  $P eval --checkpoint base --data data --seq-len 16384 --batch 1 --per-doc --json --device $dev > whole_$dev.json 2>/dev/null || echo "eval whole $dev failed"
  $P eval --checkpoint base --data data --seq-len 64 --batch 4 --per-doc --json --carry-state --device $dev > carry_$dev.json 2>carry_$dev.err || { echo "eval carry $dev failed"; tail -2 carry_$dev.err; }
  $P eval --checkpoint base --data data --seq-len 64 --batch 4 --per-doc --json --device $dev > cut_$dev.json 2>/dev/null
done
python3 - <<'PY'
import json
def load(f):
    j = json.load(open(f)); return j['mean_loss'], {d['doc']: (d['tokens'], d['loss']) for d in j['per_doc']}
for dev in ['cuda', 'cpu']:
    mw, w = load('whole_%s.json' % dev); mc, c = load('carry_%s.json' % dev); mx, x = load('cut_%s.json' % dev)
    worst = max(abs(c[k][1] - w[k][1]) / w[k][1] for k in w); same_tokens = all(c[k][0] == w[k][0] for k in w)
    apart = max(abs(x[k][1] - w[k][1]) / w[k][1] for k in w)
    print('%s: mean whole %.6f carried %.6f restarted %.6f; per doc carried vs whole worst %.2e (tokens equal %s), restarted %.2e' % (dev, mw, mc, mx, worst, same_tokens, apart))
PY
cd $OLDPWD
}

op_tests() {
    timeout 300 .gpu/bin/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1
    echo "test_cuda_ops rc $?"
    grep -E "^\[  (PASSED|FAILED)|FAIL" "$OUT/test_cuda_ops.log" | head -20
}

carry_resume() {
    local P=.gpu/bin/packmamba
    local A="--device cuda --data /tmp/c/data --preset tiny --seq-len 64 --batch 4 --log-every 0 --carry-state --deterministic"
    rm -rf /tmp/ra /tmp/rb
    $P train $A --steps 20 --out /tmp/ra >/dev/null 2>&1 || echo "train 20 failed"
    $P train $A --steps 10 --out /tmp/rb >/dev/null 2>&1 && $P train $A --steps 20 --resume --out /tmp/rb >/dev/null 2>&1 || echo "resume failed"
    python3 -c "
import json
a=[json.loads(l)['loss'] for l in open('/tmp/ra/metrics.jsonl')]; b=[json.loads(l)['loss'] for l in open('/tmp/rb/metrics.jsonl')]
print('carry resume on the GPU: %d and %d steps, identical %s, step 20 loss %.9f vs %.9f' % (len(a), len(b), a == b, a[-1], b[-1]))"
}

carry_profile_130m() {
    local c n
    for c in "" "--carry-state"; do
        n=plain; [ -n "$c" ] && n=carry
        timeout 200 .gpu/bin/packmamba bench --device cuda --preset 130m --batch 8 --seq-len 512 --policy pack \
            --data /tmp/c/data --steps 30 --profile-steps 5 --out "$OUT/b130_$n" --no-plots $c >"$OUT/b130_$n.log" 2>&1 \
            || tail -3 "$OUT/b130_$n.log"
        python3 dev/bench_profile.py "$OUT/b130_$n/results.json" "130m T512 B8 $n"
    done
    python3 - "$OUT/b130_plain/results.json" "$OUT/b130_carry/results.json" <<'PY'
import json, sys
a, b = (json.load(open(f))['configs'][0] for f in sys.argv[1:3])
oa = {o['region']: o['ms'] for o in a['ops']}; ob = {o['region']: o['ms'] for o in b['ops']}
print('per op, ms a step, carry minus plain (|diff| > 0.01):')
for k in sorted(set(oa) | set(ob), key=lambda k: -abs(ob.get(k, 0) - oa.get(k, 0))):
    d = ob.get(k, 0) - oa.get(k, 0)
    if abs(d) > 0.01: print('  %-28s %7.3f -> %7.3f (%+.3f)' % (k, oa.get(k, 0), ob.get(k, 0), d))
print('other %.3f -> %.3f; profiled step %.3f -> %.3f; tok/s %.0f -> %.0f' % (a['other_ms'], b['other_ms'], a['profiled_step_ms'], b['profiled_step_ms'], a['tok_per_s'], b['tok_per_s']))
PY
}
