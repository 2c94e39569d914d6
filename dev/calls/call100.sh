#!/bin/bash
# session 15, call 1: scan v48 (the 4-thread backward walking each chunk in two halves, 128 registers, four blocks an
# SM: B8 D2048 and B4 D4096 in one wave) against v45 in the lab (checks, memcheck/racecheck on prod), then end to
# end at 370m B8 and 1.4b B4 interleaved, PM_SCAN_HALF=0 (v45's plan) against =1
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
LAB_BIGS=8x2048x2048,4x2048x4096,8x2048x1536,2x8192x4096 SCAN_LAB_VERSIONS=v45+st,prod+st,prod,v45+st0,prod+st0 \
    LAB_S=150 SAN=prod SAN_S=60 bash dev/kernels/scan_run.sh 2>&1 | tail -30
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh PM_SCAN_HALF "0 1 0 1" "--preset 370m --batch 8" "--preset 1.4b --batch 4"
