#!/bin/bash
# session 12, call 4: the final build (the reduction queue): README's whole end-to-end table with the op tests, and
# the GPU training checks (determinism, resume, GPU vs CPU eval, packing)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
bash dev/readme_table.sh
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
cd $R && tar czf all.tgz gpu train_check* && rm -rf gpu train_check
