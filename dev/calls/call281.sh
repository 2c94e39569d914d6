#!/bin/bash
# Thirty-fifth session, sixth call: conv_xdt v2 in its lab (dev/kernels/convx2_lab.cu: each warp owns 16 tokens'
# rows, no block barrier; x_proj's B fragments as 16-byte loads from the read-only path with the k order permuted
# in 32s): checks against the production conv (u bits) and reference GEMM kernels, and timings of four variants
# (ring depth S1, blocks an SM) against the production conv alone (370m). Carry .gpu/convx2.
# Source: dev/experiments/conv_xdt_v2_warp_rows_lab.patch (a lab only; not kept).
timeout 200 .gpu/convx2/convx2_lab 2>&1 | tail -14
