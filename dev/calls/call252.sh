#!/bin/bash
# v83 in src (every warp-specialized forward's producers keep z raw in the stage and form silu(z) with the output in
# store_out, not in their pass; the lab's zlate, call251: fwd -1.5% at B8·D2048 and B4·D4096; on v82): (1) the CUDA
# op tests from both builds; (2) lab, three interleaved rounds, HEAD's lab before v82 (prod, call247's build)
# against v83's (scan_lab_v83); (3) end to end, v81's build (.gpu/v81, HEAD 97035fe) against v83's (.gpu),
# interleaved: 370m B8 twice, 130m B8 once. Carry .gpu/bin .gpu/lib .gpu/v81 .gpu/scan31.
# Prediction: op tests ok; lab fwd -1 to -2% at B8·D2048 and B4·D4096, -0 to -1% at B2·D4096·L8192, B8·D1536 as v82
# (-3.5%); 370m within +-0.3% (the forward scan is 11.6 of 122 ms), 130m +0.5%.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
mkdir -p .gpu/scan && cp .gpu/scan31/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "prod v83" | tail -12
PM_AB_TIMEOUT=100 timeout 250 bash dev/ab_bench.sh BIN ".gpu/v81 .gpu .gpu/v81 .gpu" "--preset 370m --batch 8" 2>&1 | tee "$OUT/ab.txt"
PM_AB_TIMEOUT=100 timeout 150 bash dev/ab_bench.sh BIN ".gpu/v81 .gpu" "--preset 130m --batch 8" 2>&1 | tee -a "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
