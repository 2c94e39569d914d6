#!/usr/bin/env bash
# run_2gpu.sh — data-parallel checks and measurements on the 2-GPU machine (kind nvidia-h200-x2), in one call:
#   1. correctness: mpirun -np 2 x --batch 2 against 1 GPU x --batch 4 (the same global batch), --deterministic,
#      130m at T=1024 for 50 steps: per-step losses (bit-identical steps counted, max relative difference)
#      (the default path; PM_DIST_OVERLAP=0 PM_DIST_FP32_GATHER=1: every F32 master gathered; and the overlapped
#      path, PM_DIST_OVERLAP=1)
#   2. scaling: 370m (B=8 per GPU) and 1.4b (B=4 per GPU) at T=2048, packed: 1 GPU vs 2 GPUs with the same per-GPU
#      batch; global tokens/s (median over steps 4..), the speedup, and the time rank 0 spent waiting in
#      collectives; then the first of them again on 2 GPUs with the overlap (PM_DIST_OVERLAP=1)
# Build on the CPU machine first (the GPU machine has no OpenBLAS headers):
#   cmake -S . -B build-dist-cuda -DPM_CUDA=ON && cmake --build build-dist-cuda -j2 --target packmamba
# then one call of the run tool:
#   kind nvidia-h200-x2, carry ["build-dist-cuda/packmamba"], command "bash dev/dist/run_2gpu.sh"
# Results come back in $OUT: summary.txt, and runs.tar.gz with each run's log and metrics.jsonl.
# Knobs: PM_BIN (binary), STEPS (scaling steps, default 20), SCALE (default "370m 8,1.4b 4": preset and per-GPU
# batch), CHECK (default "130m 1024": preset and T of the correctness run), CHECK_STEPS (default 50), SEQ (default 2048), OVERLAP_ROW
# (default: the first SCALE entry again with PM_DIST_OVERLAP=1; empty: skip), DEVICE (default cuda), SIDE_CHECK (default 1:
# the overlap with the side queue held back against it off, bit for bit; 0: skip).
# Dry run on a CPU machine: DEVICE=cpu CHECK="tiny 128" SCALE="tiny 2" SEQ=128 TOKENIZER=byte PM_BIN=build-x/packmamba
set -uo pipefail
# NVLink multicast stays off on the lent machines (KINDS.md): NCCL must not use NVLS there.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=${PM_BIN:-build-dist-cuda/packmamba}
OUT=${OUT:-/tmp/pm_dist_out}
STEPS=${STEPS:-20}
SCALE=${SCALE:-370m 8,1.4b 4}
CHECK=${CHECK:-130m 1024}
CHECK_STEPS=${CHECK_STEPS:-50}
CHECK_ARGS=${CHECK_ARGS:---lr 6e-4}  # a learning rate at which 130m trains stably (3e-3 spikes, amplifying bf16 noise)
SEQ=${SEQ:-2048}
DEVICE=${DEVICE:-cuda}
W=/tmp/pm_dist
L="$W/logs"
rm -rf "$W"
mkdir -p "$W" "$L" "$OUT"
S="$OUT/summary.txt"
: > "$S"
log() { echo "$*" | tee -a "$S"; }
MPI=(mpirun --allow-run-as-root --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS -x LD_LIBRARY_PATH -x PATH -np 2)

log "== machine"
nvidia-smi -L 2>&1 | tee -a "$S"
nvidia-smi topo -m 2>/dev/null | head -4 | tee -a "$S"
log "mpirun: $(command -v mpirun) $(mpirun --version 2>/dev/null | head -1)"
if [ ! -x "$BIN" ]; then log "FAIL: no binary at $BIN (build it and carry it)"; exit 1; fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
for lib in $(ldd "$BIN" 2>/dev/null | awk '/not found/ {print $1}'); do  # e.g. libnccl from a pip wheel
    f=$(find /usr /opt -name "$lib" 2>/dev/null | head -1)
    [ -n "$f" ] && export LD_LIBRARY_PATH="$(dirname "$f"):$LD_LIBRARY_PATH" && log "using $f"
done
if ldd "$BIN" | grep -q "not found"; then log "FAIL: missing libraries:"; ldd "$BIN" | grep "not found" | tee -a "$S"; exit 1; fi
ldd "$BIN" | grep -E "nccl|mpi" | tee -a "$S"

log "== corpus"
python3 dev/dist/make_corpus.py "$W/docs.jsonl" 2000000
"$BIN" prepare --out "$W/data" --tokenizer "${TOKENIZER:-tests/fixtures/tokenizer/gpt2}" "$W/docs.jsonl" 2>&1 | tail -2 | tee -a "$S"

# Per-step losses of two runs side by side: steps compared, bit-identical steps, max relative difference.
compare() {
    python3 - "$1" "$2" <<'EOF' | tee -a "$S"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
b = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
n = min(len(a), len(b))
same = sum(a[i]["loss"] == b[i]["loss"] for i in range(n))
rel = [abs(a[i]["loss"] - b[i]["loss"]) / abs(a[i]["loss"]) for i in range(n)]
worst = max(range(n), key=lambda i: rel[i]) if n else 0
print(f"steps {len(a)} vs {len(b)}; bit-identical losses {same}/{n}; max relative difference {max(rel) if n else 0:.3e} "
      f"(step {worst + 1}: {a[worst]['loss']:.7f} vs {b[worst]['loss']:.7f}); final {a[n-1]['loss']:.5f} vs {b[n-1]['loss']:.5f}")
EOF
}

# Median global tokens/s (and rank 0's collective time) over steps 4.. of a run.
rate() {
    python3 - "$1" <<'EOF'
import json, sys, statistics
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][3:]
tok = statistics.median(x["tok_per_s"] for x in m) if m else 0
step = statistics.median(x["step_s"] for x in m) if m else 0
comm = statistics.median(x.get("comm_s", 0) for x in m) if m else 0
print(f"{tok:.0f} {step:.4f} {comm:.4f}")
EOF
}

save_run() {  # keep the metrics beside the logs, then free the disk (checkpoints of 1.4b are ~17 GB)
    cp "$W/$1/metrics.jsonl" "$L/$1.metrics.jsonl" 2>/dev/null
    rm -rf "$W/$1"
}

read -r CP CT <<< "$CHECK"
log "== 1. correctness: 2 ranks x B2 vs 1 x B4, $CP T=$CT, --deterministic, $CHECK_STEPS steps"
C=(train --device "$DEVICE" --deterministic --data "$W/data" --preset "$CP" --seq-len "$CT" --steps "$CHECK_STEPS" --warmup 5
   --log-every 25 --seed 1 ${CHECK_ARGS:-})
timeout 240 "$BIN" "${C[@]}" --batch 4 --out "$W/c1" > "$L/c1.log" 2>&1 || log "1 GPU run failed: $(tail -2 "$L/c1.log")"
timeout 240 "${MPI[@]}" "$BIN" "${C[@]}" --batch 2 --out "$W/c2" > "$L/c2.log" 2>&1 || log "2 GPU run failed: $(tail -3 "$L/c2.log")"
log "default (one reduce-scatter after the backward; bf16 compute copy + F32 small tensors gathered):"
compare "$W/c1" "$W/c2"
PM_DIST_OVERLAP=1 timeout 240 "${MPI[@]}" -x PM_DIST_OVERLAP "$BIN" "${C[@]}" --batch 2 --out "$W/c4" > "$L/c4.log" 2>&1 ||
    log "2 GPU run (overlap) failed: $(tail -3 "$L/c4.log")"
log "PM_DIST_OVERLAP=1 (reductions bucketed by layer during the backward):"
compare "$W/c1" "$W/c4"
PM_DIST_OVERLAP=0 PM_DIST_FP32_GATHER=1 timeout 240 "${MPI[@]}" -x PM_DIST_OVERLAP -x PM_DIST_FP32_GATHER "$BIN" \
    "${C[@]}" --batch 2 --out "$W/c3" > "$L/c3.log" 2>&1 || log "2 GPU run (no overlap) failed: $(tail -3 "$L/c3.log")"
log "PM_DIST_OVERLAP=0 PM_DIST_FP32_GATHER=1 (one reduce-scatter after the backward; all F32 masters gathered):"
compare "$W/c1" "$W/c3"
save_run c1; save_run c2; save_run c3; save_run c4
if [ "${SIDE_CHECK:-1}" = 1 ]; then
    # The overlap keeps the backward's side queue and deferred reductions (Model.hook_orders_itself): each layer's
    # bucket waits for both queues on the device. With the side work held back ~0.3 ms (PM_SIDE_STREAM=2) a bucket
    # reduced before its weight gradients were written would change the bits; the same run with everything on the
    # main queue, and with every reduction at once, must give the same losses bit for bit.
    SC=(train --device "$DEVICE" --deterministic --data "$W/data" --preset "$CP" --seq-len "$CT" --steps 10 --warmup 5
        --log-every 5 --seed 1 ${CHECK_ARGS:-} --batch 2)
    for v in "PM_SIDE_STREAM=2:s2" "PM_SIDE_STREAM=0:s0" "PM_DEFER_REDUCTIONS=0:d0" "PM_FENCE_HOLD=1:h1"; do
        name=${v#*:}; kv=${v%%:*}
        env "$kv" PM_DIST_OVERLAP=1 timeout 240 "${MPI[@]}" -x "${kv%%=*}" -x PM_DIST_OVERLAP "$BIN" "${SC[@]}" \
            --out "$W/$name" > "$L/$name.log" 2>&1 ||
            log "2 GPU run ($kv) failed: $(tail -3 "$L/$name.log")"
    done
    log "2 ranks, side work held back (PM_SIDE_STREAM=2) against everything on the main queue (=0); then against every reduction at once (PM_DEFER_REDUCTIONS=0); then against the collectives held back ~1 ms after each fence (PM_FENCE_HOLD=1: nothing may read a bucket before the optimizer step waits for it):"
    compare "$W/s2" "$W/s0"
    compare "$W/s2" "$W/d0"
    compare "$W/s2" "$W/h1"
    save_run s2; save_run s0; save_run d0; save_run h1
fi

log "== 2. scaling at T=$SEQ (packed), same per-GPU batch; tok/s is global, comm = rank 0's time in collectives"
declare -A R1
log "model  B/GPU  1 GPU tok/s  2 GPU tok/s  speedup  step_s(1) step_s(2)  comm_s/step  comm share"
IFS=, read -r -a CFGS <<< "$SCALE"
for cfg in "${CFGS[@]}" "${OVERLAP_ROW-${CFGS[0]} overlap}"; do
    [ -z "$cfg" ] && continue
    read -r P B X <<< "$cfg"
    if [ "$X" = overlap ]; then export PM_DIST_OVERLAP=1; else export PM_DIST_OVERLAP=0; fi
    A=(train --device "$DEVICE" --data "$W/data" --preset "$P" --seq-len "$SEQ" --batch "$B" --steps "$STEPS" --warmup 2
       --log-every 5 --seed 1)
    if [ "$X" = overlap ]; then
        r1=${R1[$P]}  # the 1-GPU run of this preset above
    else
        timeout 200 "$BIN" "${A[@]}" --out "$W/s1_$P" > "$L/s1_$P.log" 2>&1 || log "$P 1 GPU failed: $(tail -2 "$L/s1_$P.log")"
        r1=$(rate "$W/s1_$P"); save_run "s1_$P"
        R1[$P]=$r1
    fi
    timeout 200 "${MPI[@]}" -x PM_DIST_OVERLAP "$BIN" "${A[@]}" --out "$W/s2_$P$X" > "$L/s2_$P$X.log" 2>&1 ||
        log "$P $X 2 GPU failed: $(tail -3 "$L/s2_$P$X.log")"
    r2=$(rate "$W/s2_$P$X"); save_run "s2_$P$X"
    read -r t1 st1 _ <<< "$r1"
    read -r t2 st2 c2 <<< "$r2"
    python3 -c "
t1, t2, s1, s2, c = $t1, $t2, $st1, $st2, $c2
sp = t2 / t1 if t1 else 0
print(f'$P $X  $B      {t1:>10.0f}   {t2:>10.0f}   {sp:6.3f}x  {s1:8.4f}  {s2:8.4f}   {c:9.4f}    {100*c/s2 if s2 else 0:5.1f}%')
" | tee -a "$S"
done
log "== done"
tar czf "$OUT/runs.tar.gz" -C "$W" logs
