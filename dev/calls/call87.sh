#!/bin/bash
# session 13, call 11: would layer pairs pay at 1.4b (not grouped by default: d_inner 4096)? Interleaved
# PM_DW_GROUP=1/2 at 1.4b B4 by default (memory too), for the next session
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R bash dev/ab_bench.sh PM_DW_GROUP "1 2 1 2" "--preset 1.4b --batch 4"
grep -h "GEMM" $R/ab_last.log | head -1
