"""make_bin_fixture.py — PyTorch `pytorch_model.bin` checkpoints (torch.save's zip format), for tests/test_bin.c.

The official checkpoints (state-spaces/mamba-130m ... 2.8b, and transformers' older saves) are torch.save files,
not safetensors. This writes, with torch itself, the weights of the two committed safetensors fixtures as .bin
files, so the test can require that both formats load to the same bits:

  mamba_ssm_bf16/  tests/fixtures/interop/mamba_ssm_bf16's state dict, bf16, lm_head.weight tied to (sharing the
                   storage of) backbone.embedding.weight, as MambaLMHeadModel.state_dict() gives it
  mamba_ssm_f32/   the same in float32, with in_proj.weight of layer 1 saved as a transposed view (strides (1, 64)):
                   a reader must follow the strides, not assume a contiguous layout
  hf_f32/          tests/fixtures/hf/hf_f32 as transformers loads it: torch.save(model.state_dict()), an
                   OrderedDict carrying _metadata, lm_head.weight sharing the embedding's storage
  hf_sharded/      the same state dict over three torch.save files named by pytorch_model.bin.index.json, as
                   transformers' save_pretrained(safe_serialization=False) wrote them before version 5
  legacy.bin       the pre-1.6 (non-zip) format, which the reader refuses by name

Each directory gets the config.json of its source. Run where torch and transformers are installed (the GPU machine):
    python3 dev/reference/make_bin_fixture.py OUT_DIR
"""
import json
import os
import shutil
import sys

from collections import OrderedDict

import torch
from safetensors.torch import load_file

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")


def tied(sd, head="lm_head.weight", emb="backbone.embedding.weight"):
    sd = dict(sd)
    sd[head] = sd[emb]  # the same tensor object: torch.save writes one storage for both
    return sd


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bin_fixture.py OUT_DIR")
    out = sys.argv[1]
    src = os.path.join(FIX, "interop", "mamba_ssm_bf16")
    sd = load_file(os.path.join(src, "model.safetensors"))
    sd = {k: v for k, v in sd.items() if k != "lm_head.weight"}

    d = os.path.join(out, "mamba_ssm_bf16")
    os.makedirs(d)
    torch.save(tied(sd), os.path.join(d, "pytorch_model.bin"))
    shutil.copy(os.path.join(src, "config.json"), d)

    d = os.path.join(out, "mamba_ssm_f32")
    os.makedirs(d)
    f32 = {k: v.float() for k, v in sd.items()}
    w = f32["backbone.layers.1.mixer.in_proj.weight"]
    f32["backbone.layers.1.mixer.in_proj.weight"] = w.t().contiguous().t()  # same values, strides (1, rows)
    assert f32["backbone.layers.1.mixer.in_proj.weight"].stride() == (1, w.shape[0])
    torch.save(tied(f32), os.path.join(d, "pytorch_model.bin"))
    shutil.copy(os.path.join(src, "config.json"), d)

    torch.save(tied(sd), os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)

    from transformers import MambaForCausalLM
    hf = os.path.join(FIX, "hf", "hf_f32")
    sd = MambaForCausalLM.from_pretrained(hf).state_dict()  # an OrderedDict with _metadata; lm_head tied
    d = os.path.join(out, "hf_f32")
    os.makedirs(d)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    shutil.copy(os.path.join(hf, "config.json"), d)
    # transformers 5 writes safetensors only; its older save_pretrained(safe_serialization=False) split a state
    # dict over pytorch_model-0000i-of-0000n.bin files named by pytorch_model.bin.index.json, written here alike.
    d = os.path.join(out, "hf_sharded")
    os.makedirs(d)
    names = [k for k in sd if k != "lm_head.weight"]
    parts = [names[i::3] for i in range(3)]
    weight_map = {}
    for i, part in enumerate(parts):
        f = f"pytorch_model-{i + 1:05d}-of-00003.bin"
        torch.save(OrderedDict((k, sd[k]) for k in part), os.path.join(d, f))
        weight_map.update({k: f for k in part})
    with open(os.path.join(d, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(sd[k].numel() * 4 for k in names)},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    shutil.copy(os.path.join(hf, "config.json"), d)
    for root, _, files in os.walk(out):
        for f in sorted(files):
            p = os.path.join(root, f)
            print(f"{os.path.relpath(p, out)}: {os.path.getsize(p)} bytes")


if __name__ == "__main__":
    main()
