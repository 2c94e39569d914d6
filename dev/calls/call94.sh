#!/bin/bash
# session 14, call 5 (nvidia-h200-x2): data parallelism keeping the side queue and deferred reductions under the
# overlap hook (Model.hook_orders_itself, Backend.fence_stream): dev/dist/run_2gpu.sh's correctness check, its new
# side-queue check (held back vs off vs no deferral, bit for bit) and scaling (370m, 130m B8 per GPU); then the
# side-queue check alone with a mutant binary whose buckets skip the fence (build-dist-mut: must differ).
R=$OUT
export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/dist CHECK_STEPS=20 STEPS=8 SCALE="370m 8,130m 8" NO_OVERLAP_ROW="" \
    PM_BIN=$PWD/build-dist-cuda/packmamba bash dev/dist/run_2gpu.sh > $R/dist.log 2>&1
tail -14 $R/dist/summary.txt
echo "== mutant (no fence before each bucket's reduction)"
OUT=$R/mut CHECK_STEPS=2 SCALE="" NO_OVERLAP_ROW="" \
    PM_BIN=$PWD/build-dist-mut/packmamba bash dev/dist/run_2gpu.sh > $R/mut.log 2>&1
grep -A3 "side work held back" $R/mut/summary.txt
