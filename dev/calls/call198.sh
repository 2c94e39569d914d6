#!/bin/bash
# v72c: the warp-specialized backward's tiles in three slots (chunk i in slot i % 3), so each chunk's copies are
# issued right after the pass of the chunk before (call197's profile: the walkers wait on the producers, 8.3% of
# the samples at the full barrier's retry branch); B/C fetched after the flush. One lab round of HEAD's lab (v72)
# and v72c, the op tests on a build with v72c, the lab's checks under memcheck and racecheck. Carry .gpu/bin
# .gpu/lib .gpu/scan. NOT RUN (the twenty-fifth session's device time ran out): apply
# dev/experiments/scan_bwd_ws_v72c.patch, `dev/gpu.sh pack`, and build the two labs (HEAD's as scan_lab_v72, the
# patched as scan_lab_v72c) with -gencode arch=compute_90a,code=sm_90a first.
LAB_TIMEOUT=40 LAB_BIGS=8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 1 "v72 v72c"
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=60 timeout 80 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -cE "staged backward +bit-identical" "$OUT/t/test_cuda_ops.log"
SAN_S=40 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v72c prod+st
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
