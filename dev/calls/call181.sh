#!/bin/bash
# Three changes to v66's warp-specialized forward, each a compile-time switch (lab binaries): v16 (the producers
# copy u/dpre/z by 16-byte cp.async, one token's 8-channel group a thread, the pass arrays' positions rotated
# within each group for conflict-free stores; PM_SCAN_WS_V16=1), wf (the walkers as the block's first warps,
# which the schedulers prefer: call180's ncu showed the walkers the critical path, 22% of their samples "not
# selected", while the producers wait on the empty barriers; PM_SCAN_WS_WFIRST=1), hint (try_wait with a 1 ms
# suspend-time hint, fewer spins of the waiting producers; PM_SCAN_WS_HINT=1000000), and v16wf. The CUDA op tests
# on a build with v16 (.gpu/{bin,lib}), memcheck and racecheck on the v16 lab, then all labs interleaved, two
# rounds. Carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v16 prod+st
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,4x2048x4096,8x2048x3072,16x1024x1536,8x2048x5120
for r in 1 2; do for v in v66 v16 wf hint v16wf; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
