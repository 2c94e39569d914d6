#!/bin/bash
# Thirty-seventh session, seventh call: the recompute ahead (model.c, backward_body; Model.recompute_slots). Layer
# l - 1's recompute (norm, conv, dt_proj) is queued on the side stream, forked at the main stream's point before
# layer l's scan backward, into a second slot of the shared buffers; the side stream now has the lowest priority
# and the main stream the highest, so the scan's blocks take their SMs first and the recompute runs on the 4 SMs
# its 128-block grid leaves free (call298: a stand-in copy kernel 89-90% hidden). Here: the CUDA op tests (the
# side-queue test holds each piece of side work back 0.3 ms: a missing wait shows as different bits); 370m B8
# with the recompute ahead (default) against PM_RECOMPUTE_AHEAD=0 (one slot, the recompute on the main stream),
# interleaved three times, one run without stream priorities (PM_STREAM_PRIORITY=0); 130m B8 and 1.4b B4 once
# each way; peak memory of each.
# Prediction: 370m -3 to -4 ms a step (the 4.8 ms recompute ~80% hidden): +2.5-3.5%; 1.4b +2-3% (5.3 ms of
# recompute, 175 ms step); 130m: its 4-thread backward runs 96-wide blocks one an SM (128 at B8·D1536), so
# likewise, +2-4%; peak memory +0.22 GiB at 370m (a second slot of xn, dpre and two more u copies). Carry .gpu/bin
# .gpu/lib.
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|FAIL|side queue|tickets" | head -12
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --steps 8 --warmup 2 --no-plots --time-limit 80"
run() {  # run <tag> <preset> <batch> <env...>
    local tag="$1" p="$2" b="$3"; shift 3
    env "$@" timeout 150 .gpu/bin/packmamba bench $A --preset $p --batch $b --out "$OUT/b_$tag" >"$OUT/b_$tag.log" 2>&1 || tail -3 "$OUT/b_$tag.log"
    local mem=$(python3 -c "import json; c=json.load(open('$OUT/b_$tag/results.json'))['configs'][0]; print('%.2f GiB' % (c['memory']['peak'] / 2**30))" 2>/dev/null)
    echo "$tag $(grep -E '\[1/1\]' "$OUT/b_$tag.log" | sed 's/.*\] //') peak $mem"
}
for r in 1 2 3; do
    run 370m_ahead_$r 370m 8 PM_RECOMPUTE_AHEAD=1
    run 370m_main_$r 370m 8 PM_RECOMPUTE_AHEAD=0
    [ $r = 1 ] && run 130m_ahead 130m 8 PM_RECOMPUTE_AHEAD=1 && run 130m_main 130m 8 PM_RECOMPUTE_AHEAD=0
    [ $r = 2 ] && run 1.4b_ahead 1.4b 4 PM_RECOMPUTE_AHEAD=1 && run 1.4b_main 1.4b 4 PM_RECOMPUTE_AHEAD=0
    [ $r = 3 ] && run 370m_ahead_noprio 370m 8 PM_RECOMPUTE_AHEAD=1 PM_STREAM_PRIORITY=0
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
