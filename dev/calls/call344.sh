#!/bin/bash
# Forty-fifth session, first call: call343's lines (the CUDA op tests and carry_eval on the forty-fourth session's
# final commit, ac418be), then where --carry-state's extra ~9% at 130m T=512 B8 goes (call339: 13.50 against 12.35
# ms a step, unprofiled): the bench's per-op profile of pack and pack+carry on carry_eval's corpus.
# (As run, its profile lines were in place here; they are common.sh's carry_profile_130m since call345.)
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
bash dev/calls/call343.sh
carry_profile_130m
