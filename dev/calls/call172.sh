#!/bin/bash
# session 23, call 5: why v65's two sides take turns. ncu's warp-state, scheduler and per-SASS-instruction views of
# the warp-specialized forward (p4 of call171: 4 walker threads a channel, cp.async producers as the first warps)
# at B8·D2048·L2048, through scan_prof.sh. Needs .gpu/scan/scan_lab (p4, built with -lineinfo).
PROF_KERNELS=scan_fwd_ws SASS_KERNEL=scan_fwd_ws SASS_TOP=45 bash dev/kernels/scan_prof.sh prod+st
