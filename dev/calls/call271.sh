#!/bin/bash
# Thirty-fourth session, third call: v90 (lab, -DPM_SCAN_WS_YPART=1), the 2-thread warp-specialized forward's
# walkers storing y's two halves (one float a thread and token) for the producers to add in store_out, instead of
# the transposed butterfly (2 selects, a shuffle and an add a thread and 2 tokens, then one store). Walker
# instructions a thread and token ~52.5 -> ~51 and no shuffle (MIO: 15% of the walkers' stall samples, call247);
# the producers read 4 float4 instead of 2 and add 8 values an item. Same bits (fp32 addition commutes; the lab
# checks the backward's copy of the output against the forward's). Base = HEAD (bf2), with an identical control.
# Prediction: fwd -0.5 to -1.5% at B8·D2048, B4·D4096 and B2·D4096·L8192; B8·D1536 (4 walker threads) unchanged.
# Carry .gpu/scan46.
mkdir -p .gpu/scan && cp .gpu/scan46/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_base .gpu/scan/scan_lab_basec
for v in base yp; do cuobjdump -sass .gpu/scan/scan_lab_$v >$OUT/$v.sass 2>/dev/null; done
python3 dev/kernels/sass_ops.py $OUT/base.sass $OUT/yp.sass '^(?!_ZN8scan_v43).*scan_fwd_ws_kernelILi64ELi3' | head -12
rm -f $OUT/*.sass
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "base yp basec" | grep -v "^prod+st\|^==" | tail -22
cd "$OUT" && tar xzf labs.tgz && grep -l "DIFFERS\|FAIL" lab_*.log | head; grep -h "copy of out" lab_yp_1.log | sort | uniq -c | head -5
tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
