#!/bin/bash
# Thirty-sixth session, seventh call: ncu on the production conv backward (conv_lab's profile mode: 130m, the
# production entry points 5 times), to see what holds it at 0.57 of its byte floor (call288: a ring twice as deep
# made it slower, so it is not waiting on DRAM latency alone). Speed of light, memory, occupancy, scheduler, and the
# stall reasons per issued instruction. Carry .gpu/conv.
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section LaunchStats --section InstructionStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    -k regex:conv_bwd_kernel -c 1 .gpu/conv/conv_lab profile >"$OUT/ncu.txt" 2>&1
echo "rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Registers Per|Block Limit|Compute \(SM\) Throughput|Executed Ipc|Active Warps Per|Eligible Warps|dram__bytes|inst_executed|bank_conflicts" "$OUT/ncu.txt" | head -40
grep -E "issue_stalled" "$OUT/ncu.txt" | awk '{print $1, $NF}' | sort -k2 -g -r | head -14
