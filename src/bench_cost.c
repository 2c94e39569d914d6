// bench_cost.c — see bench_cost.h. Every formula is written once, here. Notation per step: M tokens, d = d_model,
// di = d_inner, R = dt_rank, N = d_state, K = d_conv, Vp = padded vocabulary, L = n_layer, nx = R + 2N;
// a = bytes of an ACT element, f = bytes of an F32 element. exp, log and division count as one flop each.
#include "bench_cost.h"

#include <string.h>

const char *const op_categories[] = {"scan", "conv",  "in_proj",    "x_proj",    "dt_proj",   "out_proj",
                                     "norm", "classifier", "embedding", "optimizer", "recompute", NULL};

const char *op_direction(const char *region) {
    if (strncmp(region, "fwdbwd.", 7) == 0) return "fwdbwd";
    if (strncmp(region, "fwd.", 4) == 0) return "fwd";
    if (strncmp(region, "bwd.", 4) == 0) return "bwd";
    if (strncmp(region, "opt.", 4) == 0) return "opt";
    return "other";
}

const char *op_category(const char *region) {
    if (strncmp(region, "opt.", 4) == 0) return "optimizer";
    const char *dot = strchr(region, '.');
    const char *name = dot ? dot + 1 : region;
    for (int i = 0; op_categories[i]; i++)
        if (strcmp(name, op_categories[i]) == 0) return op_categories[i];
    return "other";
}

// A GEMM out (M, n) = inp (M, k) @ W (n, k)^T. Forward: 2Mnk flops; bytes: read inp and W, write out.
static void gemm_fwd(OpCost *o, double M, double n, double k, double a) {
    o->flops += 2 * M * n * k;
    o->gemm_flops += 2 * M * n * k;
    o->bytes += a * (M * k + n * k + M * n);
}
// Its backward: dinp = dout @ W (2Mnk) and dW += dout^T @ inp (2Mnk). Bytes: read dout, W, inp; write dinp;
// read-modify-write dW in F32.
static void gemm_bwd(OpCost *o, double M, double n, double k, double a, double f) {
    o->flops += 4 * M * n * k;
    o->gemm_flops += 4 * M * n * k;
    o->bytes += a * (M * n + n * k + M * k + M * k) + 2 * f * n * k;
}

int op_cost(const CostShape *s, const char *region, OpCost *out) {
    const ModelConfig *c = s->cfg;
    const double M = s->M, d = c->d_model, di = c->d_inner, R = c->dt_rank, N = c->d_state, K = c->d_conv;
    const double Vp = c->vocab_pad, L = c->n_layer, nx = R + 2 * N, P = (double)s->n_params;
    const double a = (double)s->act_bytes, f = (double)s->f32_bytes;
    OpCost o = {0};
    if (!strcmp(region, "bwd.recompute")) {
        // the backward recomputes what the forward did not keep: in recompute_acts layers the norm (xn), the conv +
        // SiLU (u) and the dt_proj GEMM (dpre), in recompute_in_proj layers the in_proj GEMM (xz) — the forward
        // costs of those ops, once per such layer. The layers that keep activations are the top ones, and so
        // are those that keep xz: the region runs in as many layers as the larger count.
        OpCost part;
        const char *parts[] = {"fwd.norm", "fwd.conv", "fwd.dt_proj", "fwd.in_proj"};
        for (int i = 0; i < 4; i++) {
            op_cost(s, parts[i], &part);
            // per layer (fwd.norm also counts the final norm), times the layers that recompute it
            const double scale = (i == 3 ? s->recompute_in_proj : s->recompute_acts) / (i == 0 ? L + 1 : L);
            o.flops += part.flops * scale, o.bytes += part.bytes * scale, o.exps += part.exps * scale;
            o.gemm_flops += part.gemm_flops * scale;
        }
        o.calls = s->recompute_acts > s->recompute_in_proj ? s->recompute_acts : s->recompute_in_proj;
    } else if (!strcmp(region, "fwd.embedding")) {
        // gather M rows of the (Vp, d) table into the F32 residual stream; no arithmetic
        o.calls = 1;
        o.bytes = M * d * (a + f) + 4 * M;
    } else if (!strcmp(region, "bwd.embedding")) {
        // scatter-add M rows of dres into dwte: one add per element, rows read-modify-written
        o.calls = 1;
        o.flops = M * d;
        o.bytes = M * d * f + 2 * M * d * f + 4 * M;
    } else if (!strcmp(region, "fwd.norm")) {
        // per layer and the final norm: res += h (1), sum of squares (2), * rstd * w (2) -> 5 per element;
        // read res_in (f) and h (a), write res_out (f) and xn (a)
        o.calls = c->n_layer + 1;
        o.flops = o.calls * (5 * M * d + 2 * M);
        o.bytes = o.calls * (M * d * (2 * f + 2 * a) + M * f);
    } else if (!strcmp(region, "bwd.norm")) {
        // dxn * w, dot with xhat, combine (about 8 per element, plus dw); read dxn (a), res (f), dres (f);
        // write dres (f) and its ACT copy (a)
        o.calls = c->n_layer + 1;
        o.flops = o.calls * 10 * M * d;
        o.bytes = o.calls * (M * d * (3 * f + 2 * a) + M * f);
    } else if (!strcmp(region, "fwd.in_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_fwd(&o, M, 2 * di, d, a);
    } else if (!strcmp(region, "bwd.in_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_bwd(&o, M, 2 * di, d, a, f);
    } else if (!strcmp(region, "fwd.x_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_fwd(&o, M, nx, di, a);
    } else if (!strcmp(region, "bwd.x_proj")) {
        // dinp accumulates into du: one more read of (M, di)
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_bwd(&o, M, nx, di, a, f), o.bytes += a * M * di;
    } else if (!strcmp(region, "fwd.dt_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_fwd(&o, M, di, R, a);
    } else if (!strcmp(region, "bwd.dt_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_bwd(&o, M, di, R, a, f);
    } else if (!strcmp(region, "fwd.out_proj")) {
        o.calls = c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_fwd(&o, M, d, di, a);
    } else if (!strcmp(region, "bwd.out_proj")) {
        // two calls per layer: d(y) before the scan's backward, the weight gradient after it (the scan's backward
        // writes the y it takes again: the model keeps no copy)
        o.calls = 2 * c->n_layer;
        for (int l = 0; l < c->n_layer; l++) gemm_bwd(&o, M, d, di, a, f);
    } else if (!strcmp(region, "fwd.conv")) {
        // K multiply-adds + bias (2K + 1), SiLU = x / (1 + exp(-x)) (4); read xi, write u
        o.calls = c->n_layer;
        o.flops = L * M * di * (2 * K + 5);
        o.bytes = L * (2 * a * M * di + 4 * M);
    } else if (!strcmp(region, "bwd.conv")) {
        // recompute the pre-activation (2K + 1) and SiLU' (6), dxi (2K), dw (2K), db (1)
        o.calls = c->n_layer;
        o.flops = L * M * di * (6 * K + 8);
        o.bytes = L * (3 * a * M * di + 4 * M);
    } else if (!strcmp(region, "fwd.scan")) {
        // per (token, channel, state): delta*A (1), exp (1), delta*u*B (1, delta*u shared), s = dA*s + dBu (2),
        // y += s*C (2) -> 7 with one exp. Per (token, channel): softplus (3), delta*u (1), + D*u (2),
        // SiLU(z) (4), gate (1) -> 11. Bytes: read u, dpre, z, write out (4 a per (token, channel)); read B, C.
        o.calls = c->n_layer;
        o.flops = L * M * di * (7 * N + 11);
        o.exps = L * M * di * (N + 2);
        o.bytes = L * (4 * a * M * di + 2 * a * M * N + 4 * M);
    } else if (!strcmp(region, "bwd.scan")) {
        // The backward replays the forward recurrence from its checkpoints (7 per state, one exp)
        // and then runs the reverse one: ds = dA*ds_next + dy*C (2), dC += s*dy (2), dB += ds*delta*u (2),
        // d(delta) += ds*(A*dA*s_prev + B*u) (4), dA_log += ds*delta*dA*s_prev*A (2) -> 12; per (token,
        // channel) about 25 (softplus and SiLU derivatives, gating, D). Bytes: read u, dpre, z, dout, write
        // du, ddpre, dz (7 a); read B, C and write dB, dC (4 a N).
        o.calls = c->n_layer;
        o.flops = L * M * di * (19 * N + 25);
        o.exps = L * M * di * (N + 3);
        o.bytes = L * (7 * a * M * di + 4 * a * M * N + 4 * M);
        // A layer without kept states (recompute_states) first runs the checkpoint pass in this region: the
        // forward recurrence without its output, delta*A, exp, delta*u*B, s = dA*s + dBu (5 per state, one exp),
        // softplus and delta*u (4) per (token, channel); it reads u, dpre and B.
        const double rs = s->recompute_states;
        o.flops += rs * M * di * (5 * N + 4);
        o.exps += rs * M * di * (N + 1);
        o.bytes += rs * (2 * a * M * di + a * M * N + 4 * M);
    } else if (!strcmp(region, "fwdbwd.classifier")) {
        // logits = x @ wte^T (2 M Vp d), softmax + cross-entropy (about 5 per logit with one exp), dx = dlogits @
        // wte (2 M Vp d), dwte += dlogits^T @ x (2 M Vp d). Bytes: read x and wte, write dx, read-modify-write
        // dwte (F32); the logits never reach memory (chunked).
        o.calls = 1;
        o.flops = 6 * M * Vp * d + 5 * M * Vp;
        o.gemm_flops = 6 * M * Vp * d;
        o.exps = M * Vp;
        o.bytes = a * (2 * M * d + Vp * d) + 2 * f * Vp * d + 8 * M;
    } else if (!strcmp(region, "fwd.classifier")) {
        o.calls = 1;
        o.flops = 2 * M * Vp * d + 5 * M * Vp;
        o.gemm_flops = 2 * M * Vp * d;
        o.exps = M * Vp;
        o.bytes = a * (M * d + Vp * d) + 8 * M;
    } else if (!strcmp(region, "opt.zero_grad")) {
        o.calls = 1;
        o.bytes = f * P;
    } else if (!strcmp(region, "opt.grad_norm")) {
        o.calls = 1;
        o.flops = 2 * P;
        o.bytes = f * P;
    } else if (!strcmp(region, "opt.adamw")) {
        // per parameter about 15 flops (decay, two moment updates, bias corrections, sqrt, divide); read p, g,
        // m, v, write p, m, v (and the ACT copy of p when the backend keeps one)
        o.calls = 1;
        o.flops = 15 * P;
        o.exps = P;  // the sqrt
        o.bytes = 7 * f * P + (s->act_copy ? a * P : 0);
    } else {
        return -1;
    }
    *out = o;
    return 0;
}

double model_flops_per_token(const ModelConfig *c, size_t n_params) {
    // forward (7N + 11) + backward (19N + 25) per channel of every layer, as in op_cost
    double scan = (double)c->n_layer * c->d_inner * (26.0 * c->d_state + 36.0);
    return 6.0 * (double)n_params + scan;
}

double op_floor_s(const OpCost *c, const Ceilings *k, const char **bound) {
    const double vec = c->flops - c->gemm_flops;
    double t[4] = {0, 0, 0, 0};  // gemm, vector, memory, exp
    static const char *const names[4] = {"gemm", "vector", "memory", "exp"};
    if (k->vector_flops_per_s > 0) {
        if (k->gemm_flops_per_s > 0) t[0] = c->gemm_flops / k->gemm_flops_per_s;
        t[1] = vec / k->vector_flops_per_s;
    } else if (k->gemm_flops_per_s > 0) {
        t[0] = c->flops / k->gemm_flops_per_s;
    }
    if (k->bytes_per_s > 0) t[2] = c->bytes / k->bytes_per_s;
    if (k->exps_per_s > 0) t[3] = c->exps / k->exps_per_s;
    int best = -1;
    for (int i = 0; i < 4; i++)
        if (t[i] > 0 && (best < 0 || t[i] > t[best])) best = i;
    if (bound) *bound = best < 0 ? "none" : names[best];
    return best < 0 ? 0 : t[best];
}
