#!/bin/bash
# session 15, call 8: scan v50 (64-wide forward blocks two an SM where they tie with 128-wide ones; the backward
# unchanged): lab at B8 D2048 and B4 D4096 (v43 frozen beside it), then 370m and 1.4b end to end, PM_SCAN_NARROW=1
# (v50) against =0 (v45's 128-wide forward), interleaved
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 80 .gpu/scan/scan_lab > $R/lab.log 2>&1
echo "lab rc $?"; grep -E "^(v43|prod)|correctness|agree|FAIL" $R/lab.log | grep -v "^  " | head -8
OUT=$R PM_AB_TIMEOUT=90 bash dev/ab_bench.sh PM_SCAN_NARROW "0 1 0 1" "--preset 370m --batch 8"
OUT=$R PM_AB_TIMEOUT=90 bash dev/ab_bench.sh PM_SCAN_NARROW "0 1" "--preset 1.4b --batch 4"
