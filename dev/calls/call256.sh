#!/bin/bash
# Thirty-second session, third call (lab only): sf = v85 with silu(z) = h + h tanh(h), h = z/2
# (-DPM_SCAN_SILU_FMA=1: one multiply fewer a (token, channel) in the producers' output and the backward's pass;
# every kernel that writes the output alike, so the backward's copy stays bit-identical, which the lab checks), and
# o0 (-DPM_SCAN_WS_OUTW=0) again beside v85, three interleaved rounds. Carry .gpu/scan34 (built here as
# call254.sh's header says: scan_lab_v85 with no -D, scan_lab_o0, scan_lab_sf).
# Prediction: sf fwd -0.3 to -1% at B8·D2048 (the producers' issue is on the forward's path), fwd+bwd -0.2%; o0 at
# B8·D1536 within +-1% of v85 (call255: -1% fwd, inside two rounds' spread).
mkdir -p .gpu/scan && cp .gpu/scan34/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 sf o0" | tail -20
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
