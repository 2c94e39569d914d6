#!/bin/bash
# v76 (lab): the warp-specialized backward for B2·D4096·L8192, where 128-wide blocks fill only 64 SMs and the
# 4-thread staged kernel runs today (2.0 ms of its 2.52 ms fwd+bwd). One lab build (scan_lab_v76, with
# -DPM_SCAN_LAB_PLANS), its plans chosen by environment (wrappers in .gpu/scan): v76b = its defaults (as v73);
# v76w64 = 64-wide warp-specialized blocks, one an SM, no register split (PM_SCAN_BWD_WS64=1); v76s2 = 128-wide
# warp-specialized blocks with two time segments (PM_SCAN_BWD_WS_SEG=1, the staged kernel's segment summaries in
# 128-wide blocks); v76s2b = v76s2 with the summaries in 64-wide blocks (PM_SCAN_BSUMM64=1). v72c = HEAD's lab.
# Two interleaved rounds at B8·D2048 (unchanged plan: must match v72c) and B2·D4096·L8192; each run's correctness
# checks run with its forced plan. Then memcheck on v76s2. Carry .gpu/scan/scan_lab_v72c .gpu/scan/scan_lab_v76*.
LAB_TIMEOUT=60 LAB_BIGS=8x2048x2048,2x8192x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 \
    "v72c v76b v76w64 v76s2 v76s2b"
PM_SCAN_BWD4=0 PM_SCAN_BWD_PLAN=128,2 PM_SCAN_BWD_WS_SEG=1 SAN_TOOLS=memcheck SAN_S=60 timeout 150 bash dev/kernels/lab_sanitize.sh \
    .gpu/scan/scan_lab_v76 prod+st 2>&1 | tail -8
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
