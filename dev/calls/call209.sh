#!/bin/bash
# Why v74 and v75 lost ~5.5-5.9% whichever way their copies were ordered: both ask for more shared memory
# (208.7 / 230.2 KB against v73's 193.2), leaving the SM a smaller L1. v73pad is v73 with 36,992 bytes of unused
# dynamic shared memory added to its request (230,176 bytes, v75's), nothing else changed
# (dev/experiments/scan_bwd_ws_v73pad_timing_only.patch: apply, build the lab as scan_lab_v73pad, revert; the lab of
# HEAD without it as scan_lab_v72c). NOT RUN (the twenty-sixth session's device time ran out). Two lab rounds against
# v73's lab (scan_lab_v72c). Carry .gpu/scan/scan_lab_v72c .gpu/scan/scan_lab_v73pad.
LAB_TIMEOUT=30 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v72c v73pad"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
