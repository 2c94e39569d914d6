#!/bin/bash
# Thirty-eighth session, ninth call: the bench's energy a step from the counter's rate between its updates (the
# sampler now reads the counter every 20 ms) against the difference of two readings (call311: identical 2 s runs
# read 82.5 and 86.7 J a 370m step that way). 370m B8, 16 timed steps, three identical runs; then energy_lab.
# Prepared in the thirty-eighth session, not run (its device time ran out). Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --warmup 2 --steps 16 --no-plots --time-limit 100 --preset 370m --batch 8"
for r in 1 2 3; do
    timeout 100 .gpu/bin/packmamba bench $A --out "$OUT/r$r" >"$OUT/r$r.log" 2>&1 || tail -3 "$OUT/r$r.log"
    python3 - "$OUT/r$r/results.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['configs'][0]; e = c['energy']; s = c['step_ms']
print('median %.2f mean %.2f | %.2f J/step (%s; %d updates over %.2f s, %.1f W) | difference %.2f J/step'
      % (s['median'], s['mean'], e['j_per_step'], e['method'][:12], e['counter_updates'], e['window_s'], e['rate_w'],
         e['counter_difference_j'] / c['steps']))
PY
done
python3 - "$OUT/r1/nvml_samples.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r['config'] == '0' and r['energy_j']]
ch = [(float(a['t_s']), float(b['energy_j']) - float(a['energy_j'])) for a, b in zip(rows, rows[1:]) if b['energy_j'] != a['energy_j']]
gaps = [b[0] - a[0] for a, b in zip(ch, ch[1:])]
print('counter moves seen:', len(ch), 'gaps between moves (s):', ' '.join('%.3f' % g for g in gaps[:20]))
PY
# the energy lab with the same method (call310 read its joules from the difference of two readings)
timeout 120 .gpu/bin/energy_lab 2 > "$OUT/energy_lab.txt" 2>&1; cat "$OUT/energy_lab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
