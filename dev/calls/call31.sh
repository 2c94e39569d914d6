#!/bin/bash
# session 8, call 8: plan alternatives at the 130m width (B8 D1536): the 2-thread backward with segments
# (PM_SCAN_BWD4=0) against the 4-thread one since v36; the forward at 64- and 128-wide blocks
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for env in "X=1" "PM_SCAN_BWD4=0" "PM_SCAN_FWD_CH=64" "PM_SCAN_FWD_CH=128" "X=1"; do
  env $env SCAN_LAB_VERSIONS=prod+st,prod+st0 LAB_BIGS=8x2048x1536 timeout 60 .gpu/scan/scan_lab > $R/lab.log 2>&1
  echo "== $env rc $?: $(grep -E 'timed' $R/lab.log | paste -sd' ')"
  grep -ciE "fail|mismatch" $R/lab.log
done
