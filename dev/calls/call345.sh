#!/bin/bash
# Forty-fifth session: carry v6. call344's profile put --carry-state's extra ~1.1 ms a 130m T=512 B8 step in
# bwd.conv (+0.55: the carry conv backward's 12 blocks walking 8 rows, then two add kernels after a flush of the held
# reductions, every layer) and fwd.scan (+0.37: the state out from the last checkpoint, a token's loads after the
# one before). v6: conv_silu_fwd/bwd take the carried rows themselves (first, hist); the backward's carried parts
# are one more partial row of the conv's own reduction (no add, no flush) from a kernel of (32 channels x 4 row
# groups) blocks; the state out loads its <= 16 tokens first. Here: the CUDA op tests, the carry timings, carry_eval,
# the GPU carry resume (bit for bit, as call340), and call344's bench profile of pack and pack+carry.
# Also decoding v4, lanes (generate --samples N decodes up to 8 samples at once): test_cuda_decode (each lane the
# one-lane decoder's bits), its timings with PM_BENCH=1 (1 lane and 2, 4, 8 lanes a step), and generate --samples 8
# at 370m against --samples 1.
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
op_tests
PM_BIN=$PWD/.gpu/bin/packmamba timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|differ|worst|lanes|SKIP" "$OUT/test_cuda_decode.log" | head -12
PM_BENCH=1 PM_TEST_FILTER=test_decode_speed timeout 200 .gpu/bin/test_cuda_decode 2>&1 | grep -E "graph\+pdl|lanes" | tee "$OUT/decode_speed.txt"
generate_370m --samples 8
PM_BENCH=1 PM_TEST_FILTER=test_carry_timings timeout 120 .gpu/bin/test_cuda_ops 2>&1 | grep -E "op |carry ops" | tee "$OUT/carry_timings.txt"
carry_eval
carry_resume
carry_profile_130m
rm -rf "$OUT"/b130_*/trace.json
# the 370m headline (the default path's conv ops gained first/hist, NULL there)
timeout 240 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16 \
    --out "$OUT/b370" --no-plots >"$OUT/b370.log" 2>&1 || tail -3 "$OUT/b370.log"
bench_line "$OUT/b370/results.json"
rm -f "$OUT/b370/trace.json"
