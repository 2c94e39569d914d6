#!/bin/bash
# session 23, call 9: end to end again, new (v65 + tie64) against HEAD (.gpu/prev), interleaved twice, where
# call175 was short of runs: 2.8b B4 (one run each there: -0.76%), 370m B8, 790m B8. Needs .gpu/{bin,lib},
# .gpu/prev/bin.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PM_AB_TIMEOUT=100 bash dev/ab_bench.sh BIN ".gpu .gpu/prev .gpu .gpu/prev" "--preset 2.8b --batch 4" \
    "--preset 370m --batch 8" "--preset 790m --batch 8"
