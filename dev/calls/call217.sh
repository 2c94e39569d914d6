#!/bin/bash
# v77's build against v73's (the session's start; .gpu/v73 from the twenty-sixth session), interleaved twice at 370m
# B8, where the plans are unchanged: whether the warp-specialized backward's new parameters (segments, summary
# split) cost its unsegmented launch anything. Carry .gpu/bin/packmamba .gpu/lib .gpu/v73/bin.
ln -sfn ../lib .gpu/v73/lib
PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/v73 .gpu .gpu/v73 .gpu" "--preset 370m --batch 8"
