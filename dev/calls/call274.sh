#!/bin/bash
# Thirty-fourth session, sixth call: v91 (lab, -DPM_SCAN_WU=1), the warp-specialized kernels' producer/walker split
# on the warp index broadcast from lane 0 (producer_warp), which the compiler knows is warp-uniform, so that the
# walkers' shuffles need no convergence check (call272: HEAD's forward walker loop had a BRA.DIV at its first
# butterfly shuffle, splitting the unrolled chunk and followed by a divergent copy of it; the lab binary is 213 KB
# smaller with the switch). Static BRA.DIV / instruction counts of both builds' scan kernels, then lab rounds of v90
# (src) against wu and an identical control, three rounds, four shapes. Carry .gpu/scan48.
# Prediction: fwd -1 to -3% at B8·D2048 and B4·D4096 (where v90 keeps the butterfly), bwd -1 to -3%.
mkdir -p .gpu/scan && cp .gpu/scan48/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_v90 .gpu/scan/scan_lab_v90c
for v in v90 wu; do cuobjdump -sass .gpu/scan/scan_lab_$v >$OUT/$v.sass 2>/dev/null; done
for v in v90 wu; do echo "$v: $(grep -c 'BRA.DIV' $OUT/$v.sass) BRA.DIV, $(grep -c '/\*[0-9a-f]\{4,6\}\*/' $OUT/$v.sass) instructions"; done
python3 dev/kernels/sass_ops.py $OUT/v90.sass $OUT/wu.sass '^(?!_ZN8scan_v43).*(scan_fwd_ws_kernelILi64ELi3ELi4ELi2ELi2ELb0ELb0E|scan_bwd_ws_kernelILi0ELb1E|scan_bwd4_ws)' | head -12
rm -f $OUT/*.sass
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v90 wu v90c" | grep -v "^prod+st\|^==" | tail -16
cd "$OUT" && tar xzf labs.tgz && grep -l "DIFFERS\|FAIL" lab_*.log | head; grep -h "copy of out" lab_wu_1.log | sort | uniq -c | head -3
rm -f labs.tgz lab_*.log; tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
