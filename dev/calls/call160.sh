#!/bin/bash
# session 22, call 3: scan_use_bwd4 now takes the 4-thread backward from 15/8 blocks an SM (256 blocks on 132 SMs:
# B2·D4096·L8192, B4·D2048·L4096), as call159 measured. The lab on HEAD's build at the shapes and the
# long-row ones; the op tests; end to end, the shapes that change (370m B4 T4096, 1.4b B2 T8192) with PM_SCAN_BWD4=0
# (the 2-thread kernel, as the old rule chose there) against the default, interleaved twice. Needs
# .gpu/scan/scan_lab_prod and `dev/gpu.sh pack`; carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SCAN_LAB_VERSIONS=v43+st,prod+st LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x4096x2048,2x8192x2048 \
    timeout 150 .gpu/scan/scan_lab_prod > "$OUT/lab.log" 2>&1
echo "== lab rc $?"; grep -E "^(v43|prod)|correctness|FAIL" "$OUT/lab.log"
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$OUT/t/summary.txt"
PM_AB_TIMEOUT=120 bash dev/ab_bench.sh PM_SCAN_BWD4 "0 1 0 1" "--preset 370m --batch 4 --seq-len 4096" \
    "--preset 1.4b --batch 2 --seq-len 8192"
