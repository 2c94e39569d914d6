#!/bin/bash
# Thirty-third session, first call: v87's lookahead walkers (-DPM_SCAN_WS_LA=1: a token's 16 decays formed during
# the token before; =2: across chunks too) against v85, positions balanced: v85 la1 la2 v85c, three rounds. Carry
# .gpu/scan37 (v85, v85c: call256's builds) and .gpu/scan38 (la1, la2). Then the SASS of la1's and la2's
# B8·D2048 forward instance (for the MUFU-to-FFMA distances, /tmp/mdist.py's count).
# Prediction: la1 -1 to -3% fwd at B8·D2048 and B2·D4096·L8192 against v85 (each FFMA's exp issued ~50
# instructions earlier instead of ~13); la2 a further -0.5% (a chunk's first token's six back-to-back exps gone).
mkdir -p .gpu/scan && cp .gpu/scan37/scan_lab_v85* .gpu/scan38/scan_lab_la* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 la1 la2 v85c" | tail -24
for v in la1 la2; do cuobjdump -sass -fun '_Z18scan_fwd_ws_kernelILi64ELi3ELi4ELi2ELi2ELb0EEvP13__nv_bfloat16PfPKS0_S4_PKfS6_S4_S4_iS6_S4_iPKiiii' .gpu/scan/scan_lab_$v > "$OUT/$v.sass" 2>&1; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
