#!/bin/bash
# scan_prof.sh [VERSION] — one device call: ncu's warp-state, scheduler, instruction and source (SASS) views of
# one scan version's kernels at B8·D2048·L2048 (scan_lab profile VERSION; default prod). Build the lab with
# -lineinfo first and carry .gpu/scan. Writes $OUT/prof_<kernel>.txt (details) and $OUT/sass_bwd.csv.
# PROF_KERNELS names the kernels (regex each; default the forward/checkpoint and backward main pass).
set -o pipefail
v=${1:-prod}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
S="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
for k in ${PROF_KERNELS:-scan_fwd_staged scan_bwd_staged}; do
    [ "$k" = none ] && break
    timeout ${PROF_S:-90} $NCU --clock-control none -k regex:$k --launch-skip 1 --launch-count 1 $S \
        .gpu/scan/scan_lab profile $v >$OUT/prof_$k.txt 2>&1
    echo "== ncu $k rc $?"
    grep -E "Duration|Issue Slots Busy|Achieved Active Warps|Registers Per|Stall|No Eligible|Eligible Warps|Executed Ipc A|Warp Cycles Per Issued|issue_stalled" $OUT/prof_$k.txt | sed -E 's/ +/ /g' | head -40
done
# per-SASS-instruction stall samples and executions (SASS_KERNEL: regexes, each optionally :CD for the lab's
# B8 D<CD> L2048 instead of D2048; default the 2-thread backward main pass; SASS=0 skips it): $OUT/sass_<name>.csv,
# and the instructions with the most samples, the samples and executions per opcode and the hot loop's phases
# printed (dev/kernels/sass_top.py --phases). PROF_KERNELS=none skips the detail views above.
[ "${SASS:-1}" = 0 ] && exit 0
for kc in ${SASS_KERNEL:-scan_bwd_staged}; do
    sk=${kc%%:*}; cd_=${LAB_PROFILE_CD:-}; [ "$kc" != "$sk" ] && cd_=${kc#*:}
    env ${cd_:+LAB_PROFILE_CD=$cd_} timeout ${PROF_S:-90} $NCU --clock-control none -k regex:$sk --launch-skip 1 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --section InstructionStats --import-source no \
        -o $OUT/sass .gpu/scan/scan_lab profile $v >/dev/null 2>&1
    echo "== ncu source $sk ${cd_:+D$cd_ }rc $?"
    timeout 60 $NCU -i $OUT/sass.ncu-rep --page source --print-source sass --csv >$OUT/sass_$sk.csv 2>&1
    echo "== sass rc $? $(wc -l <$OUT/sass_$sk.csv) lines"
    rm -f $OUT/sass.ncu-rep
    python3 "$(dirname "$0")/sass_top.py" $OUT/sass_$sk.csv ${SASS_TOP:-30} --phases
done
