#!/bin/bash
# session 13, call 4: the weight gradients of pairs of layers as batched GEMMs (Model.pair_dw,
# Backend.matmul_dw_batch): the CUDA op tests (matmul_dw_batch against the CPU; the side-queue test with the pairs,
# held back), then interleaved A/B of PM_DW_PAIR=0/1 at 130m (keeping activations, and by default) and 370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1
grep -E "matmul_dw_batch|side queue|side tickets|FAIL" $R/optests.txt | head -20; tail -3 $R/optests.txt
OUT=$R bash dev/ab_bench.sh PM_DW_PAIR "0 1 0 1" "--preset 130m --batch 8 --keep-activations" \
  "--preset 130m --batch 8" "--preset 370m --batch 8"
cd $R && tar czf all.tgz optests.txt t 2>/dev/null; rm -rf t
