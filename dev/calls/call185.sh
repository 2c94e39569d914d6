#!/bin/bash
# v70 (HEAD: the warp-specialized forward also for 32-wide plans whose blocks fit one wave at three an SM): the CUDA
# op tests (their B9·D960 and B8·D1480 cases take it, and compare it bit for bit with the staged forward); the lab
# (its checks, and B8·D1536, B4·D5120: the latter keeps the staged kernel); end to end against the session's start
# (.gpu/prev, v65): 130m B8, by default and keeping activations. Carry .gpu/bin .gpu/lib .gpu/prev/bin/packmamba
# .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p .gpu/prev/lib && cp -n .gpu/lib/* .gpu/prev/lib/ 2>/dev/null
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x1536,4x2048x5120,8x2048x2048 timeout 60 .gpu/scan/scan_lab_v70 > "$OUT/lab.log" 2>&1
echo "== lab rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab.log" | head -8
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh BIN ".gpu .gpu/prev .gpu .gpu/prev" "--preset 130m --batch 8" \
    "--preset 130m --batch 8 --keep-activations"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
