#!/bin/bash
# session 23, call 1: (1) the CUDA op tests on HEAD (7fd8fbf: the review's scan_bwd_plan refactor had not run on a
# GPU); (2) the lab, interleaved twice: PREV (HEAD), TIE (HEAD + dev/experiments/scan_bwd_tie64.patch: 64-wide
# backward blocks on cost ties where 128-wide ones need segments) and WSA (v65: the forward warp-specialized,
# -DPM_SCAN_FWD_WS=1, 4 producer warps beside 128-wide blocks, 2 beside 64-wide ones; 96 registers). Needs
# .gpu/prev/{bin,lib} and .gpu/scan/scan_lab_{prev,tie,wsa}.
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,8x2048x3072,4x2048x5120,8x2048x5120,2x8192x4096,4x2048x4096,8x2048x1536
(export LD_LIBRARY_PATH=$PWD/.gpu/prev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
 OUT=$OUT/t PM_GPU_DIR=.gpu/prev PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
 echo "== op tests (HEAD) rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt")
for r in 1 2; do for v in prev tie wsa; do
    echo "== $v round $r"
    timeout 120 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -20
done; done
