#!/bin/bash
# Forty-second session: `packmamba export --layout mamba_ssm` read by torch 2.11's torch.load with its default
# weights_only=True (the restricted unpickler of torch >= 2.6, which mamba_ssm's from_pretrained goes through),
# on the GPU machine's CPU. Its input, made on the development machine (not committed):
#   packmamba export --checkpoint tests/fixtures/interop/mamba_ssm_bf16 --out dev/calls/call333_in/f32 --layout mamba_ssm
#   packmamba export --checkpoint tests/fixtures/interop/mamba_ssm_bf16 --out dev/calls/call333_in/bf16 --layout mamba_ssm --dtype bf16
# Each state dict against the fixture's safetensors (values, dtype, the tied head sharing the embedding's
# storage), then interop.py eval-ours (the float64 reference, through torch.load) against expected.json's losses.
PY=python3
for p in /opt/torch/.venv/bin/python3 python3; do $p -c 'import torch' 2>/dev/null && PY=$p && break; done
for d in f32 bf16; do
    $PY - dev/calls/call333_in/$d <<'PY'
import sys, torch
from safetensors.torch import load_file
sd = torch.load(sys.argv[1] + "/pytorch_model.bin", map_location="cpu")  # weights_only=True by default
ref = load_file("tests/fixtures/interop/mamba_ssm_bf16/model.safetensors")
same = all(torch.equal(sd[k].float(), ref[k].float()) for k in ref)
print(f"{sys.argv[1]}: torch {torch.__version__}, {len(sd)} tensors, {sd['backbone.embedding.weight'].dtype}, "
      f"values equal the fixture's: {same}, keys equal: {set(sd) == set(ref)}, tied head shares storage: "
      f"{sd['lm_head.weight'].data_ptr() == sd['backbone.embedding.weight'].data_ptr()}")
PY
    $PY dev/reference/interop.py eval-ours dev/calls/call333_in/$d --docs tests/fixtures/interop/expected.json >/tmp/e.json
    $PY - /tmp/e.json <<'PY'
import json, sys
got = [r["loss"] for r in json.load(open(sys.argv[1]))["per_doc"]]
ref = [r["loss"] for r in json.load(open("tests/fixtures/interop/expected.json"))["per_doc"]]
print("  eval-ours through torch.load: max rel diff from expected.json", max(abs(a - b) / abs(b) for a, b in zip(got, ref)))
PY
done
