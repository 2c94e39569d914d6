#!/bin/bash
# (written in session 23 for the next session's first call; not yet run) v65 on HEAD: the SASS around racecheck's
# flagged read (call178's dump), the CUDA op tests (with session 23's new v65 cases), compute-sanitizer (memcheck,
# racecheck) on the lab's checking shapes (with the new B66·D200·L40 v65 shape) for HEAD (new), the final-sync patch
# (fs) and the mbarrier patch (mbar), then the three labs' timings, interleaved twice. Needs .gpu/{bin,lib} (HEAD,
# dev/gpu.sh pack) and .gpu/scan/scan_lab_{new,fs,mbar} (the lab built on HEAD, and with each patch applied):
#   nvcc -O3 -arch=sm_90 -Isrc -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu -o .gpu/scan/scan_lab_new
#   git apply dev/experiments/scan_v65_final_sync.patch && (same nvcc ... -o .gpu/scan/scan_lab_fs); git checkout src
#   git apply dev/experiments/scan_v65_mbarrier.patch && (same nvcc ... -o .gpu/scan/scan_lab_mbar); git checkout src
# Carry .gpu/bin .gpu/lib .gpu/scan (44 MB).
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CU=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump | head -1)
$CU -sass -fun '_Z18scan_fwd_ws_kernelILi64ELi3ELi4ELi2ELi2EEvP13__nv_bfloat16PfPKS0_S4_PKfS6_S4_S4_iS6_S4_iPKiiii' \
    .gpu/scan/scan_lab_new > "$OUT/ws_sass.txt" 2>&1
echo "== sass rc $? $(wc -l < "$OUT/ws_sass.txt") lines"; grep -nE 'BAR\.|EXIT' "$OUT/ws_sass.txt" | head -20
OUT=$OUT/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run >"$OUT/optests.log" 2>&1
echo "== op tests rc $?"; grep -E "ok,|FAIL" "$OUT/t/summary.txt"
for v in new fs mbar; do
    echo "== sanitize $v"; SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_$v prod+st
    for t in memcheck racecheck; do mv "$OUT/cs_${t}_prod_st.log" "$OUT/cs_${t}_$v.log" 2>/dev/null; done
done
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,4x2048x4096,8x2048x3072
for r in 1 2; do for v in new fs mbar; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
