#!/bin/bash
# session 16, call 1: the CUDA op tests (the 370m-width scan case added by v50 has not run on a GPU yet), then an ncu
# census of the 370m shape's scan kernels (prod, B8 D2048 L2048): the 2-thread backward and the forward, per SASS
# instruction, to count instructions per (token, state) as call46 did for the 130m shape
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "scan" $R/t/test_cuda_ops.log | head -30; tail -4 $R/optests.txt | head -1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for k in scan_bwd_staged scan_fwd_staged; do
  LAB_PROFILE_CD=2048 timeout 120 $NCU --clock-control none -k regex:$k --launch-skip 1 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section InstructionStats --section SpeedOfLight --import-source no -o $R/s_$k .gpu/scan/scan_lab profile prod > $R/ncu_$k.log 2>&1
  echo "== ncu $k rc $?"
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page source --print-source sass --csv > $R/sass_$k.csv 2>&1
  timeout 60 $NCU -i $R/s_$k.ncu-rep --page details > $R/det_$k.txt 2>&1
  echo "== sass $k $(wc -l < $R/sass_$k.csv) lines"
  grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued|Registers" $R/det_$k.txt | head
  rm -f $R/s_$k.ncu-rep
done
cd $R && tar czf all.tgz optests.txt t sass_*.csv det_*.txt ncu_*.log && rm -rf t sass_*.csv det_*.txt ncu_*.log
