#!/bin/bash
# v72 (lab, sm_90a): the 2-thread backward's 128-wide plan warp-specialized (scan_bwd_ws_kernel: a producer
# warpgroup for the tiles, the cooperative pass and the flush; two walker warpgroups; setmaxnreg 40 / 232).
# Labs built with -gencode arch=compute_90a,code=sm_90a: b90a (HEAD), bws (-DPM_SCAN_BWD_WS=1). The checks (the
# new B60·D200·L40 shape takes the 128-wide plan without segments) under memcheck and racecheck, then b90a and bws
# interleaved at the 128-wide shapes. Carry .gpu/scan.
SAN_TOOLS=memcheck SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_bws prod+st
LAB_BIGS=8x2048x2048,4x2048x4096,16x2048x1024 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "b90a bws"
SAN_TOOLS=racecheck SAN_S=200 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_bws prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
