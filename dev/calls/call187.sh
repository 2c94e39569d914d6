#!/bin/bash
# The backward, profiled for the next step (its cooperative pass in producer warps, as the forward's since v65):
# ncu's warp-state and scheduler views and per-SASS phases (between barriers) of the 2-thread backward main pass
# (scan_bwd_staged_kernel) at B8·D2048 (370m width) and of the 4-thread one (scan_bwd4_kernel) at B8·D1536 (130m
# width), from the HEAD lab built with -lineinfo (.gpu/scan/scan_lab). Carry .gpu/scan.
PROF_KERNELS="scan_bwd_staged" SASS_KERNEL="scan_bwd_staged scan_bwd4:1536" SASS_TOP=25 PROF_S=100 \
    bash dev/kernels/scan_prof.sh prod
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
