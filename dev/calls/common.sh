#!/bin/bash
# dev/calls/common.sh — what device calls share (from the thirty-ninth session on; the earlier calls each carry
# their own copies and stay as run). Source it at the top of a call: `. dev/calls/common.sh`.
#
#   pm_gpu_env               the libraries `dev/gpu.sh pack` put in .gpu/lib (carry .gpu/bin .gpu/lib)
#   bench_line RESULTS [i]   one line of a bench's results.json (configuration i, default 0): its label, tok/s,
#                            median and mean step, mean SM clock and power, power-capped share, J a step, tokens/J
#   pack_out                 everything under $OUT into $OUT/all.tgz (the device tool returns at most 8 files)
#   generate_370m            a 370m checkpoint after two training steps (.gpu/data), then `generate --device cuda`
#                            after an 800-token prompt, 1024 tokens at top-k 0 and 40: its closing line each
#                            (calls 325 and 326, which ran these lines in place)
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
            --no-stop --temperature 0.8 --top-k $k >"$OUT/gen_k$k.txt" 2>"$OUT/gen_k$k.log"
        echo "370m top-k $k rc $?: $(grep 'packmamba: prefill' "$OUT/gen_k$k.log")"
    done
}
