#!/bin/bash
# session 14, call 10 (nvidia-h200-x2): 1.4b B4 per GPU on 2 GPUs, the all-gather in pieces overlapped with the next
# forward (PM_DIST_GATHER_PIECES=1, the default) against one gather waited for (=0), interleaved twice
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$PWD/.gpu/lib
BIN=$PWD/build-dist-cuda/packmamba W=/tmp/pm_ab R=$OUT
rm -rf $W; mkdir -p $W
python3 dev/dist/make_corpus.py $W/docs.jsonl 2000000
$BIN prepare --out $W/data --tokenizer tests/fixtures/tokenizer/gpt2 $W/docs.jsonl 2>&1 | tail -1
i=0
for v in 1 0 1 0; do
    i=$((i + 1))
    PM_DIST_GATHER_PIECES=$v timeout 150 mpirun --allow-run-as-root --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE \
        -x LD_LIBRARY_PATH -x PATH -x PM_DIST_GATHER_PIECES -np 2 $BIN train --device cuda --data $W/data \
        --preset 1.4b --seq-len 2048 --batch 4 --steps 8 --warmup 2 --log-every 4 --seed 1 --out $W/r$i \
        > $R/r$i.log 2>&1 || tail -3 $R/r$i.log
    python3 - "$W/r$i" "$v" <<'PY'
import json, sys, statistics
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][3:]
print(f"pieces={sys.argv[2]}  tok/s {statistics.median(x['tok_per_s'] for x in m):.0f}  step {statistics.median(x['step_s'] for x in m):.4f} s  "
      f"comm {statistics.median(x.get('comm_s', 0) for x in m):.4f} s  (steps 4..{len(m) + 3})")
PY
    rm -rf $W/r$i
done
