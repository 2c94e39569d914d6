// model.h — the Mamba-1 language model (DESIGN §1): configuration, presets, the flat parameter layout with
// reference tensor names, and forward/backward written once on the Backend interface (backend.h).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "batch.h"

typedef struct {
    int n_layer, d_model, vocab_size;  // as in the reference config.json
    int pad_vocab_multiple;            // vocab padded up to a multiple of this (8)
    int d_state, d_conv, expand;       // N = 16, K = 4, 2
    // derived by config_derive():
    int vocab_pad, d_inner, dt_rank;
    float norm_eps;  // 1e-5
} ModelConfig;

// Presets: tiny (4 layers x 128, for CPU demos/tests), 130m, 370m, 790m, 1.4b, 2.8b. Returns 0 or -1.
int config_preset(const char *name, int vocab_size, ModelConfig *c);
void config_derive(ModelConfig *c);  // fills vocab_pad, d_inner, dt_rank from the base fields
const char *config_preset_names(void);  // "tiny, 130m, ..." for help texts

// Tensors in the order they sit in the flat parameter buffer (the reference order):
// embedding; per layer: norm.weight, mixer.{A_log, D, in_proj.weight, conv1d.weight, conv1d.bias,
// x_proj.weight, dt_proj.weight, dt_proj.bias, out_proj.weight}; norm_f.weight.
enum {
    P_NORM, P_A_LOG, P_D, P_IN_PROJ, P_CONV_W, P_CONV_B, P_X_PROJ, P_DT_W, P_DT_B, P_OUT_PROJ,
    P_PER_LAYER
};

typedef struct {
    char name[96];      // reference name, e.g. "backbone.layers.3.mixer.in_proj.weight"
    int ndim;
    int64_t shape[3];   // checkpoint shape (conv1d.weight is (d_inner, 1, K))
    size_t offset, size;  // in elements within the flat buffer
    int decay;
} ParamInfo;

// Fills `out` (may be NULL) and returns the number of tensors: 2 + P_PER_LAYER * n_layer.
int model_param_infos(const ModelConfig *c, ParamInfo *out);
size_t model_num_params(const ModelConfig *c);
// Index of a tensor: layer < 0 with which = 0 for the embedding, 1 for norm_f.
int model_tensor_index(const ModelConfig *c, int layer, int which);

typedef struct {
    ModelConfig cfg;
    const Backend *bk;
    int n_tensors;
    ParamInfo *tensors;      // (n_tensors), host
    ParamSegment *segments;  // (n_tensors), host, for the optimizer
    size_t n_params;

    void *params;      // F32 (n_params) master weights, reference layout
    void *params_act;  // ACT (n_params) compute copy; == params when ACT and F32 coincide; with weights_cast
                       // only the embedding's copy (vocab_pad, d_model) and two layer slots (2, layer_span)
    void *grads;       // F32 (n_params)
    void *adam_m, *adam_v;  // F32 (n_params), allocated by model_alloc_optimizer
    int step;          // optimizer steps taken

    // Activations, sized for (B, T) by model_alloc_activations; M = B*T.
    int B, T;
    void *arena_act, *arena_f32;  // one allocation per element kind
    int32_t *tokens, *pos, *targets;  // (M) each, backend memory
    // Stored per layer for the backward: only what is expensive to recompute. xn, u and dpre are recomputed in
    // the backward (a norm, the depthwise conv and the small dt_proj GEMM: a few % of the step), y is written
    // again by the scan's backward (from the states it recomputes anyway: 1-2% of the step, docs/perf.md v24) and
    // h is consumed by the next layer's residual add, so those live in shared buffers — this is what keeps peak
    // memory below the official implementation's.
    struct LayerActs {
        void *res;    // F32 (M, d_model) residual stream entering this layer's norm
        void *rstd;   // F32 (M)
        void *xz;     // ACT (M, 2*d_inner) in_proj output: xi | z (NULL where the layer does not keep it, see
                      // keep_in_proj: m->xz is used)
        void *xdbl;   // ACT (M, dt_rank + 2N) x_proj output: dt_low | B | C
        void *scan_states;  // the scan states the training forward leaves for the backward (backend-defined,
                            // Backend.scan_states_bytes), or NULL when not kept
        void *xn, *u, *dpre, *y;  // where it keeps activations: this layer's own ACT (M, d_model), (M, d_inner) x 3 (y:
                                  // the gated scan output), so the backward recomputes nothing; else NULL (the
                                  // shared buffers below are used)
    } *layers;         // (n_layer)
    // How many layers keep their scan states, where the backend can (Backend.scan_states_bytes): the forward of a
    // training step leaves them for the backward, which then skips recomputing them — faster, for
    // scan_states_bytes more memory per layer (docs/perf.md, v12). Negative (model_create's default) or n_layer
    // and more: every layer; 0: none; in between, the last keep_scan_states layers (a memory/speed dial). Read by
    // model_alloc_activations.
    int keep_scan_states;
    // How many layers keep their xn, u, dpre and y. 0 (the default): none; the backward recomputes them (a norm, the
    // conv, the dt_proj GEMM; y in the scan's backward). Negative or n_layer and more: every layer — faster (no
    // recompute: 4-5% of a step), for (d_model + 3 d_inner) ACT values per token per layer more memory. In
    // between: the last keep_activations layers, rounded down to whole weight-gradient groups (dw_group: a group's
    // batched GEMMs read every member's u and y the same way). Either way the results are the same bits. Read by
    // model_alloc_activations.
    int keep_activations;
    // How many layers keep their in_proj output xz, as keep_scan_states counts: negative (model_create's default)
    // or n_layer and more: every layer; 0: none; in between, the last keep_in_proj layers. A layer that does not
    // keep it has the backward recompute it (one in_proj GEMM, ~1/3 of in_proj's training FLOPs) from xn — the
    // largest per-layer activation (2 d_inner ACT values per token) traded for compute, for when memory is what
    // limits the model or the batch. The same bits either way. Read by model_alloc_activations.
    int keep_in_proj;
    // 0 (the default): an ACT copy of every weight lives beside the F32 masters (refreshed by the optimizer).
    // 1 (where the backend keeps a copy at all): only the embedding's; each layer's weights are cast from the
    // masters into one of two slots (layer l: slot l % 2) when its forward or backward starts and the slot does
    // not already hold them: 2 bytes a parameter less memory for a cast of each layer's weights about twice a
    // step (the backward finds the forward's last two layers still in their slots). The same bits either way (the
    // cast rounds as the optimizer's copy does). Read by model_alloc_activations, which lays params_act out.
    int cast_weights;
    int weights_cast;       // params_act is laid out for cast_weights (model_alloc_activations)
    int slot_layer[2];      // the layer whose weights each slot holds; -1: none, or stale
    size_t layer_span;      // elements of one layer's parameters (they lie together, layer after layer)
    // 0 (the default): a training step's classifier (model_forward_backward, model_backward) may round the logits
    // to bf16 before the softmax, as PyTorch's autocast LM head does (Backend.classifier's bf16_logits; on the GPU
    // half the bytes through the classifier: +0.4% to +1.5% measured, docs/perf.md). 1: fp32 logits in training too
    // (`--fp32-logits`).
    // Evaluation (model_forward) always takes fp32 logits.
    int fp32_logits;
    void *arena_states;    // one allocation for every layer's scan_states
    size_t states_cap;     // bytes of each layer's scan_states
    int states_valid;      // the last forward left scan states for model_backward
    void *xz;          // ACT (M, 2*d_inner) in_proj output of the current layer where some layer does not keep its
                       // own (keep_in_proj), else NULL
    void *xn;          // ACT (M, d_model) normed input of the current layer's mixer (NULL with keep_activations)
    void *u;           // ACT (M, d_inner) silu(conv(xi)) of the current layer (NULL with keep_activations)
    void *dpre;        // ACT (M, d_inner) dt_proj output (before bias and softplus) of the current layer (ditto)
    void *h;           // ACT (M, d_model) mixer output of the current layer
    void *y;           // ACT (M, d_inner) gated scan output of the current layer (NULL with keep_activations); the
                       // scan backward writes it again for the out_proj weight gradient (Backend.scan_bwd's out)
    void *res_f;       // F32 (M, d_model) final residual
    void *rstd_f;      // F32 (M)
    void *xf;          // ACT (M, d_model) final normed
    void *losses;      // F32 (M) per-token loss
    // backward scratch, shared by all layers
    void *dres;        // F32 (M, d_model)
    void *dh;          // ACT (M, d_model)
    void *dxn;         // ACT (M, d_model)
    void *dxz;         // ACT (M, 2*d_inner)
    void *du;          // ACT (M, d_inner)
    void *ddpre;       // ACT (M, d_inner)
    void *dxdbl;       // ACT (M, dt_rank + 2N)
    void *dy;          // ACT (M, d_inner)
    // dw_group (model_alloc_activations: model_dw_group): the backward computes the out_proj, dt_proj and x_proj
    // weight gradients of dw_group layers at once (Backend.matmul_dw_batch, one batched GEMM each; model.c,
    // backward_body); 1: each layer's alone. The layers above the bottom one of a group then keep what those GEMMs
    // read in copies of their own: copy j (1 .. dw_group - 1) of dh, ddpre, dxdbl, and without keep_activations
    // u and y, lies j * *_cs bytes above the shared buffer (copy 0). Set dw_group to 1 after model_alloc_activations
    // to compute each layer's alone (the copies stay allocated); model_limit_dw_group before it makes none.
    int dw_group, dw_copies;  // (dw_copies: how many copies model_alloc_activations made)
    size_t dh_cs, ddpre_cs, dxdbl_cs, u_cs, y_cs;
    // recompute_slots (model_alloc_activations: model_recompute_slots): 2 when the backward recomputes layer l - 1
    // on the side queue while layer l's scan backward runs (model.c, backward_body: the scan's grid leaves SMs
    // free), 1 otherwise. With 2, the shared buffers the recompute writes come in two slots, a layer's by its
    // parity: xn, dpre and xz at slot (l & 1), xn_cs, dpre_cs, xz_cs bytes apart; u at copy set * dw_copies + j,
    // set the parity of the layer's group (so a group's copies stay evenly spaced for its batched GEMM).
    int recompute_slots;
    size_t xn_cs, dpre_cs, xz_cs;
    double *host_losses;  // (M) host copy of the per-token losses
    int64_t n_valid;     // valid targets in the current batch
    int cur_M, cur_T;    // tokens and row length of the last forward's batch (<= B*T, T)
    int grads_unset;     // model_zero_grad left the buffer as it was: the next backward writes every gradient
    // The update ahead (model_optimizer_step without a hook): the step updates the embedding, layer 0 and the final
    // norm at once and leaves layers upd_lo .. n_layer - 1 pending with upd_args (upd_lo 0: none). The next forward
    // queues layer l + 1's update on the side queue beside layer l's scan (upd_t: its ticket, waited for at layer
    // upd_t_layer), or applies it in place before layer l + 1 where the backend has no side queue; every other use
    // of the parameters, moments or gradients applies what is pending first (model_settle_updates).
    int upd_lo, upd_t, upd_t_layer;
    AdamWArgs upd_args;

    // Carried state (DESIGN §2; model_alloc_carry; Batch.carry_in / carry_out): a row with carry_in starts from
    // the scan state and conv inputs that the previous batch's same row ended with, as if the document were not
    // cut (the forward is the unbroken document's; the backward stops at the row start: truncated backpropagation).
    // Two sets of buffers: the forward reads set carry_cur and writes the other, then makes that one current; the
    // backward of a batch reads the set its forward read (carry_used).
    int carry_on;                       // model_alloc_carry was called
    void *carry_h[2];                   // F32 (n_layer, B, d_inner, N) the rows' final scan states
    void *carry_hist[2];                // ACT (n_layer, B, K-1, d_inner) the rows' last K-1 conv inputs (xi)
    int32_t *carry_first, *carry_last;  // (B) backend memory: the carry ops' first and last of the batch
    int carry_cur, carry_used;          // the set the next forward reads; the set the last forward read
    int carry_rows_in;                  // rows of the last forward that continue a document (carry_in)
    // With data parallelism the checkpoint holds the global batch's rows: this rank's are carry_row0 ..
    // carry_row0 + B - 1 of carry_rows (one rank: 0 and B; set by train), and before a checkpoint rank 0 holds every
    // rank's in carry_all (host F32, h then hist in the checkpoint's layout: dist_gather_optimizer), else NULL.
    int carry_row0, carry_rows;
    float *carry_all;

    // Optional profiling hook: called with begin = 1 before and 0 after each named region of the forward and
    // backward ("fwd.in_proj", "bwd.scan", ...). NULL (the default) costs nothing. See bench.c.
    void (*hook)(void *ctx, const char *region, int begin);
    void *hook_ctx;
    // 0 (the default): the hook expects each region's work done on the main queue when the region ends (the bench's
    // profiler times each op there), so the backward runs without the side queue and the deferred reductions.
    // 1: the hook orders its own work after the backend's queues (Backend.fence_stream: dist's overlap hook), so the
    // backward keeps both; it then runs the held-back reductions at the end of every norm region, so that a layer's
    // gradients are all queued when its last region ends.
    int hook_orders_itself;
} Model;

// Allocate parameters and gradients on bk and initialize them as the reference does, from `seed`.
void model_create(Model *m, const ModelConfig *c, const Backend *bk, uint64_t seed);
void model_init_weights(Model *m, uint64_t seed);  // (re)initialize parameters
void model_alloc_optimizer(Model *m);               // Adam moments, zeroed
void model_alloc_activations(Model *m, int B, int T);
// Model.dw_group as model_alloc_activations sets it on bk: where the backend has matmul_dw_batch and the layers are
// narrow, their out_proj / dt_proj / x_proj weight-gradient GEMMs leave the GPU part idle alone (docs/perf.md):
// 2 layers at once up to d_inner 2048 (130m, 370m; groups of 4 measured no faster at 130m), else 1.
// PM_DW_GROUP=N sets it (1: off; at most PM_DW_GROUP_MAX). Never above the limit model_limit_dw_group set.
int model_dw_group(const ModelConfig *c, const Backend *bk);
int model_recompute_slots(const Backend *bk);  // Model.recompute_slots for this backend (model.c)
// From now on (process-wide) groups of at most max_group layers; 0 lifts the limit. dist_attach sets 1, with its
// overlap on (PM_DIST_OVERLAP=1), before the activations are planned and allocated: the overlap hook reduces each
// layer's gradients when that layer's last region ends, so no layer's weight gradients may wait for its group (and
// no copies are made for groups).
void model_limit_dw_group(int max_group);
#define PM_DW_GROUP_MAX 8  // the most layers a group may have
// Bytes model_alloc_activations(B, T) allocates on bk (both arenas, the integer inputs, and the scan states
// when keep_scan_states is set and the backend keeps them), for the given keep_* / recompute_* settings.
size_t model_activation_bytes(const ModelConfig *c, const Backend *bk, int B, int T, int keep_scan_states,
                              int keep_activations, int keep_in_proj);
// The memory/speed settings of a training model (Model.keep_activations, keep_scan_states, keep_in_proj; the
// counts as those fields take them: -1 every layer; and Model.cast_weights).
typedef struct {
    int keep_activations, keep_scan_states, keep_in_proj, cast_weights;
} MemorySettings;
// Device bytes a training step at (B, T) holds on bk with settings s: the parameters (F32 masters and, where ACT
// differs, the compute copy), gradients, Adam moments, activations (model_activation_bytes) and the backend's
// own buffers (Backend.workspace_bytes: an estimate; 0 where the backend has none).
size_t model_train_bytes(const ModelConfig *c, const Backend *bk, int B, int T, const MemorySettings *s);
// --memory-budget: the fastest settings whose model_train_bytes fit in budget bytes. Candidates, fastest first
// (docs/perf.md measures each step), each giving up what costs the least time for its bytes next:
//   - every layer's activations kept (and every layer's scan states and in_proj output), then one weight-gradient
//     group of layers fewer at a time (370m B8: 0.094 ms a step for a layer's 0.21 GiB, 0.44 ms a GiB);
//   - the default (every layer's states and in_proj output, no activations), then states for one layer fewer at a
//     time down to none (0.16-0.17 ms a step for a layer's 0.125 GiB at 370m and 1.4b: 1.3 ms a GiB);
//   - with no states, where the backend keeps a weight copy, the layers' weights cast when used (cast_weights:
//     1.4b B4 about as costly for its 2.3 GiB as the states, 370m 1.2 ms for 0.57 GiB, 2.1 ms a GiB);
//   - then in_proj outputs for one layer fewer at a time down to none (the same bytes as a layer's states on the
//     GPU, M d_inner 4, for a GEMM: 0.20 ms a 370m layer, 0.42 at 1.4b: 1.6-3.4 ms a GiB).
// Returns 0, or -1 when even the leanest does not fit (*s is then the leanest).
int model_fit_memory(const ModelConfig *c, const Backend *bk, int B, int T, size_t budget, MemorySettings *s);
// Elements of the ACT weight copy a backend with one keeps: every parameter's, or with cast_weights the
// embedding's and two layers' (Model.cast_weights).
size_t model_weight_copy_elems(const ModelConfig *c, int cast_weights);
// Sets Model.keep_activations, keep_scan_states, keep_in_proj and cast_weights (before model_alloc_activations).
void model_set_memory_settings(Model *m, const MemorySettings *s);
// How many layers keep their in_proj output under keep_in_proj (Model.keep_in_proj).
int model_in_proj_layers(const ModelConfig *c, int keep_in_proj);
// How many layers keep their activations under keep_activations (Model.keep_activations) with weight-gradient
// groups of `group` layers (model_dw_group).
int model_activation_layers(const ModelConfig *c, int keep_activations, int group);
// One line for logs: "keep activations, scan states for 24 of 24 layers, in_proj outputs for 24 of 24 layers".
void model_memory_settings_text(char *buf, size_t n, const ModelConfig *c, const Backend *bk, const MemorySettings *s);
// How many layers keep their scan states under keep_scan_states (Model.keep_scan_states) on bk: 0 where the
// backend keeps none (Backend.scan_states_bytes NULL).
int model_state_layers(const ModelConfig *c, const Backend *bk, int keep_scan_states);
// Bytes of the kept scan states alone (keep_scan_states layers' worth, 0 when none): part of
// model_activation_bytes.
size_t model_scan_states_bytes(const ModelConfig *c, const Backend *bk, int B, int T, int keep_scan_states);
void model_destroy(Model *m);
// Carried state (Model.carry_on): allocates its buffers for the activations' (B, T) (after model_alloc_activations;
// again after a re-allocation), the state zeroed. Dies where the backend has no carry ops or T < d_conv - 1.
void model_alloc_carry(Model *m);
// What model_alloc_carry allocates for batches (B, T), and the backend's carry workspace (the --memory-budget
// estimate adds it where the state is carried: MemoryFlags.carry_state).
size_t model_carry_train_bytes(const ModelConfig *c, const Backend *bk, int B, int T);
// The carried state as host bytes (save and restore, for an exact resume): the current set of carry_h then of
// carry_hist, model_carry_bytes() bytes in the backend's element types.
size_t model_carry_bytes(const Model *m);
void model_get_carry(const Model *m, void *host);
void model_set_carry(Model *m, const void *host);

// Upload host F32 parameters (n_params floats) into the model (and refresh the compute copy); download them.
void model_set_params(Model *m, const float *host);
void model_get_params(const Model *m, float *host);
void model_get_grads(Model *m, float *host);  // (clears them first after a deferred model_zero_grad)
void model_sync_compute_weights(Model *m);

// Forward over one batch (B, T must match the allocated activations). Returns the mean loss over valid
// targets (0 if none). Per-token losses are left in m->host_losses. If logits is not NULL, the fp32 logits
// (B*T, vocab_pad) are written there (host memory).
double model_forward(Model *m, const Batch *b, float *logits);
// The forward without the LM head (no logits, no losses): leaves every layer's stored activations and the final
// normed hidden states m->xf (ACT, (M, d_model)), for callers that need few positions' logits (generate's prefill).
void model_forward_hidden(Model *m, const Batch *b);
// Backward of the last forward, accumulating into m->grads the gradient of loss_scale * sum of token losses.
// (loss_scale = 1/n_valid gives the gradient of the mean; 1 the gradient of the sum.)
void model_backward(Model *m, float loss_scale);
// Forward + backward in one pass (the classifier computes loss and dlogits together, no recomputation): the
// training path. Returns the mean loss like model_forward; logits as there (NULL for none).
double model_forward_backward(Model *m, const Batch *b, float loss_scale, float *logits);
// Gradients to zero, for an optimizer step's first backward. Where the backend has grads_write (and PM_GRADS_WRITE
// is not 0), the buffer is not touched: that backward writes each gradient instead of adding to it, and anything
// reading the gradients before it (model_get_grads, model_grad_norm) clears them first.
void model_zero_grad(Model *m);
double model_grad_norm(Model *m);  // global L2 norm of m->grads

typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_clip;  // grad_clip <= 0: no clipping
} OptimConfig;
OptimConfig optim_defaults(void);  // lr 1e-3, betas (0.9, 0.95), eps 1e-8, wd 0.1, clip 1.0
// The gradient scale of global-norm clipping at max_norm (<= 0: none), as torch.nn.utils.clip_grad_norm_.
float clip_scale(double norm, float max_norm);
// One AdamW step with global-norm clipping at lr; returns the gradient norm before clipping.
double model_optimizer_step(Model *m, const OptimConfig *o, float lr);
// Applies every parameter update the last model_optimizer_step left pending (Model.upd_lo): the parameters,
// moments and gradients are then as if it had run whole. The model's own entry points call it; code that reads
// m->params, params_act, adam_m or adam_v directly must call it first.
void model_settle_updates(Model *m);
// Warmup + cosine decay to min_lr_frac*lr over total steps.
float lr_schedule(int step, int warmup, int total, float lr, float min_lr_frac);
