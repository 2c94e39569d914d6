#!/bin/bash
# Packed rows against fixed-length ones at 130m on the final build (scan v81; its kernels at this width are new this
# session), interleaved twice. Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for r in 1 2; do
  timeout 150 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed,pack --no-plots \
    --preset 130m --batch 8 --out /tmp/p$r >"$OUT/pack_$r.log" 2>&1
  echo "rc $?"; grep "tok/s" "$OUT/pack_$r.log" | tail -2
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
