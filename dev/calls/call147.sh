#!/bin/bash
# session 19, call 9 (refused: too little device time left to start a machine; not run): two more switches of the 4-thread backward measured again
# on v63, B8 D1536, interleaved twice: rc0 = r formed the pre-v57 way (PM_SCAN_BWD_R_CARRY4=0; v57c measured it
# equal on v57's kernel), wg1 = each token's stores right after its butterfly (PM_SCAN_WALK_GROUP4=1; +1.8-2.1%
# against groups of 2 at v52)
LAB_BIGS=8x2048x1536 LAB_TIMEOUT=40 bash dev/kernels/lab_rounds.sh 2 "v63 rc0 wg1"
