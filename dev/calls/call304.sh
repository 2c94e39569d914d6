#!/bin/bash
# Thirty-eighth session, first call. (1) The CUDA op tests on the thirty-seventh session's last commit (b529134,
# the review mends to the update ahead: adamw_parts, update_through, adamw_segment_range; not yet run on a GPU).
# (2) call303 as prepared (the recompute's parts ahead one at a time; a 30-step 370m run with the clocks and power
# sampled), and (3) a 20-step 1.4b run sampled the same way (its slow step is the 5th of eight).
# Carry .gpu/bin .gpu/lib.
mkdir -p "$OUT/tests"
OUT="$OUT/tests" PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 PM_PTX_CHECK=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
grep -E "update ahead|side queue|FAIL|pending" "$OUT"/tests/test_cuda_ops.log | head -12
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 20 > "$OUT/smi14.csv" &
SMI=$!
timeout 120 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --policy fixed --warmup 2 --no-plots --time-limit 100 \
    --steps 20 --preset 1.4b --batch 4 --out "$OUT/b14_long" >"$OUT/b14_long.log" 2>&1
kill $SMI
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['configs'][0]; s=c['step_ms']; print('1.4b 20 steps: median %.2f mean %.2f tok/s %.0f each %s' % (s['median'], s['mean'], c['tok_per_s'], ' '.join('%.1f' % t for t in s['each'])))" "$OUT/b14_long/results.json"
bash dev/calls/call303.sh
