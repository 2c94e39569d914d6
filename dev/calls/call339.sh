#!/bin/bash
# Forty-fourth session: carry v5 (the scan kernels start a carried row from its state, ScanInit: no carry kernel of
# the scan is left) on the GPU: all of call337's lines, the 370m bench among them (the default path's kernels gained
# the initial state's parameter).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
bash dev/calls/call337.sh
