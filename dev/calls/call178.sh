#!/bin/bash
# session 23, call 11: racecheck (call177) flagged one shared-memory read in v65's walkers at +0x75c0 of
# scan_fwd_ws_kernel<64, 3, 4, 2, 2>, racing with the producers' pass stores. Is that read placed after a BAR.ARV
# (a real race) or between the chunk's BAR.SYNC and its BAR.ARV? The kernel's SASS from the lab binary that ran.
# Needs .gpu/scan/scan_lab_new.
CU=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump | head -1)
$CU -sass -fun '_Z18scan_fwd_ws_kernelILi64ELi3ELi4ELi2ELi2EEvP13__nv_bfloat16PfPKS0_S4_PKfS6_S4_S4_iS6_S4_iPKiiii' \
    .gpu/scan/scan_lab_new > "$OUT/ws_sass.txt" 2>&1
echo "rc $? $(wc -l < "$OUT/ws_sass.txt") lines"
grep -nE 'BAR|/\*75[0-9a-f]0\*/|/\*76[0-9a-f]0\*/' "$OUT/ws_sass.txt" | head -60
