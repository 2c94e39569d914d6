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
#        -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu -o .gpu/scan32/scan_lab_{v84,wf,th}
# and nvcc -O3 -gencode arch=compute_90a,code=sm_90a -Isrc dev/kernels/mufu_lab.cu -o .gpu/scan32/mufu_lab
# Prediction: 23 ok from each build; wf within +-2% (if the producers meeting the queue first is what costs, wf -1
# to -3% at B8·D2048).
# Added in the thirty-second session: (3) dev/kernels/mufu_lab.cu (built into .gpu/scan32/mufu_lab): the
# special-function unit's rate per instruction kind (is a packed f16x2/bf16x2 ex2 or tanh two results for one
# issue?) and the accuracy of sigmoid(z) = 0.5 tanh(z/2) + 0.5; (4) lab variant th (-DPM_SCAN_SIGMOID_TANH=1: every
# kernel's sigmoid by one tanh.approx instead of ex2 + rcp, i.e. 19 special-function results a (token, channel) in
# the forward instead of 20). Prediction: tanh.f32 at ex2.f32's rate; th fwd -2 to -4% at B8·D2048, bwd -1 to -2%;
# the lab's checks may flag th's sigmoid error (~2^-12 absolute) where their tolerance is tighter than that.
# Two rounds (three variants), to stay inside one call.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
timeout 60 .gpu/scan32/mufu_lab 2>&1 | tee "$OUT/mufu.log"
mkdir -p .gpu/scan && cp .gpu/scan32/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v84 wf th" | tail -24
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
