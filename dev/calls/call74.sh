#!/bin/bash
# session 12, call 5: conv v8 (register tiles, every load of a tile at once; dev/kernels/conv_v8.cuh) in the conv
# lab: small checks (v8 against the reference, bit-identity to production), the model shapes' checks and times
# against production (v6) and v7; memcheck on the small checks of v8
R=$OUT
timeout 200 .gpu/conv/conv_lab > $R/conv_lab.txt 2>&1; echo "== conv lab rc $?"; tail -60 $R/conv_lab.txt
grep -E "FAIL|fail" $R/conv_lab.txt | head -5
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 120 $CS --tool memcheck --print-limit 3 .gpu/conv/conv_lab check v8 > $R/cs_mem.txt 2>&1
echo "== memcheck rc $? : $(grep -E 'ERROR SUMMARY' $R/cs_mem.txt | paste -sd' ')"
