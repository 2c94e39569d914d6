#!/bin/bash
# session 17, call 8: ncu census of v54's scan kernels (as call118 did for v52): the 2-thread backward and the
# forward at B8 D2048, the 4-thread backward at B8 D1536, per SASS instruction, with the hot loop's phases
# (lab built with -lineinfo)
PROF_KERNELS=none SASS_KERNEL="scan_bwd_staged scan_bwd4:1536 scan_fwd_staged" PROF_S=120 bash dev/kernels/scan_prof.sh prod
cd $OUT && tar czf sass.tgz sass_*.csv && rm -f sass_*.csv sass.ncu-rep
