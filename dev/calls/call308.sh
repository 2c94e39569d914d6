#!/bin/bash
# Thirty-eighth session, fifth call: how long must the bench warm up before its timed steps read a long run's
# rate? Each headline configuration with no timed warm-up (--warmup 2 --warmup-s 0; the tuner's step still raises
# the warm-up to 11 steps) and many timed steps (130m 80, 370m 40, 1.4b 25: each step's time in results.json), then
# with the new default (at least 3 s of warm-up) and 8 timed steps; every run reports the device's energy over its
# timed steps (NVML's counter: J a step, tokens/J). Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --no-plots --time-limit 150"
each() { python3 - "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['configs'][0]; s = c['step_ms']; n = c['nvml']; e = c.get('energy', {})
t = s['each']; k = len(t)
def mean(a): return sum(a) / len(a) if a else float('nan')
thirds = ' '.join('%.2f' % mean(t[i * k // 3:(i + 1) * k // 3]) for i in range(3))
print('warm %d steps %.2f s | median %.2f mean %.2f tok/s %.0f | thirds %s | SM %.0f MHz %.0f W | %.1f J/step %.0f tok/J'
      % (c['warmup'], c['warmup_s'], s['median'], s['mean'], c['tok_per_s'], thirds, n['sm_mhz']['mean'],
         n['power_w']['mean'], e.get('j_per_step', float('nan')), e.get('tokens_per_j', float('nan'))))
PY
}
run() {  # label preset batch args...
    local l=$1 p=$2 b=$3; shift 3
    timeout 200 .gpu/bin/packmamba bench $A --preset $p --batch $b "$@" --out "$OUT/$l" >"$OUT/$l.log" 2>&1 || tail -3 "$OUT/$l.log"
    echo "$l $(each "$OUT/$l/results.json")"
}
run m130_long 130m 8 --warmup 2 --warmup-s 0 --steps 80
run m130_def 130m 8 --warmup 2 --steps 8
run m370_long 370m 8 --warmup 2 --warmup-s 0 --steps 40
run m370_def 370m 8 --warmup 2 --steps 8
run m14_long 1.4b 4 --warmup 2 --warmup-s 0 --steps 25
run m14_def 1.4b 4 --warmup 2 --steps 8
grep -ah 'SM clock' "$OUT"/m370_def.log | tr '\r' '\n' | grep 'SM clock'
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
