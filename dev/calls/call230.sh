#!/bin/bash
# v79 candidate: with RE (the backward writing the forward's output again, the training default) the 2-thread
# backward's pass stores delta log2 e in pa4's free slot, +inf at document starts, so the walk's recompute and
# reverse loops drop their per-token start test and delta log2 e multiply (the 4-thread kernel's v26 trick); A < 0
# in every lane. base (v77), v78c and v79 labs, two interleaved rounds; compute-sanitizer on v79. Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78c .gpu/scan28/scan_lab_v79 .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,4x4096x2048,8x2048x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "base v78c v79"
SAN_S=60 timeout 240 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v79 prod+st
