#!/bin/bash
# Forty-fifth session, review: the carry state out's kernel back to v4's loop (v6's loads ahead gained nothing), the
# model's carried-state arguments through one helper each. The CUDA op tests and carry_eval.
# Carry .gpu/bins.tar.xz (bin/: build/'s packmamba and test_cuda_ops, stripped) and .gpu/lib.
tar -C .gpu -xJf .gpu/bins.tar.xz
. dev/calls/common.sh
pm_gpu_env
op_tests
carry_eval
