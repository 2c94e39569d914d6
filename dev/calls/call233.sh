#!/bin/bash
# v78 at the other plans (its chain of multiply-adds reaches every forward and 2-thread backward plan): v77's lab
# (base) against v78c's at the 2.8b width (B4·D5120: 128-wide staged forward), 790m (B8·D3072), B8·D5120, one
# 16K-token row at the 130m width (B1·D1536·L16384: time segments forward and backward) and B16·D1536·L1024; two
# interleaved rounds. Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78c .gpu/scan/
LAB_TIMEOUT=90 LAB_BIGS=4x2048x5120,8x2048x3072,8x2048x5120,1x16384x1536,16x1024x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "base v78c"
