#!/bin/bash
# v72 end to end: a build with the warp-specialized backward (cmake -DCMAKE_CUDA_ARCHITECTURES=90a
# -DCMAKE_CUDA_FLAGS=-DPM_SCAN_BWD_WS=1, binaries in .gpu/bws) through the CUDA op tests (the B8·T40·D2048 case takes
# it), then interleaved with HEAD's build (.gpu/prev) twice: 370m B8 and 1.4b B4 (both 128-wide backward plans
# without segments). Carry .gpu/bws .gpu/prev/bin/packmamba .gpu/prev/lib.
OUT=$OUT/t PM_GPU_DIR=.gpu/bws PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/prev .gpu/bws .gpu/prev .gpu/bws" "--preset 370m --batch 8" \
    "--preset 1.4b --batch 4"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
