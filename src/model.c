// model.c — the Mamba-1 LM on the Backend interface: presets, parameter layout, initialization, forward,
// backward, optimizer step. Nothing in here knows whether it runs on the CPU or the GPU.
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

// ---------------------------------------------------------------------------------------------------------------
// configuration

static const struct {
    const char *name;
    int n_layer, d_model;
} presets[] = {
    {"tiny", 4, 128}, {"130m", 24, 768}, {"370m", 48, 1024}, {"790m", 48, 1536}, {"1.4b", 48, 2048}, {"2.8b", 64, 2560},
};

const char *config_preset_names(void) { return "tiny, 130m, 370m, 790m, 1.4b, 2.8b"; }

void config_derive(ModelConfig *c) {
    if (c->pad_vocab_multiple <= 0) c->pad_vocab_multiple = 8;
    if (c->d_state <= 0) c->d_state = 16;
    if (c->d_conv <= 0) c->d_conv = 4;
    if (c->expand <= 0) c->expand = 2;
    if (c->norm_eps <= 0) c->norm_eps = 1e-5f;
    int p = c->pad_vocab_multiple;
    c->vocab_pad = (c->vocab_size + p - 1) / p * p;
    c->d_inner = c->expand * c->d_model;
    c->dt_rank = (c->d_model + 15) / 16;
}

int config_preset(const char *name, int vocab_size, ModelConfig *c) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name) == 0) {
            memset(c, 0, sizeof *c);
            c->n_layer = presets[i].n_layer;
            c->d_model = presets[i].d_model;
            c->vocab_size = vocab_size;
            config_derive(c);
            return 0;
        }
    }
    return pm_error("unknown preset '%s' (expected one of: %s)", name, config_preset_names());
}

// ---------------------------------------------------------------------------------------------------------------
// parameter layout

int model_tensor_index(const ModelConfig *c, int layer, int which) {
    if (layer < 0) return which == 0 ? 0 : 1 + P_PER_LAYER * c->n_layer;
    return 1 + P_PER_LAYER * layer + which;
}

static void set_info(ParamInfo *p, size_t *off, const char *name, int decay, int ndim, int64_t d0, int64_t d1,
                     int64_t d2) {
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->shape[0] = d0, p->shape[1] = d1, p->shape[2] = d2;
    p->size = (size_t)d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    p->offset = *off;
    p->decay = decay;
    *off += p->size;
}

int model_param_infos(const ModelConfig *c, ParamInfo *out) {
    int n = 2 + P_PER_LAYER * c->n_layer;
    if (!out) return n;
    const int d = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv;
    size_t off = 0;
    char name[96];
    ParamInfo *p = out;
    set_info(p++, &off, "backbone.embedding.weight", 1, 2, c->vocab_pad, d, 0);  // (Vp, d)
    for (int l = 0; l < c->n_layer; l++) {
#define NAME(s) (snprintf(name, sizeof name, "backbone.layers.%d.%s", l, s), name)
        set_info(p++, &off, NAME("norm.weight"), 0, 1, d, 0, 0);                   // (d)
        set_info(p++, &off, NAME("mixer.A_log"), 0, 2, di, N, 0);                  // (di, N)
        set_info(p++, &off, NAME("mixer.D"), 0, 1, di, 0, 0);                      // (di)
        set_info(p++, &off, NAME("mixer.in_proj.weight"), 1, 2, 2 * di, d, 0);     // (2di, d)
        set_info(p++, &off, NAME("mixer.conv1d.weight"), 0, 3, di, 1, K);          // (di, 1, K)
        set_info(p++, &off, NAME("mixer.conv1d.bias"), 0, 1, di, 0, 0);            // (di)
        set_info(p++, &off, NAME("mixer.x_proj.weight"), 1, 2, R + 2 * N, di, 0);  // (R+2N, di)
        set_info(p++, &off, NAME("mixer.dt_proj.weight"), 1, 2, di, R, 0);         // (di, R)
        set_info(p++, &off, NAME("mixer.dt_proj.bias"), 0, 1, di, 0, 0);           // (di)
        set_info(p++, &off, NAME("mixer.out_proj.weight"), 1, 2, d, di, 0);        // (d, di)
#undef NAME
    }
    set_info(p++, &off, "backbone.norm_f.weight", 0, 1, d, 0, 0);  // (d)
    return n;
}

size_t model_num_params(const ModelConfig *c) {
    int n = model_param_infos(c, NULL);
    ParamInfo *t = pm_malloc(sizeof(ParamInfo) * n);
    model_param_infos(c, t);
    size_t total = t[n - 1].offset + t[n - 1].size;
    free(t);
    return total;
}

// Whether bk computes from an ACT copy of the weights beside the F32 masters: every backend but the CPU, which
// computes straight from the masters (the one place this is decided: model_create lays the copy out by it, and the
// memory estimates and the budget count it by it).
static int keeps_weight_copy(const Backend *bk) {
    return !(bk->act_bytes == bk->f32_bytes && strcmp(bk->name, "cpu") == 0);
}

// Elements of one layer's parameters: the layers lie together between the embedding (tensor 0) and the final norm
// (the last tensor), layer after layer.
static size_t layer_span_of(const ParamInfo *t, int n_tensors, int n_layer) {
    return (t[n_tensors - 1].offset - t[1].offset) / (size_t)n_layer;
}

// Typed views into flat buffers. F32 buffers hold bk->f32_bytes per element, ACT buffers bk->act_bytes.
static inline void *f32_at(const Model *m, const void *base, size_t off) {
    return (char *)base + off * m->bk->f32_bytes;
}
static inline void *act_at(const Model *m, const void *base, size_t off) {
    return (char *)base + off * m->bk->act_bytes;
}
// Parameter `which` of layer l (l < 0: embedding/norm_f) inside a flat buffer of either kind.
static inline size_t poff(const Model *m, int l, int which) {
    return m->tensors[model_tensor_index(&m->cfg, l, which)].offset;
}
#define PF32(buf, l, w) f32_at(m, (buf), poff(m, (l), (w)))     // F32 view (master, grads)
// ACT compute copy of a weight: in params_act's full layout, or (weights_cast) a layer's in its slot
static inline void *pact(const Model *m, int l, int which) {
    if (m->weights_cast && l >= 0)
        return act_at(m, m->params_act,
                      m->tensors[0].size + (size_t)(l & 1) * m->layer_span + poff(m, l, which) - poff(m, l, 0));
    return act_at(m, m->params_act, poff(m, l, which));
}
#define PACT(l, w) pact(m, (l), (w))

// ---------------------------------------------------------------------------------------------------------------
// creation and initialization

void model_create(Model *m, const ModelConfig *c, const Backend *bk, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    config_derive(&m->cfg);
    m->bk = bk;
    m->keep_scan_states = -1;  // every layer
    m->keep_in_proj = -1;      // every layer
    m->slot_layer[0] = m->slot_layer[1] = -1;
    m->n_tensors = model_param_infos(&m->cfg, NULL);
    m->tensors = pm_malloc(sizeof(ParamInfo) * m->n_tensors);
    model_param_infos(&m->cfg, m->tensors);
    m->segments = pm_malloc(sizeof(ParamSegment) * m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++)
        m->segments[i] = (ParamSegment){m->tensors[i].offset, m->tensors[i].size, m->tensors[i].decay};
    m->n_params = m->tensors[m->n_tensors - 1].offset + m->tensors[m->n_tensors - 1].size;
    m->params = bk->alloc(m->n_params * bk->f32_bytes);
    m->grads = bk->alloc(m->n_params * bk->f32_bytes);
    m->params_act = keeps_weight_copy(bk) ? bk->alloc(m->n_params * bk->act_bytes) : m->params;
    m->layer_span = layer_span_of(m->tensors, m->n_tensors, m->cfg.n_layer);
    model_init_weights(m, seed);
}

// x[i] ~ U(-bound, bound), in order from rng.
static void fill_uniform(float *x, size_t n, float bound, PmRng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = -bound + 2.0f * bound * pm_rng_uniform(rng);
}

void model_init_weights(Model *m, uint64_t seed) {
    model_settle_updates(m);  // (nothing pending may land on the new values)
    const ModelConfig *c = &m->cfg;
    const int d = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv;
    float *w = pm_malloc(m->n_params * sizeof(float));
    PmRng rng;
    pm_rng_seed(&rng, seed);
#define UNIFORM(lo, hi) ((lo) + ((hi) - (lo)) * pm_rng_uniform(&rng))
    for (int t = 0; t < m->n_tensors; t++) {
        const ParamInfo *p = &m->tensors[t];
        float *x = w + p->offset;
        int which = t == 0 ? -1 : t == m->n_tensors - 1 ? -2 : (t - 1) % P_PER_LAYER;
        switch (which) {
            case -1:  // embedding N(0, 0.02)
                for (size_t i = 0; i < p->size; i++) x[i] = 0.02f * pm_rng_normal(&rng);
                break;
            case -2:
            case P_NORM:
                for (size_t i = 0; i < p->size; i++) x[i] = 1.0f;
                break;
            case P_A_LOG:  // A = -(1..N) per channel, S4D-real
                for (int ch = 0; ch < di; ch++)
                    for (int n = 0; n < N; n++) x[(size_t)ch * N + n] = logf((float)(n + 1));
                break;
            case P_D:
                for (size_t i = 0; i < p->size; i++) x[i] = 1.0f;
                break;
            case P_IN_PROJ:
                fill_uniform(x, p->size, 1.0f / sqrtf((float)d), &rng);
                break;
            case P_X_PROJ:
                fill_uniform(x, p->size, 1.0f / sqrtf((float)di), &rng);
                break;
            case P_CONV_W:
            case P_CONV_B:
                fill_uniform(x, p->size, 1.0f / sqrtf((float)K), &rng);
                break;
            case P_DT_W:
                fill_uniform(x, p->size, 1.0f / sqrtf((float)R), &rng);
                break;
            case P_DT_B:  // softplus(b) = dt, dt log-uniform in [1e-3, 0.1]
                for (size_t i = 0; i < p->size; i++) {
                    double dt = exp(UNIFORM(logf(1e-3f), logf(0.1f)));
                    if (dt < 1e-4) dt = 1e-4;
                    x[i] = (float)(dt + log(-expm1(-dt)));
                }
                break;
            case P_OUT_PROJ:  // scaled by 1/sqrt(n_layer) so the residual stream's variance does not grow with depth
                fill_uniform(x, p->size, 1.0f / sqrtf((float)di), &rng);
                for (size_t i = 0; i < p->size; i++) x[i] /= sqrtf((float)c->n_layer);
                break;
        }
    }
#undef UNIFORM
    model_set_params(m, w);
    free(w);
}

static void sync_compute_weights(Model *m) {
    if (m->params_act == m->params) return;
    m->slot_layer[0] = m->slot_layer[1] = -1;  // (cast again from the masters when next used)
    m->bk->f32_to_act(m->params_act, m->params, m->weights_cast ? m->tensors[0].size : m->n_params);
}
void model_sync_compute_weights(Model *m) {
    model_settle_updates(m);
    sync_compute_weights(m);
}

// ---------------------------------------------------------------------------------------------------------------
// the update ahead (Model.upd_lo)

// AdamW on the segments a names (AdamWArgs.part_*), on the queue ops go to now.
static void adamw_parts(Model *m, const AdamWArgs *a) {
    m->bk->adamw(m->params, m->params_act == m->params || m->weights_cast ? NULL : m->params_act, m->grads, m->adam_m,
                 m->adam_v, m->segments, m->n_tensors, a);
}

// The pending updates of layers upd_lo .. l_end - 1 (l_end = n_layer: the rest; the final norm is never pending),
// with the last step's arguments, on the queue ops go to now.
static void update_through(Model *m, int l_end) {
    AdamWArgs a = m->upd_args;
    a.part_first = model_tensor_index(&m->cfg, m->upd_lo, 0);
    a.part_count = model_tensor_index(&m->cfg, l_end, 0) - a.part_first;
    adamw_parts(m, &a);
    m->upd_lo = l_end < m->cfg.n_layer ? l_end : 0;
}

void model_settle_updates(Model *m) {
    if (m->upd_t) m->bk->side_wait(m->upd_t), m->upd_t = 0;
    if (m->upd_lo > 0) update_through(m, m->cfg.n_layer);
}

// Before layer l's forward: its update done (waited for where the side queue has it; applied here if still
// pending).
static void update_before_layer(Model *m, int l) {
    if (m->upd_t && m->upd_t_layer == l) m->bk->side_wait(m->upd_t), m->upd_t = 0;
    if (m->upd_lo > 0 && m->upd_lo <= l) update_through(m, l + 1);
}

// Just before layer l - 1's scan (l >= 1): layer l's update on the side queue, beside the scan (256 64-wide blocks
// two an SM at the 370m and 1.4b widths, 128 96-wide ones at 130m's: 4 SMs free; the side queue's lower priority
// gives the scan its SMs first, as for the backward's recompute ahead). Not under a hook (a profiler times each
// region on the main queue).
static void update_ahead(Model *m, int l) {
    if (m->upd_lo != l || m->hook || !m->bk->side_begin) return;
    m->bk->side_begin();
    update_through(m, l + 1);
    m->upd_t = m->bk->side_end();
    m->upd_t_layer = l;
}

// Lays params_act out for Model.cast_weights (the embedding's copy and two slots) or the full copy, if it is not
// already; a backend that computes from the masters has nothing to lay out.
static void layout_weight_copy(Model *m) {
    const Backend *bk = m->bk;
    if (m->params_act == m->params || (m->cast_weights != 0) == m->weights_cast) return;
    bk->free(m->params_act);
    m->weights_cast = m->cast_weights != 0;
    m->params_act = bk->alloc(model_weight_copy_elems(&m->cfg, m->weights_cast) * bk->act_bytes);
    model_sync_compute_weights(m);
}

// Layer l's weights into its slot (weights_cast), unless the slot holds them already.
static void layer_weights_ready(Model *m, int l) {
    if (!m->weights_cast || m->slot_layer[l & 1] == l) return;
    m->bk->f32_to_act(pact(m, l, 0), PF32(m->params, l, 0), m->layer_span);
    m->slot_layer[l & 1] = l;
}

// Host float <-> backend F32 (which is double in the float64 test build).
static void upload_f32(const Model *m, void *dst, const float *src, size_t n) {
    if (m->bk->f32_bytes == sizeof(float)) {
        m->bk->upload(dst, src, n * sizeof(float));
        return;
    }
    double *tmp = pm_malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) tmp[i] = src[i];
    m->bk->upload(dst, tmp, n * sizeof(double));
    free(tmp);
}

static void download_f32(const Model *m, float *dst, const void *src, size_t n) {
    if (m->bk->f32_bytes == sizeof(float)) {
        m->bk->download(dst, src, n * sizeof(float));
        return;
    }
    double *tmp = pm_malloc(n * sizeof(double));
    m->bk->download(tmp, src, n * sizeof(double));
    for (size_t i = 0; i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
}

void model_set_params(Model *m, const float *host) {
    model_settle_updates(m);  // (nothing pending may land on the new values)
    upload_f32(m, m->params, host, m->n_params);
    sync_compute_weights(m);
}
void model_get_params(const Model *m, float *host) {
    model_settle_updates((Model *)m);  // (pending updates are part of the parameters' value: applying them is
                                       // not a change a reader could see)
    download_f32(m, host, m->params, m->n_params);
}
// model_zero_grad deferred to the next backward: clear the buffer now (a reader came first; pending updates
// read the gradients before)
static void grads_settle(Model *m) {
    if (m->grads_unset) {
        model_settle_updates(m);
        m->bk->memzero(m->grads, m->n_params * m->bk->f32_bytes), m->grads_unset = 0;
    }
}

void model_get_grads(Model *m, float *host) {
    grads_settle(m);
    download_f32(m, host, m->grads, m->n_params);
}

void model_alloc_optimizer(Model *m) {
    if (m->adam_m) return;
    m->adam_m = m->bk->alloc(m->n_params * m->bk->f32_bytes);
    m->adam_v = m->bk->alloc(m->n_params * m->bk->f32_bytes);
}

// Carves one arena into tensors; offsets rounded to 256 bytes so every tensor is aligned for vector loads.
typedef struct {
    size_t bytes, elem;
    char *base;
} Carver;
static void *carve(Carver *cv, size_t n) {
    void *p = cv->base + cv->bytes;
    cv->bytes += (n * cv->elem + 255) / 256 * 256;
    return cv->base ? p : NULL;
}

// n elements, then `copies - 1` more of the same right after it (Model.dw_group's copies, each *cs bytes above the
// one before: the strides of a group's batches)
static void *carve_copies(Carver *cv, size_t n, int copies, size_t *cs) {
    const size_t b0 = cv->bytes;
    void *p = carve(cv, n);
    *cs = cv->bytes - b0;
    for (int j = 1; j < copies; j++) carve(cv, n);
    return p;
}

// group: Model.dw_group
static void layout_activations(const ModelConfig *c, Model *m, int B, int T, int group, Carver *a, Carver *f) {
    const size_t M = (size_t)B * T, d = c->d_model, di = c->d_inner, nx = c->dt_rank + 2 * c->d_state;
    for (int l = 0; l < c->n_layer; l++) {
        struct LayerActs *L = &m->layers[l];
        L->res = carve(f, M * d);
        L->rstd = carve(f, M);
        L->xdbl = carve(a, M * nx);
    }
    // What only some layers keep, after the loop, so that every layer's buffers above stay the same distance apart
    // whichever layers keep those (a group's batched weight gradients step through xdbl by one stride), and those
    // that keep activations have theirs the same distance apart too (u and y, ditto).
    const int a0 = c->n_layer - model_activation_layers(c, m->keep_activations, group);
    for (int l = 0; l < c->n_layer; l++) {
        struct LayerActs *L = &m->layers[l];
        L->xn = L->u = L->dpre = L->y = NULL;
        if (l >= a0) {
            L->xn = carve(a, M * d);
            L->u = carve(a, M * di);
            L->dpre = carve(a, M * di);
            L->y = carve(a, M * di);
        }
    }
    const int l0 = c->n_layer - model_in_proj_layers(c, m->keep_in_proj);
    for (int l = 0; l < c->n_layer; l++) m->layers[l].xz = l >= l0 ? carve(a, M * 2 * di) : NULL;
    // one buffer each, shared by the layers that keep none of their own (refilled by the backward's recompute),
    // in Model.recompute_slots slots
    const int S = m->recompute_slots > 1 ? 2 : 1;
    m->xn = m->u = m->dpre = NULL, m->u_cs = m->xn_cs = m->dpre_cs = m->xz_cs = 0;
    if (a0 > 0) {
        m->xn = carve_copies(a, M * d, S, &m->xn_cs);
        m->u = carve_copies(a, M * di, group * S, &m->u_cs);
        m->dpre = carve_copies(a, M * di, S, &m->dpre_cs);
    }
    m->xz = l0 > 0 ? carve_copies(a, M * 2 * di, S, &m->xz_cs) : NULL;
    m->h = carve(a, M * d);
    m->y = NULL, m->y_cs = 0;
    if (a0 > 0) m->y = carve_copies(a, M * di, group, &m->y_cs);
    m->res_f = carve(f, M * d);
    m->rstd_f = carve(f, M);
    m->losses = carve(f, M);
    m->dres = carve(f, M * d);
    m->xf = carve(a, M * d);
    m->dh = carve_copies(a, M * d, group, &m->dh_cs);
    m->dxn = carve(a, M * d);
    m->dxz = carve(a, M * 2 * di);
    m->du = carve(a, M * di);
    m->ddpre = carve_copies(a, M * di, group, &m->ddpre_cs);
    m->dxdbl = carve_copies(a, M * nx, group, &m->dxdbl_cs);
    m->dy = carve(a, M * di);
}

static int g_dw_group_limit;  // model_limit_dw_group; 0: none

void model_limit_dw_group(int max_group) { g_dw_group_limit = max_group > 0 ? max_group : 0; }

// 2 where the backward can recompute a layer ahead on the side queue (a backend with one; PM_RECOMPUTE_AHEAD=0
// turns it off), else 1: Model.recompute_slots.
int model_recompute_slots(const Backend *bk) {
    const char *e = getenv("PM_RECOMPUTE_AHEAD");
    return bk->side_begin && !(e && e[0] == '0') ? 2 : 1;
}

int model_dw_group(const ModelConfig *c, const Backend *bk) {
    const char *e = getenv("PM_DW_GROUP");
    if (!bk->matmul_dw_batch) return 1;
    int g = c->d_inner <= 2048 ? 2 : 1;
    if (e && *e) g = atoi(e), g = g < 1 ? 1 : g > PM_DW_GROUP_MAX ? PM_DW_GROUP_MAX : g;
    return g_dw_group_limit && g > g_dw_group_limit ? g_dw_group_limit : g;
}

// Bytes of one layer's scan states at (B, T), 256-aligned; 0 when not kept.
static size_t states_per_layer(const ModelConfig *c, const Backend *bk, int B, int T, int keep) {
    if (!keep || !bk->scan_states_bytes) return 0;
    return (bk->scan_states_bytes(B * T, T, c->d_inner, c->d_state) + 255) / 256 * 256;
}

// Layers that keep their scan states: the last `keep` of them (every layer when keep < 0 or keep >= n_layer).
static int kept_state_layers(const ModelConfig *c, int keep) {
    return keep == 0 ? 0 : keep > 0 && keep < c->n_layer ? keep : c->n_layer;
}

int model_state_layers(const ModelConfig *c, const Backend *bk, int keep_scan_states) {
    return bk->scan_states_bytes ? kept_state_layers(c, keep_scan_states) : 0;
}

void model_set_memory_settings(Model *m, const MemorySettings *s) {
    m->keep_activations = s->keep_activations;
    m->keep_scan_states = s->keep_scan_states;
    m->keep_in_proj = s->keep_in_proj;
    m->cast_weights = s->cast_weights;
    layout_weight_copy(m);  // (now, so the allocation is not made among the activations')
}

size_t model_weight_copy_elems(const ModelConfig *c, int cast_weights) {
    const int n = model_param_infos(c, NULL);
    ParamInfo *t = pm_malloc(sizeof(ParamInfo) * n);
    model_param_infos(c, t);
    const size_t elems =
        cast_weights ? t[0].size + 2 * layer_span_of(t, n, c->n_layer) : t[n - 1].offset + t[n - 1].size;
    free(t);
    return elems;
}

int model_in_proj_layers(const ModelConfig *c, int keep_in_proj) {
    return keep_in_proj < 0 || keep_in_proj >= c->n_layer ? c->n_layer : keep_in_proj;
}

int model_activation_layers(const ModelConfig *c, int keep_activations, int group) {
    if (keep_activations < 0 || keep_activations >= c->n_layer) return c->n_layer;
    return group > 1 ? keep_activations / group * group : keep_activations;
}

void model_memory_settings_text(char *buf, size_t n, const ModelConfig *c, const Backend *bk, const MemorySettings *s) {
    const int na = model_activation_layers(c, s->keep_activations, model_dw_group(c, bk));
    char acts[64];
    if (na == c->n_layer) snprintf(acts, sizeof acts, "keep activations");
    else if (na == 0) snprintf(acts, sizeof acts, "recompute activations");
    else snprintf(acts, sizeof acts, "activations for %d of %d layers", na, c->n_layer);
    snprintf(buf, n, "%s, scan states for %d of %d layers, in_proj outputs for %d of %d layers%s", acts,
             model_state_layers(c, bk, s->keep_scan_states), c->n_layer, model_in_proj_layers(c, s->keep_in_proj),
             c->n_layer, s->cast_weights && keeps_weight_copy(bk) ? ", layer weights cast when used" : "");
}

size_t model_scan_states_bytes(const ModelConfig *c, const Backend *bk, int B, int T, int keep_scan_states) {
    return (size_t)kept_state_layers(c, keep_scan_states) * states_per_layer(c, bk, B, T, keep_scan_states != 0);
}

size_t model_activation_bytes(const ModelConfig *c, const Backend *bk, int B, int T, int keep_scan_states,
                              int keep_activations, int keep_in_proj) {
    Model tmp = {0};
    tmp.keep_activations = keep_activations;
    tmp.keep_in_proj = keep_in_proj;
    tmp.recompute_slots = model_recompute_slots(bk);
    tmp.layers = pm_calloc(c->n_layer, sizeof(struct LayerActs));
    Carver a = {0, bk->act_bytes, NULL}, f = {0, bk->f32_bytes, NULL};
    layout_activations(c, &tmp, B, T, model_dw_group(c, bk), &a, &f);
    free(tmp.layers);
    return a.bytes + f.bytes + 3 * (size_t)B * T * sizeof(int32_t) +
           model_scan_states_bytes(c, bk, B, T, keep_scan_states);
}

size_t model_train_bytes(const ModelConfig *c, const Backend *bk, int B, int T, const MemorySettings *s) {
    const size_t np = model_num_params(c), f = bk->f32_bytes;
    size_t bytes = np * 4 * f;  // params, grads, m, v (+ the ACT copy)
    if (keeps_weight_copy(bk)) bytes += model_weight_copy_elems(c, s->cast_weights) * bk->act_bytes;
    bytes += model_activation_bytes(c, bk, B, T, s->keep_scan_states, s->keep_activations, s->keep_in_proj);
    if (bk->workspace_bytes)
        bytes += bk->workspace_bytes(B * T, T, c->d_model, c->d_inner, c->d_state, c->d_conv, c->vocab_pad);
    return bytes;
}

int model_fit_memory(const ModelConfig *c, const Backend *bk, int B, int T, size_t budget, MemorySettings *s) {
    const int L = c->n_layer;
    const int G = model_dw_group(c, bk);
    MemorySettings cand = {-1, -1, -1, 0};  // every layer's activations
    if (model_train_bytes(c, bk, B, T, &cand) <= budget) return *s = cand, 0;
    for (int n = (L - 1) / G * G; n > 0; n -= G) {  // then for fewer layers, whole groups
        cand = (MemorySettings){n, -1, -1, 0};
        if (model_train_bytes(c, bk, B, T, &cand) <= budget) return *s = cand, 0;
    }
    for (int n = L; n >= 0; n--) {  // the default (n = L: every layer), then states for fewer layers
        cand = (MemorySettings){0, n == L ? -1 : n, -1, 0};
        if (model_train_bytes(c, bk, B, T, &cand) <= budget) return *s = cand, 0;
    }
    const int cw = keeps_weight_copy(bk);  // a weight copy to give up: cast the layers' when used
    if (cw) {
        cand = (MemorySettings){0, 0, -1, 1};
        if (model_train_bytes(c, bk, B, T, &cand) <= budget) return *s = cand, 0;
    }
    for (int k = L - 1; k >= 0; k--) {  // no states; in_proj outputs for fewer layers
        cand = (MemorySettings){0, 0, k, cw};
        if (model_train_bytes(c, bk, B, T, &cand) <= budget) return *s = cand, 0;
    }
    *s = cand;  // the leanest: no states, no in_proj output kept, the layers' weights cast when used
    return -1;
}

// ---------------------------------------------------------------------------------------------------------------
// carried state (Model.carry_on)

static size_t carry_h_layer(const Model *m) { return (size_t)m->B * m->cfg.d_inner * m->cfg.d_state; }
static size_t carry_hist_layer(const Model *m) { return (size_t)m->B * (m->cfg.d_conv - 1) * m->cfg.d_inner; }

static void free_carry(Model *m) {
    if (!m->carry_on) return;
    const Backend *bk = m->bk;
    for (int i = 0; i < 2; i++) bk->free(m->carry_h[i]), bk->free(m->carry_hist[i]);
    bk->free(m->carry_first), bk->free(m->carry_last);
    free(m->carry_all);
    m->carry_all = NULL;
    m->carry_on = 0;
}

void model_alloc_carry(Model *m) {
    const Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    if (!bk->carry_state_out)
        pm_die("the %s backend cannot carry state from batch to batch", bk->name);
    if (!m->layers) pm_die("model: carried state before the activations are allocated");
    if (m->T < c->d_conv - 1) pm_die("carried state needs rows of at least d_conv - 1 = %d tokens (got %d)", c->d_conv - 1, m->T);
    if (c->d_state > 64) pm_die("carried state supports d_state <= 64 (got %d)", c->d_state);
    free_carry(m);
    for (int i = 0; i < 2; i++) {
        m->carry_h[i] = bk->alloc((size_t)c->n_layer * carry_h_layer(m) * bk->f32_bytes);
        m->carry_hist[i] = bk->alloc((size_t)c->n_layer * carry_hist_layer(m) * bk->act_bytes);
    }
    m->carry_first = bk->alloc((size_t)m->B * sizeof(int32_t));
    m->carry_last = bk->alloc((size_t)m->B * sizeof(int32_t));
    m->carry_on = 1, m->carry_cur = m->carry_used = 0, m->carry_rows_in = 0;
    m->carry_row0 = 0, m->carry_rows = m->B, m->carry_all = NULL;
}

size_t model_carry_train_bytes(const ModelConfig *c, const Backend *bk, int B, int T) {
    const size_t L = c->n_layer, di = c->d_inner;
    size_t bytes = 2 * L * (size_t)B * (di * c->d_state * bk->f32_bytes + (size_t)(c->d_conv - 1) * di * bk->act_bytes);
    bytes += 2 * (size_t)B * sizeof(int32_t);  // first, last
    if (bk->carry_workspace_bytes) bytes += bk->carry_workspace_bytes(B * T, T, c->d_inner, c->d_state);
    return bytes;
}

size_t model_carry_bytes(const Model *m) {
    if (!m->carry_on) return 0;
    return (size_t)m->cfg.n_layer * (carry_h_layer(m) * m->bk->f32_bytes + carry_hist_layer(m) * m->bk->act_bytes);
}
void model_get_carry(const Model *m, void *host) {
    const size_t hb = (size_t)m->cfg.n_layer * carry_h_layer(m) * m->bk->f32_bytes;
    m->bk->synchronize();
    m->bk->download(host, m->carry_h[m->carry_cur], hb);
    m->bk->download((char *)host + hb, m->carry_hist[m->carry_cur], model_carry_bytes(m) - hb);
}
void model_set_carry(Model *m, const void *host) {
    const size_t hb = (size_t)m->cfg.n_layer * carry_h_layer(m) * m->bk->f32_bytes;
    m->bk->upload(m->carry_h[m->carry_cur], host, hb);
    m->bk->upload(m->carry_hist[m->carry_cur], (const char *)host + hb, model_carry_bytes(m) - hb);
}

// The batch's carried rows: Model.carry_rows_in, and the carry ops' first[r] (the length of a continuing row's
// first document segment: up to its next document start) and last[r] (the start of the last segment of a row that
// goes on in the next batch; -1 for the others). Returns whether some row goes on (the state to keep).
static int carry_prepare(Model *m, const Batch *b) {
    int in = 0, out = 0;
    for (int r = 0; b->carry_in && r < b->B; r++) in += b->carry_in[r] != 0, out += b->carry_out[r] != 0;
    m->carry_rows_in = in;
    m->carry_used = m->carry_cur;
    if (!in && !out) return 0;
    if (!m->carry_on) pm_die("model: a batch carries state from the one before, and the model keeps none (model_alloc_carry)");
    const int B = b->B, T = b->T;
    int32_t *fl = pm_malloc(2 * (size_t)B * sizeof(int32_t));
    for (int r = 0; r < B; r++) {
        const int32_t *p = b->pos + (size_t)r * T;
        int t = 1;
        while (t < T && p[t] != 0) t++;
        fl[r] = b->carry_in[r] ? t : 0;
        t = T - 1;
        while (t > 0 && p[t] != 0) t--;
        fl[B + r] = b->carry_out[r] ? t : -1;
    }
    m->bk->upload(m->carry_first, fl, (size_t)B * sizeof(int32_t));
    m->bk->upload(m->carry_last, fl + B, (size_t)B * sizeof(int32_t));
    free(fl);
    return out > 0;
}

// Layer l's slices of the carried state: the set `set`'s scan states h (F32) and conv inputs (ACT).
static void *carry_h_at(const Model *m, int set, int l) { return f32_at(m, m->carry_h[set], (size_t)l * carry_h_layer(m)); }
static void *carry_hist_at(const Model *m, int set, int l) {
    return act_at(m, m->carry_hist[set], (size_t)l * carry_hist_layer(m));
}
// What the ops take of the state carried into the batch's rows: first, and layer l's scan state h0 and conv inputs
// hist from the set the batch reads (carry_used); NULL where no row of the batch continues a document.
static const int32_t *carried_first(const Model *m) { return m->carry_rows_in ? m->carry_first : NULL; }
static void *carried_h0(const Model *m, int l) { return m->carry_rows_in ? carry_h_at(m, m->carry_used, l) : NULL; }
static void *carried_hist(const Model *m, int l) {
    return m->carry_rows_in ? carry_hist_at(m, m->carry_used, l) : NULL;
}

static void free_activations(Model *m) {
    if (!m->layers) return;
    const Backend *bk = m->bk;
    bk->free(m->arena_act);
    bk->free(m->arena_f32);
    bk->free(m->tokens);
    bk->free(m->pos);
    bk->free(m->targets);
    if (m->arena_states) bk->free(m->arena_states);
    m->arena_states = NULL, m->states_cap = 0, m->states_valid = 0;
    free_carry(m);  // sized for the activations' B
    free(m->layers);
    free(m->host_losses);
    m->layers = NULL;
}

void model_alloc_activations(Model *m, int B, int T) {
    const Backend *bk = m->bk;
    free_activations(m);  // re-allocation for a new shape
    layout_weight_copy(m);
    m->B = B, m->T = T;
    m->layers = pm_calloc(m->cfg.n_layer, sizeof(struct LayerActs));
    Carver a = {0, bk->act_bytes, NULL}, f = {0, bk->f32_bytes, NULL};
    m->dw_group = m->dw_copies = model_dw_group(&m->cfg, bk);
    m->recompute_slots = model_recompute_slots(bk);
    layout_activations(&m->cfg, m, B, T, m->dw_group, &a, &f);  // first pass: sizes only
    a.base = bk->alloc(a.bytes);
    f.base = bk->alloc(f.bytes);
    m->arena_act = a.base, m->arena_f32 = f.base;
    a.bytes = f.bytes = 0;
    layout_activations(&m->cfg, m, B, T, m->dw_group, &a, &f);  // second pass: pointers
    size_t M = (size_t)B * T;
    m->tokens = bk->alloc(M * sizeof(int32_t));
    m->pos = bk->alloc(M * sizeof(int32_t));
    m->targets = bk->alloc(M * sizeof(int32_t));
    m->host_losses = pm_calloc(M, sizeof(double));
    int nkeep = kept_state_layers(&m->cfg, m->keep_scan_states), l0 = m->cfg.n_layer - nkeep;
    m->states_cap = states_per_layer(&m->cfg, bk, B, T, nkeep > 0);
    if (m->states_cap) {
        m->arena_states = bk->alloc(nkeep * m->states_cap);
        for (int l = l0; l < m->cfg.n_layer; l++)
            m->layers[l].scan_states = (char *)m->arena_states + (l - l0) * m->states_cap;
    }
}

void model_destroy(Model *m) {
    const Backend *bk = m->bk;
    free_activations(m);
    if (m->params_act != m->params) bk->free(m->params_act);
    bk->free(m->params);
    bk->free(m->grads);
    if (m->adam_m) bk->free(m->adam_m), bk->free(m->adam_v);
    free(m->tensors);
    free(m->segments);
    memset(m, 0, sizeof *m);
}

// ---------------------------------------------------------------------------------------------------------------
// forward and backward

// Brackets one op with the profiling hook (if any): REGION(m, "fwd.scan", bk->scan_fwd(...)).
#define REGION(m, name, ...)                                \
    do {                                                    \
        if ((m)->hook) (m)->hook((m)->hook_ctx, (name), 1); \
        __VA_ARGS__;                                        \
        if ((m)->hook) (m)->hook((m)->hook_ctx, (name), 0); \
    } while (0)

// A layer's xz, xn, u, dpre, y: its own where it keeps them (xz as keep_in_proj says; the rest with
// keep_activations), else the shared buffers.
static void layer_mixer_buffers(const Model *m, const struct LayerActs *L, void **xz, void **xn, void **u,
                                void **dpre, void **y) {
    *xz = L->xz ? L->xz : m->xz;
    *xn = L->xn ? L->xn : m->xn, *u = L->u ? L->u : m->u, *dpre = L->dpre ? L->dpre : m->dpre;
    *y = L->y ? L->y : m->y;
}

// keep_states: a backward follows (training), so leave the scan states for it where they are kept and fit.
static void forward_body(Model *m, const Batch *b, int keep_states) {
    const Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    const int d = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv, nx = R + 2 * N;
    if (b->B * b->T > m->B * m->T || b->T > m->T)
        pm_die("batch (%d x %d) is larger than the model's activations (%d x %d)", b->B, b->T, m->B, m->T);
    const int M = b->B * b->T, T = b->T;
    m->cur_M = M, m->cur_T = T;
    bk->upload(m->tokens, b->tokens, (size_t)M * sizeof(int32_t));
    bk->upload(m->pos, b->pos, (size_t)M * sizeof(int32_t));
    bk->upload(m->targets, b->targets, (size_t)M * sizeof(int32_t));
    m->n_valid = b->n_valid;
    const int carry_out = carry_prepare(m, b);
    // a batch of shorter rows can need more state space than the allocated shape: then the backward recomputes.
    // Rows that go on in the next batch want them without a backward too: the state out walks on from the last.
    m->states_valid = (keep_states || carry_out) && m->states_cap && bk->scan_states_bytes(M, T, di, N) <= m->states_cap;
    const int cin = m->carry_used, cout = cin ^ 1;  // the carried sets read and written

    REGION(m, "fwd.embedding", bk->embedding_fwd(m->layers[0].res, m->tokens, PACT(-1, 0), M, d));
    for (int l = 0; l < c->n_layer; l++) {
        struct LayerActs *L = &m->layers[l];
        void *xz, *xn, *u, *dpre, *y;
        update_before_layer(m, l);
        layer_weights_ready(m, l);
        layer_mixer_buffers(m, L, &xz, &xn, &u, &dpre, &y);
        const void *res_in = l == 0 ? L->res : m->layers[l - 1].res;
        const void *h_in = l == 0 ? NULL : m->h;  // the previous layer's mixer output
        REGION(
            m, "fwd.norm",
            bk->add_rmsnorm_fwd(L->res, xn, L->rstd, res_in, h_in, PF32(m->params, l, P_NORM), M, d, c->norm_eps));
        REGION(m, "fwd.in_proj",
               bk->matmul_fwd(xz, 2 * di, xn, d, PACT(l, P_IN_PROJ), NULL, M, 2 * di, d));  // (M, 2di)
        // (the first tokens of continuing rows see the previous piece's inputs)
        REGION(m, "fwd.conv",
               bk->conv_silu_fwd(u, xz, 2 * di, PF32(m->params, l, P_CONV_W), PF32(m->params, l, P_CONV_B), m->pos,
                                 M, T, di, K, carried_first(m), carried_hist(m, l)));  // (M, di)
        REGION(m, "fwd.x_proj",
               bk->matmul_fwd(L->xdbl, nx, u, di, PACT(l, P_X_PROJ), NULL, M, nx, di));  // (M, R+2N)
        REGION(m, "fwd.dt_proj", bk->matmul_fwd(dpre, di, L->xdbl, nx, PACT(l, P_DT_W), NULL, M, di, R));  // (M, di)
        if (l + 1 < c->n_layer) update_ahead(m, l + 1);
        REGION(m, "fwd.scan",
               bk->scan_fwd(y, u, dpre, PF32(m->params, l, P_DT_B), PF32(m->params, l, P_A_LOG),
                            act_at(m, L->xdbl, R), act_at(m, L->xdbl, R + N), nx, PF32(m->params, l, P_D),
                            act_at(m, xz, di), 2 * di, m->pos, M, T, di, N,
                            m->states_valid ? L->scan_states : NULL /* NULL where not kept */,
                            carried_first(m), carried_h0(m, l)));  // (M, di)
        if (carry_out)  // the state the rows that go on end with, for the next batch
            REGION(m, "fwd.scan",
                   bk->carry_state_out(carry_h_at(m, cout, l), carry_hist_at(m, cout, l), u, dpre,
                                       PF32(m->params, l, P_DT_B), PF32(m->params, l, P_A_LOG), act_at(m, L->xdbl, R),
                                       nx, xz, 2 * di, m->carry_first, m->carry_last, carry_h_at(m, cin, l), M, T, di,
                                       N, K, m->states_valid ? L->scan_states : NULL));
        REGION(m, "fwd.out_proj", bk->matmul_fwd(m->h, d, y, di, PACT(l, P_OUT_PROJ), NULL, M, d, di));  // (M, d)
    }
    struct LayerActs *last = &m->layers[c->n_layer - 1];
    REGION(m, "fwd.norm",
           bk->add_rmsnorm_fwd(m->res_f, m->xf, m->rstd_f, last->res, m->h, PF32(m->params, -1, 1), M, d, c->norm_eps));
    if (carry_out) m->carry_cur = cout;  // the next batch reads what this one left (its backward: carry_used)
}

static double finish_losses(Model *m, int M) {
    if (m->bk->f32_bytes == sizeof(double)) {
        m->bk->download(m->host_losses, m->losses, (size_t)M * sizeof(double));
    } else {
        float *tmp = pm_malloc((size_t)M * sizeof(float));
        m->bk->download(tmp, m->losses, (size_t)M * sizeof(float));
        for (int i = 0; i < M; i++) m->host_losses[i] = tmp[i];
        free(tmp);
    }
    double sum = 0;
    for (int i = 0; i < M; i++) sum += m->host_losses[i];
    return m->n_valid > 0 ? sum / (double)m->n_valid : 0.0;
}

double model_forward(Model *m, const Batch *b, float *logits) {
    forward_body(m, b, 0);
    const ModelConfig *c = &m->cfg;
    REGION(m, "fwd.classifier",
           m->bk->classifier(m->losses, NULL, NULL, logits, m->xf, PACT(-1, 0), m->targets, 0.0f, m->cur_M, c->d_model,
                             c->vocab_pad, 0 /* evaluation: fp32 logits */));
    return finish_losses(m, m->cur_M);
}

void model_forward_hidden(Model *m, const Batch *b) { forward_body(m, b, 0); }

// The layer's weight-gradient GEMMs go to the backend's side queue where it has one (side_begin), unless a hook is
// set that expects each region's work done on the main queue when the region ends (the bench's profiler times each
// op there; Model.hook_orders_itself: dist's overlap hook fences its reductions after both queues). Nothing below
// a layer reads them, so they run beside the chain's next kernels. Each buffer a side GEMM reads stays untouched
// until a side_wait on its ticket:
//   out_proj dW reads dh and y          -> waited for before the norm backward that rewrites that dh buffer;
//   dt_proj, x_proj, in_proj dW read ddpre, dxdbl, dxz, u, xn (and out_proj's y)
//                                       -> waited for before the next layer's recompute and scan backward;
//   all of it                           -> waited for before returning (the optimizer reads the gradients, the
//                                          next forward rewrites the activations).
// The same ops on the same inputs in either case: the same bits (test_cuda_ops: test_model_side_stream).
//
// Groups (Model.dw_group > 1; dist_attach turns them off under its overlap's per-layer reductions, the bench's
// profiling keeps them): the out_proj, dt_proj and x_proj weight gradients of dw_group layers at once (the layers from the top,
// dw_group at a time; the bottom group may have fewer) are one batched GEMM each (Backend.matmul_dw_batch), queued
// by the group's bottom layer where its own would be (in the same regions, so a profile counts the same regions
// either way): alone, those GEMMs are too small to fill the GPU (130m: -19 µs a layer in pairs in the lab,
// docs/perf.md; groups of 4 measured no faster in the step). Layer j of a group (j = 0 its bottom) keeps what they
// read in copy j (dh, ddpre, dxdbl; u, y where the activations are recomputed; copy 0 is the shared buffer); the
// waits above still order everything: the group's out_proj dW is waited for before its bottom layer's norm
// backward writes the next group's top dh, and FIFO order puts the group ahead of its bottom layer's in_proj dW,
// waited for before the next layer writes anything the group read. Every memory setting groups the same layers,
// so they keep giving the same bits.
//
// matmul_bwd in two: the input gradient (if dinp) on the main queue, the weight gradient on the side queue where
// side is set (*ticket: that side work's).
static void matmul_bwd_split(const Backend *bk, int side, int *ticket, void *dinp, int ldd, int accumulate_dinp,
                             void *dW, const void *dout, int lddo, const void *inp, int ldi, const void *W, int M,
                             int N, int K) {
    if (dinp) bk->matmul_bwd(dinp, ldd, accumulate_dinp, NULL, NULL, dout, lddo, NULL, ldi, W, M, N, K);
    if (!dW) return;
    if (side) bk->side_begin();
    bk->matmul_bwd(NULL, ldd, 0, dW, NULL, dout, lddo, inp, ldi, W, M, N, K);
    if (side) *ticket = bk->side_end();
}

// One weight gradient of a group of `count` layers, as one batch on the side queue: member j's operands at dW[j],
// dout[j], inp[j], each the same distance above the one before (layout_activations, the parameter layout).
static void queue_dw_batch(const Model *m, int side, int *ticket, void *const *dW, void *const *dout, int lddo,
                           void *const *inp, int ldi, int count, int M, int N, int K) {
    const Backend *bk = m->bk;
    const size_t f = bk->f32_bytes, e = bk->act_bytes;
    const ptrdiff_t sW = (char *)dW[1] - (char *)dW[0], so = (char *)dout[1] - (char *)dout[0],
                    si = (char *)inp[1] - (char *)inp[0];
    int ok = sW > 0 && so > 0 && si > 0 && sW % f == 0 && so % e == 0 && si % e == 0;
    for (int j = 2; j < count; j++)
        ok = ok && (char *)dW[j] - (char *)dW[0] == j * sW && (char *)dout[j] - (char *)dout[0] == j * so &&
             (char *)inp[j] - (char *)inp[0] == j * si;
    if (!ok) pm_die("model: a layer group's operands are not evenly laid out upwards (%td, %td, %td bytes)", sW, so, si);
    if (side) bk->side_begin();
    bk->matmul_dw_batch(dW[0], (size_t)sW / f, dout[0], lddo, (size_t)so / e, inp[0], ldi, (size_t)si / e, count, M,
                        N, K);
    if (side) *ticket = bk->side_end();
}

// Layer l's place in its group of Model.dw_group (groups counted from the top): its index from the group's bottom
// layer (0 = the bottom), and in *count (if not NULL) the group's layers. copy_at: copy j of a buffer whose copies
// are cs apart.
static int group_index(const Model *m, int l, int *count) {
    const int G = m->dw_group, top = m->cfg.n_layer - 1 - (m->cfg.n_layer - 1 - l) / G * G;
    const int bottom = top - G + 1 > 0 ? top - G + 1 : 0;
    if (count) *count = top - bottom + 1;
    return l - bottom;
}
static void *copy_at(void *base, size_t cs, int j) { return base ? (char *)base + (size_t)j * cs : NULL; }

// Layer l's xz, xn, u, dpre and y in the backward: its own, or its copy / slot of the shared buffers (Model.dw_group's
// copies of u and y, Model.recompute_slots' slots).
static void layer_backward_buffers(const Model *m, int l, void **xz, void **xn, void **u, void **dpre, void **y) {
    const struct LayerActs *L = &m->layers[l];
    layer_mixer_buffers(m, L, xz, xn, u, dpre, y);
    const int j = group_index(m, l, NULL), two = m->recompute_slots > 1;
    const int s = two ? l & 1 : 0, set = two ? (m->cfg.n_layer - 1 - l) / m->dw_group & 1 : 0;
    if (!L->xz) *xz = copy_at(*xz, m->xz_cs, s);
    if (!L->xn) *xn = copy_at(*xn, m->xn_cs, s);
    if (!L->dpre) *dpre = copy_at(*dpre, m->dpre_cs, s);
    if (!L->u) *u = copy_at(*u, m->u_cs, set * m->dw_copies + j);
    if (!L->y) *y = copy_at(*y, m->y_cs, j);
}

static int layer_recomputes(const struct LayerActs *L) { return !L->u || !L->xz; }

// Recompute what the forward did not keep of layer l, into its slots: xn (norm), xz (in_proj, where not kept),
// u (conv + SiLU), dpre (dt_proj). The same ops on the same inputs as the forward's: the same bits.
static void recompute_layer(Model *m, int l) {
    const Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    const int d = c->d_model, di = c->d_inner, R = c->dt_rank, K = c->d_conv, nx = R + 2 * c->d_state;
    const int M = m->cur_M, T = m->cur_T;
    struct LayerActs *L = &m->layers[l];
    void *xz, *xn, *u, *dpre, *y;
    layer_backward_buffers(m, l, &xz, &xn, &u, &dpre, &y);
    if (!L->xn) bk->add_rmsnorm_fwd(L->res, xn, L->rstd, L->res, NULL, PF32(m->params, l, P_NORM), M, d, c->norm_eps);
    if (!L->xz) bk->matmul_fwd(xz, 2 * di, xn, d, PACT(l, P_IN_PROJ), NULL, M, 2 * di, d);
    if (!L->u) {
        bk->conv_silu_fwd(u, xz, 2 * di, PF32(m->params, l, P_CONV_W), PF32(m->params, l, P_CONV_B), m->pos, M, T,
                          di, K, carried_first(m), carried_hist(m, l));
        bk->matmul_fwd(dpre, di, L->xdbl, nx, PACT(l, P_DT_W), NULL, M, di, R);
    }
}

// Backward through the layers, given d(xf) in m->dxn from the classifier.
static void backward_body(Model *m) {
    const Backend *bk = m->bk;
    const ModelConfig *c = &m->cfg;
    const int d = c->d_model, di = c->d_inner, N = c->d_state, R = c->dt_rank, K = c->d_conv, nx = R + 2 * N;
    const int M = m->cur_M, T = m->cur_T;
    const int queues = !m->hook || m->hook_orders_itself;  // (Model.hook_orders_itself)
    const int side = bk->side_begin && queues;
    int t_out = 0, t_layer = 0;  // tickets: the last out_proj dW queued; all the side work of the layer above
    // recomputing ahead (Model.recompute_slots): rec_ready is the layer whose recompute the side queue holds, up to
    // ticket t_rec
    // (not under a hook: a profiler times each region on the main queue, and dist's overlap hook counts a layer's
    // regions)
    // (the whole recompute goes ahead: each part alone measured no better or worse, call300 and call303)
    const int ahead = side && !m->hook && m->recompute_slots > 1;
    int t_rec = 0, rec_ready = -1;
    // the parameter gradients' small reductions held back and run a few layers' at once (a hook expects each
    // region's outputs complete when it ends); PM_DEFER_REDUCTIONS=0 runs each at once (A/B runs, tests)
    const char *dr = getenv("PM_DEFER_REDUCTIONS");
    const int defer = bk->defer_reductions && queues && !(dr && dr[0] == '0');
    // with a hook that orders itself: what is held back runs before each norm region ends (a layer's last region)
    const int flush_norms = defer && m->hook;
    if (defer) bk->defer_reductions(1);
    bk->memzero(m->dres, (size_t)M * d * bk->f32_bytes);
    // (only lowered after allocation: the copies are dw_copies' worth)
    if (m->dw_group < 1 || m->dw_group > m->dw_copies)
        pm_die("model: weight-gradient groups of %d layers with copies for %d", m->dw_group, m->dw_copies);
    // the top layer's dh: its copy in its group
    REGION(m, "bwd.norm", {
        bk->rmsnorm_bwd(m->dres, copy_at(m->dh, m->dh_cs, group_index(m, c->n_layer - 1, NULL)),
                        PF32(m->grads, -1, 1), m->dxn, m->res_f, PF32(m->params, -1, 1), m->rstd_f, M, d);
        if (flush_norms) bk->defer_reductions(0), bk->defer_reductions(1);
    });
    void *g_y[PM_DW_GROUP_MAX], *g_u[PM_DW_GROUP_MAX], *g_dh[PM_DW_GROUP_MAX], *g_ddpre[PM_DW_GROUP_MAX],
        *g_dxdbl[PM_DW_GROUP_MAX];  // the group's members' (j = 0 ..)
    for (int l = c->n_layer - 1; l >= 0; l--) {
        struct LayerActs *L = &m->layers[l];
        layer_weights_ready(m, l);
        int count;  // this layer's place in its group, j, and the group's layers
        const int j = group_index(m, l, &count);
        // m->dh holds d(h_l), the gradient of this layer's mixer output: copy j, as ddpre, dxdbl (and u, y where
        // they are recomputed) are
        void *xz, *xn, *u, *dpre, *y;
        layer_backward_buffers(m, l, &xz, &xn, &u, &dpre, &y);
        void *dh = copy_at(m->dh, m->dh_cs, j), *ddpre = copy_at(m->ddpre, m->ddpre_cs, j),
             *dxdbl = copy_at(m->dxdbl, m->dxdbl_cs, j);
        // the gradient this layer's norm backward writes: the layer below's dh, in that layer's copy
        void *dh_below = copy_at(m->dh, m->dh_cs, l > 0 ? group_index(m, l - 1, NULL) : 0);
        g_y[j] = y, g_u[j] = u, g_dh[j] = dh, g_ddpre[j] = ddpre, g_dxdbl[j] = dxdbl;
        // out_proj: d(y) now (it needs nothing recomputed); its weight gradient after the scan's backward, which
        // writes this layer's y (the gated scan output) into m->y again from the states it recomputes anyway, bit
        // for bit (unless the layer kept its own: keep_activations).
        REGION(m, "bwd.out_proj",
               bk->matmul_bwd(m->dy, di, 0, NULL, NULL, dh, d, NULL, di, PACT(l, P_OUT_PROJ), M, d, di));
        if (side) bk->side_wait(t_layer);  // the layer above's weight gradients read what is rewritten below
        // Recompute what the forward did not keep (recompute_layer): here, or already queued on the side queue
        // while the layer above's scan backward ran (then wait for it).
        if (layer_recomputes(L)) {
            if (rec_ready == l) bk->side_wait(t_rec);
            else REGION(m, "bwd.recompute", recompute_layer(m, l));
        }
        // The layer below's recompute, on the side queue beside this layer's scan backward: the scan's one block an
        // SM (128 blocks at the 370m and 1.4b widths) leaves SMs free, and a byte-bound kernel started after it
        // runs there, ~90% hidden (dev/kernels/scan_lab.cu `beside`, call298). The side queue's lower priority
        // (backend_cuda.cu) lets the scan's blocks take their SMs first: the two become ready at the same moment
        // (side_begin's fork is the main queue's point before the scan). Into the other slots (Model.recompute_slots),
        // last read by the layer above this one, whose work the main queue has waited for (t_layer) by now.
        if (ahead && l > 0 && layer_recomputes(&m->layers[l - 1])) {
            layer_weights_ready(m, l - 1);  // (cast_weights: on the main queue, before the side queue reads them)
            bk->side_begin();  // (no REGION: `ahead` means no hook)
            recompute_layer(m, l - 1);
            t_rec = bk->side_end();
            rec_ready = l - 1;
        }
        REGION(m, "bwd.scan",
               bk->scan_bwd(m->du, ddpre, act_at(m, dxdbl, R), act_at(m, dxdbl, R + N), act_at(m, m->dxz, di),
                            PF32(m->grads, l, P_DT_B), PF32(m->grads, l, P_A_LOG), PF32(m->grads, l, P_D), m->dy, u,
                            dpre, PF32(m->params, l, P_DT_B), PF32(m->params, l, P_A_LOG), act_at(m, L->xdbl, R),
                            act_at(m, L->xdbl, R + N), nx, PF32(m->params, l, P_D), act_at(m, xz, di), 2 * di,
                            m->pos, M, T, di, N, m->states_valid ? L->scan_states : NULL,
                            L->y ? NULL : y /* written again where not kept */, carried_first(m),
                            carried_h0(m, l)));
        // weight gradients: alone (a group of one), held for the group (j > 0), or the group's (its bottom layer:
        // each in the region of its op, after the input gradient there)
        const int own_dw = count == 1, queue = count > 1 && j == 0;
        void *gW[PM_DW_GROUP_MAX], *gx[PM_DW_GROUP_MAX];
        REGION(m, "bwd.out_proj", {
            matmul_bwd_split(bk, side, &t_out, NULL, di, 0, own_dw ? PF32(m->grads, l, P_OUT_PROJ) : NULL, dh, d, y,
                             di, PACT(l, P_OUT_PROJ), M, d, di);
            if (queue) {
                for (int i = 0; i < count; i++) gW[i] = PF32(m->grads, l + i, P_OUT_PROJ);
                queue_dw_batch(m, side, &t_out, gW, g_dh, d, g_y, di, count, M, d, di);
            }
        });
        REGION(m, "bwd.dt_proj", {
            matmul_bwd_split(bk, side, &t_layer, dxdbl, nx, 0, own_dw ? PF32(m->grads, l, P_DT_W) : NULL, ddpre, di,
                             L->xdbl, nx, PACT(l, P_DT_W), M, di, R);
            if (queue) {
                for (int i = 0; i < count; i++) gW[i] = PF32(m->grads, l + i, P_DT_W), gx[i] = m->layers[l + i].xdbl;
                queue_dw_batch(m, side, &t_layer, gW, g_ddpre, di, gx, nx, count, M, di, R);
            }
        });
        REGION(m, "bwd.x_proj", {
            matmul_bwd_split(bk, side, &t_layer, m->du, di, 1, own_dw ? PF32(m->grads, l, P_X_PROJ) : NULL, dxdbl, nx,
                             u, di, PACT(l, P_X_PROJ), M, nx, di);
            if (queue) {
                for (int i = 0; i < count; i++) gW[i] = PF32(m->grads, l + i, P_X_PROJ);
                queue_dw_batch(m, side, &t_layer, gW, g_dxdbl, nx, g_u, di, count, M, nx, di);
            }
        });
        REGION(m, "bwd.conv",
               bk->conv_silu_bwd(m->dxz, 2 * di, PF32(m->grads, l, P_CONV_W), PF32(m->grads, l, P_CONV_B), m->du, xz,
                                 PF32(m->params, l, P_CONV_W), PF32(m->params, l, P_CONV_B), m->pos, M, T, di, K,
                                 carried_first(m), carried_hist(m, l)));
        REGION(m, "bwd.in_proj",
               matmul_bwd_split(bk, side, &t_layer, m->dxn, d, 0, PF32(m->grads, l, P_IN_PROJ), m->dxz, 2 * di, xn, d,
                                PACT(l, P_IN_PROJ), M, 2 * di, d));
        if (side) bk->side_wait(t_out);  // the norm's backward rewrites a dh buffer that an out_proj dW reads
        // res_l feeds this norm and (through the residual) everything above: dres accumulates; the updated dres is
        // d(h_{l-1}) for the layer below.
        REGION(m, "bwd.norm", {
            bk->rmsnorm_bwd(m->dres, l > 0 ? dh_below : NULL, PF32(m->grads, l, P_NORM), m->dxn, L->res,
                            PF32(m->params, l, P_NORM), L->rstd, M, d);
            if (flush_norms) bk->defer_reductions(0), bk->defer_reductions(1);
        });
    }
    REGION(m, "bwd.embedding", bk->embedding_bwd(PF32(m->grads, -1, 0), m->dres, m->tokens, M, d, c->vocab_pad));
    if (defer) bk->defer_reductions(0);
    if (side) bk->side_wait(t_layer);
}

// The classifier and the layers' backward; after model_zero_grad's deferral (grads_unset) they write every
// gradient (Backend.grads_write): the classifier writes wte's from its first chunk, and every other parameter's
// gradient has one writer in a backward (embedding_bwd adds into wte's last).
static void classifier_and_backward(Model *m, float loss_scale, float *logits) {
    const ModelConfig *c = &m->cfg;
    if (m->cur_M == 0) grads_settle(m);  // (the backends' ops return at once on no tokens: nothing would write)
    const int write = m->grads_unset;
    if (write) m->bk->grads_write(1);
    REGION(m, "fwdbwd.classifier",
           m->bk->classifier(m->losses, m->dxn, PF32(m->grads, -1, 0), logits, m->xf, PACT(-1, 0), m->targets,
                             loss_scale, m->cur_M, c->d_model, c->vocab_pad, !m->fp32_logits));
    backward_body(m);
    if (write) m->bk->grads_write(0), m->grads_unset = 0;
}

double model_forward_backward(Model *m, const Batch *b, float loss_scale, float *logits) {
    forward_body(m, b, 1);
    classifier_and_backward(m, loss_scale, logits);
    return finish_losses(m, m->cur_M);
}

void model_backward(Model *m, float loss_scale) { classifier_and_backward(m, loss_scale, NULL); }

// (PM_GRADS_WRITE=0 clears the buffer every time: A/B runs, and the tests' reference)
void model_zero_grad(Model *m) {
    const char *e = getenv("PM_GRADS_WRITE");
    m->grads_unset = 1;
    if (!m->bk->grads_write || (e && e[0] == '0')) grads_settle(m);
}

double model_grad_norm(Model *m) {
    grads_settle(m);
    return sqrt(m->bk->sumsq(m->grads, m->n_params));
}

// ---------------------------------------------------------------------------------------------------------------
// optimizer

OptimConfig optim_defaults(void) { return (OptimConfig){1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f}; }

float clip_scale(double norm, float max_norm) {
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    if (max_norm <= 0) return 1.0f;
    double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

// Unless a hook is set (a profiler times the whole update in its region), the update of layers 1 .. n_layer - 1
// waits for the next forward, which queues each beside a scan where the backend has a side queue (update_ahead)
// and applies it in place before the layer where it has none (the CPU: the same work in another order, so every
// CPU test runs through the pending updates and their settling too); PM_UPDATE_AHEAD=0 updates everything here.
static int updates_ahead(const Model *m) {
    const char *e = getenv("PM_UPDATE_AHEAD");
    return !m->hook && m->cfg.n_layer > 1 && !(e && e[0] == '0');
}

double model_optimizer_step(Model *m, const OptimConfig *o, float lr) {
    model_alloc_optimizer(m);
    model_settle_updates(m);
    double norm;
    REGION(m, "opt.grad_norm", norm = model_grad_norm(m));
    float scale = clip_scale(norm, o->grad_clip);
    m->step++;
    AdamWArgs a = {lr, o->beta1, o->beta2, o->eps, o->weight_decay, scale, m->step, 0, 0};
    if (updates_ahead(m)) {
        // now: the embedding and layer 0 (the next forward's first use), and what follows the layers (the final norm)
        AdamWArgs head = a, tail = a;
        head.part_first = 0, head.part_count = model_tensor_index(&m->cfg, 1, 0);
        tail.part_first = model_tensor_index(&m->cfg, m->cfg.n_layer, 0);
        tail.part_count = m->n_tensors - tail.part_first;
        REGION(m, "opt.adamw", { adamw_parts(m, &head), adamw_parts(m, &tail); });
        m->upd_args = a, m->upd_lo = 1;
    } else {
        REGION(m, "opt.adamw", adamw_parts(m, &a));
    }
    // (cast_weights: the embedding's copy from its new masters; the layers' when next used)
    if (m->weights_cast) sync_compute_weights(m);
    return norm;
}

float lr_schedule(int step, int warmup, int total, float lr, float min_lr_frac) {
    if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (total <= warmup) return lr;
    float progress = (float)(step - warmup) / (float)(total - warmup);
    if (progress > 1) progress = 1;
    float min_lr = lr * min_lr_frac;
    return min_lr + 0.5f * (lr - min_lr) * (1.0f + cosf(3.14159265358979f * progress));
}
