#!/bin/bash
# session 23, call 8: v65 promoted (the forward warp-specialized where the rows give >= 96 channels an SM; 2 walker
# threads a channel, 8 producer warps a 128-wide block, 4 a 64-wide one) and the tie64 backward plan, against HEAD
# (7fd8fbf, .gpu/prev): the CUDA op tests on the new build; the lab once each (prev, new) at the shapes and
# the other widths; end to end, interleaved prev/new twice at 370m B8, 130m B8 keeping activations, 1.4b B4, once
# at 790m B8 and 2.8b B4. Needs .gpu/{bin,lib}, .gpu/prev/{bin,lib}, .gpu/scan/scan_lab_{prev,new}.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
export SCAN_LAB_VERSIONS=prod+st
export LAB_BIGS=8x2048x2048,2x8192x4096,4x2048x4096,8x2048x1536,16x1024x1536,8x2048x3072,4x2048x5120,8x2048x5120
for v in prev new; do
    echo "== lab $v"
    timeout 100 .gpu/scan/scan_lab_$v > "$OUT/lab_$v.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_$v.log" | head -12
done
PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/prev .gpu .gpu/prev .gpu" "--preset 370m --batch 8" \
    "--preset 130m --batch 8 --keep-activations" "--preset 1.4b --batch 4"
PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/prev .gpu" "--preset 790m --batch 8" "--preset 2.8b --batch 4"
