#!/bin/bash
# v69 (HEAD: the warp-specialized forward for every 64-wide plan, no 96-channels-an-SM threshold): the CUDA op
# tests (more of their shapes now take it), memcheck and racecheck on the lab; then the lab, interleaved two
# rounds: v69 and ws32 (also for 32-wide plans, three blocks an SM: B8·D1536, the 130m width, where the plan takes
# 32-wide staged blocks; PM_SCAN_WS_32=1) (ws128 left out: the carry limit); then end
# to end against the session's start (.gpu/prev, v65) where the threshold mattered: 370m B4 (B4·D2048: 62
# channels an SM), 1.4b B2 (B2·D4096). Carry .gpu/bin .gpu/lib .gpu/prev/bin/packmamba .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p .gpu/prev/lib && cp -n .gpu/lib/* .gpu/prev/lib/ 2>/dev/null
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_ws32 prod+st
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096,4x2048x5120,16x1024x1536
for r in 1 2; do for v in v69 ws32; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh BIN ".gpu .gpu/prev .gpu .gpu/prev" "--preset 370m --batch 4" \
    "--preset 1.4b --batch 2"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
