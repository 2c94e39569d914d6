#!/bin/bash
# session 9, call 5: conv v7 lab after the helper's fixes (skipped rows instead of exits; per-lane slot release,
# fence.proxy.async before refills): full lab, racecheck v7/v7f and v7w (the old one-lane release), memcheck
R=$OUT
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 .gpu/conv/conv_lab > $R/conv_lab.txt 2>&1; echo "== conv lab rc $?"; tail -45 $R/conv_lab.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 $CS --tool racecheck --print-limit 3 .gpu/conv/conv_lab check > $R/cs_race.txt 2>&1
echo "== racecheck rc $? : $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $R/cs_race.txt | paste -sd' ')"
timeout 100 $CS --tool racecheck --print-limit 1 .gpu/conv/conv_lab check v7w > $R/cs_race_w.txt 2>&1
echo "== racecheck v7w rc $? : $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $R/cs_race_w.txt | paste -sd' ')"
timeout 100 $CS --tool memcheck --print-limit 3 .gpu/conv/conv_lab check v7,v7f,v7w > $R/cs_mem.txt 2>&1
echo "== memcheck rc $? : $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $R/cs_mem.txt | paste -sd' ')"
cd $R && tar czf conv.tgz conv_lab.txt cs_*.txt && rm -f conv_lab.txt cs_*.txt
