#!/bin/bash
# Thirty-second session, fifth call: (1) dev/kernels/mufu_lab.cu with latencies (one warp, one dependent chain:
# does tanh.approx take longer than ex2? v85's tanh sigmoid made the 96-wide forward, whose walkers form the
# output, ~1% slower at B8·D1536 while the 2-thread shapes gained 2%); (2) lab, three interleaved rounds: v85,
# un8 (-DPM_SCAN_WS_UNROLL=8: the forward's walk unrolled by 8 tokens instead of the whole 16-token chunk; last
# measured on v65, no better), o0 (-DPM_SCAN_WS_OUTW=0) a third time. Carry .gpu/scan35 (scan_lab_v85, _o0 as in
# call256, _un8 built the same way with the switch, mufu_lab).
# Prediction: tanh's latency a few cycles above ex2's; un8 within +-1%; o0 as before (fwd B8·D1536 -0.5 to -1%).
timeout 60 .gpu/scan35/mufu_lab 2>&1 | sed -n '/latency/,/accuracy/p'
mkdir -p .gpu/scan && cp .gpu/scan35/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 un8 o0" | tail -16
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
