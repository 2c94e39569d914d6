#!/bin/bash
# session 15, call 2: scan v49 (each chunk's dB/dC summed by the last block of its row to flush it, no
# scan_bc_reduce_kernel): lab against v45 (checks, memcheck/racecheck on prod), CUDA op tests (v49 against the
# separate reduce bit for bit, both backward kernels), then interleaved A/B PM_SCAN_BC_FUSED=0/1 at 130m (keeping
# activations and by default) and 370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096 SCAN_LAB_VERSIONS=v45+st,prod+st,prod,v45+st0,prod+st0 \
    LAB_S=150 SAN=prod SAN_S=60 SAN_TOOLS=memcheck bash dev/kernels/scan_run.sh 2>&1 | tail -20
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "reduced after|FAIL" $R/t/test_cuda_ops.log | head -12; tail -4 $R/optests.txt | head -1
OUT=$R PM_AB_TIMEOUT=100 bash dev/ab_bench.sh PM_SCAN_BC_FUSED "0 1 0 1" "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8" "--preset 370m --batch 8"
cd $R && tar czf all.tgz optests.txt t 2>/dev/null; rm -rf t
