#!/bin/bash
# Forty-fourth session, its final commit (the checkpoint interval one constant): the CUDA op tests, and the carried
# state end to end (carry_eval).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
op_tests  # (as run, its lines were in place here; common.sh has them since call345)
carry_eval
