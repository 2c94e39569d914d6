#!/bin/bash
# session 18, call 9: ncu census of v57's 2-thread backward at B8 D2048 (the warp-state view and, per SASS
# instruction, the hot loop's phases; lab built with -lineinfo), as call126 did for v54
PROF_KERNELS=scan_bwd_staged SASS_KERNEL="scan_bwd_staged" PROF_S=120 bash dev/kernels/scan_prof.sh prod
cd $OUT && tar czf sass.tgz sass_*.csv && rm -f sass_*.csv sass.ncu-rep
