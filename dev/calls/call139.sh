#!/bin/bash
# session 18, call 11 (refused then for lack of device time; run as the nineteenth session's call 2): the CUDA op tests of the v61 build (.gpu: the 4-thread backward's pass without the branch,
# inputs loaded first); end to end, v57 (.gpu/ab/v57: the previous commit's packmamba) against v61, interleaved
# twice, at 130m keeping activations and by default (the shapes that run the 4-thread backward)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/ab/v57/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run > $R/optests.log 2>&1; echo "== op tests rc $?"
grep -E "ok,|FAIL" $R/t/summary.txt | head -5
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/v57 .gpu .gpu/ab/v57 .gpu" \
  "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8"
