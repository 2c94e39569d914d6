#!/bin/bash
# Twenty-eighth session, first call. (1) The CUDA op tests, the PTX-only build's too (the twenty-seventh session's
# refactor had not run there), with the new test of Backend.spin (bench's vector and exp ceilings) against the
# device's per-clock rates. (2) `packmamba bench` per-op profiles with every op placed against its floor under the
# four measured ceilings (GEMM, vector FMA, copy, exp): 370m B8 T2048 (the scan at B8·D2048·L2048), 1.4b B4
# T2048 (the config) and 1.4b B2 T8192 (the scan at B2·D4096·L8192). Carry .gpu/bin .gpu/lib.
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "spin |warp-specialized:|FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --steps 8 --warmup 2 --policy fixed --no-plots"
i=0
for cfg in "--preset 370m --batch 8 --seq-len 2048" "--preset 1.4b --batch 4 --seq-len 2048" "--preset 1.4b --batch 2 --seq-len 8192"; do
    i=$((i + 1)); timeout 180 .gpu/bin/packmamba bench $A $cfg --out "$OUT/b$i" >"$OUT/b$i.log" 2>&1 || tail -5 "$OUT/b$i.log"
    grep -h 'ceilings\|vector' "$OUT/b$i.log" | head -2
    python3 dev/bench_profile.py "$OUT/b$i/results.json" "$cfg"
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
