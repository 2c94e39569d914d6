#!/bin/bash
# Is there room in the warp-specialized scans' producers for a fused dt_proj (docs/perf.md, twenty-eighth session)?
# HEAD's lab (base) against the same lab built with -DPM_SCAN_WS_DUMMY_MMA=3 (mma): the producers of both
# warp-specialized kernels do a fused dt_proj's tensor-core work a chunk (ldmatrix from the chunk's slot, 8-16
# mma.sync m16n8k16 a warp, a bf16 store), its results discarded. Three interleaved rounds at the 370m, 1.4b B4,
# B2·D4096·L8192 and 130m scan shapes. Carry .gpu/scan28.
mkdir -p .gpu/scan && cp .gpu/scan28/scan_lab_base .gpu/scan28/scan_lab_mma .gpu/scan/
LAB_TIMEOUT=80 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st \
    bash dev/kernels/lab_rounds.sh 3 "base mma"
ls -la "$OUT"
