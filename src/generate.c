// generate.c — `packmamba generate`: the prompt goes through the parallel forward (model.c on the CPU or CUDA
// backend: GEMMs over all prompt tokens at once), each layer's states after it are rebuilt from the stored
// activations, then decoding is constant-memory and recurrent: on the host here (the reference), or on the GPU
// (cuda_decode.cu) for a model on the CUDA backend. Each layer keeps its conv state (the last
// K-1 inputs of the conv, per channel) and its SSM state (d_inner, N); one token costs one pass over the weights,
// whatever the length of the text so far. The math is DESIGN §1 specialised to one token (tested against the
// parallel forward, and parallel prefill against recurrent prefill, in tests/test_generate.c).
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "commands.h"
#include "cuda_decode.h"
#include "generate.h"
#include "tokenizer.h"
#include "util.h"

struct Decoder {
    ModelConfig c;
    int lanes;          // sequences stepped together, each with its own states
    CudaDecoder *gpu;   // decoding on the GPU (decoder_create_cuda): everything below but c, lanes and t is unused
    float *w;           // (n_params) host copy of the parameters, reference layout
    const ParamInfo *t; // tensor table of the model
    float *conv_state;  // (lanes, n_layer, d_inner, K-1)
    float *ssm_state;   // (lanes, n_layer, d_inner, N)
    float *res, *xn, *xz, *u, *xdbl, *dpre, *y, *h;  // one token's activations (the lanes run one after another)
    float *logits;      // (lanes, vocab_pad)
    float *saved;       // decoder_save's copy of both states of every lane (host decoding)
};

// floats of one lane's conv and SSM states
static size_t conv_lane(const ModelConfig *c) { return (size_t)c->n_layer * c->d_inner * (c->d_conv - 1); }
static size_t ssm_lane(const ModelConfig *c) { return (size_t)c->n_layer * c->d_inner * c->d_state; }

static const float *P(const Decoder *d, int layer, int which) {
    return d->w + d->t[model_tensor_index(&d->c, layer, which)].offset;
}

Decoder *decoder_create(const Model *m) { return decoder_create_lanes(m, 1); }

Decoder *decoder_create_lanes(const Model *m, int lanes) {
    if (lanes < 1) pm_die("decoder: %d lanes", lanes);
    Decoder *d = pm_calloc(1, sizeof *d);
    d->c = m->cfg;
    d->lanes = lanes;
    d->t = m->tensors;
    d->w = pm_malloc(m->n_params * sizeof(float));
    model_get_params(m, d->w);
    const ModelConfig *c = &d->c;
    const int di = c->d_inner, N = c->d_state, K = c->d_conv;
    d->conv_state = pm_calloc((size_t)lanes * c->n_layer * di * (K - 1), sizeof(float));
    d->ssm_state = pm_calloc((size_t)lanes * c->n_layer * di * N, sizeof(float));
    d->res = pm_calloc(c->d_model, sizeof(float));
    d->xn = pm_calloc(c->d_model, sizeof(float));
    d->h = pm_calloc(c->d_model, sizeof(float));
    d->xz = pm_calloc(2 * di, sizeof(float));
    d->u = pm_calloc(di, sizeof(float));
    d->y = pm_calloc(di, sizeof(float));
    d->dpre = pm_calloc(di, sizeof(float));
    d->xdbl = pm_calloc(c->dt_rank + 2 * N, sizeof(float));
    d->logits = pm_calloc((size_t)lanes * c->vocab_pad, sizeof(float));
    return d;
}

Decoder *decoder_create_cuda(const Model *m) { return decoder_create_cuda_lanes(m, 1); }

Decoder *decoder_create_cuda_lanes(const Model *m, int lanes) {
    if (strcmp(m->bk->name, "cuda") != 0) {
        pm_error("GPU decoding needs the model on the CUDA backend (it is on '%s')", m->bk->name);
        return NULL;
    }
    const ModelConfig *c = &m->cfg;
    const float *base = (const float *)m->params;  // the fp32 master weights, on the device
    m->bk->synchronize();                          // (their upload may still be queued on the backend's stream)
#define AT(layer, which) (base + m->tensors[model_tensor_index(c, layer, which)].offset)
    DecodeLayerWeights *L = pm_calloc(c->n_layer ? c->n_layer : 1, sizeof *L);
    for (int l = 0; l < c->n_layer; l++)
        L[l] = (DecodeLayerWeights){AT(l, P_NORM),   AT(l, P_A_LOG),  AT(l, P_D),    AT(l, P_IN_PROJ), AT(l, P_CONV_W),
                                    AT(l, P_CONV_B), AT(l, P_X_PROJ), AT(l, P_DT_W), AT(l, P_DT_B),    AT(l, P_OUT_PROJ)};
    DecodeWeights w = {.n_layer = c->n_layer, .d_model = c->d_model, .d_inner = c->d_inner, .d_state = c->d_state,
                       .d_conv = c->d_conv, .dt_rank = c->dt_rank, .vocab_pad = c->vocab_pad,
                       .norm_eps = c->norm_eps, .embedding = AT(-1, 0), .norm_f = AT(-1, 1), .layers = L};
#undef AT
    CudaDecoder *g = cuda_decoder_create(&w, lanes);
    free(L);
    if (!g) return NULL;
    Decoder *d = pm_calloc(1, sizeof *d);
    d->c = m->cfg;
    d->lanes = lanes;
    d->t = m->tensors;
    d->gpu = g;
    return d;
}

void decoder_reset(Decoder *d) {
    if (d->gpu) {
        cuda_decoder_reset(d->gpu);
        return;
    }
    memset(d->conv_state, 0, sizeof(float) * d->lanes * conv_lane(&d->c));
    memset(d->ssm_state, 0, sizeof(float) * d->lanes * ssm_lane(&d->c));
}

int decoder_lanes(const Decoder *d) { return d->lanes; }

void decoder_fill_lanes(Decoder *d) {
    if (d->gpu) {
        cuda_decoder_fill_lanes(d->gpu);
        return;
    }
    const size_t nc = conv_lane(&d->c), ns = ssm_lane(&d->c);
    for (int s = 1; s < d->lanes; s++) {
        memcpy(d->conv_state + s * nc, d->conv_state, nc * sizeof(float));
        memcpy(d->ssm_state + s * ns, d->ssm_state, ns * sizeof(float));
    }
}

void decoder_free(Decoder *d) {
    if (!d) return;
    cuda_decoder_free(d->gpu);
    free(d->w), free(d->conv_state), free(d->ssm_state), free(d->res), free(d->xn), free(d->h), free(d->xz);
    free(d->u), free(d->y), free(d->dpre), free(d->xdbl), free(d->logits), free(d->saved);
    free(d);
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// y = W x, W (rows, cols) row-major
static void gemv(float *y, const float *W, const float *x, int rows, int cols) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, W, cols, x, 1, 0.0f, y, 1);
}

// The host decoder's states and their copy: conv (lanes, n_layer, d_inner, K-1) then SSM (lanes, n_layer, d_inner,
// N) floats. to_saved: states -> copy (allocated at the first save), else copy -> states.
static void host_states_copy(Decoder *d, int to_saved) {
    const size_t nc = d->lanes * conv_lane(&d->c), ns = d->lanes * ssm_lane(&d->c);
    if (!d->saved && !to_saved) pm_die("decoder_restore: nothing saved");
    if (!d->saved) d->saved = pm_malloc((nc + ns) * sizeof(float));
    float *parts[2][2] = {{d->conv_state, d->saved}, {d->ssm_state, d->saved + nc}};
    const size_t sizes[2] = {nc, ns};
    for (int i = 0; i < 2; i++)
        memcpy(parts[i][to_saved ? 1 : 0], parts[i][to_saved ? 0 : 1], sizes[i] * sizeof(float));
}

void decoder_save(Decoder *d) {
    if (d->gpu) cuda_decoder_save(d->gpu);
    else host_states_copy(d, 1);
}

void decoder_restore(Decoder *d) {
    if (d->gpu) cuda_decoder_restore(d->gpu);
    else host_states_copy(d, 0);
}

// One token through lane `lane` (its states), its logits into out (vocab_pad).
static void host_step(Decoder *d, int lane, int token, float *out) {
    const ModelConfig *c = &d->c;
    const int dm = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv, nx = R + 2 * N;
    memcpy(d->res, P(d, -1, 0) + (size_t)token * dm, sizeof(float) * dm);  // res = embedding; h = 0
    memset(d->h, 0, sizeof(float) * dm);
    for (int l = 0; l < c->n_layer; l++) {
        for (int i = 0; i < dm; i++) d->res[i] += d->h[i];
        rmsnorm(d->xn, d->res, P(d, l, P_NORM), dm, c->norm_eps);
        gemv(d->xz, P(d, l, P_IN_PROJ), d->xn, 2 * di, dm);  // (2di): xi | z
        const float *cw = P(d, l, P_CONV_W), *cb = P(d, l, P_CONV_B);
        float *cs = d->conv_state + lane * conv_lane(c) + (size_t)l * di * (K - 1);  // (di, K-1): oldest first
        for (int ch = 0; ch < di; ch++) {
            float *s = cs + (size_t)ch * (K - 1);
            float xi = d->xz[ch], acc = cb[ch] + cw[ch * K + K - 1] * xi;
            for (int k = 0; k < K - 1; k++) acc += cw[ch * K + k] * s[k];
            for (int k = 0; k < K - 2; k++) s[k] = s[k + 1];
            s[K - 2] = xi;
            d->u[ch] = silu(acc);
        }
        gemv(d->xdbl, P(d, l, P_X_PROJ), d->u, nx, di);  // (R+2N)
        gemv(d->dpre, P(d, l, P_DT_W), d->xdbl, di, R);  // (di)
        const float *A_log = P(d, l, P_A_LOG), *Dp = P(d, l, P_D), *dtb = P(d, l, P_DT_B);
        const float *Bv = d->xdbl + R, *Cv = d->xdbl + R + N;
        float *ss = d->ssm_state + lane * ssm_lane(c) + (size_t)l * di * N;  // (di, N)
        for (int ch = 0; ch < di; ch++) {
            float delta = softplus(d->dpre[ch] + dtb[ch]), u = d->u[ch], acc = 0;
            for (int n = 0; n < N; n++) {
                float *s = &ss[(size_t)ch * N + n];
                *s = expf(-delta * expf(A_log[ch * N + n])) * *s + delta * Bv[n] * u;
                acc += *s * Cv[n];
            }
            d->y[ch] = (acc + Dp[ch] * u) * silu(d->xz[di + ch]);
        }
        gemv(d->h, P(d, l, P_OUT_PROJ), d->y, dm, di);
    }
    for (int i = 0; i < dm; i++) d->res[i] += d->h[i];
    rmsnorm(d->xn, d->res, P(d, -1, 1), dm, c->norm_eps);
    gemv(out, P(d, -1, 0), d->xn, c->vocab_pad, dm);
}

const float *decoder_step_lanes(Decoder *d, const int32_t *tokens) {
    if (d->gpu) return cuda_decoder_step_lanes(d->gpu, tokens);
    for (int s = 0; s < d->lanes; s++) host_step(d, s, tokens[s], d->logits + (size_t)s * d->c.vocab_pad);
    return d->logits;
}

const float *decoder_step(Decoder *d, int token) {
    if (d->gpu) return cuda_decoder_step(d->gpu, token);
    for (int s = 0; s < d->lanes; s++) host_step(d, s, token, d->logits + (size_t)s * d->c.vocab_pad);
    return d->logits;
}

// Backend ACT values -> host floats, through a backend F32 scratch buffer of at least n values (ACT is bf16 on CUDA).
static void act_download(const Backend *bk, float *dst, const void *src, size_t n, void *scratch) {
    bk->act_to_f32(scratch, src, n);
    if (bk->f32_bytes == sizeof(float)) {
        bk->download(dst, scratch, n * sizeof(float));
        return;
    }
    double *tmp = pm_malloc(n * sizeof(double));  // the float64 build's CPU backend
    bk->download(tmp, scratch, n * sizeof(double));
    for (size_t i = 0; i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
}

// The GEMMs run in parallel on the backend; the states after the prompt are then cheap to rebuild on the host from
// two stored tensors per layer. The conv state is just the last K-1 inputs xi. The SSM state needs u and delta at
// every prompt token (a depthwise conv, and the small dt_proj GEMM: both O(n * d_inner * max(K, R))) and one pass
// of the recurrence, O(n * d_inner * N) — the same work as the scan itself, without the C contraction.
const float *decoder_prefill(Decoder *d, Model *m, const int32_t *tokens, int n) {
    const ModelConfig *c = &d->c;
    const Backend *bk = m->bk;
    const int dm = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv, nx = R + 2 * N;
    if (n < 1) pm_die("decoder_prefill: empty prompt");
    // (the prefill reads every layer's own xz below: a model that recomputes it gets per-layer buffers again)
    if (!m->layers || n > m->T || !m->layers[0].xz) {
        m->keep_in_proj = -1;
        model_alloc_activations(m, 1, n);
    }
    Batch b = batch_alloc(1, n);
    for (int i = 0; i < n; i++) b.tokens[i] = tokens[i], b.pos[i] = i, b.doc[i] = 0;  // one document; no targets
    batch_count_valid(&b);
    model_forward_hidden(m, &b);
    batch_free(&b);
    if (d->gpu) {  // the same rebuild on the device, from the same stored tensors
        const void **acts = pm_malloc(sizeof(void *) * 2 * (c->n_layer ? c->n_layer : 1));  // xz, then xdbl
        for (int l = 0; l < c->n_layer; l++) acts[l] = m->layers[l].xz, acts[c->n_layer + l] = m->layers[l].xdbl;
        float *xf_last = bk->alloc((size_t)dm * bk->f32_bytes);  // (d_model) the last token's, in fp32
        bk->act_to_f32(xf_last, (const char *)m->xf + (size_t)(n - 1) * dm * bk->act_bytes, dm);
        bk->synchronize();  // (the decoder has its own stream)
        const float *logits = cuda_decoder_prefill(d->gpu, acts, xf_last, n);
        bk->free(xf_last);
        free(acts);
        return logits;
    }

    const size_t M = (size_t)n;
    void *scratch = bk->alloc(M * 2 * di * bk->f32_bytes);  // (M, 2di) F32, the widest tensor downloaded
    float *xz = pm_malloc(M * 2 * di * sizeof(float));      // (M, 2di): xi | z
    float *xdbl = pm_malloc(M * nx * sizeof(float));        // (M, R+2N): dt_low | B | C
    float *u = pm_malloc(M * di * sizeof(float));           // (M, di)
    float *dpre = pm_malloc(M * di * sizeof(float));        // (M, di) dt_proj output, before bias and softplus
    float *Aexp = pm_malloc((size_t)di * N * sizeof(float));  // (di, N) exp(A_log) = -A
    for (int l = 0; l < c->n_layer; l++) {
        act_download(bk, xz, m->layers[l].xz, M * 2 * di, scratch);
        act_download(bk, xdbl, m->layers[l].xdbl, M * nx, scratch);
        // conv state: xi of the last K-1 tokens, oldest first; zeros before the document start
        float *cs = d->conv_state + (size_t)l * di * (K - 1);  // (di, K-1)
        for (int ch = 0; ch < di; ch++)
            for (int k = 0; k < K - 1; k++) {
                long t = (long)M - (K - 1) + k;
                cs[(size_t)ch * (K - 1) + k] = t >= 0 ? xz[(size_t)t * 2 * di + ch] : 0.0f;
            }
        // u = silu(conv(xi)): the taps before the document start read 0
        const float *cw = P(d, l, P_CONV_W), *cb = P(d, l, P_CONV_B);
#pragma omp parallel for schedule(static)
        for (long t = 0; t < (long)M; t++)
            for (int ch = 0; ch < di; ch++) {
                float acc = cb[ch];
                for (int k = 0; k < K; k++) {
                    long ts = t - (K - 1) + k;
                    if (ts >= 0) acc += cw[ch * K + k] * xz[(size_t)ts * 2 * di + ch];
                }
                u[(size_t)t * di + ch] = silu(acc);
            }
        // dpre = dt_low @ W_dt^T   (M, di)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, di, R, 1.0f, xdbl, nx, P(d, l, P_DT_W), R, 0.0f, dpre,
                    di);
        const float *dtb = P(d, l, P_DT_B), *A_log = P(d, l, P_A_LOG);
        for (size_t i = 0; i < (size_t)di * N; i++) Aexp[i] = expf(A_log[i]);
        // the recurrence from s = 0 at the document start, delta = softplus(dpre + b_dt); channels are independent
        float *ss = d->ssm_state + (size_t)l * di * N;  // (di, N)
#pragma omp parallel for schedule(static)
        for (int ch = 0; ch < di; ch++) {
            float *s = ss + (size_t)ch * N;
            const float *a = Aexp + (size_t)ch * N;
            for (int k = 0; k < N; k++) s[k] = 0.0f;
            for (size_t t = 0; t < M; t++) {
                const float dl = softplus(dpre[t * di + ch] + dtb[ch]), du = dl * u[t * di + ch];
                const float *Bv = xdbl + t * nx + R;  // (N) B of token t
                for (int k = 0; k < N; k++) s[k] = expf(-dl * a[k]) * s[k] + du * Bv[k];
            }
        }
    }
    // logits of the last token: the head over its final normed hidden state
    act_download(bk, d->xn, (const char *)m->xf + (M - 1) * dm * bk->act_bytes, dm, scratch);
    gemv(d->logits, P(d, -1, 0), d->xn, c->vocab_pad, dm);
    bk->free(scratch);
    free(xz), free(xdbl), free(u), free(dpre), free(Aexp);
    return d->logits;
}

typedef struct {
    float p;
    int id;
} Cand;

// The candidates in descending order of p, ties in ascending id (the order they come in): a stable LSD radix sort
// on p's bits, which order as unsigned integers for p >= 0. qsort took 7.5-14 ms a draw at a vocabulary of 50K,
// several times a 1.4b model's decoding step on the GPU (dev/sample_lab.c).
static void sort_desc(Cand *c, Cand *tmp, int n) {
    for (int shift = 0; shift < 32; shift += 8) {
        int start[257] = {0};
        for (int i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &c[i].p, sizeof b);
            start[((~b >> shift) & 255) + 1]++;
        }
        for (int k = 0; k < 256; k++) start[k + 1] += start[k];
        for (int i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &c[i].p, sizeof b);
            tmp[start[(~b >> shift) & 255]++] = c[i];
        }
        Cand *t = c;  // (four passes: the result ends where it began)
        c = tmp, tmp = t;
    }
}

static int cand_bucket(const Cand *c) {  // p's top 8 bits, reversed: bucket 0 holds the largest p
    uint32_t b;
    memcpy(&b, &c->p, sizeof b);
    return (int)((~b >> 24) & 255);
}

int sample_token(const float *logits, int vocab, float temperature, int top_k, float top_p, PmRng *rng) {
    if (temperature <= 0) {  // greedy
        int best = 0;
        for (int i = 1; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    // (the candidates' buffers are kept from call to call: allocated anew, a 50K vocabulary's 800 KB were
    // page-faulted in every token, a third of the time sampling took)
    static _Thread_local Cand *c = NULL, *tmp = NULL;
    static _Thread_local int cap = 0;
    if (vocab > cap) {
        free(c), free(tmp);
        c = pm_malloc(sizeof(Cand) * vocab), tmp = pm_malloc(sizeof(Cand) * vocab), cap = vocab;
    }
    float mx = logits[0];
    for (int i = 1; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    const int k_on = top_k > 0 && top_k < vocab, p_on = top_p > 0 && top_p < 1;
    // Two tries. The first sorts only a prefix of the order: the buckets of p (its top 8 bits) up to the ones that
    // hold the top_k-th candidate and the top_p crossing, and one more (the crossing is summed here in another
    // order than below); a trained model's nucleus is a few buckets of its 50K candidates. Where the walk below
    // does not end inside that prefix, the second try sorts every candidate. Either way the draw is the same.
    for (int attempt = 0;; attempt++) {
        double sum = 0;
        for (int i = 0; i < vocab; i++) {
            c[i].id = i;
            c[i].p = expf((logits[i] - mx) / temperature);
            sum += c[i].p;
        }
        int kept = vocab;
        if (attempt == 0 && (k_on || p_on)) {
            int count[256] = {0}, cut = 255, seen = 0;
            double mass[256] = {0}, acc = 0;
            for (int i = 0; i < vocab; i++) {
                const int k = cand_bucket(&c[i]);
                count[k]++, mass[k] += c[i].p;
            }
            for (int k = 0; k < 256; k++) {
                seen += count[k], acc += mass[k];
                if ((k_on && seen >= top_k) || (p_on && acc / sum >= top_p)) {
                    cut = k;
                    break;
                }
            }
            for (int k = cut + 1; k < 256; k++)
                if (count[k]) {
                    cut = k;
                    break;
                }
            kept = 0;
            for (int i = 0; i < vocab; i++)
                if (cand_bucket(&c[i]) <= cut) c[kept++] = c[i];  // (in id order: ties stay in it)
        }
        sort_desc(c, tmp, kept);
        int n = k_on && top_k < kept ? top_k : kept, crossed = 0;
        if (p_on) {
            double acc = 0;
            for (int i = 0; i < n; i++) {
                acc += c[i].p / sum;
                if (acc >= top_p) {
                    n = i + 1, crossed = 1;
                    break;
                }
            }
        }
        // past the prefix, the whole order would have walked on: sort everything
        if (kept < vocab && p_on && !crossed && !(k_on && top_k <= kept)) continue;
        double total = 0;
        for (int i = 0; i < n; i++) total += c[i].p;
        double r = pm_rng_uniform(rng) * total;
        int id = c[n - 1].id;
        for (int i = 0; i < n; i++) {
            r -= c[i].p;
            if (r <= 0) {
                id = c[i].id;
                break;
            }
        }
        return id;
    }
}

static Tokenizer *find_tokenizer(const char *ckpt, const char *flag) {
    if (flag) return tokenizer_load(flag);
    char p[4200];
    if (checkpoint_tokenizer(ckpt, p, sizeof p) == 0) return tokenizer_load(p);
    pm_error("%s: no tokenizer.json beside the checkpoint or in its run directory (pass --tokenizer)", ckpt);
    return NULL;
}

int cmd_generate(int argc, char **argv) {
    const char *checkpoint = NULL, *prompt = "", *tokpath = NULL, *prefill = "parallel", *device = "cpu",
               *decode = "device";
    int n_tokens = 200, top_k = 0, seed = 1, stop_eod = 1, prefill_max = 1024, samples = 1;
    float temperature = 0.8f, top_p = 0.95f;
    int no_stop = 0;
    ArgSpec specs[] = {
        {"--checkpoint", ARG_STR, &checkpoint, "checkpoint directory, or a run directory (newest checkpoint)"},
        {"--prompt", ARG_STR, &prompt, "text to continue"},
        {"--tokens", ARG_INT, &n_tokens, "tokens to generate"},
        {"--temperature", ARG_FLOAT, &temperature, "softmax temperature (0: greedy)"},
        {"--top-k", ARG_INT, &top_k, "sample from the k most likely tokens (0: all)"},
        {"--top-p", ARG_FLOAT, &top_p, "nucleus sampling mass (1: off)"},
        {"--seed", ARG_INT, &seed, "sampling seed (sample i of --samples draws with seed + i)"},
        {"--samples", ARG_INT, &samples,
         "continuations of the prompt, one after another, each from the prompt's state (prefilled once)"},
        {"--tokenizer", ARG_STR, &tokpath, "tokenizer (default: the one saved with the run)"},
        {"--no-stop", ARG_BOOL, &no_stop, "keep going past an end-of-document token"},
        {"--prefill", ARG_STR, &prefill, "prompt prefill: parallel (one forward) or recurrent (token by token)"},
        {"--prefill-max", ARG_INT, &prefill_max,
         "longest prompt prefix prefilled in parallel (activations grow with it: 0.6 GB at 1024 for 130m on the "
         "CPU); the rest is fed recurrently"},
        {"--device", ARG_STR, &device, "backend of the parallel prefill and of decoding: cpu or cuda"},
        {"--decode", ARG_STR, &decode, "where tokens are decoded: device (--device's) or host (the CPU reference)"},
    };
    args_parse(argc, argv, "packmamba generate --checkpoint PATH [--prompt TEXT] [options]", specs,
               sizeof specs / sizeof specs[0], NULL, 0, NULL);
    if (!checkpoint) pm_die("generate: --checkpoint PATH is required");
    if (n_tokens < 0) pm_die("generate: --tokens must be >= 0");
    if (!(temperature >= 0))  // (the parser has refused nan and inf)
        pm_die("generate: --temperature %g: must be >= 0 (0: greedy)", (double)temperature);
    if (!(top_p > 0 && top_p <= 1)) pm_die("generate: --top-p %g: must be in (0, 1] (1: off)", (double)top_p);
    if (top_k < 0) pm_die("generate: --top-k %d: must be >= 0 (0: all tokens)", top_k);
    if (samples < 1) pm_die("generate: --samples %d: must be >= 1", samples);
    const int parallel = strcmp(prefill, "parallel") == 0;
    if (!parallel && strcmp(prefill, "recurrent") != 0)
        pm_die("generate: --prefill must be parallel or recurrent, not '%s'", prefill);
    if (prefill_max < 1) pm_die("generate: --prefill-max must be >= 1");
    const int decode_host = strcmp(decode, "host") == 0;
    if (!decode_host && strcmp(decode, "device") != 0)
        pm_die("generate: --decode must be device or host, not '%s'", decode);
    const Backend *bk = backend_get(device, 0);
    stop_eod = !no_stop;
    char ckpt[4096];
    if (checkpoint_resolve(checkpoint, ckpt, sizeof ckpt) != 0) pm_die("%s", pm_last_error());
    ModelConfig cfg;
    if (checkpoint_load_config(ckpt, &cfg) != 0) pm_die("%s", pm_last_error());
    Model m;
    model_create(&m, &cfg, bk, 0);
    m.keep_scan_states = 0;  // generation has no backward: nothing to keep states for
    if (checkpoint_load_model(ckpt, &m) != 0) pm_die("%s", pm_last_error());
    Tokenizer *tk = find_tokenizer(ckpt, tokpath);
    if (!tk) pm_die("%s", pm_last_error());
    if (tokenizer_vocab_size(tk) > cfg.vocab_size)
        pm_die("%s: tokenizer has %d ids but the model only %d", ckpt, tokenizer_vocab_size(tk), cfg.vocab_size);

    int32_t *ids = NULL;
    size_t cap = 0;
    int64_t n = tokenizer_encode(tk, prompt, strlen(prompt), 1, &ids, &cap);
    if (n < 0) pm_die("generate: --prompt: %s", pm_last_error());
    // The samples are decoded `lanes` at a time, each lane a sample (on the GPU each weight is read once for up to
    // CUDA_DECODE_MAX_LANES lanes: 8 lanes give ~2.6x one lane's tokens at 370m; on the host lanes would run one
    // after another, so one lane does).
    Decoder *d = NULL;  // on the GPU where the model is; a shape its kernels do not take decodes on the host
    if (!decode_host && strcmp(bk->name, "cuda") == 0 &&
        !(d = decoder_create_cuda_lanes(&m, samples < CUDA_DECODE_MAX_LANES ? samples : CUDA_DECODE_MAX_LANES)))
        fprintf(stderr, "packmamba: note: decoding on the host: %s\n", pm_last_error());
    if (!d) d = decoder_create(&m);
    const int lanes = decoder_lanes(d);
    // Prefill: an empty prompt starts from the end-of-document token, as after a document boundary.
    if (n == 0) {
        if (cap < 1) ids = pm_realloc(ids, sizeof(int32_t)), cap = 1;
        ids[0] = tokenizer_eod_id(tk);
    }
    const int64_t n_pre = n == 0 ? 1 : n;
    const float *logits = NULL;
    double t0 = pm_now();
    int64_t done = 0;
    if (parallel) {
        done = n_pre < prefill_max ? n_pre : prefill_max;
        logits = decoder_prefill(d, &m, ids, (int)done);
    }
    for (int64_t i = done; i < n_pre; i++) logits = decoder_step(d, ids[i]);
    double t1 = pm_now();
    // Each sample from the prompt's state and logits (kept aside when there are several), with its own seed: lane s
    // of a group of samples g0 .. g0 + lanes - 1 decodes sample g0 + s. The first sample of a group is written as it
    // comes, the others when the group ends, so that the output is each sample whole, in order (as decoded one by
    // one); a lane whose sample has ended is fed the end-of-document token and its logits go unread.
    const size_t vp = cfg.vocab_pad;
    float *first = samples > 1 ? pm_malloc(sizeof(float) * vp) : NULL;
    if (first) memcpy(first, logits, sizeof(float) * vp), decoder_save(d);
    PmRng *rngs = pm_malloc(sizeof(PmRng) * lanes);
    int32_t *next = pm_malloc(sizeof(int32_t) * lanes);
    int *live = pm_malloc(sizeof(int) * lanes), *drawn = pm_malloc(sizeof(int) * lanes);
    char **text = pm_calloc(lanes, sizeof(char *));
    size_t *text_len = pm_calloc(lanes, sizeof(size_t)), *text_cap = pm_calloc(lanes, sizeof(size_t));
    int produced = 0;
    for (int g0 = 0; g0 < samples; g0 += lanes) {
        const int group = samples - g0 < lanes ? samples - g0 : lanes;
        if (g0 > 0) decoder_restore(d);
        if (lanes > 1) decoder_fill_lanes(d);
        for (int s = 0; s < lanes; s++) pm_rng_seed(&rngs[s], (uint64_t)seed + (uint64_t)(g0 + s));
        for (int s = 0; s < lanes; s++) live[s] = s < group, text_len[s] = 0;
        if (samples > 1) printf("%s=== sample %d of %d ===\n", g0 ? "\n" : "", g0 + 1, samples);
        fwrite(prompt, 1, strlen(prompt), stdout);
        fflush(stdout);
        const float *lg = g0 > 0 ? first : logits;  // (lane s's logits at lg + s * vp once stepped)
        size_t lstride = 0;                         // the prompt's logits serve every lane
        for (int k = 0; k < n_tokens; k++) {
            int any = 0;
            // the lanes' draws in parallel (each from its own generator: the same draws in any order; a draw at a
            // 50K vocabulary takes about as long as a 370m decoding step)
#pragma omp parallel for schedule(static, 1) if (lanes > 1)
            for (int s = 0; s < lanes; s++)
                drawn[s] = live[s] ? sample_token(lg + s * lstride, tokenizer_vocab_size(tk), temperature, top_k, top_p,
                                                  &rngs[s])
                                   : -1;
            for (int s = 0; s < lanes; s++) {
                next[s] = tokenizer_eod_id(tk);
                if (!live[s]) continue;
                const int id = drawn[s];
                if (stop_eod && id == tokenizer_eod_id(tk)) {
                    live[s] = 0;
                    continue;
                }
                size_t len;
                char *piece = tokenizer_decode(tk, &id, 1, &len);
                if (s == 0) {
                    fwrite(piece, 1, len, stdout);
                    fflush(stdout);
                } else {
                    if (text_len[s] + len > text_cap[s])
                        text_cap[s] = 2 * (text_len[s] + len), text[s] = pm_realloc(text[s], text_cap[s]);
                    memcpy(text[s] + text_len[s], piece, len), text_len[s] += len;
                }
                free(piece);
                next[s] = id, any = 1, produced++;
            }
            if (!any) break;
            lg = decoder_step_lanes(d, next), lstride = vp;
        }
        for (int s = 1; s < group; s++) {
            printf("\n=== sample %d of %d ===\n", g0 + s + 1, samples);
            fwrite(prompt, 1, strlen(prompt), stdout);
            fwrite(text[s], 1, text_len[s], stdout);
        }
        fflush(stdout);
    }
    for (int s = 0; s < lanes; s++) free(text[s]);
    free(text), free(text_len), free(text_cap), free(live), free(drawn), free(next), free(rngs);
    free(first);
    double t2 = pm_now();
    fprintf(stderr,
            "\npackmamba: prefill %lld tokens (%s on %s, %.0f tok/s), generated %d tokens (%.0f tok/s, decoded on %s)\n",
            (long long)n_pre, parallel ? "parallel" : "recurrent", bk->name, n_pre / (t1 - t0 + 1e-9), produced,
            produced / (t2 - t1 + 1e-9), d->gpu ? "the GPU" : "the host");
    free(ids);
    decoder_free(d);
    tokenizer_free(tk);
    model_destroy(&m);
    return 0;
}
