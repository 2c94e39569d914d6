#!/bin/bash
# Forty-fourth session: carried state with data parallelism, on one GPU: the model now adds the carried rows'
# conv-gradient parts inside each layer's backward (before dist's overlap hook), which flushes the CUDA backend's held
# reductions there; and eval --carry-state keeps the scan states where rows go on, so its state out walks on from
# the last checkpoint. The CUDA op tests; eval --carry-state against unbroken documents (carry_eval); train
# --carry-state at 130m T=512 B8 (call339: 13.50 ms, plain 12.35) and plain; a tiny --carry-state run of 20 steps
# against 10 steps resumed to 20 (losses bit for bit, --deterministic).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
op_tests  # (as run, its lines were in place here; common.sh has them since call345)
carry_eval
for c in "" "--carry-state"; do
  rm -rf /tmp/t; timeout 200 .gpu/bin/packmamba train --device cuda --data /tmp/c/data --out /tmp/t --preset 130m --seq-len 512 --batch 8 --steps 40 --log-every 0 $c >/dev/null 2>&1 || echo "train $c failed"
  python3 -c "
import json,sys
r=[json.loads(l) for l in open('/tmp/t/metrics.jsonl')][10:39]
print('130m T512 B8 %-14s median step %.2f ms' % (sys.argv[1] or 'plain', sorted(x['step_s'] for x in r)[len(r)//2]*1e3))" "$c"
done
carry_resume  # (as run, these lines were in place here; common.sh has them since call345)
