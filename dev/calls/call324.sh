#!/bin/bash
# Forty-first session, fourth call: the GPU decoder v3 (v2 with programmatic dependent launch, weights loaded before the wait): test_cuda_decode with
# PM_BENCH=1 (130m, 370m, 1.4b shapes, graph or not, PDL or not), and generate at 370m on the GPU and on the host. Carry .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/lib .gpu/data.
# The same commands as call322.sh (run then with this build): the step alone, then generate at 370m (its summary
# grep was widened for this run to "FAILED|worst|decode |differ|error", head -24).
bash dev/calls/call322.sh
