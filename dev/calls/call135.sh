#!/bin/bash
# session 18, call 7: v60 (sigmoid's reciprocal by three Newton steps on the FMA pipe instead of the
# special-function unit, in every kernel's cooperative pass: one special-function result an item fewer) against
# v57 (the previous commit's cuda_scan.cu), three shapes, interleaved twice
LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536 bash dev/kernels/lab_rounds.sh 2 "v57 v60"
