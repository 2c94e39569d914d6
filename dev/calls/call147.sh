#!/bin/bash
# session 19, call 9 (refused: too little device time left to start a machine; not run; v64 added after): three
# variants of the 4-thread backward against v63, B8 D1536, interleaved twice. rc0 = r formed the pre-v57 way
# (-DPM_SCAN_BWD_R_CARRY4=0; v57c measured it equal on v57's kernel); wg1 = each token's stores right after its
# butterfly (-DPM_SCAN_WALK_GROUP4=1; +1.8-2.1% against groups of 2 at v52); v64 = one barrier a chunk, the pass
# one chunk ahead (dev/experiments/scan_v64_bwd4_one_barrier.patch applied, -DPM_SCAN_BWD4_ONE_BARRIER=1; its lab
# run's checks come first). Build each here as
#   nvcc -O3 -arch=sm_90 -Isrc -Idev/kernels [-D...] dev/kernels/scan_lab.cu src/cuda_scan.cu -o .gpu/scan/scan_lab_NAME
# (v64: `git apply` the patch before its build and `git apply -R` after)
LAB_BIGS=8x2048x1536 LAB_TIMEOUT=40 bash dev/kernels/lab_rounds.sh 2 "v63 rc0 wg1 v64"
