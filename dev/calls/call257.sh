#!/bin/bash
# Thirty-second session, last call: README's headline rows on v85's build (PM_TABLE=key: 130m B8, 370m B8, 1.4b B4,
# 130m B8 keeping activations and with --memory-budget 14.24; the op tests first, through dev/gpu.sh), then 130m
# with fixed and packed rows (README's packed fraction). Carry .gpu/bin .gpu/lib (dev/gpu.sh pack at HEAD).
# Prediction: as call255 on its GPU (370m ~134.5K, 130m ~340K), 1.4b ~47K; packed >= 97% of fixed.
PM_TABLE=key bash dev/readme_table.sh
LD_LIBRARY_PATH=$PWD/.gpu/lib timeout 200 .gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed,pack --preset 130m --batch 8 --no-plots --out "$OUT/pk" >"$OUT/pk.log" 2>&1; echo "== pack rc $?"
python3 - "$OUT/pk/bench_results.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["label"], "tok/s", r.get("tok_per_s"), "step", r["step_ms_median"], "fill", r.get("fill"))
PY
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
