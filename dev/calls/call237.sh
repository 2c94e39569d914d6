#!/bin/bash
# cuBLASLt's heuristic limited to each algorithm id in turn (PM_GEMM_SEARCH=1: every id's own best configurations
# timed beside the default 8 candidates): the tuning log at 370m with and without, then 0 against 1 end to end,
# interleaved, at 370m and 130m. Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for s in 1; do
  PM_CUDA_VERBOSE=1 PM_GEMM_SEARCH=$s timeout 150 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 6 \
    --warmup 2 --policy fixed --no-plots --preset 370m --batch 8 --out /tmp/v$s >"$OUT/verbose_$s.log" 2>&1
  echo "rc $?"; grep "GEMM m=" "$OUT/verbose_$s.log" | sort -u | head -20; grep "tok/s" "$OUT/verbose_$s.log" | tail -1
done
PM_AB_TIMEOUT=150 timeout 400 bash dev/ab_bench.sh PM_GEMM_SEARCH "0 1 0 1" "--preset 370m --batch 8" \
  "--preset 130m --batch 8" 2>&1 | tee "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
