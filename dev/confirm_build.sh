#!/bin/bash
# dev/confirm_build.sh NEW BASE LAB "ARGS" ... — on the GPU machine: what a scan change passes before it is kept,
# in one call. NEW and BASE are build folders of `dev/gpu.sh pack` relative to the root (NEW needs bin/packmamba and
# bin/test_cuda_ops; BASE bin/packmamba; both get .gpu/lib as their lib if they have none); LAB is NEW's scan lab
# binary. Runs NEW's CUDA op tests, compute-sanitizer racecheck and memcheck on LAB's correctness shapes with kept
# states (the training path), then `packmamba bench` of BASE and NEW interleaved twice with each ARGS
# (dev/ab_bench.sh). Logs under $OUT.
R=${OUT:?set OUT}; new=${1:?new build}; base=${2:?base build}; lab=${3:?lab binary}; shift 3
cd "$(dirname "$0")/.." || exit 1
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$new" "$base"; do [ -d "$b/lib" ] || cp -r .gpu/lib "$b/lib"; done
OUT=$R/t PM_GPU_DIR=$new PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run >"$R/optests.log" 2>&1
echo "== op tests rc $?"
grep -E "ok,|FAIL" "$R/t/summary.txt" | head -5
SAN_TOOLS="racecheck memcheck" SAN_S=${SAN_S:-60} bash dev/kernels/lab_sanitize.sh "$lab" prod+st
OUT=$R PM_AB_TIMEOUT=${PM_AB_TIMEOUT:-120} bash dev/ab_bench.sh BIN "$base $new $base $new" "$@"
