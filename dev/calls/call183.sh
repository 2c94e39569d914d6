#!/bin/bash
# v68 (HEAD): the CUDA op tests; the lab with the warp-specialized forward at every channel count (min0:
# PM_SCAN_WS_MINCH=0) against v67's lab (the staged forward below 96 channels an SM) at the shapes under that
# threshold (B8·D1536 the 130m width: 93 an SM; B2·D4096·L8192, B4·D2048: 62; B4·D1536: 47), two rounds; then end
# to end, HEAD against the session's start (3492bc6, v65: .gpu/prev), interleaved: 370m B8, 1.4b B4, 130m B8
# keeping activations. Carry .gpu/bin .gpu/lib .gpu/prev/bin .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p .gpu/prev/lib && cp -n .gpu/lib/* .gpu/prev/lib/ 2>/dev/null
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x1536,2x8192x4096,4x2048x2048,4x2048x1536
for r in 1 2; do for v in v67 min0; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh BIN ".gpu .gpu/prev .gpu .gpu/prev" "--preset 370m --batch 8" \
    "--preset 1.4b --batch 4" "--preset 130m --batch 8 --keep-activations"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
