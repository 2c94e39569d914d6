#!/bin/bash
# session 20, call 1: call147's three 4-thread variants against v63 at B8 D1536 (rc0: -DPM_SCAN_BWD_R_CARRY4=0;
# wg1: -DPM_SCAN_WALK_GROUP4=1; v64: dev/experiments/scan_v64_bwd4_one_barrier.patch with
# -DPM_SCAN_BWD4_ONE_BARRIER=1), then three older switches of the forward and the 2-thread backward measured again
# on v63 at B8 D2048 (fb0: -DPM_SCAN_FWD_TWO_BARRIERS=0; n0: PM_SCAN_NARROW=0, a wrapper script around v63's lab;
# o0: -DPM_SCAN_BWD_ORDER=0), each set interleaved twice. Lab binaries built here as call147.sh's header says.
# The n0 wrapper (.gpu/scan/scan_lab_n0, executable):
#   #!/bin/bash
#   exec env PM_SCAN_NARROW=0 "$(dirname "$0")/scan_lab_v63" "$@"
mkdir -p "$OUT/a" "$OUT/b"
OUT=$OUT/a LAB_BIGS=8x2048x1536 LAB_TIMEOUT=60 bash dev/kernels/lab_rounds.sh 2 "v63 rc0 wg1 v64"
OUT=$OUT/b LAB_BIGS=8x2048x2048 LAB_TIMEOUT=60 bash dev/kernels/lab_rounds.sh 2 "v63 fb0 n0 o0"
