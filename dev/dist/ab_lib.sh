#!/bin/bash
# dev/dist/ab_lib.sh — sourced by A/B calls on the 2-GPU machine (kind nvidia-h200-x2; carry build-dist-cuda/packmamba
# and .gpu/lib): ab_setup prepares a GPT-2-tokenized synthetic corpus; ab_run NAME PRESET BATCH [VAR=VALUE ...] trains
# it packed at T=2048 on $AB_NP ranks (default 2) for $AB_STEPS steps (default 8) with the assignments in its
# environment (forwarded to the ranks) and prints the median tok/s, step time and rank 0's time in collectives
# over steps 4 on. Logs go to $OUT/NAME.log.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # (KINDS.md: no NVLink multicast)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$PWD/.gpu/lib
AB_BIN=$PWD/build-dist-cuda/packmamba AB_W=/tmp/pm_ab
ab_setup() {
    rm -rf $AB_W; mkdir -p $AB_W
    python3 dev/dist/make_corpus.py $AB_W/docs.jsonl 2000000
    $AB_BIN prepare --out $AB_W/data --tokenizer tests/fixtures/tokenizer/gpt2 $AB_W/docs.jsonl 2>&1 | tail -1
}
ab_run() {
    local name=$1 preset=$2 batch=$3; shift 3
    local fwd="" kv
    for kv in "$@"; do fwd="$fwd -x ${kv%%=*}"; done
    env "$@" timeout 150 mpirun --allow-run-as-root --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE \
        -x LD_LIBRARY_PATH -x PATH $fwd -np ${AB_NP:-2} $AB_BIN train --device cuda --data $AB_W/data \
        --preset $preset --seq-len 2048 --batch $batch --steps ${AB_STEPS:-8} --warmup 2 --log-every 4 --seed 1 \
        --out $AB_W/$name > $OUT/$name.log 2>&1 || tail -3 $OUT/$name.log
    python3 - "$AB_W/$name" "$name" <<'PY'
import json, sys, statistics
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][3:]
print(f"{sys.argv[2]:<14} tok/s {statistics.median(x['tok_per_s'] for x in m):.0f}  step {statistics.median(x['step_s'] for x in m):.4f} s  "
      f"comm {statistics.median(x.get('comm_s', 0) for x in m):.4f} s  (steps 4..{len(m) + 3})")
PY
    rm -rf $AB_W/$name
}
