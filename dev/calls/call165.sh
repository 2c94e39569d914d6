#!/bin/bash
# session 22, call 8: the forward's plan takes 64-wide blocks two an SM (128 registers) wherever it picks 64-wide
# blocks by load, not only on a tie with 128-wide ones (call164: faster at every shape tried). PREV (HEAD's lab,
# .gpu/scan/scan_lab_prev) and NEW interleaved twice at the shapes whose plans change (B16·D1536·L1024, B8·D3072,
# B8·D5120, B2·D4096·L8192, B4·D2048·L4096, B4·D1536·L4096) and two that must not; the op tests; end to end 790m B8
# and 130m B16 T1024 on PREV (.gpu/prev) and NEW, interleaved twice. Carry .gpu/bin .gpu/lib .gpu/prev/bin
# .gpu/prev/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=16x1024x1536,8x2048x3072,8x2048x5120,2x8192x4096,4x4096x2048,4x4096x1536,8x2048x2048,8x2048x1536
for r in 1 2; do for v in prev prod; do
    echo "== $v round $r"
    timeout 200 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_${v}_$r.log"
done; done
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/prev .gpu .gpu/prev .gpu" "--preset 790m --batch 8" \
    "--preset 130m --batch 16 --seq-len 1024"
