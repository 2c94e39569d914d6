#!/bin/bash
# v66 (v65's ring handshakes on mbarriers, from dev/experiments/scan_v65_mbarrier.patch, with sm_80's polling
# wait): the CUDA op tests; memcheck and racecheck on the lab's checking shapes; ncu's warp-state, scheduler and
# per-SASS views of the warp-specialized forward at B8·D2048 (lab built with -lineinfo as .gpu/scan/scan_lab);
# then v65 against v66, interleaved, two rounds. Needs .gpu/{bin,lib} (dev/gpu.sh pack on v66) and
# .gpu/scan/scan_lab{,_v65,_v66}. Carry .gpu/bin .gpu/lib .gpu/scan.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_v66 prod+st
PROF_KERNELS=scan_fwd_ws SASS_KERNEL=scan_fwd_ws SASS_TOP=40 PROF_S=120 bash dev/kernels/scan_prof.sh prod
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,4x2048x4096,8x2048x3072,16x1024x1536,8x2048x5120
for r in 1 2; do for v in v65 v66; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
# (at most 8 files come back: everything in one archive)
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
