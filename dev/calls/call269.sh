#!/bin/bash
# Thirty-fourth session, first call: v89 (lab), the backward's dB/dC butterfly level 1 fused into the walk's
# products (-DPM_SCAN_BWD_FUSE1=1: the kept half's ds*delta u and dy*s each one FFMA onto the partner's term: 8 FMUL
# + 8 FADD -> 8 FFMA a thread and token in the 2-thread walk, 4 + 4 -> 4 in the 4-thread walk), and the review's
# bf2_pack as one packed convert (-DPM_SCAN_BF2_PAIR=1, same bits). Static SASS counts of each build against v85's
# first; then lab rounds v85 f1 bf2 v85c (an identical control), three rounds, four shapes. Carry .gpu/scan45.
# Prediction: f1 fwd+bwd -0.5 to -1.5% (the walk loses ~4% of its instructions; call264 found ~0.25% of time per 1%
# of walker instructions removed); bf2 fwd within +-0.5%.
mkdir -p .gpu/scan && cp .gpu/scan45/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_v85 .gpu/scan/scan_lab_v85c
for v in v85 f1 bf2; do cuobjdump -sass .gpu/scan/scan_lab_$v >$OUT/$v.sass 2>/dev/null; done
python3 dev/kernels/sass_ops.py $OUT/v85.sass $OUT/f1.sass '^(?!_ZN8scan_v43).*scan_bwd' | head -24
python3 dev/kernels/sass_ops.py $OUT/v85.sass $OUT/bf2.sass '^(?!_ZN8scan_v43).*scan_fwd' | head -12
rm -f $OUT/*.sass
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 f1 bf2 v85c" | grep -v "^prod+st\|^==" | tail -22
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
