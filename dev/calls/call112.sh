#!/bin/bash
# session 16, call 5: ncu census of v51's scan kernels, as call108: the 2-thread backward and the forward at
# B8 D2048 (370m), the 4-thread backward at B8 D1536 (130m) (the perf log's phases: dev/kernels/sass_top.py --phases,
# written afterwards; it reproduces them from these CSVs)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for kc in scan_bwd_staged:2048 scan_fwd_staged:2048 scan_bwd4:1536; do
  k=${kc%:*}; cd_=${kc#*:}
  LAB_PROFILE_CD=$cd_ timeout 120 $NCU --clock-control none -k regex:$k --launch-skip 1 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section InstructionStats --section SpeedOfLight --import-source no -o $R/s_$k .gpu/scan/scan_lab profile prod > $R/ncu_$k.log 2>&1
  echo "== ncu $k rc $?"
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page source --print-source sass --csv > $R/sass_$k.csv 2>&1
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page details > $R/det_$k.txt 2>&1
  grep -E "Duration|Executed Instructions |Warp Cycles Per Issued" $R/det_$k.txt | head -4
  rm -f $R/s_$k.ncu-rep
done
cd $R && tar czf all.tgz sass_*.csv det_*.txt ncu_*.log && rm -f sass_*.csv det_*.txt ncu_*.log
