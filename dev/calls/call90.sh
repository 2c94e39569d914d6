#!/bin/bash
# session 14 (skinny lab), call 1: .gpu/skinny/skinny_lab (dev/kernels/skinny_lab.cu, built as in its header): small-shape checks, the 130m/370m/1.4b dt_proj fwd and x_proj dinp GEMMs checked and timed against cuBLASLt; memcheck and racecheck on the small mode
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
timeout 170 .gpu/skinny/skinny_lab > $R/skinny.txt 2>&1; echo "lab rc $?"
grep -A12 "== table" $R/skinny.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 55 $CS --tool $tool --print-limit 5 .gpu/skinny/skinny_lab small > $R/cs_$tool.txt 2>&1
  echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|small checks' $R/cs_$tool.txt | paste -sd' ')"
done
