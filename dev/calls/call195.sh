#!/bin/bash
# The final build of the twenty-fifth session (scan v72: the warp-specialized 2-thread backward, CMake's CUDA target
# 90a): the op tests and README's headline rows (PM_TABLE=key), then, time allowing, one lab round of HEAD's sm_90a
# lab (b90a) against v72b built with its producers at 40 registers (bws2; each run limited to 30 s). Carry .gpu/bin
# .gpu/lib .gpu/scan.
PM_TABLE=key bash dev/readme_table.sh
LAB_TIMEOUT=30 LAB_BIGS=8x2048x2048 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 1 "b90a bws2"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
