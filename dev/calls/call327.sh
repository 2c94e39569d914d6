#!/bin/bash
# Forty-first session, seventh call: dev/sample_lab.c on the GPU machine's host (the sampling's three forms timed on
# one host: call326 found the new form slower there than here, with nothing to compare it with). Carry
# .gpu/bin/sample_lab .gpu/lib (sample_lab copied into .gpu/bin by hand from .gpu/build).
. dev/calls/common.sh
pm_gpu_env
lscpu | grep -E "Model name|^CPU\(s\)|MHz" | head -4
for i in 1 2; do .gpu/bin/sample_lab; done
