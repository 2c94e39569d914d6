#!/bin/bash
# v79b: v79 in the walk only (its recompute loop as v78c's: v79's float4 loads there are the suspect of its +1.5%).
# v78c against v79b, two interleaved rounds. Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_v78c .gpu/scan28/scan_lab_v79b .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,4x4096x2048 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "v78c v79b"
