#!/bin/bash
# Thirty-first session: is the forward's walker held up by its own special-function instructions (so that moving
# some of its exps to the producers, which wait ~30% of their samples on the ring's empty barriers in call247's
# profile, would pay)? Timing-only lab builds (dev/experiments/scan_fwd_mufu_shift_timing_only.patch, wrong
# results by design: their correctness lines read FAIL), all from HEAD's source, carried in .gpu/scan31:
#   prod  HEAD's lab (call247's .gpu/scan30 build)
#   s1    the walker's last state of each 8 takes its decay as one shared-memory load and a select (no exp):
#         one exp and one multiply-add fewer a thread and token, one load more
#   s1p   s1, and the producers do the 2 exps a (token, channel) that moving that state would cost them
#   s2p   two states a thread moved (the producers 4 exps more a (token, channel))
#   p2    only the producers' 2 extra exps (their cost alone)
# Built with: nvcc -O3 -gencode arch=compute_90a,code=sm_90a -DPM_SCAN_LAB_PLANS -DPM_SCAN_WS_LAB_SKIP=K
#   -DPM_SCAN_WS_LAB_PX=X -Isrc -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu (the patch applied).
# Prediction: if the walker's in-order stream is what bounds the chunk (call247: walkers wait on the full barrier
# ~1% of samples, producers on the empty one ~30%), s1p gains 3-6% fwd at B2·D4096·L8192 (one walker warp a
# scheduler) and 1-4% at B8·D2048; if the special-function unit as a whole is the bound, s1p = prod and s1 shows
# the walker-side ceiling of the idea.
mkdir -p .gpu/scan && cp .gpu/scan31/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,2x8192x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "prod s1 s1p s2p p2" 2>&1 | grep -v correctness
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
