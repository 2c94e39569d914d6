#!/bin/bash
# v71b (-DPM_SCAN_BWD_BC_SMEM=2: the dB/dC transpose through shared memory, the next token's sums read before this
# token's partials are written, two buffers) interleaved with HEAD's lab (base), and the 2-thread backward forced to
# 64-wide blocks without segments (lab built with -DPM_SCAN_LAB_PLANS, PM_SCAN_BWD_PLAN=64,1) at the shapes whose
# plan is 128-wide one an SM (B8·D2048, B4·D4096). Carry .gpu/scan.
LAB_BIGS=8x2048x2048,2x8192x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "base smem2"
for r in 1 2; do for p in 128,1 64,1; do
    PM_SCAN_BWD_PLAN=$p LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st timeout 60 .gpu/scan/scan_lab_plans >"$OUT/plans_${p/,/_}_$r.log" 2>&1
    echo "== plan $p rc $?"; grep -E "^prod|correctness" "$OUT/plans_${p/,/_}_$r.log"
done; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
