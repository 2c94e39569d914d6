#!/bin/bash
# v78c end to end against v77 (call222's build, in .gpu/v77), interleaved: 370m B8 and 130m B8 keeping activations
# twice, 1.4b B4 once. Carry .gpu/bin .gpu/lib .gpu/v77.
ln -sfn ../lib .gpu/v77/lib
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/v77 .gpu .gpu/v77 .gpu" "--preset 370m --batch 8" \
    "--preset 130m --batch 8 --keep-activations"
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/v77 .gpu" "--preset 1.4b --batch 4"
