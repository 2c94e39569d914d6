#!/bin/bash
# Forty-first session, ninth call: test_cuda_decode after the review (the GPU prefill takes the last token's fp32
# state from the backend's act_to_f32 and its layer table from create). The same commands as call328.sh. Carry
# .gpu/bin/packmamba .gpu/bin/test_cuda_decode .gpu/lib.
bash dev/calls/call328.sh
