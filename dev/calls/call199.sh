#!/bin/bash
# Twenty-sixth session, first call. (1) The op tests on HEAD's build with CMake's default CUDA targets (90a-real,
# 90-virtual; the review mends and the new hook that counts the warp-specialized kernels' launches, so the
# staged-kernel comparisons must show both ran). (2) Two lab rounds: HEAD's lab (v72) against v72c (three tile
# slots) and v72d (v72c + B/C and pos by cp.async; 52 bytes spilled), each built from
# dev/experiments/scan_bwd_ws_v72{c,d}.patch. (3) The bench's per-op profile at 370m B8 (by default and keeping
# activations), for where a step's time goes after v65-v72. (4) compute-sanitizer on v72c's lab. Carry .gpu/bin
# .gpu/lib .gpu/scan.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=90 timeout 120 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -E "warp-specialized:|bit-identical|FAIL" "$OUT/t/test_cuda_ops.log" | sort | uniq -c | sort -rn | head -12
LAB_TIMEOUT=40 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v72 v72c v72d"
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed --no-plots"
i=0
for cfg in "--preset 370m --batch 8" "--preset 370m --batch 8 --keep-activations"; do
    i=$((i + 1)); timeout 150 .gpu/bin/packmamba bench $A $cfg --out "$OUT/b$i" >"$OUT/b$i.log" 2>&1 || tail -5 "$OUT/b$i.log"
    python3 dev/bench_profile.py "$OUT/b$i/results.json" "$cfg"
done
SAN_S=40 timeout 200 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v72c prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
