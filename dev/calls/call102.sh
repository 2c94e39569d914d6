#!/bin/bash
# session 15, call 3 (nvidia-h200-x2): why 1.4b on 2 GPUs scales 1.90x now against 1.943x in the fourth session:
# 1.4b B4 per GPU, packed, 2 ranks, the default (then: the overlap) against the overlap off (PM_DIST_OVERLAP=0), the
# side queue off (PM_SIDE_STREAM=0) and the deferred reductions off (PM_DEFER_REDUCTIONS=0), the default again; 1 GPU
source dev/dist/ab_lib.sh
ab_setup
ab_run default 1.4b 4 PM_X=1
ab_run overlap0 1.4b 4 PM_DIST_OVERLAP=0
ab_run side0 1.4b 4 PM_SIDE_STREAM=0
ab_run defer0 1.4b 4 PM_DEFER_REDUCTIONS=0
ab_run default2 1.4b 4 PM_X=1
AB_NP=1 ab_run gpu1 1.4b 4 PM_X=1
