#!/bin/bash
# call228 again with three interleaved pairs each (its 130m pair read -0.90%, though the 130m shapes run the same
# arithmetic in both builds: the 4-thread backward's plan keeps the pairs). Carry .gpu/bin .gpu/lib .gpu/v77.
ln -sfn ../lib .gpu/v77/lib
PM_AB_TIMEOUT=150 bash dev/ab_bench.sh BIN ".gpu/v77 .gpu .gpu/v77 .gpu .gpu/v77 .gpu" "--preset 130m --batch 8 --keep-activations" \
    "--preset 370m --batch 8"
