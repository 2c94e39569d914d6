#!/bin/bash
# For the next GPU session, first (prepared in the thirty-first session, whose device time ran out before it ran):
# (1) v84's CUDA op tests from both builds (v84 = the warp-specialized forward's pass without its select for tokens
# past the row's end; partial last chunks compare the forward's outputs and checkpoints with the staged kernels');
# (2) lab, three interleaved rounds: v84 against wf, the walkers as the block's first warps
# (-DPM_SCAN_WS_WALKERS_FIRST=1; v67's call181 measured that no faster, when the producers were heavier: the
# thirty-first session found the producers' special-function work on the forward's critical path, and the
# scheduler's preference for older warps decides who meets the queue first). Carry .gpu/bin .gpu/lib .gpu/scan32,
# built here: dev/gpu.sh pack (HEAD), and into .gpu/scan32 the lab as
#   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -DPM_SCAN_LAB_PLANS [-DPM_SCAN_WS_WALKERS_FIRST=1] -Isrc \
#        -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu -o .gpu/scan32/scan_lab_{v84,wf}
# Prediction: 23 ok from each build; wf within +-2% (if the producers meeting the queue first is what costs, wf -1
# to -3% at B8·D2048).
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
mkdir -p .gpu/scan && cp .gpu/scan32/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v84 wf" | tail -14
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
