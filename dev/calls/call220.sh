#!/bin/bash
# Smaller batches at T=2048, where v76/v77 change the backward's plan in training (64 blocks of 128: two segments):
# 370m B4 (scan B4·D2048) and 1.4b B2 (B2·D4096), v73's build against v77's, one interleaved pair each (the
# session's last device time). Carry .gpu/bin/packmamba .gpu/lib .gpu/v73/bin.
ln -sfn ../lib .gpu/v73/lib
PM_AB_TIMEOUT=90 bash dev/ab_bench.sh BIN ".gpu/v73 .gpu" "--preset 370m --batch 4" "--preset 1.4b --batch 2"
