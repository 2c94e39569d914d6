#!/bin/bash
# session 17, call 3: the CUDA op tests of the v54 build (.gpu: the forward's two barriers a chunk; backward
# order 2 for 128-wide blocks and the 4-thread kernel, 3 for 64-wide blocks); end to end, v52 (.gpu/v52: the
# same tree built with -DPM_SCAN_BWD_ORDER=0 -DPM_SCAN_BWD_ORDER4=0 -DPM_SCAN_FWD_TWO_BARRIERS=0) against v54,
# interleaved twice
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/v52/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run > $R/optests.log 2>&1; echo "== op tests rc $?"
tail -4 $R/optests.log
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/v52 .gpu .gpu/v52 .gpu" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations" "--preset 1.4b --batch 4"
