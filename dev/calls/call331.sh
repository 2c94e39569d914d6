#!/bin/bash
# Forty-second session, second call: transformers' layout on the GPU, and at the 130m size against transformers.
# Carry .gpu/bin .gpu/lib .gpu/bytedata .gpu/gdata .gpu/g3 (built and prepared on the development machine: build/'s
# packmamba with its libraries as dev/gpu.sh pack copies them; bytedata and gdata are README.md and docs/*.md with
# the byte and GPT-2 tokenizers; g3 three one-sentence JSONL documents with GPT-2, --val-fraction 0).
# 1. eval of both tests/fixtures/hf checkpoints (vocab 260: no padding, the CUDA classifier's other paths) on the
#    CPU and on the GPU; 2. train --device cuda --init-from hf_sharded, then generate on the GPU from the run;
# 3. a 130m model trained 20 steps on the GPU, exported f32 and bf16; transformers' per-document losses of the
#    exports (float64, CPU) against ours of the same weights (eval --per-doc on the CPU in fp32, and on the GPU).
. dev/calls/common.sh
pm_gpu_env
B=.gpu/bin/packmamba
PY=python3
for p in /opt/torch/.venv/bin/python3 python3; do $p -c 'import transformers' 2>/dev/null && PY=$p && break; done
for d in hf_f32 hf_sharded; do
    for dev in cpu cuda; do
        echo "$d $dev: $($B eval --checkpoint tests/fixtures/hf/$d --data .gpu/bytedata --split val --device $dev \
            --seq-len 256 --batch 4 2>&1 | tail -1)"
    done
done
rm -rf /tmp/ft
$B train --device cuda --data .gpu/bytedata --init-from tests/fixtures/hf/hf_sharded --out /tmp/ft --seq-len 256 \
    --batch 8 --steps 60 --lr 3e-3 --log-every 20 2>&1 | tail -5
$B generate --device cuda --checkpoint /tmp/ft --prompt "The kernel " --tokens 60 --temperature 0 2>&1 | tail -2

rm -rf /tmp/r130 /tmp/x32 /tmp/x16
$B train --device cuda --data .gpu/gdata --preset 130m --out /tmp/r130 --seq-len 256 --batch 4 --steps 20 \
    --log-every 10 2>&1 | tail -3
$B export --checkpoint /tmp/r130 --out /tmp/x32 && $B export --checkpoint /tmp/r130 --out /tmp/x16 --dtype bf16
ls -la /tmp/x32 /tmp/x16
$PY - "$B" <<'PY' > /tmp/docs.json
import json, subprocess, sys
docs = []
for line in open(".gpu/g3/docs.jsonl"):
    ids = subprocess.run([sys.argv[1], "tokenize", "--tokenizer", ".gpu/g3/tokenizer.json", json.loads(line)["text"]],
                         capture_output=True, text=True, check=True).stdout.split()
    docs.append([int(i) for i in ids] + [50256])  # our documents end with the end-of-document token
print(json.dumps({"docs": docs}))
PY
cat /tmp/docs.json
for x in x32 x16; do
    src=/tmp/r130; [ $x = x16 ] && src=/tmp/x16
    $PY dev/reference/hf_losses.py /tmp/$x /tmp/docs.json >/tmp/hf_$x.json 2>/tmp/hf_$x.err || tail -3 /tmp/hf_$x.err
    for dev in cpu cuda; do
        $B eval --checkpoint $src --data .gpu/g3 --split all --packing pack --seq-len 64 --batch 1 --device $dev \
            --per-doc --json >/tmp/ours_${x}_$dev.json 2>/dev/null
        $PY - /tmp/hf_$x.json /tmp/ours_${x}_$dev.json "$x ($src) $dev" <<'PY'
import json, sys
hf = json.load(open(sys.argv[1]))["per_doc"]
ours = [r["loss"] for r in sorted(json.load(open(sys.argv[2]))["per_doc"], key=lambda r: r["doc"])]
err = max(abs(a - b) / abs(b) for a, b in zip(ours, hf))
print(f"{sys.argv[3]}: transformers {['%.6f' % v for v in hf]} ours {['%.6f' % v for v in ours]} max rel diff {err:.2e}")
PY
    done
done
