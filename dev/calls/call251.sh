#!/bin/bash
# v82 in src (the 96-wide warp-specialized forward's walkers form the output; on v81): (1) the CUDA op tests from both
# builds (the staged forward must give the same bits at the shapes that take the 96-wide blocks); (2) end to end at
# 130m, v82's build (.gpu) against v81's (.gpu/v81: HEAD 97035fe's), interleaved, by default and keeping
# activations; (3) lab, three interleaved rounds: HEAD's lab before v82 (prod, call247's build) against zlate (v82,
# and the 2-thread instances' producers keep z raw and form silu(z) in store_out instead of their pass:
# -DPM_SCAN_WS_ZLATE=1 on v82's tree; the same special-function work split into two bursts a chunk, and one shared
# store and load fewer an item; its B8·D1536 row is v82 against v81 again). Carry .gpu/bin .gpu/lib .gpu/v81
# .gpu/scan31.
# Prediction: op tests all ok; 130m +0.2 to +0.5% (the forward scan 5.5 ms of a 48.6 ms step, -3.5% of it in the lab);
# zlate -1 to -3% fwd at the 2-thread shapes if the producers' exp bursts are what hold the walkers.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
PM_AB_TIMEOUT=100 timeout 300 bash dev/ab_bench.sh BIN ".gpu/v81 .gpu .gpu/v81 .gpu" "--preset 130m --batch 8" 2>&1 | tee "$OUT/ab.txt"
PM_AB_TIMEOUT=100 timeout 250 bash dev/ab_bench.sh BIN ".gpu/v81 .gpu .gpu/v81 .gpu" "--preset 130m --batch 8 --keep-activations" 2>&1 | tee -a "$OUT/ab.txt"
mkdir -p .gpu/scan && cp .gpu/scan31/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "prod zlate"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
