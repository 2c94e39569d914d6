#!/bin/bash
# The committed code's op tests (call195's build with the scan test's staged-backward check folded into its loop of
# calls). Carry .gpu/bin .gpu/lib.
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"; grep -E "staged backward|FAIL" "$OUT/t/test_cuda_ops.log" | sort | uniq -c
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
