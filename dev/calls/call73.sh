#!/bin/bash
# session 12, call 6: the final build (the reduction queue): README's whole end-to-end table with the op tests, the
# GPU training checks (determinism, resume, GPU vs CPU eval, packing), and the reduction queue's A/B once more at
# 130m keeping activations (a second GPU for call70's +0.25%)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
bash dev/readme_table.sh
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
OUT=$R bash dev/ab_bench.sh PM_DEFER_REDUCTIONS "0 1 0 1 0 1" "--preset 130m --batch 8 --keep-activations"
cd $R && tar czf all.tgz gpu train_check* && rm -rf gpu train_check
