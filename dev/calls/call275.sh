#!/bin/bash
# Thirty-fourth session, last call: v91 in src (the warp-specialized forward's producer/walker split on the warp
# index broadcast from lane 0, so the walkers' shuffles carry no convergence check; the backward kernels keep the
# plain split, which call274 measured faster for them): the CUDA op tests (also from the PTX-only build) and the
# whole-model GPU checks, then lab rounds of v90 against v91, two rounds, four shapes. Carry .gpu/bin .gpu/lib
# .gpu/scan49. Prediction: fwd as call274's wu (B8·D2048 0.218-0.224, B4·D4096 0.218-0.222, B8·D1536 0.192), the
# backward as v90's.
PM_SANITIZE=0 PM_BENCH=0 PM_E2E=0 bash dev/gpu.sh run 2>&1 | grep -E "rc=|rel err" | head -12
mkdir -p .gpu/scan && cp .gpu/scan49/scan_lab_* .gpu/scan/
cuobjdump -sass .gpu/scan/scan_lab_v91 2>/dev/null | grep -c "BRA.DIV"
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v90 v91" | grep -v "^prod+st\|^==" | tail -12
cd "$OUT" && tar xzf labs.tgz && grep -l "DIFFERS\|FAIL" lab_*.log | head; grep -h "copy of out" lab_v91_1.log | sort | uniq -c | head -3
rm -f labs.tgz lab_*.log; tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
