#!/bin/bash
# Thirty-sixth session, twelfth call: the scan backward's cooperative pass with softplus'(v) as sigmoid(v) (one
# tanh, off the softplus's chain of special-function results: 2 deep instead of 3; lab switch
# -DPM_SCAN_SIG_TANH=1, build scan_lab_sigt) against v91 (scan_lab_base), two interleaved rounds. The producers'
# pass is on the walkers' path part of the time (call201: the walkers' wait on a stage's full barrier 6% of
# samples). Prediction: fwd+bwd -0.5 to -1% at B8·D2048, within 0.5% elsewhere. Carry .gpu/scan.
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "base sigt" | grep -v "^prod+st\|^==" | tail -14
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
