#!/bin/bash
# Where the 4-thread backward is the plan (192 of its 32-wide blocks: B8·D1536 = 130m, B6·D2048, B3·D4096), v78b
# made it +2% (its y now two chains and a select). Is the 2-thread kernel, 4% faster with v78, now the better plan
# there? base (v77), v78b, v78b with PM_SCAN_BWD4=0 (the rule's next plan) and with PM_SCAN_BWD_PLAN=128,1 (the
# warp-specialized 128-wide backward, one wave), two interleaved rounds. Carry .gpu/scan28.
mkdir -p .gpu/scan && cp -a .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_v78b* .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x1536,6x2048x2048,3x2048x4096 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 2 "base v78b v78b_nb4 v78b_p128"
