#!/bin/bash
# v80 as planned in src (the 4-thread backward's 96-wide warp-specialized blocks, and their staged twin under
# PM_SCAN_BWD_WS=0): (1) the CUDA op tests from both builds (the default build's B8·T56·D1480 case must run it and
# match the twin bit for bit; the PTX-only build must run the 32-wide staged plan); (2) the lab, v80 against the same
# build with PM_SCAN_BWD4_WS=0, two interleaved rounds; (3) memcheck on the twin's lab checks; (4) end to end at 130m,
# PM_SCAN_BWD4_WS=0 against 1, interleaved. Carry .gpu/bin .gpu/lib .gpu/scan29.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL|warp-specialized: forward" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -12
mkdir -p .gpu/scan && cp .gpu/scan29/scan_lab_* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x1536,6x2048x2048,8x2048x2048 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "b32 v80"
PM_SCAN_BWD_WS=0 SAN_TOOLS=memcheck SAN_S=60 timeout 100 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v80 prod+st
PM_AB_TIMEOUT=100 timeout 300 bash dev/ab_bench.sh PM_SCAN_BWD4_WS "0 1 0 1" "--preset 130m --batch 8" 2>&1 | tee "$OUT/ab.txt"
PM_AB_TIMEOUT=100 timeout 150 bash dev/ab_bench.sh PM_SCAN_BWD4_WS "0 1" "--preset 130m --batch 8 --keep-activations" 2>&1 | tee -a "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
