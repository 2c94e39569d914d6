"""interop.py — checkpoints between packmamba and the PyTorch world, in both directions (issue 6, "Interoperability").

Subcommands (CPU float64 throughout; needs only torch, uses the `safetensors` package when present):

  make-fixture OUT_DIR
      Writes OUT_DIR/mamba_ssm_bf16/ — a checkpoint laid out the way the official tools leave one: model.safetensors
      with the reference tensor names in mamba_ssm's state_dict order, lm_head.weight written out although tied,
      every tensor in bf16 (a model cast with .to(torch.bfloat16) before saving), and config.json as mamba_ssm's
      save_pretrained writes MambaConfig (all twelve keys, ssm_cfg {}, indent 4) — and OUT_DIR/expected.json: the
      token sequences and, per sequence, the float64 reference's mean next-token loss (each sequence run alone).
      Committed as tests/fixtures/interop/ and checked by tests/test_interop.c.

  eval-ours CKPT_DIR --docs FILE
      Loads a checkpoint directory (ours, or one in the mamba_ssm layout) with mamba_ref.load_checkpoint in float64
      and prints one JSON object: {"per_doc": [{"doc", "tokens", "loss"}], "mean_loss", "tokens", "documents"}
      where doc i is FILE's i-th token list run alone, tokens the number of next-token targets (length - 1) and loss
      their mean cross-entropy over all vocab_pad logits — the fields `packmamba eval --per-doc --json` prints.
      FILE is JSON: {"docs": [[id, ...], ...]} or a bare list of lists.

  export-mamba-ssm SRC_DIR DST_DIR [--dtype f32|bf16|f16] [--bin]
      Our checkpoint -> the mamba_ssm layout (adds lm_head.weight and the full MambaConfig); --bin also writes
      pytorch_model.bin, the file MambaLMHeadModel.from_pretrained reads.

  import-mamba-ssm SRC_DIR DST_DIR
      A mamba_ssm checkpoint directory (pytorch_model.bin or model.safetensors, plus config.json) -> a directory
      `packmamba` loads (model.safetensors, dtype kept, + the same config.json).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mamba_ref as mr  # noqa: E402

FIXTURE_SEED = 20261130
FIXTURE_DOC_LENS = [17, 5, 11, 2, 24, 9]  # varied lengths, a two-token document, none longer than a test row
# dt_proj.bias from step sizes in 1e-3..1 instead of DESIGN's 1e-3..0.1, so that the scan carries a visible share
# of each layer's output (as make_fixture.py does).
FIXTURE_DT_RANGE = (1e-3, 1.0)
# norm_f.weight is drawn around 15 instead of 1: with DESIGN's init (embedding std 0.02, tied head) every logit is
# within ~0.1 of the others, every loss sits at ln(vocab_pad) and a comparison of losses says little. Scaling the
# final norm (not the embedding, which would drown the layers' contributions in the residual stream) gives logits
# of a few units, as a trained model's, while the mixers still carry most of the residual stream.
FIXTURE_NORM_F_SCALE = 15.0

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}


def fail(msg):
    print(f"interop.py: {msg}", file=sys.stderr)
    sys.exit(1)


# ---- the mamba_ssm layout ----

def mamba_ssm_config(cfg):
    """config.json as mamba_ssm writes it: json.dump(MambaConfig.__dict__). ssm_cfg is {} when every Mamba block
    argument is at its default (d_state 16, d_conv 4, expand 2, dt_rank "auto"), as in the published checkpoints."""
    ssm = {}
    if cfg.d_state != 16:
        ssm["d_state"] = cfg.d_state
    if cfg.d_conv != 4:
        ssm["d_conv"] = cfg.d_conv
    if cfg.expand != 2:
        ssm["expand"] = cfg.expand
    if cfg.dt_rank != math.ceil(cfg.d_model / 16):
        ssm["dt_rank"] = cfg.dt_rank
    return {"d_model": cfg.d_model, "d_intermediate": 0, "n_layer": cfg.n_layer, "vocab_size": cfg.vocab_size,
            "ssm_cfg": ssm, "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True,
            "fused_add_norm": True, "pad_vocab_size_multiple": cfg.pad_vocab_multiple, "tie_embeddings": True}


def check_supported(j, path):
    """The reference model is plain Mamba-1 with RMSNorm and a tied head: refuse configs that describe more."""
    if j.get("d_intermediate", 0) != 0:
        fail(f"{path}: d_intermediate {j['d_intermediate']}: MLP blocks are not supported")
    if j.get("attn_layer_idx", []):
        fail(f"{path}: attn_layer_idx {j['attn_layer_idx']}: attention layers are not supported")
    if not j.get("rms_norm", True):
        fail(f"{path}: rms_norm false (LayerNorm) is not supported")
    if not j.get("tie_embeddings", True):
        fail(f"{path}: tie_embeddings false is not supported")
    if (j.get("ssm_cfg") or {}).get("layer", "Mamba1") != "Mamba1":
        fail(f"{path}: ssm_cfg.layer {j['ssm_cfg']['layer']}: only Mamba1 is supported")


def mamba_ssm_state_dict(model, dtype):
    """{name: tensor} in the order MambaLMHeadModel.state_dict() lists them (per block: mixer.in_proj, conv1d,
    x_proj, dt_proj, A_log, D, out_proj, then norm; lm_head last) — deliberately not the engine's flat order, so
    a loader that relies on the order rather than the names shows up. lm_head.weight is its own copy of the
    embedding, as torch.save writes a tied state_dict."""
    p = dict(model.named_parameters())
    order = ["backbone.embedding.weight"]
    for i in range(model.cfg.n_layer):
        b = f"backbone.layers.{i}."
        order += [b + "mixer." + s for s in ("in_proj.weight", "conv1d.weight", "conv1d.bias", "x_proj.weight",
                                             "dt_proj.weight", "dt_proj.bias", "A_log", "D", "out_proj.weight")]
        order.append(b + "norm.weight")
    order.append("backbone.norm_f.weight")
    assert sorted(order) == sorted(p), "mamba_ref parameter names changed"
    out = {n: p[n].detach().to(dtype).clone() for n in order}
    out["lm_head.weight"] = out["backbone.embedding.weight"].clone()
    return out


def write_json(path, obj, indent):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
    os.replace(tmp, path)


def save_mamba_ssm(ckpt_dir, model, dtype, write_bin=False):
    os.makedirs(ckpt_dir, exist_ok=True)
    sd = mamba_ssm_state_dict(model, dtype)
    mr.st_save(sd, os.path.join(ckpt_dir, "model.safetensors"), metadata={"format": "pt"})
    if write_bin:
        torch.save(sd, os.path.join(ckpt_dir, "pytorch_model.bin"))
    write_json(os.path.join(ckpt_dir, "config.json"), mamba_ssm_config(model.cfg), indent=4)


def load_any(ckpt_dir):
    """A float64 MambaLM from <dir>: config.json plus model.safetensors (ours or mamba_ssm's) or pytorch_model.bin."""
    cpath = os.path.join(ckpt_dir, "config.json")
    try:
        with open(cpath) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{cpath}: {e}")
    check_supported(j, cpath)
    if os.path.exists(os.path.join(ckpt_dir, "model.safetensors")):
        return mr.load_checkpoint(ckpt_dir, dtype=torch.float64)
    bpath = os.path.join(ckpt_dir, "pytorch_model.bin")
    if not os.path.exists(bpath):
        fail(f"{ckpt_dir}: neither model.safetensors nor pytorch_model.bin")
    model = mr.MambaLM(mr.Config.from_json(j)).double()
    model.load_tensors(torch.load(bpath, map_location="cpu"))
    return model


# ---- evaluation ----

def doc_losses(model, docs):
    """Each token list run alone (B 1): the mean cross-entropy of its len-1 next-token targets, in float64."""
    out = []
    with torch.no_grad():
        for i, d in enumerate(docs):
            n = len(d) - 1
            if n < 1:
                out.append({"doc": i, "tokens": 0, "loss": None})
                continue
            tok = torch.tensor([d], dtype=torch.long)  # (1, L)
            pos = torch.arange(len(d)).unsqueeze(0)  # (1, L)
            tgt = torch.tensor([d[1:] + [mr.IGNORE]], dtype=torch.long)  # (1, L)
            loss = model.loss(model(tok, pos), tgt).item()
            out.append({"doc": i, "tokens": n, "loss": loss})
    return out


def summary(per_doc):
    n = sum(r["tokens"] for r in per_doc)
    s = sum(r["loss"] * r["tokens"] for r in per_doc if r["tokens"])
    return {"mean_loss": s / n if n else None, "tokens": n, "documents": sum(1 for r in per_doc if r["tokens"]),
            "per_doc": per_doc}


def read_docs(path, vocab_size):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    docs = j["docs"] if isinstance(j, dict) and "docs" in j else j
    if not isinstance(docs, list) or not all(isinstance(d, list) for d in docs):
        fail(f"{path}: expected {{\"docs\": [[token ids], ...]}} or a list of token id lists")
    for i, d in enumerate(docs):
        for t in d:
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab_size:
                fail(f"{path}: document {i}: token {t!r} is not an id in [0, {vocab_size})")
    return docs


# ---- subcommands ----

def cmd_make_fixture(a):
    gen = torch.Generator().manual_seed(FIXTURE_SEED)
    cfg = mr.Config(d_model=32, n_layer=2, vocab_size=257)  # mamba_ssm defaults: N 16, K 4, expand 2, dt_rank 2
    model = mr.MambaLM(cfg).double()
    mr.init_params(model, gen, perturb=True, dt_range=FIXTURE_DT_RANGE)
    with torch.no_grad():
        model.backbone.norm_f.weight.mul_(FIXTURE_NORM_F_SCALE)
    ckpt = os.path.join(a.out_dir, "mamba_ssm_bf16")
    save_mamba_ssm(ckpt, model, torch.bfloat16)

    docs = [torch.randint(0, cfg.vocab_size, (n,), generator=gen).tolist() for n in FIXTURE_DOC_LENS]
    docs[0][4], docs[4][7] = cfg.vocab_size - 1, 0  # the smallest and the largest id occur
    # The truth is computed from what was written (the bf16 values, upcast exactly), read back through the same
    # loader that eval-ours uses.
    back = load_any(ckpt)
    per_doc = doc_losses(back, docs)
    # How much the bf16 rounding alone moves the losses: the fixture is only useful if the C side must use the
    # bf16 values, not "close to them" (the test's tolerance is 1e-5).
    full = doc_losses(model, docs)
    shift = max(abs(p["loss"] - q["loss"]) / abs(q["loss"]) for p, q in zip(per_doc, full))
    # How much the layers matter: the losses with every mixer's output projection zeroed.
    with torch.no_grad():
        for layer in back.backbone.layers:
            layer.mixer.out_proj.weight.zero_()
    bare = doc_losses(back, docs)
    mixers = max(abs(p["loss"] - q["loss"]) / abs(p["loss"]) for p, q in zip(per_doc, bare))
    exp = {"checkpoint": "mamba_ssm_bf16", "seed": FIXTURE_SEED, "torch_version": torch.__version__,
           "docs": docs, **summary(per_doc)}
    write_json(os.path.join(a.out_dir, "expected.json"), exp, indent=1)
    for r in per_doc:
        print(f"doc {r['doc']}: {r['tokens'] + 1:3d} tokens  loss {r['loss']:.12f}")
    print(f"mean loss {exp['mean_loss']:.12f} (ln 264 = {math.log(264):.6f}); bf16 rounding of the weights moves "
          f"the per-document losses by up to {shift:.1e} relative")
    print(f"without the mixers (out_proj zeroed) the losses change by up to {mixers:.1e} relative")
    print(f"wrote {ckpt}/{{model.safetensors,config.json}} and {a.out_dir}/expected.json")


def cmd_eval_ours(a):
    model = load_any(a.ckpt_dir)
    docs = read_docs(a.docs, model.cfg.vocab_size)
    print(json.dumps(summary(doc_losses(model, docs))))


def cmd_export(a):
    model = mr.load_checkpoint(a.src_dir, dtype=torch.float64)
    save_mamba_ssm(a.dst_dir, model, _DTYPES[a.dtype], write_bin=a.bin)
    print(f"wrote {a.dst_dir} (mamba_ssm layout, {a.dtype})")


def cmd_import(a):
    model = load_any(a.src_dir)  # validates names, shapes and the tied head
    with open(os.path.join(a.src_dir, "config.json")) as f:
        j = json.load(f)
    src = os.path.join(a.src_dir, "model.safetensors")
    tensors = mr.st_load(src)[0] if os.path.exists(src) else \
        torch.load(os.path.join(a.src_dir, "pytorch_model.bin"), map_location="cpu")
    del model
    os.makedirs(a.dst_dir, exist_ok=True)
    mr.st_save({k: v.contiguous().clone() for k, v in tensors.items()}, os.path.join(a.dst_dir, "model.safetensors"),
               metadata={"format": "pt"})
    write_json(os.path.join(a.dst_dir, "config.json"), j, indent=4)
    print(f"wrote {a.dst_dir} (model.safetensors + config.json)")


def main():
    ap = argparse.ArgumentParser(description="checkpoint interoperability with the PyTorch reference / mamba_ssm")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-fixture", help="write the mamba_ssm-layout bf16 fixture and its float64 losses")
    p.add_argument("out_dir")
    p.set_defaults(fn=cmd_make_fixture)
    p = sub.add_parser("eval-ours", help="per-document losses of a checkpoint, as JSON")
    p.add_argument("ckpt_dir")
    p.add_argument("--docs", required=True, help="JSON file: {\"docs\": [[ids], ...]}")
    p.set_defaults(fn=cmd_eval_ours)
    p = sub.add_parser("export-mamba-ssm", help="our checkpoint -> mamba_ssm layout")
    p.add_argument("src_dir")
    p.add_argument("dst_dir")
    p.add_argument("--dtype", choices=sorted(_DTYPES), default="f32")
    p.add_argument("--bin", action="store_true", help="also write pytorch_model.bin")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("import-mamba-ssm", help="mamba_ssm checkpoint -> a directory packmamba loads")
    p.add_argument("src_dir")
    p.add_argument("dst_dir")
    p.set_defaults(fn=cmd_import)
    a = ap.parse_args()
    try:
        a.fn(a)
    except ValueError as e:  # mamba_ref's load errors (unknown tensor, wrong shape, untied head)
        fail(str(e))


if __name__ == "__main__":
    main()
