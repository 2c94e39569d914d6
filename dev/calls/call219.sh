#!/bin/bash
# The forward where a 64-wide plan gives each SM one block (B2·D4096·L8192, B4·D2048, B4·D1536): today's plan holds
# that block to 128 registers (the two-an-SM kernel) though no second block comes; forced plans (lab): 64-wide at
# one an SM (up to 255 registers), and 32-wide warp-specialized blocks (two an SM there). Two interleaved rounds of
# v77q's lab. Carry .gpu/scan/scan_lab_v77q .gpu/scan/scan_lab_v77f64 .gpu/scan/scan_lab_v77f32.
LAB_TIMEOUT=60 LAB_BIGS=2x8192x4096,4x2048x2048,4x2048x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "v77q v77f64 v77f32"
