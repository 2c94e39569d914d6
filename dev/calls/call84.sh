#!/bin/bash
# session 13, call 8: which cuBLASLt candidate the fast backend's tuning keeps for each GEMM shape of a 130m step
# (PM_CUDA_VERBOSE=1 prints first and best candidate times as timed in the step)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
PM_CUDA_VERBOSE=1 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 4 --warmup 3 --policy fixed \
  --preset 130m --batch 8 --keep-activations --no-plots --out /tmp/pb > $R/verbose.txt 2>&1
grep "GEMM m=" $R/verbose.txt | sort | uniq -c | head -40
