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
mkdir -p /tmp/c && cd /tmp/c
python3 - <<'PY'
import os, random
random.seed(5)
os.makedirs('corpus', exist_ok=True)
w = "the cat a dog river sees follows paints the hill long road window market stone".split()
for i in range(60):
    n = random.choice([5, 20, 60, 200, 700, 2500, 9000])
    open('corpus/d%02d.txt' % i, 'w').write(' '.join(random.choice(w) for _ in range(n // 4 + 1)) + '\n')
PY
P=$OLDPWD/.gpu/bin/packmamba
$P prepare --out data corpus >/dev/null 2>&1 || echo "prepare failed"
$P train --data data --out base --preset tiny --seq-len 64 --batch 2 --steps 30 --log-every 0 >/dev/null 2>&1 || echo "train failed"
for dev in cuda cpu; do
  $P eval --checkpoint base --data data --seq-len 16384 --batch 1 --per-doc --json --device $dev > whole_$dev.json 2>/dev/null || echo "eval whole $dev failed"
  $P eval --checkpoint base --data data --seq-len 64 --batch 4 --per-doc --json --carry-state --device $dev > carry_$dev.json 2>carry_$dev.err || { echo "eval carry $dev failed"; tail -2 carry_$dev.err; }
  $P eval --checkpoint base --data data --seq-len 64 --batch 4 --per-doc --json --device $dev > cut_$dev.json 2>/dev/null
done
python3 - <<'PY'
import json
def load(f):
    j = json.load(open(f)); return j['mean_loss'], {d['doc']: (d['tokens'], d['loss']) for d in j['per_doc']}
for dev in ['cuda', 'cpu']:
    mw, w = load('whole_%s.json' % dev); mc, c = load('carry_%s.json' % dev); mx, x = load('cut_%s.json' % dev)
    worst = max(abs(c[k][1] - w[k][1]) / w[k][1] for k in w); same_tokens = all(c[k][0] == w[k][0] for k in w)
    apart = max(abs(x[k][1] - w[k][1]) / w[k][1] for k in w)
    print('%s: mean whole %.6f carried %.6f restarted %.6f; per doc carried vs whole worst %.2e (tokens equal %s), restarted %.2e' % (dev, mw, mc, mx, worst, same_tokens, apart))
PY
cd $OLDPWD
# a real mix: the tiny corpus above is too small for 130m rows of 2048; use it anyway at T=512 B8 for speed
for c in "" "--carry-state"; do
  rm -rf /tmp/t; timeout 200 .gpu/bin/packmamba train --device cuda --data /tmp/c/data --out /tmp/t --preset 130m --seq-len 512 --batch 8 --steps 40 --log-every 0 $c >/dev/null 2>&1 || echo "train $c failed"
  python3 -c "
import json,sys
r=[json.loads(l) for l in open('/tmp/t/metrics.jsonl')][10:39]
print('130m T512 B8 %-14s median step %.2f ms, fill %.3f' % (sys.argv[1] or 'plain', sorted(x['step_s'] for x in r)[len(r)//2]*1e3, sum(x['fill'] for x in r)/len(r)))" "$c"
done
