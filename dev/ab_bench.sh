#!/bin/bash
# dev/ab_bench.sh VAR "V1 V2 ..." "BENCH ARGS" ["BENCH ARGS" ...] — interleaved A/B runs of `packmamba bench` on the
# GPU machine: for each argument set, one run per value in the list (repeat values to interleave: "0 1 0 1"), with
# the environment variable VAR set to it; prints one line per run (tok/s, median step ms, the profiled step's scan and
# classifier ms, peak GiB), then per argument set and value the mean tok/s, its range over the runs, and the change
# of each value's mean against the first value's.
# VAR=BIN alternates builds instead: each value is a build folder of dev/gpu.sh pack relative to the root (".gpu",
# ".gpu/old": PM_GPU_DIR), whose bin/packmamba runs with its own lib/ first on the library path.
# The common arguments are fixed (T=2048, 10 timed steps after 3 warm-ups, fixed-length rows); PM_AB_TIMEOUT
# bounds each run (s). Logs of the last run go to ${OUT:-/tmp}/ab_last.log. A run with --memory-budget also prints the
# settings the budget picked.
set -u
var=$1 vals=$2; shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
export LD_LIBRARY_PATH="$root/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
common="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
runs=$(mktemp)  # "value<TAB>args<TAB>tok/s" of every run, for the summary
for a in "$@"; do
    for v in $vals; do
        rm -rf /tmp/pm_ab
        if [ "$var" = BIN ]; then bin="$root/$v/bin/packmamba" envset="LD_LIBRARY_PATH=$root/$v/lib:$LD_LIBRARY_PATH"
        else bin="$root/.gpu/bin/packmamba" envset="$var=$v"; fi
        env "$envset" timeout "${PM_AB_TIMEOUT:-150}" "$bin" bench $common $a --out /tmp/pm_ab \
            >"${OUT:-/tmp}/ab_last.log" 2>&1 || { echo "$var=$v $a: bench failed ($(tail -1 "${OUT:-/tmp}/ab_last.log"))"; continue; }
        grep -m1 -o -- "--memory-budget [0-9.]* GiB: .*" "${OUT:-/tmp}/ab_last.log" | sed "s|^|$var=$v picked |"
        python3 - "$var=$v" "$a" "$runs" <<'PY'
import csv, sys
r = list(csv.DictReader(open('/tmp/pm_ab/results.csv')))[0]
print(f"{sys.argv[1]:<18} {sys.argv[2]:<42} tok/s {float(r['tok_per_s']):9.0f}  step {float(r['step_ms_median']):7.2f} ms"
      f"  scan {float(r.get('scan_ms') or 0):6.2f}  classifier {float(r.get('classifier_ms') or 0):5.2f} ms"
      f"  peak {float(r.get('mem_peak_bytes') or 0) / 2**30:6.2f} GiB")
with open(sys.argv[3], "a") as f:
    f.write(f"{sys.argv[1]}\t{sys.argv[2]}\t{float(r['tok_per_s'])}\n")
PY
    done
done
python3 - "$runs" <<'PY'
import sys
from collections import OrderedDict
groups = OrderedDict()
for line in open(sys.argv[1]):
    v, a, t = line.rstrip("\n").split("\t")
    groups.setdefault(a, OrderedDict()).setdefault(v, []).append(float(t))
for a, byv in groups.items():
    base = None
    for v, ts in byv.items():
        mean = sum(ts) / len(ts)
        base = base or mean
        print(f"mean {v:<18} {a:<42} tok/s {mean:9.0f}  range {min(ts):.0f}-{max(ts):.0f} ({len(ts)} runs)"
              f"  {100 * (mean / base - 1):+.2f}% against the first value")
PY
rm -f "$runs"
