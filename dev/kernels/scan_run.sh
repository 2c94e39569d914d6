#!/bin/bash
# scan_run.sh [NCU_V...] — one device call for the scan lab (build .gpu/scan/scan_lab first, carry .gpu/scan):
# checks + timing of every version; compute-sanitizer memcheck + racecheck on $SAN (default v6); ncu per-kernel
# view of each version named (each costs ~30 s of device time: name none when the budget is short).
# Usage through the run tool: SAN=v6 bash dev/kernels/scan_run.sh [v6 ...]
# SCAN_LAB_VERSIONS=v1,prod,v8 limits the lab to those versions; SAN_TOOLS (default "memcheck racecheck") picks
# the compute-sanitizer tools; LAB_S / SAN_S are the time limits of the lab and of each sanitizer run.
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout ${LAB_S:-90} .gpu/scan/scan_lab 2>&1 | tee $OUT/lab.log
echo "== lab rc $?"
bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab ${SAN:-v6}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for v in "$@"; do
    timeout 60 $NCU --clock-control none -k regex:scan_ --launch-skip 5 --launch-count 5 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
        .gpu/scan/scan_lab profile $v >$OUT/ncu_$v.log 2>&1
    echo "== ncu $v rc $?"
    grep -E "^  [a-z_ ]*scan_[a-z_]*|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Active Warps" $OUT/ncu_$v.log \
        | sed -E 's/\(__nv_bfloat16.*//; s/^ +//' | paste -sd' ' | sed 's/void /\n/g; s/ scan_/\nscan_/g'
done
