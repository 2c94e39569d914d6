#!/bin/bash
# session 9, call 8: every kernel of 130m keep-activations steps under ncu (gpu__time_duration; the per-kernel table)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
PM_GEMM_TUNE=0 timeout 400 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  .gpu/bin/packmamba bench --device cuda --preset 130m --batch 8 --seq-len 2048 --steps 1 --warmup 1 --profile-steps 1 \
  --policy fixed --no-plots --keep-activations --out /tmp/pb3 > $R/ncu_step.csv 2> $R/ncu_step.err
echo "== ncu rc $? lines $(wc -l < $R/ncu_step.csv)"; tail -3 $R/ncu_step.err
cd $R && tar czf all.tgz ncu_step.* && rm -f ncu_step.*
