#!/bin/bash
# v71 (the warp-specialized forward with 4 walker threads a channel where a 64-wide plan's blocks are at most one
# an SM: there each scheduler has one walker warp of 2 threads a channel; PM_SCAN_WS_WG4_ONE=1): the CUDA op tests
# on a build with it (their small shapes take it), then the lab, v70 against v71, interleaved twice, at the shapes
# of one block an SM or fewer (B2·D4096·L8192, B4·D2048, B4·D1536: 128, 128, 96 blocks) and B8·D2048 (256 blocks:
# unchanged). Carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=2x8192x4096,4x2048x2048,4x2048x1536,8x2048x2048
for r in 1 2; do for v in v70 v71; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
