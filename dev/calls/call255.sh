#!/bin/bash
# Thirty-second session, second call: v85 = every scan kernel's sigmoid as 0.5 tanh(v/2) + 0.5 (one tanh.approx
# instead of ex2 + rcp; call254's lab variant th measured fwd -1.8% at B8·D2048 and B4·D4096, -1.7% at
# B2·D4096·L8192, all lab checks passing; mufu_lab: tanh.approx.f32 runs at ex2's rate, sigmoid's max abs error 3.9e-6).
# (1) v85's CUDA op tests from both builds; (2) lab, three interleaved rounds: v84 (call254's build), v85, and v85
# with the walkers forming the output nowhere (o0: -DPM_SCAN_WS_OUTW=0) or everywhere (o2: =2), since the cheaper
# sigmoid changes what v82's balance between producers and walkers weighs; (3) end to end, interleaved, v84's build
# (.gpu/v84) against v85's (.gpu), 370m B8 and 130m B8.
# Built here: dev/gpu.sh pack (HEAD, v85) in .gpu/bin, .gpu/lib; .gpu/c255.tgz holds v84/ (call254's packmamba and
# lib) and scan/scan_lab_{v84,v85,o0,o2} (the lab as in call254.sh's header, v85 with no -D, o0/o2 with
# -DPM_SCAN_WS_OUTW=0/2). Carry .gpu/bin .gpu/lib .gpu/c255.tgz.
# Prediction: 23 ok from each build; lab as call254 (v85 fwd -1.5 to -2% against v84 at B8·D2048); o0 at B8·D1536
# within +-1% of v85 (the walkers' extra special-function result is now one, not two), o2 slower (+1 to +4%) at
# B8·D2048; end to end 370m +0.1 to +0.3% (scan fwd 11.6 of 122 ms), inside the ~0.5% spread; 130m +-0.3%.
tar xzf .gpu/c255.tgz -C .gpu || exit 1
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=120 timeout 200 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
grep -h -E "FAIL" "$OUT"/t/*test_cuda_ops.log | sort | uniq -c | sort -rn | head -8
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "v84 v85 o0 o2" | tail -24
PM_AB_TIMEOUT=100 timeout 250 bash dev/ab_bench.sh BIN ".gpu/v84 .gpu .gpu/v84 .gpu" "--preset 370m --batch 8" 2>&1 | tee "$OUT/ab.txt"
PM_AB_TIMEOUT=100 timeout 150 bash dev/ab_bench.sh BIN ".gpu/v84 .gpu .gpu/v84 .gpu" "--preset 130m --batch 8" 2>&1 | tee -a "$OUT/ab.txt"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
