#!/bin/bash
# v78 candidate: quad_dot as one chain of multiply-adds in state order (4 instructions a quad against v24's pairs'
# 5), the 4-thread backward passing its pair-swapped states back in state order with C from bcf's copy 0.
# HEAD's lab (base, v77) against it, three interleaved rounds, at the 370m / 1.4b B4 scan shapes, B2·D4096·L8192,
# 130m's, and B4·D2048·L4096 (a 4-thread backward plan). Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78 .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x4096x2048 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 3 "base v78"
