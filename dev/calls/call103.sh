#!/bin/bash
# session 15, call 4 (nvidia-h200-x2): the overlapped gradient buckets on their own NCCL communicator held to
# PM_NCCL_OVERLAP_CTAS CTAs (0: the one communicator, as before). Bits: 2 ranks, 130m T=1024, --deterministic,
# 10 steps, CTAS=4 against 0 (losses bit for bit). Speed: 1.4b B4 and 370m B8 per GPU, packed, 2 ranks, several
# CTA limits and the overlap off (PM_DIST_OVERLAP=0)
# (the CTA limit was a change to src/dist.c measured here and not kept: docs/dist.md, fifteenth session)
source dev/dist/ab_lib.sh
ab_setup
MPI="mpirun --allow-run-as-root --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH -x PM_NCCL_OVERLAP_CTAS -np 2"
BIN=$AB_BIN W=$AB_W R=$OUT
for c in 4 0; do
    PM_NCCL_OVERLAP_CTAS=$c timeout 120 $MPI $BIN train --device cuda --data $W/data --preset 130m --seq-len 1024 --batch 2 \
        --steps 10 --deterministic --lr 6e-4 --log-every 1 --seed 1 --out $W/bits$c > $R/bits$c.log 2>&1 || tail -3 $R/bits$c.log
done
python3 - $W/bits4 $W/bits0 <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:3])
print(f"bits: {len(a)} and {len(b)} steps, {sum(x == y for x, y in zip(a, b))} losses bit-identical (CTAS=4 vs 0)")
PY
ab_run 1.4b_c0 1.4b 4 PM_NCCL_OVERLAP_CTAS=0
ab_run 1.4b_c2 1.4b 4 PM_NCCL_OVERLAP_CTAS=2
ab_run 1.4b_c4 1.4b 4 PM_NCCL_OVERLAP_CTAS=4
ab_run 1.4b_c8 1.4b 4 PM_NCCL_OVERLAP_CTAS=8
ab_run 1.4b_ov0 1.4b 4 PM_DIST_OVERLAP=0
ab_run 1.4b_c4b 1.4b 4 PM_NCCL_OVERLAP_CTAS=4
ab_run 370m_c0 370m 8 PM_NCCL_OVERLAP_CTAS=0
ab_run 370m_c4 370m 8 PM_NCCL_OVERLAP_CTAS=4
ab_run 370m_ov0 370m 8 PM_DIST_OVERLAP=0
