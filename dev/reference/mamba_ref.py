"""mamba_ref.py — an independent, plain-PyTorch Mamba-1 language model (DESIGN §1-2), written to check the C engine.

It is deliberately slow and literal: the depthwise conv is a masked per-token gather of K taps, the selective scan is
a sequential loop over tokens, and gradients come from torch.autograd. Run it in float64 (model.double()) to get a
truth that the fp32 C engine can be compared against.

Packed batches: every token has `pos`, its position within its document. As in src/backend.h, token t of a row starts
a new document when pos[t] == 0 or t is the row's first token. A conv tap j steps back is read only if it lies in the
same document (j <= steps since the document start); the scan state is zeroed at a document start. Both are done by
multiplying with a 0/1 mask, so neither values nor gradients cross a document start.

Checkpoints: load_checkpoint(dir) / save_checkpoint(dir, model) read and write our checkpoint directory
(model.safetensors with the reference tensor names + config.json with the reference keys).
"""
import json
import math
import os

import torch
import torch.nn as nn

IGNORE = -1  # target value of tokens that contribute no loss


class Config:
    """Model dimensions (DESIGN §1). dt_rank = ceil(d_model/16) and vocab_pad = vocab_size rounded up to
    pad_vocab_multiple unless given."""

    def __init__(self, d_model, n_layer, vocab_size, d_state=16, d_conv=4, expand=2, dt_rank=None,
                 pad_vocab_multiple=8, norm_eps=1e-5):
        self.d_model, self.n_layer, self.vocab_size = d_model, n_layer, vocab_size
        self.d_state, self.d_conv, self.expand = d_state, d_conv, expand
        self.pad_vocab_multiple = pad_vocab_multiple
        self.norm_eps = norm_eps
        self.d_inner = expand * d_model
        self.dt_rank = dt_rank if dt_rank is not None else math.ceil(d_model / 16)
        m = pad_vocab_multiple
        self.vocab_pad = (vocab_size + m - 1) // m * m

    def to_json(self):
        """config.json in the reference's keys."""
        return {
            "d_model": self.d_model, "n_layer": self.n_layer, "vocab_size": self.vocab_size,
            "ssm_cfg": {"d_state": self.d_state, "d_conv": self.d_conv, "expand": self.expand},
            "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
            "pad_vocab_size_multiple": self.pad_vocab_multiple, "tie_embeddings": True,
        }

    @staticmethod
    def from_json(j):
        ssm = j.get("ssm_cfg") or {}
        dtr = ssm.get("dt_rank", "auto")
        return Config(d_model=j["d_model"], n_layer=j["n_layer"], vocab_size=j["vocab_size"],
                      d_state=ssm.get("d_state", 16), d_conv=ssm.get("d_conv", 4), expand=ssm.get("expand", 2),
                      dt_rank=None if dtr == "auto" else int(dtr),
                      pad_vocab_multiple=j.get("pad_vocab_size_multiple", 8))


def param_specs(cfg):
    """(name, shape, decay) for every tensor, in the order of the C engine's flat buffer (model.h)."""
    D, Di, N, K, R = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.d_conv, cfg.dt_rank
    out = [("backbone.embedding.weight", (cfg.vocab_pad, D), True)]
    for i in range(cfg.n_layer):
        p = f"backbone.layers.{i}."
        out += [
            (p + "norm.weight", (D,), False),
            (p + "mixer.A_log", (Di, N), False),
            (p + "mixer.D", (Di,), False),
            (p + "mixer.in_proj.weight", (2 * Di, D), True),
            (p + "mixer.conv1d.weight", (Di, 1, K), False),
            (p + "mixer.conv1d.bias", (Di,), False),
            (p + "mixer.x_proj.weight", (R + 2 * N, Di), True),
            (p + "mixer.dt_proj.weight", (Di, R), True),
            (p + "mixer.dt_proj.bias", (Di,), False),
            (p + "mixer.out_proj.weight", (D, Di), True),
        ]
    out.append(("backbone.norm_f.weight", (D,), False))
    return out


def _holder(**tensors):
    """A bare module holding named parameters (so named_parameters() yields the reference names)."""
    m = nn.Module()
    for k, v in tensors.items():
        m.register_parameter(k, nn.Parameter(v))
    return m


def rmsnorm(x, w, eps):
    # x (..., C), w (C)
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def silu(x):
    return x * torch.sigmoid(x)


def softplus(v):
    # DESIGN §1: softplus(v) = v for v > 20 (the clamp only keeps exp() of the unused branch finite)
    return torch.where(v > 20, v, torch.log1p(torch.exp(torch.clamp(v, max=20.0))))


def doc_offsets(pos):
    """pos (B, T) -> (start (B, T) bool, off (B, T) long): start marks tokens that begin a document (pos == 0 or
    row start); off is the number of steps since the current document's first token in this row."""
    B, T = pos.shape
    start = pos == 0
    start[:, 0] = True
    off = torch.zeros(B, T, dtype=torch.long)
    for t in range(1, T):
        off[:, t] = torch.where(start[:, t], torch.zeros_like(off[:, t]), off[:, t - 1] + 1)
    return start, off


class Mixer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        Di, N, K, R, D = cfg.d_inner, cfg.d_state, cfg.d_conv, cfg.dt_rank, cfg.d_model
        self.cfg = cfg
        z = torch.zeros
        # registration order = the C engine's flat order: A_log, D, in_proj, conv1d, x_proj, dt_proj, out_proj
        self.A_log = nn.Parameter(z(Di, N))
        self.D = nn.Parameter(z(Di))
        self.in_proj = _holder(weight=z(2 * Di, D))
        self.conv1d = _holder(weight=z(Di, 1, K), bias=z(Di))
        self.x_proj = _holder(weight=z(R + 2 * N, Di))
        self.dt_proj = _holder(weight=z(Di, R), bias=z(Di))
        self.out_proj = _holder(weight=z(D, Di))

    def forward(self, x, start, off):
        # x (B, T, D); start (B, T) bool; off (B, T) long
        cfg = self.cfg
        Di, N, K, R = cfg.d_inner, cfg.d_state, cfg.d_conv, cfg.dt_rank
        B, T, _ = x.shape
        xz = x @ self.in_proj.weight.t()  # (B, T, 2*Di)
        xi, z = xz[..., :Di], xz[..., Di:]  # (B, T, Di) each

        # Depthwise causal conv: tap k reads xi j = K-1-k steps back, only inside the same document.
        w = self.conv1d.weight[:, 0, :]  # (Di, K)
        t_idx = torch.arange(T)
        xc = self.conv1d.bias.expand(B, T, Di)
        for k in range(K):
            j = K - 1 - k
            tap = xi[:, (t_idx - j).clamp(min=0), :]  # (B, T, Di): xi[b, t-j]
            valid = (off >= j).to(x.dtype).unsqueeze(-1)  # (B, T, 1): 0 before the document start
            xc = xc + w[:, k] * (tap * valid)
        u = silu(xc)  # (B, T, Di)

        xdbl = u @ self.x_proj.weight.t()  # (B, T, R + 2N)
        dtl, Bm, Cm = xdbl[..., :R], xdbl[..., R:R + N], xdbl[..., R + N:]
        delta = softplus(dtl @ self.dt_proj.weight.t() + self.dt_proj.bias)  # (B, T, Di)
        A = -torch.exp(self.A_log)  # (Di, N)

        # Selective scan, one token at a time; the state is multiplied by 0 at a document start.
        s = torch.zeros(B, Di, N, dtype=x.dtype)
        ys = []
        for t in range(T):
            keep = (~start[:, t]).to(x.dtype).view(B, 1, 1)
            dA = torch.exp(delta[:, t, :, None] * A)  # (B, Di, N)
            s = dA * (s * keep) + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]
            ys.append((s * Cm[:, t, None, :]).sum(-1))  # (B, Di)
        y = torch.stack(ys, 1) + self.D * u  # (B, T, Di)
        return (y * silu(z)) @ self.out_proj.weight.t()  # (B, T, D)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm = _holder(weight=torch.zeros(cfg.d_model))  # registered before mixer: the flat order
        self.mixer = Mixer(cfg)


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embedding = _holder(weight=torch.zeros(cfg.vocab_pad, cfg.d_model))
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm_f = _holder(weight=torch.zeros(cfg.d_model))


class MambaLM(nn.Module):
    """Parameters are named exactly as the reference checkpoints (backbone.*); the LM head is the embedding."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.backbone = Backbone(cfg)

    def forward(self, tokens, pos):
        """tokens, pos (B, T) integer -> logits (B, T, vocab_pad)."""
        cfg = self.cfg
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        start, off = doc_offsets(torch.as_tensor(pos, dtype=torch.long))
        emb = self.backbone.embedding.weight  # (Vp, D)
        h = emb[tokens]  # (B, T, D)
        res = None
        for layer in self.backbone.layers:
            res = h if res is None else res + h
            h = layer.mixer(rmsnorm(res, layer.norm.weight, cfg.norm_eps), start, off)
        res = res + h
        xf = rmsnorm(res, self.backbone.norm_f.weight, cfg.norm_eps)  # (B, T, D)
        return xf @ emb.t()  # (B, T, Vp): the tied head over all padded vocabulary rows

    def loss(self, logits, targets):
        """Mean cross-entropy over tokens whose target != -1, over all vocab_pad logits."""
        targets = torch.as_tensor(targets, dtype=torch.long)
        valid = targets != IGNORE
        lse = torch.logsumexp(logits, -1)  # (B, T)
        picked = logits.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
        per_tok = torch.where(valid, lse - picked, torch.zeros_like(lse))
        return per_tok.sum() / valid.sum()

    def state_tensors(self):
        """{reference name: tensor} in the flat order."""
        return {n: p for n, p in self.named_parameters()}

    def load_tensors(self, tensors, strict=True):
        """Copy tensors {name: tensor} into the parameters (shape-checked; lm_head.weight must equal the embedding)."""
        params = dict(self.named_parameters())
        for name, t in tensors.items():
            if name == "lm_head.weight":
                if not torch.equal(t.to(torch.float64), tensors["backbone.embedding.weight"].to(torch.float64)):
                    raise ValueError("lm_head.weight differs from backbone.embedding.weight (untied head)")
                continue
            if name not in params:
                raise ValueError(f"unknown tensor {name}")
            if tuple(t.shape) != tuple(params[name].shape):
                raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {tuple(params[name].shape)}")
        missing = [n for n in params if n not in tensors]
        if strict and missing:
            raise ValueError(f"missing tensors: {missing[:4]}")
        with torch.no_grad():
            for n, p in params.items():
                if n in tensors:
                    p.copy_(tensors[n].to(p.dtype))


def init_params(model, gen, perturb=True, dt_range=(1e-3, 0.1)):
    """DESIGN §1 initialization from torch.Generator `gen`. With perturb, the values the reference sets to
    constants (A_log = ln(n+1), D = 1, norm weights = 1) get small random changes so that a test using them can
    see an indexing mistake. dt_range: the range of the initial step sizes behind dt_proj.bias (DESIGN: 1e-3..0.1;
    a test may widen it so that the scan carries more of the output)."""
    cfg = model.cfg
    D, Di, N, K, R = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.d_conv, cfg.dt_rank

    def U(shape, a, b):
        return torch.rand(shape, generator=gen, dtype=torch.float64) * (b - a) + a

    with torch.no_grad():
        model.backbone.embedding.weight.copy_(torch.randn(cfg.vocab_pad, D, generator=gen, dtype=torch.float64)
                                              * 0.02)
        for layer in model.backbone.layers:
            mx = layer.mixer
            layer.norm.weight.copy_(U((D,), 0.8, 1.2) if perturb else torch.ones(D))
            a_log = torch.log(torch.arange(1, N + 1, dtype=torch.float64)).expand(Di, N)
            mx.A_log.copy_(a_log + (U((Di, N), -0.2, 0.2) if perturb else 0))
            mx.D.copy_(U((Di,), 0.5, 1.5) if perturb else torch.ones(Di))
            b = 1 / math.sqrt(D)
            mx.in_proj.weight.copy_(U((2 * Di, D), -b, b))
            b = 1 / math.sqrt(K)
            mx.conv1d.weight.copy_(U((Di, 1, K), -b, b))
            mx.conv1d.bias.copy_(U((Di,), -b, b))
            b = 1 / math.sqrt(Di)
            mx.x_proj.weight.copy_(U((R + 2 * N, Di), -b, b))
            b = R ** -0.5
            mx.dt_proj.weight.copy_(U((Di, R), -b, b))
            dt = torch.exp(U((Di,), math.log(dt_range[0]), math.log(dt_range[1]))).clamp(min=1e-4)
            mx.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
            b = 1 / math.sqrt(Di)
            mx.out_proj.weight.copy_(U((D, Di), -b, b) / math.sqrt(cfg.n_layer))
        model.backbone.norm_f.weight.copy_(U((D,), 0.8, 1.2) if perturb else torch.ones(D))


# ---- safetensors I/O (the safetensors package when present; a minimal reader/writer of the same format otherwise,
#      so this file also works where only torch is installed) ----

_DT = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
       "I64": torch.int64, "I32": torch.int32}


def st_save(tensors, path, metadata=None):
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        from safetensors.torch import save_file
        save_file(tensors, tmp, metadata=metadata)
    except ImportError:
        names = {v: k for k, v in _DT.items()}
        header, blobs, off = {}, [], 0
        for k, v in tensors.items():
            b = v.numpy().tobytes() if v.dtype != torch.bfloat16 else v.view(torch.int16).numpy().tobytes()
            header[k] = {"dtype": names[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
        if metadata:
            header["__metadata__"] = metadata
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(tmp, "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    os.replace(tmp, path)


def st_load(path):
    """-> ({name: tensor}, metadata dict or None)"""
    try:
        from safetensors import safe_open
        out = {}
        with safe_open(path, framework="pt") as f:
            meta = f.metadata()
            for k in f.keys():
                out[k] = f.get_tensor(k)
        return out, meta
    except ImportError:
        with open(path, "rb") as f:
            data = f.read()
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        meta = header.pop("__metadata__", None)
        out = {}
        for k, d in header.items():
            a, b = d["data_offsets"]
            buf = bytearray(data[8 + n + a:8 + n + b])
            dt = _DT[d["dtype"]]
            if dt == torch.bfloat16:
                t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if buf else torch.zeros(0, dtype=dt)
            else:
                t = torch.frombuffer(buf, dtype=dt) if buf else torch.zeros(0, dtype=dt)
            out[k] = t.reshape(d["shape"]).clone()
        return out, meta


def load_checkpoint(ckpt_dir, dtype=torch.float64):
    """Read <dir>/config.json and <dir>/model.safetensors (our checkpoints, or the reference's) into a MambaLM."""
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = Config.from_json(json.load(f))
    model = MambaLM(cfg).to(dtype)
    tensors, _ = st_load(os.path.join(ckpt_dir, "model.safetensors"))
    model.load_tensors(tensors)
    return model


def save_checkpoint(ckpt_dir, model):
    """Write <dir>/model.safetensors (F32, reference names; lm_head tied, not written) and <dir>/config.json."""
    os.makedirs(ckpt_dir, exist_ok=True)
    st_save({n: p.detach().to(torch.float32) for n, p in model.named_parameters()},
            os.path.join(ckpt_dir, "model.safetensors"), metadata={"format": "pt"})
    tmp = os.path.join(ckpt_dir, f"config.json.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(model.cfg.to_json(), f, indent=2)
    os.replace(tmp, os.path.join(ckpt_dir, "config.json"))
