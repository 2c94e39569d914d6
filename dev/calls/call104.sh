#!/bin/bash
# session 15, call 5 (nvidia-h200-x2): the overlapped bucket reduction (then the default) against one reduce-scatter
# after the backward (PM_DIST_OVERLAP=0), interleaved: 130m B8 and 1.4b B4 per GPU, packed, 2 ranks, 10 steps
source dev/dist/ab_lib.sh
ab_setup
export AB_STEPS=10
for i in 1 2; do
    ab_run 130m_ov1_$i 130m 8 PM_DIST_OVERLAP=1
    ab_run 130m_ov0_$i 130m 8 PM_DIST_OVERLAP=0
done
ab_run 1.4b_ov1 1.4b 4 PM_DIST_OVERLAP=1
ab_run 1.4b_ov0 1.4b 4 PM_DIST_OVERLAP=0
