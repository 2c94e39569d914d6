#!/bin/bash
# session 11, call 4: why v44 (the 4-thread backward in clusters of 4) was 1.65x slower: the lab at the 130m shape
# with clusters of 4, of 2 and none (PM_SCAN_CLUSTER=4/2/0), how many clusters the GPU holds at once, and ncu's
# occupancy and launch view of the clustered kernel
R=$OUT
for c in 0 2 4 0 2 4; do
  echo "== PM_SCAN_CLUSTER=$c"
  PM_SCAN_CLUSTER=$c PM_SCAN_CLUSTER_INFO=1 SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x1536 timeout 100 .gpu/scan/scan_lab 2>&1 \
    | grep -E "clusters of|timed|FAIL|all PASS" | sort -u
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for c in 4 0; do
  PM_SCAN_CLUSTER=$c LAB_PROFILE_CD=1536 timeout 90 $NCU --clock-control none -k regex:scan_bwd4 --launch-skip 1 --launch-count 1 \
    --section Occupancy --section LaunchStats --section SpeedOfLight --section WarpStateStats .gpu/scan/scan_lab profile prod+st > $R/ncu_$c.txt 2>&1
  echo "== ncu clusters $c rc $?"
  grep -E "Duration|Cluster|Achieved Occupancy|Achieved Active Warps|Waves Per SM|Block Limit|Stall|Warp Cycles Per Issued" $R/ncu_$c.txt | head -24
done
