#!/bin/bash
# The GEMMs' tuning log at 370m (each shape's first and fastest cuBLASLt candidate, with tile and split-K), with 8
# candidates timed (the default) and with up to 64 (PM_GEMM_CANDS); then 8 against 64 end to end, interleaved.
# Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for c in 8 64; do
  PM_CUDA_VERBOSE=1 PM_GEMM_CANDS=$c timeout 120 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 6 \
    --warmup 2 --policy fixed --no-plots --preset 370m --batch 8 --out /tmp/v$c >"$OUT/verbose_$c.log" 2>&1
  grep "GEMM m=" "$OUT/verbose_$c.log"; cp /tmp/v$c/ops.csv "$OUT/ops_$c.csv"
done
PM_AB_TIMEOUT=120 timeout 420 bash dev/ab_bench.sh PM_GEMM_CANDS "8 64 8 64" "--preset 370m --batch 8" \
  "--preset 130m --batch 8" 2>&1 | tee "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
