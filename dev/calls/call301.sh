#!/bin/bash
# Thirty-seventh session, ninth call: the update ahead (model.c: model_optimizer_step updates the embedding, layer 0
# and the final norm at once and leaves layers 1 .. L-1 pending; the next forward queues layer l + 1's AdamW on the
# side stream just before layer l's scan, whose 256 64-wide blocks (two an SM) leave 4 SMs free, and waits for it
# at layer l + 1; every other use of the parameters, moments or gradients settles what is pending first). Backends
# take a segment range (AdamWArgs.part_first / part_count). Here: the CUDA op tests (the side-queue test now
# expects the second step's L - 1 update tickets, and holds each piece of side work back 0.3 ms: a missing wait
# changes the bits); 370m B8 with the update ahead (default) against PM_UPDATE_AHEAD=0, interleaved three times;
# 1.4b B4 and 130m B8 once each way. Carry .gpu/bin .gpu/lib.
# Prediction: AdamW is 2.7 ms of a 370m step; beside a 0.23 ms forward scan the 4 free SMs move ~40% of a layer's
# 219 MB: ~1.1 ms hidden, +0.9%; 1.4b (9.8 ms of AdamW, 0.5 ms scans, 870 MB a layer) ~2.2 ms, +1.3%; 130m +0.5%.
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL" | head -8
grep -E "side queue|tickets|FAIL" .gpu/out/test_cuda_ops.log "$OUT"/test_cuda_ops.log 2>/dev/null | head -8
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
run() {  # run <tag> <preset> <batch> <env...>
    local tag="$1" p="$2" b="$3"; shift 3
    env "$@" timeout 150 .gpu/bin/packmamba bench $A --preset $p --batch $b --out "$OUT/b_$tag" >"$OUT/b_$tag.log" 2>&1 || tail -3 "$OUT/b_$tag.log"
    local x=$(python3 -c "import json; c=json.load(open('$OUT/b_$tag/results.json'))['configs'][0]; s=c['step_ms']; print('median %.2f mean %.2f each %s' % (s['median'], s['mean'], ' '.join('%.1f' % t for t in s.get('each', []))))" 2>/dev/null)
    echo "$tag $(grep -E '\[1/1\]' "$OUT/b_$tag.log" | sed 's/.*\] //' | sed 's/ (p10.*//') | $x"
}
for r in 1 2 3; do
    run 370m_ahead_$r 370m 8 PM_UPDATE_AHEAD=1
    run 370m_off_$r 370m 8 PM_UPDATE_AHEAD=0
    [ $r = 1 ] && run 1.4b_ahead 1.4b 4 PM_UPDATE_AHEAD=1 && run 1.4b_off 1.4b 4 PM_UPDATE_AHEAD=0
    [ $r = 2 ] && run 130m_ahead 130m 8 PM_UPDATE_AHEAD=1 && run 130m_off 130m 8 PM_UPDATE_AHEAD=0
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
