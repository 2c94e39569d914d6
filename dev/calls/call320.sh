#!/bin/bash
# Fortieth session, third call: the session's last commit on the H200: the CUDA op tests and test_dist (as call319),
# a 370m train with the energy report (its intervals now start at the first reading), and README's 370m bench row
# (`packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16`). Carry
# .gpu/bin .gpu/lib .gpu/data.
. dev/calls/common.sh
pm_gpu_env
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=4
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
echo "op tests rc $?: $(grep -c '\[       OK \]' "$OUT/ops.log") ok, $(grep -c '^\[  SKIPPED \] test' "$OUT/ops.log") skip lines"
grep -E "FAILED|ERROR|model loss|all gradients" "$OUT/ops.log" | head -5
PM_BIN=$PWD/.gpu/bin/packmamba PM_FAKE_NVML=$PWD/.gpu/bin/libfake_nvml.so timeout 300 .gpu/bin/test_dist \
    >"$OUT/test_dist.log" 2>&1
echo "test_dist rc $?: $(grep -c '\[       OK \]' "$OUT/test_dist.log") ok"
timeout 200 .gpu/bin/packmamba train --device cuda --data .gpu/data --out "$OUT/t370m" --preset 370m --seq-len 2048 \
    --batch 8 --steps 40 --log-every 10 --save-every 0 >"$OUT/t370m.log" 2>&1 || echo "train failed"
tr '\r' '\n' <"$OUT/t370m.log" | grep -v '^\s*$' | grep -E '^step|GPU|note|error' | tail -3
rm -rf "$OUT/t370m/checkpoints"
timeout 300 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16 \
    --no-plots --out "$OUT/b370m" >"$OUT/b370m.log" 2>&1 || echo "bench failed"
bench_line "$OUT/b370m/results.json"
pack_out
