#!/bin/bash
# Long rows, small batches, end to end: where v76/v77 change the backward's plan in training. 370m B2 T=8192 (scan
# B2·D2048·L8192: 32 blocks of 128, four segments) and 1.4b B1 T=8192 (B1·D4096·L8192: 32 blocks, four segments),
# v73's build (.gpu/v73) against v77's, interleaved twice. Carry .gpu/bin/packmamba .gpu/lib .gpu/v73/bin.
ln -sfn ../lib .gpu/v73/lib
for cfg in "--preset 370m --batch 2" "--preset 1.4b --batch 1"; do
  for d in .gpu/v73 .gpu .gpu/v73 .gpu; do
    rm -rf /tmp/pmb
    LD_LIBRARY_PATH=$PWD/$d/lib timeout 120 $d/bin/packmamba bench --device cuda --seq-len 8192 --steps 8 --warmup 2 \
        --policy fixed --no-plots $cfg --out /tmp/pmb >"$OUT/last.log" 2>&1
    echo "$d $cfg rc $?: $(grep -o '[0-9]* tok/s, step [0-9.]* ms' "$OUT/last.log" | head -1)"
  done
done
