#!/bin/bash
# Prepared in the thirty-seventh session, not run (the session's device time ran out). Two questions:
# 1. Which part of the recompute hides beside the scan backward? The recompute ahead hid ~2.6 of 4.7 ms at 370m
#    (call299), while by bytes the 4 free SMs could carry nearly all of it (a copy kernel moved ~0.4 TB/s there in
#    scan_lab `beside`, call298: 14 GB of capacity over a step's backward scans against the recompute's 14 GB).
#    PM_RECOMPUTE_AHEAD=m<mask> puts only some parts ahead (norm 1, conv 2, dt_proj 4; model.c, backward_body):
#    370m B8 with masks 7 (all, the default), 1, 2, 4, 5 (the byte-bound norm and dt_proj, the conv in place),
#    and 0 (PM_RECOMPUTE_AHEAD=0, none), interleaved twice.
#    The part whose move gains least per byte is the one to make more efficient on 4 SMs.
# 2. What makes the same one or two timed steps slow in every run (call301: 370m's 7th and 8th, ~1 s after the
#    first; 1.4b's 5th)? 370m B8 with 30 timed steps while nvidia-smi samples clocks and power every 20 ms.
# Carry .gpu/bin .gpu/lib (dev/gpu.sh pack first).
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A="--device cuda --seq-len 2048 --policy fixed --warmup 2 --no-plots --time-limit 120"
each() { python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['configs'][0]; s=c['step_ms']; print('median %.2f mean %.2f tok/s %.0f each %s' % (s['median'], s['mean'], c['tok_per_s'], ' '.join('%.1f' % t for t in s['each'])))" "$1"; }
for r in 1 2; do
    for mk in m7 m1 m2 m4 m5 0; do
        PM_RECOMPUTE_AHEAD=$mk timeout 150 .gpu/bin/packmamba bench $A --steps 8 --preset 370m --batch 8 --out "$OUT/b_${mk}_$r" >"$OUT/b_${mk}_$r.log" 2>&1 || tail -3 "$OUT/b_${mk}_$r.log"
        echo "ahead=$mk r$r $(each "$OUT/b_${mk}_$r/results.json")"
    done
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 20 > "$OUT/smi.csv" &
SMI=$!
timeout 200 .gpu/bin/packmamba bench $A --steps 30 --preset 370m --batch 8 --out "$OUT/b_long" >"$OUT/b_long.log" 2>&1
kill $SMI
echo "30 steps: $(each "$OUT/b_long/results.json")"
python3 - "$OUT/smi.csv" <<'PY'
import sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 3]
mhz = [float(r[1].split()[0]) for r in rows if r[1].split()[0].replace(".", "").isdigit()]
w = [float(r[2].split()[0]) for r in rows if r[2].split()[0].replace(".", "").isdigit()]
print("samples", len(mhz), "sm MHz min/median/max", min(mhz), sorted(mhz)[len(mhz) // 2], max(mhz),
      "W max", max(w) if w else None)
PY
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')
