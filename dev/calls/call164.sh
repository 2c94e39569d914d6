#!/bin/bash
# session 22, call 7: the forward's plan over widths and row lengths. A lab build with -DPM_SCAN_LAB_FWD_PLAN reads
# PM_SCAN_FWD_PLAN=ch,minb,segments and runs that plan everywhere (src/cuda_scan.cu, scan_fwd_plan); each plan at the
# shapes where the forward runs slower a (token, channel) than at B8·D2048 (long rows at the 130m width, the 790m
# and 2.8b widths), the default plan first. Needs .gpu/scan/scan_lab_fplan.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=4x4096x1536,2x8192x1536,16x1024x1536,8x2048x3072,8x2048x1536,4x2048x5120,8x2048x5120
for p in default 32,4,1 64,1,1 64,2,1 128,1,1 64,1,2 32,4,2 128,2,2 32,4,4; do
    echo "== plan $p"
    if [ "$p" = default ]; then unset PM_SCAN_FWD_PLAN; else export PM_SCAN_FWD_PLAN=$p; fi
    timeout 120 .gpu/scan/scan_lab_fplan > "$OUT/lab_$p.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_$p.log"
done
