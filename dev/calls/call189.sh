#!/bin/bash
# Twenty-fifth session, first call: the review mends (b6c1d8b, not yet run on a GPU) through the CUDA op tests;
# v71 candidate (the 2-thread backward's dB/dC sums through a shared-memory transpose, -DPM_SCAN_BWD_BC_SMEM=1):
# the lab's checks under memcheck and racecheck, then interleaved with HEAD's lab (base) at B8·D2048, B2·D4096·L8192
# and B4·D4096 (1.4b's width). Carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_S=40 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_smem prod+st
LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "base smem"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
