#!/bin/bash
# Forty-first session, third call: the GPU decoder v2 (four kernels a layer, no cuBLAS): test_cuda_decode with
# PM_BENCH=1 (130m, 370m, 1.4b shapes, graph and eager), and generate at 370m on the GPU and on the host. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/lib .gpu/data.
# The same commands as call322.sh (run then with this build): the step alone, then generate at 370m.
bash dev/calls/call322.sh
