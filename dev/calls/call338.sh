#!/bin/bash
# Forty-fourth session: carry v4 (the forward's carry kernel also gives the scan states their carried part, and the
# state out walks on from the last state checkpoint) on the GPU: call337's lines without the 370m bench (the default
# path's kernels did not change since call337).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
PM_CALL_NO_370M=1 bash dev/calls/call337.sh
