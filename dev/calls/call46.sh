#!/bin/bash
# session 10, call 1: ncu per-SASS-instruction executions and stall samples of the 130m shape's scan kernels
# (prod, B8 D1536 L2048): the 4-thread backward and the 32-wide forward, to count instructions per (token, state)
R=$OUT
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for k in scan_bwd4 scan_fwd_staged; do
  LAB_PROFILE_CD=1536 timeout 120 $NCU --clock-control none -k regex:$k --launch-skip 1 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section InstructionStats --section SpeedOfLight --import-source no -o $R/s_$k .gpu/scan/scan_lab profile prod > $R/ncu_$k.log 2>&1
  echo "== ncu $k rc $?"
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page source --print-source sass --csv > $R/sass_$k.csv 2>&1
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page details > $R/det_$k.txt 2>&1
  echo "== sass $k $(wc -l < $R/sass_$k.csv) lines"
  grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued" $R/det_$k.txt | head
  rm -f $R/s_$k.ncu-rep
done
cd $R && tar czf all.tgz sass_*.csv det_*.txt ncu_*.log && rm -f sass_*.csv det_*.txt ncu_*.log
