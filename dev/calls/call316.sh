#!/bin/bash
# Thirty-ninth session, fourth call: train's energy report on the H200 (263120e): 130m and 370m, B8 T2048, packed
# rows of the Linux admin-guide (byte tokenizer; .gpu/data from `packmamba prepare --out .gpu/data --ext rst,rst.gz
# /usr/share/doc/linux-doc-6.1/Documentation/admin-guide`), logging every 10 steps. Carry .gpu/bin .gpu/lib .gpu/data.
. dev/calls/common.sh
pm_gpu_env
for p in 130m 370m; do
    timeout 120 .gpu/bin/packmamba train --device cuda --data .gpu/data --out "$OUT/t$p" --preset $p --seq-len 2048 \
        --batch 8 --steps 60 --log-every 10 --save-every 0 >"$OUT/t$p.log" 2>&1 || echo "train $p failed"
    tr '\r' '\n' <"$OUT/t$p.log" | grep -v '^\s*$' | grep -E '^step|GPU|done|error' | tail -9
    tail -1 "$OUT/t$p/metrics.jsonl"
    rm -rf "$OUT/t$p/checkpoints"
done
pack_out
