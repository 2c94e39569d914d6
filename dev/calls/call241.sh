#!/bin/bash
# v81 in src (the forward's 32-wide plans of one wave as 96-wide warp-specialized blocks, 4 walker threads a channel;
# on v80): (1) the CUDA op tests from both builds (B8·T56·D1480 and B9·T40·D960 run it; the staged forward must give
# its bits); (2) end to end at 130m, PM_SCAN_FWD_WS96=0 (v80) against 1, interleaved. Carry .gpu/bin .gpu/lib.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 240 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
PM_AB_TIMEOUT=100 timeout 300 bash dev/ab_bench.sh PM_SCAN_FWD_WS96 "0 1 0 1" "--preset 130m --batch 8" 2>&1 | tee "$OUT/ab.txt"
PM_AB_TIMEOUT=100 timeout 200 bash dev/ab_bench.sh PM_SCAN_FWD_WS96 "0 1 0 1" "--preset 130m --batch 8 --keep-activations" 2>&1 | tee -a "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
