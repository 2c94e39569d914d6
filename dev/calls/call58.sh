#!/bin/bash
# session 11, call 3: README's end-to-end table with scan v43 and the bf16 classifier's 8192-token chunks, with the
# op tests; the GPU training checks (determinism, resume, GPU vs CPU eval, packing)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
bash dev/readme_table.sh
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
cd $R && tar czf all.tgz gpu train_check* && rm -rf gpu train_check
