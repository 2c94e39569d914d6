#!/bin/bash
# session 16, call 11: ncu census of v52's scan kernels: call112's census (the 2-thread backward and the forward at
# B8 D2048, the 4-thread backward at B8 D1536) on the final build's lab. (For a new census, dev/kernels/scan_prof.sh
# does this and prints the phases: PROF_KERNELS=none SASS_KERNEL="scan_bwd_staged scan_bwd4:1536" ...)
exec bash "$(dirname "$0")/call112.sh"
