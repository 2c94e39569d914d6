#!/bin/bash
# Thirty-ninth session, second call: is the GEMM the tuner picks the cheapest one at the power limit? energy_lab's
# new `gemms` mode runs each main 370m GEMM with each cuBLASLt candidate alone, sustained 1.5 s (ms, J, clock a
# call); a 370m bench with PM_CUDA_VERBOSE=1 logs which candidate the tuner picked per shape at step 10.
# Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 200 .gpu/bin/energy_lab gemms 1.5 >"$OUT/gemms.txt" 2>&1; cat "$OUT/gemms.txt"
A="--device cuda --seq-len 2048 --policy fixed --warmup 2 --steps 8 --no-plots --time-limit 100 --preset 370m --batch 8"
PM_CUDA_VERBOSE=1 timeout 120 .gpu/bin/packmamba bench $A --out "$OUT/b" >"$OUT/bench.log" 2>&1
grep -E "GEMM m=|tok/s" "$OUT/bench.log" | cut -c1-220
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
