#!/bin/bash
# session 22, call 4: the backward's kernel choice over the shapes the characterization study and users run (fixed
# 16K tokens a step at the 130m and 370m widths, 8K at 1.4b's, and the 2.8b width), to find other shapes where
# scan_use_bwd4's rule misses the faster kernel: each shape with PM_SCAN_BWD4=0 (never the 4-thread kernel),
# 1 (the plan) and 2 (the 4-thread kernel wherever one wave holds its blocks). The lab's production kernels only.
# Needs .gpu/scan/scan_lab_prod (HEAD's src).
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=32x512x1536,16x1024x1536,4x4096x1536,2x8192x1536,1x16384x1536,32x512x2048,16x1024x2048,1x16384x2048,8x1024x4096,2x4096x4096,1x8192x4096,4x2048x5120,2x2048x5120,6x2048x1536
for f in 0 1 2; do
    echo "== PM_SCAN_BWD4=$f"
    PM_SCAN_BWD4=$f timeout 200 .gpu/scan/scan_lab_prod > "$OUT/lab_sweep_$f.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL" "$OUT/lab_sweep_$f.log"
done
