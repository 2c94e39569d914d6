#!/bin/bash
# Thirty-eighth session, eighth call: does a step's time at the power limit follow its energy? 370m B8 with 16
# timed steps (2 s of warm-up): the default, --keep-activations (no recompute: fewer joules, more memory),
# PM_RECOMPUTE_AHEAD=0 (the same joules, less overlap), the default again. If the step is held by its energy,
# the J a step saved by keeping activations should come back as ~1.4 ms a joule (at 700 W).
# Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --warmup 2 --steps 16 --no-plots --time-limit 100 --preset 370m --batch 8"
each() { python3 - "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['configs'][0]; s = c['step_ms']; n = c['nvml']; e = c.get('energy', {})
print('median %.2f mean %.2f tok/s %.0f | SM %.0f MHz %.0f W | %.2f J/step %.1f tok/J | peak %.2f GiB'
      % (s['median'], s['mean'], c['tok_per_s'], n['sm_mhz']['mean'], n['power_w']['mean'], e.get('j_per_step', float('nan')),
         e.get('tokens_per_j', float('nan')), c['memory']['peak'] / 2**30))
PY
}
run() { local l=$1; shift; env "$@" timeout 100 .gpu/bin/packmamba bench $A ${FLAGS:-} --out "$OUT/$l" >"$OUT/$l.log" 2>&1 || tail -3 "$OUT/$l.log"; echo "$l $(each "$OUT/$l/results.json")"; }
run default1 PM_X=1
FLAGS=--keep-activations run keep PM_X=1
run ahead0 PM_RECOMPUTE_AHEAD=0
run default2 PM_X=1
FLAGS=--keep-activations run keep2 PM_X=1
