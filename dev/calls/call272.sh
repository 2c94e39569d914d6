#!/bin/bash
# Thirty-fourth session, fourth call: v90 again (yp2), its halves stored one group late as the butterfly's sums
# are (call271's yp stored each half right after its FFMA chain, ahead of the next token's shared loads, which the
# compiler keeps in order: a wait a token), and the SASS of the B8·D2048 instance of both builds and of HEAD's
# (call271 counted 1,976 static instructions in yp against 2,600 in HEAD, 168 MUFU against 264: a different
# structure, not only the butterfly). Base = HEAD (bf2), with an identical control; two rounds. Carry .gpu/scan46.
# Prediction: yp2 fwd -0.5 to -1.5% at the 2-thread shapes if yp's loss was the early stores.
mkdir -p .gpu/scan && cp .gpu/scan46/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_base .gpu/scan/scan_lab_basec
F=_Z18scan_fwd_ws_kernelILi64ELi3ELi4ELi2ELi2ELb0EEvP13__nv_bfloat16PfPKS0_S4_PKfS6_S4_S4_iS6_S4_iPKiiii
for v in base yp yp2; do cuobjdump -sass -fun $F .gpu/scan/scan_lab_$v >$OUT/fwd64_$v.sass 2>&1; wc -l <$OUT/fwd64_$v.sass; done
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "base yp2 basec" | grep -v "^prod+st\|^==" | tail -14
cd "$OUT" && tar xzf labs.tgz && grep -l "DIFFERS\|FAIL" lab_*.log | head; grep -h "copy of out" lab_yp2_1.log | sort | uniq -c | head -3
rm -f labs.tgz; tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
