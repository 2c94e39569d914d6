#!/usr/bin/env bash
# dev/gpu.sh — the one script for the GPU machine.
#
#   dev/gpu.sh pack   (here, on the build machine) build with CUDA into .gpu/build, then copy the binaries
#                     into .gpu/bin and the shared libraries the GPU machine lacks into .gpu/lib. Carry `.gpu`.
#                     Also builds the CUDA op tests from compute_90 PTX alone (.gpu/build-ptx, CMake's
#                     90-virtual: what a GPU newer than Hopper loads from the default build) as
#                     .gpu/bin/ptx_test_cuda_ops (1.8 MB; PM_PTX_CHECK=0 skips it, in `run` too: the driver's
#                     compile and the tests take ~35 s of device time on the H200).
#   dev/gpu.sh [run]  (there) run the CUDA op tests (also under compute-sanitizer, and from the PTX-only build
#                     with PM_TEST_PTX_ONLY=1 where pack made it), the whole-model checks and,
#                     when `packmamba bench` exists, the benchmark; full logs go to $OUT (or .gpu/out), and a
#                     short table is printed last.
#
# Environment for `run`: PM_SANITIZE=0 skips the compute-sanitizer pass; PM_BENCH=0 skips the op timings;
# PM_E2E=0 skips `packmamba bench`; PM_BENCH_ARGS overrides its arguments (several runs: separate the argument
# sets with ';'); PM_TEST_TIMEOUT / PM_BENCH_TIMEOUT bound each test binary / each bench run (seconds).
# PM_GPU_DIR (both modes) puts the build, binaries and libraries elsewhere than .gpu (e.g. .gpu/mine, so
# engineers sharing a tree do not overwrite each other's binaries; carry that folder).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GPU="${PM_GPU_DIR:-$ROOT/.gpu}"
case "$GPU" in /*) ;; *) GPU="$ROOT/$GPU" ;; esac
MODE="${1:-run}"

if [ "$MODE" = pack ]; then
    set -e
    cmake -S "$ROOT" -B "$GPU/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$GPU/build" -j"${PM_JOBS:-2}"
    rm -rf "${GPU:?}/bin" "${GPU:?}/lib"
    mkdir -p "$GPU/bin" "$GPU/lib"
    # (test_dist: its GPU case, more ranks than GPUs refused, runs only where there is a GPU; the stand-in NVML
    # library is for its energy case)
    for f in "$GPU/build/packmamba" "$GPU/build/energy_lab" "$GPU/build"/test_cuda_* "$GPU/build"/test_*gpu* \
        "$GPU/build/test_dist" "$GPU/build/libfake_nvml.so"; do
        [ -x "$f" ] && cp "$f" "$GPU/bin/"
    done
    if [ "${PM_PTX_CHECK:-1}" != 0 ]; then
        cmake -S "$ROOT" -B "$GPU/build-ptx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-virtual >/dev/null
        cmake --build "$GPU/build-ptx" -j"${PM_JOBS:-2}" --target test_cuda_ops
        cp "$GPU/build-ptx/test_cuda_ops" "$GPU/bin/ptx_test_cuda_ops"
    fi
    # Libraries the GPU machine may lack; it has (Ubuntu 24.04) glibc, libstdc++, libgomp, OpenBLAS, PCRE2, CUDA,
    # NCCL and OpenMPI (whose own plugins must match its libmpi, so never carry ours).
    for b in "$GPU/bin"/*; do
        ldd "$b" | awk '/=> \// {print $3}'
    done | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*|libgomp.so*) ;;
            libcudart.so*|libcublas*|libopenblas.so*|libpcre2-8.so*|libz.so*) ;;
            libnccl.so*|libnvidia-ml.so*|libmpi*.so*|libopen-*.so*|libevent*.so*|libhwloc.so*|libudev.so*) ;;
            *) cp -L "$lib" "$GPU/lib/" ;;
        esac
    done
    du -sh "$GPU/bin" "$GPU/lib"
    ls "$GPU/bin" "$GPU/lib"
    exit 0
fi

OUTDIR="${OUT:-$GPU/out}"
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH="$GPU/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
cd "$ROOT"
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
row() { printf '%-34s %-8s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY" >/dev/null; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader >"$OUTDIR/gpu.txt" 2>&1
missing=$(for b in "$GPU/bin"/*; do ldd "$b" | grep 'not found'; done | sort -u)
[ -n "$missing" ] && echo "missing libraries: $missing" | tee -a "$OUTDIR/gpu.txt"

# run_test BINARY [VAR=VALUE ...]: one cmocka binary (with the variables set), its log in $OUTDIR, a summary row
run_test() {
    local t=$1 name s rc pass fail skipped
    shift
    name=$(basename "$t")
    s=$SECONDS
    env PM_CUDA_VERBOSE=1 "$@" timeout "${PM_TEST_TIMEOUT:-600}" "$t" >"$OUTDIR/$name.log" 2>&1
    rc=$?
    # cmocka prints a failed or skipped test's name twice (as it runs, and in the closing list): count names
    pass=$(grep -c '^\[       OK \]' "$OUTDIR/$name.log")
    fail=$(grep '^\[  FAILED  \] test' "$OUTDIR/$name.log" | sort -u | wc -l)
    skipped=$(grep '^\[  SKIPPED \] test' "$OUTDIR/$name.log" | sort -u | wc -l)
    row "$name" "rc=$rc" "$pass ok, $fail failed, $skipped skipped, $((SECONDS - s))s"
    grep -E 'FAIL|ERROR|packmamba:|model loss|all gradients' "$OUTDIR/$name.log" | head -30 >>"$SUMMARY"
}

# 1. op tests (and the whole-model tests in the same binary; test_dist's through mpirun with the packed binary)
for t in "$GPU/bin"/test_*; do
    run_test "$t" PM_BIN="$GPU/bin/packmamba" PM_FAKE_NVML="$GPU/bin/libfake_nvml.so"
done
# 1b. the op tests from compute_90 PTX alone (the driver compiles it at load): the backend without its sm_90a code,
#     as on a GPU newer than Hopper; PM_TEST_PTX_ONLY=1 makes test_scan require the staged backward there
if [ "${PM_PTX_CHECK:-1}" != 0 ] && [ -x "$GPU/bin/ptx_test_cuda_ops" ]; then
    run_test "$GPU/bin/ptx_test_cuda_ops" PM_TEST_PTX_ONLY=1
fi

# 2. op timings at model shapes (PM_BENCH=1 makes test_cuda_ops time each op)
if [ "${PM_BENCH:-1}" != 0 ] && [ -x "$GPU/bin/test_cuda_ops" ]; then
    PM_BENCH=1 PM_ONLY_BENCH=1 timeout "${PM_TEST_TIMEOUT:-600}" "$GPU/bin/test_cuda_ops" >"$OUTDIR/op_times.log" 2>&1
    row "op timings" "rc=$?" "see op_times.log"
    grep -E '^ +op ' "$OUTDIR/op_times.log" >>"$SUMMARY"
fi

# 3. the op tests again under compute-sanitizer (out-of-bounds / uninitialized reads in our kernels)
if [ "${PM_SANITIZE:-1}" != 0 ] && command -v compute-sanitizer >/dev/null && [ -x "$GPU/bin/test_cuda_ops" ]; then
    PM_SKIP_MODEL=1 timeout 180 compute-sanitizer --tool memcheck --print-limit 20 "$GPU/bin/test_cuda_ops" \
        >"$OUTDIR/sanitizer.log" 2>&1
    rc=$?
    row "compute-sanitizer memcheck" "rc=$rc" "$(grep -m1 'ERROR SUMMARY' "$OUTDIR/sanitizer.log")"
fi

# 4. end-to-end bench (the lead's `packmamba bench`), when it exists; PM_E2E=0 skips it. Every run's log goes
#    into bench.log and its results.csv rows into bench_results.csv ($OUT returns at most 8 files); a table of
#    tokens/s, step time, peak memory and the per-category times is printed from them.
if [ "${PM_E2E:-1}" != 0 ] && "$GPU/bin/packmamba" bench --help >/dev/null 2>&1; then
    all="${PM_BENCH_ARGS:---device cuda --preset 130m --batch 8 --seq-len 2048 --policy fixed,pack --steps 10 --warmup 3}"
    : >"$OUTDIR/bench.log"
    rm -f "$OUTDIR/bench_results.csv"
    IFS=';' read -r -a sets <<<"$all"
    for args in "${sets[@]}"; do
        rm -rf /tmp/pm_bench
        echo "== packmamba bench $args" >>"$OUTDIR/bench.log"
        # shellcheck disable=SC2086  # args is a word list on purpose
        timeout "${PM_BENCH_TIMEOUT:-240}" "$GPU/bin/packmamba" bench $args --no-plots --time-limit 150 \
            --out /tmp/pm_bench >>"$OUTDIR/bench.log" 2>&1
        rc=$?
        if [ -f /tmp/pm_bench/results.csv ]; then
            if [ -f "$OUTDIR/bench_results.csv" ]; then tail -n +2 /tmp/pm_bench/results.csv >>"$OUTDIR/bench_results.csv"
            else cp /tmp/pm_bench/results.csv "$OUTDIR/bench_results.csv"; fi
        fi
        row "packmamba bench" "rc=$rc" "$args"
    done
    grep -E 'tok/s|error|rror:' "$OUTDIR/bench.log" | tr '\r' '\n' | grep -E 'tok/s|rror' | tail -12 >>"$SUMMARY"
    if [ -f "$OUTDIR/bench_results.csv" ] && command -v python3 >/dev/null; then
        python3 - "$OUTDIR/bench_results.csv" >>"$SUMMARY" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def f(r, k, scale=1.0, fmt="%.1f"):
    try: return fmt % (float(r[k]) * scale)
    except (KeyError, ValueError): return "-"
cats = [k[:-3] for k in (rows[0].keys() if rows else []) if k.endswith("_ms") and not k.endswith(("_fwd_ms", "_bwd_ms"))
        and not k.startswith(("step_", "profiled_", "ops_", "other_"))]
print("%-28s %9s %9s %6s %9s  %s" % ("config", "tok/s", "step ms", "fill", "peak GiB", "  ".join(cats) + " (ms)"))
for r in rows:
    print("%-28s %9s %9s %6s %9s  %s" % (r["label"][:28], f(r, "tok_per_s"), f(r, "step_ms_median", fmt="%.2f"),
          f(r, "fill", fmt="%.3f"), f(r, "mem_peak_bytes", 1 / 2**30, "%.2f"),
          "  ".join(f(r, c + "_ms", fmt="%.2f") for c in cats)))
PY
    fi
else
    row "packmamba bench" "-" "skipped (PM_E2E=0 or no bench subcommand)"
fi

echo
echo "== $(head -1 "$OUTDIR/gpu.txt")"
cat "$SUMMARY"
