#!/bin/bash
# session 18, call 2: the CUDA op tests of the v57 build (.gpu); end to end, v54 (.gpu/ab/v54: the previous
# commit's packmamba) against v57, interleaved twice, at 370m and 130m keeping activations
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/ab/v54/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run > $R/optests.log 2>&1; echo "== op tests rc $?"
tail -4 $R/optests.log
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/v54 .gpu .gpu/ab/v54 .gpu" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations"
