#!/bin/bash
# Thirty-third session, last call: ncu's per-SASS-instruction stall samples and warp states of v85's
# warp-specialized 2-thread backward (scan_bwd_ws_kernel) at B8·D2048·L2048, for the next step: call264 found it
# no faster without its second pass of exps (16 instructions a thread and token) and only ~2.7% faster without its
# butterfly's last levels (21), so neither issue slots nor the special-function unit bound it. The last backward
# profile (call187) was of the staged kernel. Lab built with -lineinfo (v85's code) in .gpu/scan44 (carry it).
mkdir -p .gpu/scan && cp .gpu/scan44/scan_lab_prof .gpu/scan/scan_lab
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
LAB_PROFILE_SHAPE=8x2048x2048 SCAN_LAB_VERSIONS=prod+st timeout 200 $NCU --clock-control none -k regex:scan_bwd_ws \
    --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --import-source no -o $OUT/bws .gpu/scan/scan_lab profile prod+st >$OUT/ncu.log 2>&1
echo "== ncu rc $?"
timeout 60 $NCU -i $OUT/bws.ncu-rep --page source --print-source sass --csv >$OUT/sass_bws.csv 2>&1
timeout 60 $NCU -i $OUT/bws.ncu-rep --page details >$OUT/details.txt 2>&1
rm -f $OUT/bws.ncu-rep
grep -E "Duration|Issue Slots Busy|Stall|Eligible|Warp Cycles Per Issued|Pipe|Throughput|Busy" $OUT/details.txt | sed -E 's/ +/ /g' | head -40
python3 dev/kernels/sass_top.py $OUT/sass_bws.csv 30 --phases | head -70
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
