#!/bin/bash
# Forty-third session: carried state (--carry-state) on the GPU. The CUDA op tests (the carry ops against the CPU
# among them); then a tiny corpus of generated documents, some longer than T = 64: eval --carry-state at T = 64
# against eval at T = 1024 (documents whole), per document, on the GPU and on the CPU; and train --carry-state on the
# GPU at 130m T = 512 B8 against the same without it: median step over steps 11-39 (the carry ops' cost when most
# rows carry: the corpus's documents run to ~9000 tokens). (The first try of this call evaluated the whole documents at
# T = 4096, which still cut the longest: fixed to 16384.)
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
timeout 240 .gpu/bin/test_cuda_ops 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests? (run|skipped)|carry" | tail -12
carry_eval  # (the lines it ran here, moved to common.sh in the forty-fourth session unchanged)
# a real mix: the tiny corpus above is too small for 130m rows of 2048; use it anyway at T=512 B8 for speed
for c in "" "--carry-state"; do
  rm -rf /tmp/t; timeout 200 .gpu/bin/packmamba train --device cuda --data /tmp/c/data --out /tmp/t --preset 130m --seq-len 512 --batch 8 --steps 40 --log-every 0 $c >/dev/null 2>&1 || echo "train $c failed"
  python3 -c "
import json,sys
r=[json.loads(l) for l in open('/tmp/t/metrics.jsonl')][10:39]
print('130m T512 B8 %-14s median step %.2f ms, fill %.3f' % (sys.argv[1] or 'plain', sorted(x['step_s'] for x in r)[len(r)//2]*1e3, sum(x['fill'] for x in r)/len(r)))" "$c"
done
