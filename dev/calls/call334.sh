#!/bin/bash
# Forty-second session: test_cuda_decode with `generate --samples` (the GPU decoder's states saved after the
# prompt and restored before each sample). Carry .gpu/bin (build/packmamba and build/test_cuda_decode from the
# development machine) and .gpu/lib (their libraries as dev/gpu.sh pack copies them; libzip now among them).
. dev/calls/common.sh
pm_gpu_env
PM_BIN=.gpu/bin/packmamba timeout 300 .gpu/bin/test_cuda_decode 2>&1 | grep -v "^  " | tail -25
