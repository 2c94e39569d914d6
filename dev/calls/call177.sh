#!/bin/bash
# session 23, call 10: the final build (v65 for 64-wide forward plans only, the tie64 backward plan): the CUDA op
# tests, compute-sanitizer (memcheck, racecheck) on the lab's checking shapes (B130 D128 L24 runs v65), and the
# lab once at the shapes and B4·D5120 (staged forward again). Needs .gpu/{bin,lib}, .gpu/scan/scan_lab_new.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_new prod+st
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x5120
timeout 60 .gpu/scan/scan_lab_new > "$OUT/lab_new.log" 2>&1
echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_new.log" | head -12
