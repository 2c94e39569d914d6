#!/bin/bash
# session 10, call 10: dt_proj's forward inside the scan's forward (dev/kernels/dtfuse_lab.cu, scan_v41f.cuh FUSE):
# the fused forward against the production one (outputs, checkpoints, time), sanitizers on a small size
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 120 .gpu/scan/dtfuse_lab 2>&1 | tee $R/dtfuse.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 90 $CS --tool $tool --print-limit 5 .gpu/scan/dtfuse_lab small > $R/cs_$tool.log 2>&1
  echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL' $R/cs_$tool.log | paste -sd' ')"
done
cd $R && tar czf all.tgz dtfuse.log cs_*.log && rm -f cs_*.log
