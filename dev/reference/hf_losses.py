"""hf_losses.py — per-document losses of a checkpoint directory as Hugging Face transformers computes them.

  python3 dev/reference/hf_losses.py CKPT_DIR DOCS_JSON

Loads CKPT_DIR with MambaForCausalLM.from_pretrained (transformers' own Mamba, its pure-PyTorch path on the CPU, in
float64) and prints one JSON object {"per_doc": [loss or null, ...]}: for each token list of DOCS_JSON ({"docs":
[[id, ...], ...]} or a bare list), run alone, the mean cross-entropy of its next-token targets over all vocab_size
logits. Used to check `packmamba export` against an implementation that is not ours (dev/calls/call330.sh).
"""
import json
import sys

import torch
from transformers import MambaForCausalLM


def losses(model, docs):
    """Each token list run alone: the mean cross-entropy of its next-token targets (None for fewer than 2 tokens)."""
    out = []
    with torch.no_grad():
        for d in docs:
            if len(d) < 2:
                out.append(None)
                continue
            logits = model(input_ids=torch.tensor([d])).logits[0].double()  # (L, V)
            out.append(torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(d[1:])).item())
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hf_losses.py CKPT_DIR DOCS_JSON")
    model = MambaForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float64).eval()
    with open(sys.argv[2]) as f:
        j = json.load(f)
    print(json.dumps({"per_doc": losses(model, j["docs"] if isinstance(j, dict) else j)}))


if __name__ == "__main__":
    main()
