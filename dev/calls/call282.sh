#!/bin/bash
# Thirty-fifth session, seventh and eighth calls: conv_xdt v3 in its lab (dev/kernels/convx3_lab.cu: a producer warp
# and four consumer warps a block of 64 tokens, on mbarriers; weights through the block's ring once, as v1): checks
# against the production conv (u bits) and reference GEMM kernels; timings at 2 and 3 stages, and of the timing-only
# variants v3.l2rows (xi's reads all L2 hits) and v3.convonly (phase 1 without the mma, no phase 2), against the conv
# alone (370m). The first call ran a build with only the two stage counts; the patch's lab holds all four variants.
# Carry .gpu/convx3.
# Source: dev/experiments/conv_xdt_v3_mbarrier_lab.patch (a lab only; not kept).
timeout 200 .gpu/convx3/convx3_lab 2>&1 | tail -12
