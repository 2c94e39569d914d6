#!/bin/bash
# session 9, call 2: conv v7 (helper's lab versions: bulk-copy ring, dw/db in registers, cluster sums) — full lab,
# memcheck + racecheck on the small checks; the 130m keep-activations per-op profile (ops.csv); ncu of the
# classifier's softmax kernel in a 130m step
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 .gpu/conv/conv_lab > $R/conv_lab.txt 2>&1; echo "== conv lab rc $?"; tail -40 $R/conv_lab.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 100 $CS --tool $tool --print-limit 5 .gpu/conv/conv_lab check > $R/cs_$tool.txt 2>&1
  echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $R/cs_$tool.txt | paste -sd' ')"
done
A="--device cuda --seq-len 2048 --steps 6 --warmup 3 --policy fixed --no-plots"
timeout 100 .gpu/bin/packmamba bench $A --preset 130m --batch 8 --keep-activations --out $R/pb > $R/pb.log 2>&1
tail -2 $R/pb.log; column -s, -t < $R/pb/ops.csv | head -40
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 120 $NCU --clock-control none -k regex:softmax --launch-skip 8 --launch-count 2 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section Occupancy .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 1 \
  --warmup 2 --policy fixed --no-plots --preset 130m --batch 8 --keep-activations --out /tmp/pb2 > $R/ncu_softmax.txt 2>&1
echo "== ncu rc $?"; grep -E 'softmax|Duration|Throughput|Busy|Achieved|Bandwidth|Hit Rate' $R/ncu_softmax.txt | head -30
