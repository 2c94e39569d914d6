#!/bin/bash
# Thirty-second session: v86 = v85 with the warp-specialized forward producers' copies from running pointers and
# their ring slot's shared-window address kept (PM_SCAN_WS_PTRS; call258's SASS of the B8·D2048 instance showed
# ~80 of the producers' ~390 instructions a chunk spent recomputing 64-bit row addresses, k % 3 and the CTA's
# window base for the copies). Lab, three interleaved rounds: v85 (call256's build), v86, and v85 again in the
# third position (v85c, the same binary: the control for the round's positions); then compute-sanitizer memcheck
# on v86's lab checks (prod: the copies past a row's end must stay zero-filled reads of nothing). Carry .gpu/scan36.
# Prediction: producers ~20% fewer instructions, 1/3 of a scheduler's issue: fwd -0.5 to -2% at B8·D2048 if the
# issue slots bind; the checks pass; memcheck 0 errors.
mkdir -p .gpu/scan && cp .gpu/scan36/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v85 v86 v85c" | tail -18
SAN_TOOLS=memcheck SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v86 prod 2>&1 | tail -3
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
