"""make_hf_fixture.py — checkpoints in the Hugging Face `transformers` layout (`MambaForCausalLM`, the `*-hf` model
repositories), written and evaluated by `transformers` itself, for tests/test_interop.c.

This is a truth independent of our own reference (mamba_ref.py): the model, its saving and its losses are all
`transformers`' code (its pure-PyTorch Mamba path, on the CPU, in float64). Writes under OUT_DIR:

  hf_f32/      save_pretrained of a tiny random model in float32, one model.safetensors (lm_head left out as tied)
  hf_sharded/  the same weights cast to bf16 and saved with a small max_shard_size, so the weights are split over
               several model-0000i-of-0000n.safetensors files named by model.safetensors.index.json
  expected.json  the token sequences and, per checkpoint and sequence, transformers' mean next-token cross-entropy
               (each sequence run alone, over all vocab_size logits) of the model as from_pretrained reads it back

The vocabulary (260) is not a multiple of 8, so a loader that pads the embedding as mamba_ssm's configs ask would
see the wrong shape. dt_proj.bias comes from step sizes in 1e-3..1 and norm_f.weight is scaled by 15, as in
interop.py's fixture, so that the scan carries a visible share of the output and the losses are not all ln(V).

Run where transformers is installed (the GPU machine has it):  python3 dev/reference/make_hf_fixture.py OUT_DIR
"""
import json
import math
import os
import sys

import torch
import transformers
from transformers import MambaConfig, MambaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_losses import losses  # noqa: E402

SEED = 20261202
VOCAB = 260
DOC_LENS = [19, 6, 13, 2, 27, 8]
DT_RANGE = (1e-3, 1.0)
NORM_F_SCALE = 15.0


def init(model, gen):
    """Every parameter drawn from gen (transformers' own init is not reproducible across its versions)."""
    cfg = model.config
    d, di, n, k, r = cfg.hidden_size, cfg.intermediate_size, cfg.state_size, cfg.conv_kernel, cfg.time_step_rank

    def U(shape, a, b):
        return torch.rand(shape, generator=gen, dtype=torch.float64) * (b - a) + a

    with torch.no_grad():
        bb = model.backbone
        bb.embeddings.weight.copy_(torch.randn(VOCAB, d, generator=gen, dtype=torch.float64) * 0.02)
        for layer in bb.layers:
            mx = layer.mixer
            layer.norm.weight.copy_(U((d,), 0.8, 1.2))
            mx.A_log.copy_(torch.log(torch.arange(1, n + 1, dtype=torch.float64)).expand(di, n) + U((di, n), -0.2, 0.2))
            mx.D.copy_(U((di,), 0.5, 1.5))
            mx.in_proj.weight.copy_(U((2 * di, d), -d ** -0.5, d ** -0.5))
            mx.conv1d.weight.copy_(U((di, 1, k), -k ** -0.5, k ** -0.5))
            mx.conv1d.bias.copy_(U((di,), -k ** -0.5, k ** -0.5))
            mx.x_proj.weight.copy_(U((r + 2 * n, di), -di ** -0.5, di ** -0.5))
            mx.dt_proj.weight.copy_(U((di, r), -r ** -0.5, r ** -0.5))
            dt = torch.exp(U((di,), math.log(DT_RANGE[0]), math.log(DT_RANGE[1]))).clamp(min=1e-4)
            mx.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1
            mx.out_proj.weight.copy_(U((d, di), -di ** -0.5, di ** -0.5) / math.sqrt(cfg.num_hidden_layers))
        bb.norm_f.weight.copy_(U((d,), 0.8, 1.2) * NORM_F_SCALE)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_hf_fixture.py OUT_DIR")
    out = sys.argv[1]
    gen = torch.Generator().manual_seed(SEED)
    cfg = MambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=16, num_hidden_layers=2, expand=2, conv_kernel=4,
                      use_bias=False, use_conv_bias=True, time_step_rank="auto", residual_in_fp32=True,
                      layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    model = MambaForCausalLM(cfg).double().eval()
    init(model, gen)
    docs = [torch.randint(0, VOCAB, (n,), generator=gen).tolist() for n in DOC_LENS]
    docs[0][3], docs[4][9] = VOCAB - 1, 0  # the largest and the smallest id occur

    f32 = os.path.join(out, "hf_f32")
    model.float().save_pretrained(f32)
    shard = os.path.join(out, "hf_sharded")
    model.to(torch.bfloat16).save_pretrained(shard, max_shard_size="20KB")
    exp = {"seed": SEED, "transformers_version": transformers.__version__, "torch_version": torch.__version__,
           "docs": docs, "loss": {}}
    for name, path in (("hf_f32", f32), ("hf_sharded", shard)):
        back = MambaForCausalLM.from_pretrained(path, dtype=torch.float64).eval()
        exp["loss"][name] = losses(back, docs)
        print(name, sorted(os.listdir(path)))
        print(" ", json.dumps(exp["loss"][name]))
    # What the fixture can tell apart: bf16 rounding of the weights, and the mixers' share of the output.
    diff = max(abs(a - b) / abs(a) for a, b in zip(exp["loss"]["hf_f32"], exp["loss"]["hf_sharded"]) if a)
    back = MambaForCausalLM.from_pretrained(f32, dtype=torch.float64).eval()
    with torch.no_grad():
        for layer in back.backbone.layers:
            layer.mixer.out_proj.weight.zero_()
    bare = losses(back, docs)
    mix = max(abs(a - b) / abs(a) for a, b in zip(exp["loss"]["hf_f32"], bare) if a)
    print(f"bf16 weights move the losses by up to {diff:.1e}; without the mixers they move by up to {mix:.1e}")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
