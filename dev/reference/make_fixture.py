"""make_fixture.py — build tests/fixtures/ref_tiny.safetensors with the float64 reference (mamba_ref.py).

A tiny model (d_model 32, 2 layers, vocab 257 -> 264, N 16, K 4, expand 2, dt_rank 2) with weights drawn as DESIGN §1
says (plus small perturbations of A_log, D and the norm weights), stored as F32; one packed batch (B 2, T 24) with
several documents per row, a document cut at a row end and continued at the next row's start, a one-token document
and padding; and, computed in float64 from the F32 weights upcast:
  logits (B, T, 264) F64, loss (1,) F64, grad.<name> F64 (gradient of the mean loss), grad_norm (1,) F64 (before
  clipping), step1.<name> F64 (the parameters after clip_grad_norm_ + one torch.optim.AdamW step).
Metadata (strings): each config / hyperparameter value under its own key, plus "config_json" (config.json text).

Also prints self-checks: autograd vs a 4th-order finite difference along a random direction for every tensor, and the
packing property (every document piece run alone gives the same logits as inside the packed batch).

Usage: OUT=<dir> python3 make_fixture.py   (writes $OUT/ref_tiny.safetensors; CPU float64, a few seconds)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mamba_ref as mr  # noqa: E402

SEED = 20261129
B, T = 2, 24
# dt_proj.bias (a bias, so drawn at random) from step sizes in 1e-3..1 rather than DESIGN's 1e-3..0.1: with small
# steps the scan carries ~1% of the mixer output and a test would be nearly blind to it.
DT_RANGE = (1e-3, 1.0)
HP = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)


def make_batch(gen, vocab_size):
    """Documents (lists of token ids) laid into B rows of T; returns tokens, pos, targets (B, T) int32 and the
    pieces [(row, t0, t1)] that start a fresh document state (for the packing self-check)."""
    lens = [6, 9, 14, 8, 1, 6]  # A, B, C (cut 9 | 5 across the rows), D, E (one token), F
    docs = [torch.randint(1, vocab_size, (n,), generator=gen).tolist() for n in lens]
    docs[1][3] = vocab_size - 1  # the largest token id appears too
    # (doc index, first token of the piece, piece length) per row
    layout = [[(0, 0, 6), (1, 0, 9), (2, 0, 9)],
              [(2, 9, 5), (3, 0, 8), (4, 0, 1), (5, 0, 6)]]
    tokens = torch.zeros(B, T, dtype=torch.int32)  # padding: token 0, pos 0, target -1
    pos = torch.zeros(B, T, dtype=torch.int32)
    targets = torch.full((B, T), mr.IGNORE, dtype=torch.int32)
    pieces = []
    for r, row in enumerate(layout):
        t = 0
        for d, p0, n in row:
            pieces.append((r, t, t + n))
            for i in range(n):
                p = p0 + i
                tokens[r, t] = docs[d][p]
                pos[r, t] = p
                targets[r, t] = docs[d][p + 1] if p + 1 < len(docs[d]) else mr.IGNORE
                t += 1
        while t < T:  # each padding token is its own one-token document
            pieces.append((r, t, t + 1))
            t += 1
    return tokens, pos, targets, pieces


def main():
    out_dir = os.environ.get("OUT", ".")
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = mr.Config(d_model=32, n_layer=2, vocab_size=257, d_state=16, d_conv=4, expand=2, dt_rank=2)
    assert cfg.vocab_pad == 264 and cfg.d_inner == 64

    model = mr.MambaLM(cfg).double()
    mr.init_params(model, gen, perturb=True, dt_range=DT_RANGE)
    with torch.no_grad():  # the fixture stores F32 weights: compute from exactly those values
        for p in model.parameters():
            p.copy_(p.to(torch.float32).to(torch.float64))
    w32 = {n: p.detach().to(torch.float32).clone() for n, p in model.named_parameters()}

    tokens, pos, targets, pieces = make_batch(gen, cfg.vocab_size)
    n_valid = int((targets != mr.IGNORE).sum())

    # forward + backward of the mean loss
    logits = model(tokens, pos)
    loss = model.loss(logits, targets)
    model.zero_grad()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    print(f"loss {loss.item():.12f}  n_valid {n_valid}  ln(Vp) {torch.log(torch.tensor(264.0)).item():.6f}")

    # ---- self-check 1: autograd vs finite differences (float64), for every tensor along a random direction v
    #      (||v|| = 1): d/de loss(p + e v) by a 4th-order central stencil vs <grad, v>. The stencil's roundoff is
    #      about 1e-15 * loss / h, so tiny directional derivatives (A_log's) are judged by absolute error too. ----
    params = dict(model.named_parameters())
    dgen = torch.Generator().manual_seed(SEED + 1)
    h = 1e-4
    worst = 0.0
    with torch.no_grad():
        for name, p in params.items():
            v = torch.randn(p.shape, generator=dgen, dtype=torch.float64)
            v /= v.norm()
            old = p.clone()
            f = {}
            for k in (-2, -1, 1, 2):
                p.copy_(old + k * h * v)
                f[k] = model.loss(model(tokens, pos), targets).item()
            p.copy_(old)
            fd = (8 * (f[1] - f[-1]) - (f[2] - f[-2])) / (12 * h)
            ag = (grads[name] * v).sum().item()
            err = abs(fd - ag)
            rel = err / max(abs(fd), abs(ag), 1e-300)
            ok = rel < 1e-6 or err < 1e-10
            worst = max(worst, rel if err >= 1e-10 else 0.0)
            print(f"fd-check {name:42s} <grad,v> {ag:+.10e}  finite-diff {fd:+.10e}  abs err {err:.1e}  "
                  f"rel {rel:.1e} {'ok' if ok else 'BAD'}")
    print(f"fd-check worst relative error (where abs err >= 1e-10) {worst:.2e} ({'ok' if worst < 1e-6 else 'BAD'})")

    # ---- self-check 2: packing property, each document piece alone == inside the packed batch ----
    with torch.no_grad():
        ref = logits.detach()
        maxd = 0.0
        for r, t0, t1 in pieces:
            alone = model(tokens[r:r + 1, t0:t1], pos[r:r + 1, t0:t1])
            maxd = max(maxd, (alone[0] - ref[r, t0:t1]).abs().max().item())
        print(f"packing check: {len(pieces)} pieces, max |logit difference| alone vs packed {maxd:.2e} "
              f"({'ok' if maxd < 1e-12 else 'BAD'})")

    # ---- one AdamW step with global-norm clipping, as torch does it ----
    gnorm = torch.sqrt(sum((g * g).sum() for g in grads.values())).item()
    clip = 1.0
    while clip >= gnorm * 0.75:  # a power of two below the norm, so clipping really happens
        clip /= 2
    decay = [p for n, p in model.named_parameters() if any(n.endswith(s) for s in (
        "embedding.weight", "in_proj.weight", "x_proj.weight", "dt_proj.weight", "out_proj.weight"))]
    no_decay = [p for n, p in model.named_parameters() if all(p is not q for q in decay)]
    spec_decay = {n: d for n, _, d in mr.param_specs(cfg)}
    assert sum(spec_decay.values()) == len(decay)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), eps=HP["eps"], foreach=False)
    tn = torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item()
    print(f"grad norm {gnorm:.10f} (clip_grad_norm_ says {tn:.10f}); clip at {clip} -> scale {clip / (tn + 1e-6):.6f}")
    opt.step()
    step1 = {n: p.detach().clone() for n, p in model.named_parameters()}
    upd = torch.sqrt(sum(((step1[n] - w32[n].double()) ** 2).sum() for n in step1)).item()
    print(f"AdamW step: norm of the parameter change {upd:.6f}")

    # ---- write ----
    t = {}
    for n, w in w32.items():
        t[n] = w
    t["tokens"], t["pos"], t["targets"] = tokens, pos, targets
    t["logits"] = logits.detach()
    t["loss"] = loss.detach().reshape(1)
    t["grad_norm"] = torch.tensor([gnorm], dtype=torch.float64)
    for n, g in grads.items():
        t["grad." + n] = g
    for n, p in step1.items():
        t["step1." + n] = p
    meta = {k: str(v) for k, v in dict(
        d_model=cfg.d_model, n_layer=cfg.n_layer, vocab_size=cfg.vocab_size, vocab_pad=cfg.vocab_pad,
        pad_vocab_multiple=cfg.pad_vocab_multiple, d_state=cfg.d_state, d_conv=cfg.d_conv, expand=cfg.expand,
        dt_rank=cfg.dt_rank, norm_eps=cfg.norm_eps, B=B, T=T, n_valid=n_valid, seed=SEED,
        lr=HP["lr"], beta1=HP["beta1"], beta2=HP["beta2"], eps=HP["eps"], weight_decay=HP["weight_decay"],
        grad_clip=clip, dt_range=list(DT_RANGE), torch_version=torch.__version__).items()}
    meta["config_json"] = json.dumps(cfg.to_json())
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "ref_tiny.safetensors")
    mr.st_save(t, path, metadata=meta)
    print(f"wrote {path}: {len(t)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
