#!/usr/bin/env bash
# dev/bench/study.sh — the packmamba characterization study (docs/bench/), one command on each machine.
#
#   dev/bench/study.sh run [DIR]      on the GPU machine: `packmamba bench` over dev/bench/study.json; puts
#                                     results.json, results.csv, ops.csv, trace.json, nvml_samples.csv and study.log
#                                     into DIR (default $OUT/study): six files, inside the device tool's eight.
#   dev/bench/study.sh report DIR     here: copies DIR's files into docs/bench/study and remakes the tables, the
#                                     gnuplot plots and report.html there (`packmamba bench --report`).
#
# Binary: $PM_BIN, else .gpu/bin/packmamba (dev/gpu.sh pack builds it, with the libraries in .gpu/lib) for `run`
# and build/packmamba for `report`. The corpus entries read data/default (dev/default_corpus.sh); without it they
# are recorded as skipped. The prepared corpus (52 MB) plus the tree is over the device tool's 64 MiB, so carry it
# gzipped (`tar czf data/default.tgz -C data default`; carry data/default.tgz and .gpu/lib, and the binary alone
# as PM_BIN) and unpack it there first: `tar xzf data/default.tgz -C data && dev/bench/study.sh run`.
# PM_STUDY_LIMIT (seconds, default 420) stops starting new configurations, so the whole run ends inside the device
# tool's 10-minute command limit; what was measured is kept in any case.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MODE="${1:-}"
cd "$ROOT"

case "$MODE" in
run)
    DEST="${2:-${OUT:?set OUT or give DIR}/study}"
    BIN="${PM_BIN:-$ROOT/.gpu/bin/packmamba}"
    export LD_LIBRARY_PATH="$ROOT/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
    mkdir -p "$DEST"
    WORK=/tmp/pm_study
    rm -rf "$WORK"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$DEST/study.log" 2>&1
    timeout 570 "$BIN" bench --sweep dev/bench/study.json --no-plots --sample-ms 20 --time-limit "${PM_STUDY_LIMIT:-420}" \
        --out "$WORK" >>"$DEST/study.log" 2>&1
    rc=$?
    echo "packmamba bench exit status $rc" >>"$DEST/study.log"
    for f in results.json results.csv ops.csv trace.json nvml_samples.csv; do
        [ -f "$WORK/$f" ] && cp "$WORK/$f" "$DEST/"
    done
    tail -n 45 "$DEST/study.log"
    exit $rc
    ;;
report)
    SRC="${2:?usage: dev/bench/study.sh report DIR (the folder the run brought back)}"
    BIN="${PM_BIN:-$ROOT/build/packmamba}"
    DOC="$ROOT/docs/bench/study"
    [ -f "$SRC/results.json" ] || { echo "study.sh: $SRC/results.json: missing" >&2; exit 1; }
    mkdir -p "$DOC"
    for f in results.json trace.json nvml_samples.csv study.log; do
        [ -f "$SRC/$f" ] && cp "$SRC/$f" "$DOC/"
    done
    "$BIN" bench --report "$DOC"
    ;;
*)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
