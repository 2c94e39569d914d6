#!/bin/bash
# v72 profiled for the next step: ncu's warp-state, scheduler and per-SASS views of the warp-specialized backward
# (scan_bwd_ws_kernel) at B8·D2048, from HEAD's lab built with -lineinfo for sm_90a (.gpu/scan/scan_lab; the
# producers are warps 0-3, the walkers 4-11). Carry .gpu/scan.
PROF_KERNELS="scan_bwd_ws" SASS_KERNEL="scan_bwd_ws" SASS_TOP=25 PROF_S=70 bash dev/kernels/scan_prof.sh prod
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
