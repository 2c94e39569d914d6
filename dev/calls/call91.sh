#!/bin/bash
# session 14 (skinny lab), call 2: skinny_lab with v9-v11 (B fragments in registers) and a copy floor: checks and timings; memcheck on the small mode; ncu (speed of light, memory, warp stalls) of cuBLASLt, v1, v5, v9 at 130m (skinny_lab profile)
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
timeout 150 .gpu/skinny/skinny_lab > $R/skinny.txt 2>&1; echo "lab rc $?"
grep -A12 "== table" $R/skinny.txt | cut -c1-250
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 45 $CS --tool memcheck --print-limit 5 .gpu/skinny/skinny_lab small > $R/cs_memcheck.txt 2>&1
echo "== memcheck rc $? : $(grep -E 'ERROR SUMMARY|small checks' $R/cs_memcheck.txt | paste -sd' ')"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
S="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats"
timeout 85 $NCU --clock-control none --profile-from-start off $S .gpu/skinny/skinny_lab profile > $R/ncu.txt 2>&1
echo "== ncu rc $?"
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|issue_stalled_(barrier|long_scoreboard|mio_throttle|lg_throttle|short_scoreboard|math_pipe_throttle|wait|not_selected|selected|drain|no_instruction)_per" $R/ncu.txt | sed -E 's/ +/ /g' | cut -c1-150 | head -120
