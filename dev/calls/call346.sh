#!/bin/bash
# Forty-fifth session: decoding v4 with the lane count at compile time and one block reduction for all lanes (call345's first form, a run-time lane count
# under loops of 8, decoded one lane in 1.53 ms a 370m token against v3's documented 1.00). test_cuda_decode (each
# lane the one-lane decoder's bits), then the decode timings of v3 (ac418be's test_cuda_decode, carried as
# .gpu/bin/old_test_cuda_decode) and of this build on the same GPU, generate --samples 8 and --samples 1 at 370m,
# and the carry timings at the 370m width and at 130m T=512 (where carrying still cost 4.7% a step in call345).
# Carry .gpu/bins.tar.xz (bin/: build/'s packmamba, test_cuda_ops, test_cuda_decode; the old test_cuda_decode; all
# stripped: together over the 64 MiB a call carries), .gpu/lib and .gpu/data.
tar -C .gpu -xJf .gpu/bins.tar.xz
. dev/calls/common.sh
pm_gpu_env
PM_BIN=$PWD/.gpu/bin/packmamba timeout 200 .gpu/bin/test_cuda_decode >"$OUT/test_cuda_decode.log" 2>&1
echo "test_cuda_decode rc $?: $(grep -c '\[       OK \]' "$OUT/test_cuda_decode.log") ok"
grep -E "FAILED|lanes" "$OUT/test_cuda_decode.log" | head -6
for b in old_test_cuda_decode test_cuda_decode; do
  echo "== $b"
  PM_BENCH=1 PM_TEST_FILTER=test_decode_speed timeout 200 .gpu/bin/$b 2>&1 | grep -E "graph\+pdl|lanes" | tee -a "$OUT/decode_speed.txt"
done
generate_370m --samples 8
generate_370m --samples 1
PM_BENCH=1 PM_TEST_FILTER=test_carry_timings timeout 120 .gpu/bin/test_cuda_ops 2>&1 | grep -E "op |carry ops" | tee "$OUT/carry_timings.txt"
