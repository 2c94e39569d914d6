#!/bin/bash
# Forty-fourth session: carried state with data parallelism on 2 H200 (kind nvidia-h200-x2, NCCL): 2 ranks x
# --batch 2 --carry-state against 1 GPU x --batch 4 --carry-state (the same global batch), --deterministic, 130m at
# T=512, 20 steps, on call336's generated corpus (documents to ~9,000 tokens: most rows carry); the same without
# carrying for contrast; and a run checkpointed by 2 ranks at step 10, resumed by 1 GPU up to 20.
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --allow-run-as-root --bind-to none --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS -x LD_LIBRARY_PATH -x PATH -np 2"
nvidia-smi -L
carry_eval >/dev/null  # (its corpus: /tmp/c/data)
P=$PWD/.gpu/bin/packmamba
A="--device cuda --data /tmp/c/data --preset 130m --seq-len 512 --log-every 0 --deterministic --lr 6e-4"
cmp_runs() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a = [json.loads(l)['loss'] for l in open(sys.argv[1] + '/metrics.jsonl')]
b = [json.loads(l)['loss'] for l in open(sys.argv[2] + '/metrics.jsonl')]
n = min(len(a), len(b)); rel = max(abs(a[i] - b[i]) / abs(a[i]) for i in range(n))
print('%s: steps %d vs %d, bit-identical %d, max relative difference %.3e, step %d loss %.6f vs %.6f'
      % (sys.argv[3], len(a), len(b), sum(a[i] == b[i] for i in range(n)), rel, n, a[n - 1], b[n - 1]))
PY
}
rm -rf /tmp/d && mkdir -p /tmp/d
for c in "--carry-state" ""; do
  k=${c:+carry}; k=${k:-plain}
  timeout 200 $P train $A $c --batch 4 --steps 20 --out /tmp/d/one_$k > /tmp/d/one_$k.log 2>&1 || { echo "1 GPU $k failed"; tail -3 /tmp/d/one_$k.log; }
  timeout 200 $MPI $P train $A $c --batch 2 --steps 20 --out /tmp/d/two_$k > /tmp/d/two_$k.log 2>&1 || { echo "2 GPUs $k failed"; tail -5 /tmp/d/two_$k.log; }
  cmp_runs /tmp/d/one_$k /tmp/d/two_$k "$k: 1 GPU x B4 vs 2 GPUs x B2"
done
cmp_runs /tmp/d/one_carry /tmp/d/one_plain "1 GPU: carried vs not (must differ)"
timeout 200 $MPI $P train $A --carry-state --batch 2 --steps 10 --out /tmp/d/res > /tmp/d/res.log 2>&1 || { echo "2 GPUs to step 10 failed"; tail -5 /tmp/d/res.log; }
timeout 200 $P train $A --carry-state --batch 4 --steps 20 --resume --out /tmp/d/res >> /tmp/d/res.log 2>&1 || { echo "resume on 1 GPU failed"; tail -3 /tmp/d/res.log; }
cmp_runs /tmp/d/one_carry /tmp/d/res "carry: 1 GPU x B4 vs 2 GPUs to step 10, then 1 GPU"
cp /tmp/d/*.log "$OUT/" 2>/dev/null
