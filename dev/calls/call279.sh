#!/bin/bash
# Thirty-fifth session, fourth call: why conv_xdt is slow (call278: 134 us a 370m layer against the three ops' 95
# and a byte floor of ~47). The op test again (its two untouched-buffer checks compared against the host's NaNs;
# now the device's), the lab (dev/kernels/convx_lab.cu: production, 4 stages, phase 1 alone), and ncu on
# production's kernel at 370m. Carry .gpu/bin .gpu/lib .gpu/convx.
# Source: dev/experiments/conv_xdt_fused_forward.patch (not kept).
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PM_TEST_FILTER="test_conv_xdt" .gpu/bin/test_cuda_ops 2>&1 | grep -E "FAIL|PASSED|FAILED|OK" | head
timeout 120 .gpu/convx/convx_lab 2>&1 | tail -22
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section LaunchStats -k regex:conv_xdt -c 1 .gpu/convx/convx_lab profile >"$OUT/ncu.txt" 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Stall|Registers|Shared Memory Config|Block Limit|Compute \(SM\)|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|One or More" "$OUT/ncu.txt" | head -40
grep -B1 -A3 "stall\|Stall" "$OUT/ncu.txt" | grep -iE "cycles|stall" | head -12
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
