#!/bin/bash
# session 20, call 4: did v64's lab timing (call148) run the 4-thread backward? At B8 D1536 scan_use_bwd4 takes it
# only if the occupancy query finds three blocks an SM; with two it falls back to the 2-thread kernel. ncu's launch
# and occupancy sections of the scan backward kernels that v64's and v63's labs launch at B8 D1536 (`profile`
# mode, LAB_PROFILE_CD=1536): which kernel ran, its shared memory, registers and block limits.
# Lab binaries: .gpu/scan/scan_lab_v63 (HEAD) and scan_lab_v64 (built as call147.sh's header says).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for v in v64 v63; do
    LAB_PROFILE_CD=1536 timeout 120 $NCU --clock-control none -k regex:'scan_bwd' --launch-count 2 \
        --section LaunchStats --section Occupancy .gpu/scan/scan_lab_$v profile prod+st >"$OUT/ncu_$v.txt" 2>&1
    echo "== $v rc $?"
    grep -E "scan_bwd|Duration|Registers Per|Dynamic Shared|Block Limit|Theoretical Occupancy|Achieved Occupancy|Grid Size|Block Size" \
        "$OUT/ncu_$v.txt" | sed -E 's/ +/ /g' | head -40
done
