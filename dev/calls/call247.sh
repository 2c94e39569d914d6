#!/bin/bash
# The warp-specialized forward with one walker thread a channel (all 16 states a thread, no butterfly for y; lab
# built with -DPM_SCAN_WS_WG=1: wg1) against HEAD's (prod), two interleaved rounds; and ncu's per-SASS-instruction
# stall samples of HEAD's forward walkers at B8·D2048 and B2·D4096·L8192. Carry .gpu/scan30, built here with
#   nvcc -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a -DPM_SCAN_LAB_PLANS [-DPM_SCAN_WS_WG=1] -Isrc \
#        -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu -o .gpu/scan30/scan_lab_{prod,wg1}
# Prepared in the thirtieth session, which was lent no GPU: not run yet. Prediction (instructions counted from the source,
# not SASS): the walkers issue ~16% fewer
# instructions a (token, channel) (no butterfly or shuffle for y, half the pass-array loads) but a scheduler holds
# one walker warp instead of two at B8·D2048; v71's start-test removal showed fewer walker instructions alone gain
# nothing there, so wg1 is expected within +-3% at B8·D2048 and B4·D4096 and slower at B2·D4096·L8192 (two walker
# warps an SM).
mkdir -p .gpu/scan && cp .gpu/scan30/scan_lab_* .gpu/scan/ && cp .gpu/scan30/scan_lab_prod .gpu/scan/scan_lab
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for sh in 8x2048x2048 2x8192x4096; do
    LAB_PROFILE_SHAPE=$sh SCAN_LAB_VERSIONS=prod+st timeout 150 $NCU --clock-control none -k regex:scan_fwd_ws \
        --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
        --section SchedulerStats --import-source no -o $OUT/sass_$sh .gpu/scan/scan_lab profile prod+st >$OUT/ncu_$sh.log 2>&1
    echo "== ncu $sh rc $?"
    timeout 60 $NCU -i $OUT/sass_$sh.ncu-rep --page source --print-source sass --csv >$OUT/sass_fwd_$sh.csv 2>&1
    timeout 60 $NCU -i $OUT/sass_$sh.ncu-rep --page details >$OUT/details_$sh.txt 2>&1
    rm -f $OUT/sass_$sh.ncu-rep
    grep -E "Duration|Issue Slots Busy|Stall|Eligible|Warp Cycles Per Issued" $OUT/details_$sh.txt | sed -E 's/ +/ /g' | head -20
    python3 dev/kernels/sass_top.py $OUT/sass_fwd_$sh.csv 30 --phases | head -50
done
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "prod wg1"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
