#!/bin/bash
# The producers' special-function load: softplus's log as a degree-7 polynomial on the FMA pipe (sp), and also
# the sigmoid's reciprocal as a degree-9 one (spsig), against HEAD's lab (base), two interleaved rounds at the
# headline, 130m and 1.4b shapes. Carry .gpu/scan29.
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x2048x4096 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "base sp spsig"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
