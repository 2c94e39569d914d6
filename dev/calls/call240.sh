#!/bin/bash
# (1) A 96-wide warp-specialized forward, 4 walker threads a
# channel, one block an SM, for the 32-wide plans (lab f96: -DPM_SCAN_WS_96=1) against v80's lab, two interleaved
# rounds; memcheck on f96's checks. (2) README's headline rows (PM_TABLE=key; with the CUDA op tests from both builds)
# on the refactored v80 (the two warp-specialized backwards' producers through bws_produce and BwsRing; PTX of the
# 2-thread one unchanged). Carry .gpu/bin .gpu/lib .gpu/scan29.
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x1536,6x2048x2048,16x1024x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "v80 f96"
SAN_TOOLS=memcheck SAN_S=60 timeout 100 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_f96 prod+st
PM_TABLE=key timeout 400 bash dev/readme_table.sh 2>&1 | tail -8
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
