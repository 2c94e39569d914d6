#!/bin/bash
# session 14 (skinny lab), call 3: skinny_lab with v12/v13 (streaming stores) and the "after a 64 MB write" timing regime: checks, both tables; memcheck and racecheck on the small mode (every version)
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
timeout 180 .gpu/skinny/skinny_lab > $R/skinny.txt 2>&1; echo "lab rc $?"
grep -A8 "== table" $R/skinny.txt | cut -c1-150; grep "^checks" $R/skinny.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 55 $CS --tool $tool --print-limit 5 .gpu/skinny/skinny_lab small > $R/cs_$tool.txt 2>&1
  echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|small checks' $R/cs_$tool.txt | paste -sd' ')"
done
