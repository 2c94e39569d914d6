#!/bin/bash
# session 22, call 10: the backward's plan at long rows and the wide models. A lab build with -DPM_SCAN_LAB_FWD_PLAN
# also reads PM_SCAN_BWD_PLAN=ch,segments (the 2-thread kernel at that block width and segment count;
# src/cuda_scan.cu, scan_bwd_plan); each plan at the shapes where the backward runs slower a (token, channel) than at
# B8·D2048, the default plan first. Needs .gpu/scan/scan_lab_bplan.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=4x4096x1536,2x8192x1536,1x16384x1536,2x8192x2048,1x16384x2048,4x2048x5120,8x2048x3072
for p in default 64,2 64,4 64,8 128,2 128,4; do
    echo "== plan $p"
    if [ "$p" = default ]; then unset PM_SCAN_BWD_PLAN; else export PM_SCAN_BWD_PLAN=$p; fi
    timeout 100 .gpu/scan/scan_lab_bplan > "$OUT/lab_${p/,/_}.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_${p/,/_}.log"
done
