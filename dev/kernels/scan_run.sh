#!/bin/bash
# scan_run.sh V... — one device call for the scan lab (build .gpu/scan/scan_lab first, carry .gpu/scan):
# checks + timing of every version, ncu per-kernel view of each version named, compute-sanitizer on the first.
# Usage through the run tool: bash dev/kernels/scan_run.sh v3 v4
set -o pipefail
timeout 300 .gpu/scan/scan_lab 2>&1 | tee $OUT/lab.log
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for v in "$@"; do
    timeout 120 $NCU --clock-control none -k regex:scan_ --launch-skip 5 --launch-count 5 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
        .gpu/scan/scan_lab profile $v >$OUT/ncu_$v.log 2>&1
    echo "== ncu $v rc $?"
    grep -E "^  [a-z_ ]*scan_[a-z_]*|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Active Warps" $OUT/ncu_$v.log \
        | sed -E 's/\(__nv_bfloat16.*//; s/^ +//' | paste -sd' ' | sed 's/void /\n/g; s/ scan_/\nscan_/g'
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for v in $1; do
    for tool in memcheck racecheck; do
        timeout 50 $CS --tool $tool --print-limit 5 .gpu/scan/scan_lab small $v >$OUT/cs_${tool}_$v.log 2>&1
        echo "== $tool $v rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|correctness' $OUT/cs_${tool}_$v.log | paste -sd' ')"
    done
done
