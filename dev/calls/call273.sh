#!/bin/bash
# Thirty-fourth session, fifth call: v90 in src (the producers add y's halves where the 64-wide forward blocks
# are one an SM; kernel flag YH, scan_fwd_halves): the CUDA op tests (test_scan's new B2·D4096 case asserts the
# YH kernel ran and matches the staged forward bit for bit), also under compute-sanitizer memcheck and from the
# PTX-only build, the whole-model GPU checks; then lab rounds of HEAD (bf2) against the v90 build and an identical
# HEAD control, three rounds, four shapes. Carry .gpu/bin .gpu/lib .gpu/scan47.
# Prediction: B2·D4096·L8192 fwd 0.49-0.50 ms (call272's yp2), the other shapes unchanged (they keep the butterfly).
PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | tail -14
mkdir -p .gpu/scan && cp .gpu/scan47/scan_lab_* .gpu/scan/ && cp .gpu/scan/scan_lab_base .gpu/scan/scan_lab_basec
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "base v90 basec" | grep -v "^prod+st\|^==" | tail -16
cd "$OUT" && tar xzf labs.tgz && grep -l "DIFFERS\|FAIL" lab_*.log | head; grep -h "copy of out" lab_v90_1.log | sort | uniq -c | head -3
rm -f labs.tgz lab_*.log; tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
