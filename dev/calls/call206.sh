#!/bin/bash
# The same documents three ways on scan v73 (issue 5: packed rows against `single` and `pad`): the bench's
# lognormal documents (DESIGN §3's), rows of 4096, B8, at 370m and 1.4b; README's numbers were from scan v21-v22.
# Carry .gpu/bin/packmamba .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for p in 370m 1.4b; do
    timeout 230 .gpu/bin/packmamba bench --device cuda --preset $p --seq-len 4096 --batch 8 --policy single,pad,pack \
        --steps 6 --warmup 2 --no-plots --out "$OUT/$p" >"$OUT/$p.log" 2>&1
    echo "== $p rc $?"; grep -E "tok/s" "$OUT/$p.log" | grep -v "^==" | head -6
done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"
