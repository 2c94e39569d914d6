#!/bin/bash
# v71 candidate (HEAD + -DPM_SCAN_WS_START_INF=1 as the default: the warp-specialized forward's producers write
# delta log2 e as +inf at document starts, the walkers drop their start test): the CUDA op tests (they compare the
# warp-specialized forward with the staged one bit for bit), the lab's checks under memcheck, then its lab (inf)
# interleaved with HEAD's (base) three times at B8·D2048 (64-wide WS), B8·D1536 (32-wide WS), B2·D4096·L8192 (64-wide
# WS, one block an SM) and B4·D4096. Carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_TOOLS=memcheck SAN_S=40 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_inf prod+st
LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "base inf"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
