#!/bin/bash
# dev/calls/common.sh — what device calls share (from the thirty-ninth session on; the earlier calls each carry
# their own copies and stay as run). Source it at the top of a call: `. dev/calls/common.sh`.
#
#   pm_gpu_env               the libraries `dev/gpu.sh pack` put in .gpu/lib (carry .gpu/bin .gpu/lib)
#   bench_line RESULTS [i]   one line of a bench's results.json (configuration i, default 0): its label, tok/s,
#                            median and mean step, mean SM clock and power, power-capped share, J a step, tokens/J
#   pack_out                 everything under $OUT into $OUT/all.tgz (the device tool returns at most 8 files)
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
