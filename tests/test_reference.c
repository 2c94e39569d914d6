// test_reference.c — the C engine (CPU backend, fp32) against an independent float64 PyTorch reference.
//
// tests/fixtures/ref_tiny.safetensors is written by dev/reference/make_fixture.py (see dev/reference/README.md):
// a tiny model's F32 weights under the reference names, one packed batch (B 2, T 24: several documents per row,
// a document cut at the end of row 0 and continued at the start of row 1 with pos 9, a one-token document,
// padding), and what dev/reference/mamba_ref.py computed from them in float64 — logits, loss, the gradient of the
// mean loss for every tensor, the gradient norm, and the parameters after clip_grad_norm_ + one torch AdamW step.
// Every comparison is a relative error ||ours - ref|| / ||ref|| per tensor; the measured errors are printed.
//
// Two controls show the comparison can fail: the same weights with one layer's A_log columns reversed, and the
// same batch with the document boundaries erased, must both miss the reference by far more than the tolerance.
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "batch.h"
#include "model.h"
#include "safetensors.h"
#include "util.h"

#define FIXTURE "tests/fixtures/ref_tiny.safetensors"

// Tolerances (fp32 engine vs float64 truth). An fp32 PyTorch run of the same reference measured: logits 2.7e-7,
// gradients <= 1.1e-6, weights after the step 1e-5 with its own gradients (see test_step_own_grads for why that one
// is loose) and 5e-8 with the reference gradients.
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define TOL_STEP_OWN 1e-4
#define TOL_STEP_REF 1e-6
#define TOL_DELTA_REF 1e-4

typedef struct {
    StFile f;
    ModelConfig cfg;
    int B, T;
    OptimConfig opt;
    Batch batch;
    ParamInfo *infos;  // (n_tensors)
    int n_tensors;
    size_t n_params;
    float *w0;         // (n_params) the fixture weights, flat in the engine's layout
    double *grad_ref;  // (n_params)
    double *step_ref;  // (n_params)
    double *logits_ref;  // (B*T, vocab_pad)
    double loss_ref, gnorm_ref;
} Ref;

static Ref R;

// ---- fixture reading ----

static const StTensor *need(const char *name, const char *dtype, size_t numel) {
    const StTensor *t = st_find(&R.f, name);
    if (!t) fail_msg("%s: tensor %s missing", FIXTURE, name);
    if (strcmp(t->dtype, dtype) != 0) fail_msg("%s: %s is %s, expected %s", FIXTURE, name, t->dtype, dtype);
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    if (n != numel) fail_msg("%s: %s has %zu elements, expected %zu", FIXTURE, name, n, numel);
    return t;
}

static void read_f64(const char *name, double *out, size_t n) {
    const StTensor *t = need(name, "F64", n);
    assert_int_equal(st_read_f64(&R.f, t, out, n), 0);
}

static void read_i32(const char *name, int32_t *out, size_t n) {
    const StTensor *t = need(name, "I32", n);
    memcpy(out, t->data, n * sizeof(int32_t));  // the mapped data may be unaligned
}

static const char *meta_str(json_t *meta, const char *key) {
    json_t *v = json_object_get(meta, key);
    if (!json_is_string(v)) fail_msg("%s: metadata key \"%s\" missing", FIXTURE, key);
    return json_string_value(v);
}

// The flat buffer gathered from per-tensor fixture entries "<prefix><name>", in the engine's layout.
static void read_flat_f64(const char *prefix, double *out) {
    char key[200];
    for (int i = 0; i < R.n_tensors; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, R.infos[i].name);
        read_f64(key, out + R.infos[i].offset, R.infos[i].size);
    }
}

static int setup(void **state) {
    if (st_open(FIXTURE, &R.f) != 0) fail_msg("%s", pm_last_error());
    json_error_t jerr;
    json_t *meta = R.f.metadata_json ? json_loads(R.f.metadata_json, 0, &jerr) : NULL;
    if (!json_is_object(meta)) fail_msg("%s: no __metadata__ object", FIXTURE);

    memset(&R.cfg, 0, sizeof R.cfg);
    R.cfg.n_layer = atoi(meta_str(meta, "n_layer"));
    R.cfg.d_model = atoi(meta_str(meta, "d_model"));
    R.cfg.vocab_size = atoi(meta_str(meta, "vocab_size"));
    R.cfg.pad_vocab_multiple = atoi(meta_str(meta, "pad_vocab_multiple"));
    R.cfg.d_state = atoi(meta_str(meta, "d_state"));
    R.cfg.d_conv = atoi(meta_str(meta, "d_conv"));
    R.cfg.expand = atoi(meta_str(meta, "expand"));
    R.cfg.norm_eps = (float)atof(meta_str(meta, "norm_eps"));
    config_derive(&R.cfg);
    // The reference's own derived sizes must agree with ours, or every comparison below is meaningless.
    assert_int_equal(R.cfg.vocab_pad, atoi(meta_str(meta, "vocab_pad")));
    assert_int_equal(R.cfg.dt_rank, atoi(meta_str(meta, "dt_rank")));
    R.B = atoi(meta_str(meta, "B"));
    R.T = atoi(meta_str(meta, "T"));
    R.opt = (OptimConfig){(float)atof(meta_str(meta, "lr")),    (float)atof(meta_str(meta, "beta1")),
                          (float)atof(meta_str(meta, "beta2")), (float)atof(meta_str(meta, "eps")),
                          (float)atof(meta_str(meta, "weight_decay")), (float)atof(meta_str(meta, "grad_clip"))};
    json_decref(meta);

    R.n_tensors = model_param_infos(&R.cfg, NULL);
    R.infos = pm_malloc(sizeof(ParamInfo) * R.n_tensors);
    model_param_infos(&R.cfg, R.infos);
    R.n_params = model_num_params(&R.cfg);
    R.w0 = pm_malloc(R.n_params * sizeof(float));
    for (int i = 0; i < R.n_tensors; i++) {
        const ParamInfo *p = &R.infos[i];
        const StTensor *t = need(p->name, "F32", p->size);
        // the checkpoint shapes must be the reference's (conv1d.weight is (d_inner, 1, K))
        assert_int_equal(t->ndim, p->ndim);
        for (int k = 0; k < p->ndim; k++) assert_int_equal(t->shape[k], p->shape[k]);
        assert_int_equal(st_read_f32(&R.f, t, R.w0 + p->offset, p->size), 0);
    }
    R.grad_ref = pm_malloc(R.n_params * sizeof(double));
    R.step_ref = pm_malloc(R.n_params * sizeof(double));
    read_flat_f64("grad.", R.grad_ref);
    read_flat_f64("step1.", R.step_ref);
    size_t M = (size_t)R.B * R.T;
    R.logits_ref = pm_malloc(M * R.cfg.vocab_pad * sizeof(double));
    read_f64("logits", R.logits_ref, M * R.cfg.vocab_pad);
    read_f64("loss", &R.loss_ref, 1);
    read_f64("grad_norm", &R.gnorm_ref, 1);

    R.batch = batch_alloc(R.B, R.T);
    read_i32("tokens", R.batch.tokens, M);
    read_i32("pos", R.batch.pos, M);
    read_i32("targets", R.batch.targets, M);
    batch_count_valid(&R.batch);
    printf("reference fixture: %d layers, d_model %d, vocab %d (pad %d), B %d, T %d, %lld valid targets, "
           "loss %.9f\n", R.cfg.n_layer, R.cfg.d_model, R.cfg.vocab_size, R.cfg.vocab_pad, R.B, R.T,
           (long long)R.batch.n_valid, R.loss_ref);
    return 0;
}

static int teardown(void **state) {
    batch_free(&R.batch);
    free(R.infos), free(R.w0), free(R.grad_ref), free(R.step_ref), free(R.logits_ref);
    st_close(&R.f);
    return 0;
}

// ---- helpers ----

// ||a - b|| / ||b|| over n elements
static double rel_err_f(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d, den += b[i] * b[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

static double rel_err_d(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        num += d * d, den += b[i] * b[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

static void make_model(Model *m, const float *weights) {
    model_create(m, &R.cfg, backend_cpu(), 1);
    model_set_params(m, weights);
    model_alloc_activations(m, R.B, R.T);
}

// Forward + backward of the mean loss; logits (M, Vp) and grads (n_params) to host. Returns the loss.
static double run_fwd_bwd(Model *m, const Batch *b, float *logits, float *grads) {
    double loss = model_forward(m, b, logits);
    model_zero_grad(m);
    model_backward(m, 1.0f / (float)b->n_valid);
    model_get_grads(m, grads);
    return loss;
}

// ---- tests ----

static void test_forward_backward(void **state) {
    size_t M = (size_t)R.B * R.T, nl = M * R.cfg.vocab_pad;
    float *logits = pm_malloc(nl * sizeof(float)), *grads = pm_malloc(R.n_params * sizeof(float));
    Model m;
    make_model(&m, R.w0);
    double loss = run_fwd_bwd(&m, &R.batch, logits, grads);

    double e_logits = rel_err_f(logits, R.logits_ref, nl);
    double e_loss = fabs(loss - R.loss_ref) / fabs(R.loss_ref);
    printf("logits rel err %.3e, loss %.9f vs %.9f rel err %.3e (tol %.0e)\n", e_logits, loss, R.loss_ref, e_loss,
           TOL_FWD);
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < R.n_tensors; i++) {
        const ParamInfo *p = &R.infos[i];
        double e = rel_err_f(grads + p->offset, R.grad_ref + p->offset, p->size);
        printf("  grad %-42s rel err %.3e%s\n", p->name, e, e <= TOL_GRAD ? "" : "  <-- FAIL");
        if (e > worst) worst = e;
        bad += !(e <= TOL_GRAD);
    }
    printf("gradients: worst rel err %.3e over %d tensors (tol %.0e)\n", worst, R.n_tensors, TOL_GRAD);
    assert_true(e_logits <= TOL_FWD);
    assert_true(e_loss <= TOL_FWD);
    assert_int_equal(bad, 0);
    model_destroy(&m);
    free(logits), free(grads);
}

// Upload host floats into a backend F32 buffer of n elements (the CPU backend's F32 is `real`).
static void upload_reals(Model *m, void *dst, const double *src, size_t n) {
    size_t eb = m->bk->f32_bytes;
    char *tmp = pm_malloc(n * eb);
    for (size_t i = 0; i < n; i++) {
        if (eb == sizeof(float)) ((float *)tmp)[i] = (float)src[i];
        else ((double *)tmp)[i] = src[i];
    }
    m->bk->upload(dst, tmp, n * eb);
    free(tmp);
}

static void compare_step(Model *m, const char *what, double tol_w, double tol_delta) {
    float *w1 = pm_malloc(R.n_params * sizeof(float));
    model_get_params(m, w1);
    double worst_w = 0, worst_d = 0;
    int bad = 0;
    double *dref = pm_malloc(R.n_params * sizeof(double));
    double *dours = pm_malloc(R.n_params * sizeof(double));
    for (size_t i = 0; i < R.n_params; i++) {
        dref[i] = R.step_ref[i] - (double)R.w0[i];
        dours[i] = (double)w1[i] - (double)R.w0[i];
    }
    for (int i = 0; i < R.n_tensors; i++) {
        const ParamInfo *p = &R.infos[i];
        double ew = rel_err_f(w1 + p->offset, R.step_ref + p->offset, p->size);
        double ed = rel_err_d(dours + p->offset, dref + p->offset, p->size);
        int ok = ew <= tol_w && (tol_delta <= 0 || ed <= tol_delta);
        printf("  %s step %-42s weights rel err %.3e, update rel err %.3e%s\n", what, p->name, ew, ed,
               ok ? "" : "  <-- FAIL");
        if (ew > worst_w) worst_w = ew;
        if (ed > worst_d) worst_d = ed;
        bad += !ok;
    }
    printf("%s step: worst weights rel err %.3e (tol %.0e), worst update rel err %.3e", what, worst_w, tol_w, worst_d);
    if (tol_delta > 0) printf(" (tol %.0e)", tol_delta);
    printf("\n");
    assert_int_equal(bad, 0);
    free(w1), free(dref), free(dours);
}

// The full training step on the engine's own gradients. The weights after one AdamW step are ill-conditioned in
// the gradient where |g| is near eps (1e-8): there the update lr*g/(|g|+eps) moves by lr*eps*dg/(|g|+eps)^2, so an
// fp32 gradient error of 1e-15 moves that weight by ~1e-5 — a float32 PyTorch run of the reference measured 1e-5
// on layer 0's x_proj for exactly this reason. Hence 1e-4 here; test_step_ref_grads checks the optimizer tightly.
static void test_step_own_grads(void **state) {
    size_t nl = (size_t)R.B * R.T * R.cfg.vocab_pad;
    float *logits = pm_malloc(nl * sizeof(float)), *grads = pm_malloc(R.n_params * sizeof(float));
    Model m;
    make_model(&m, R.w0);
    run_fwd_bwd(&m, &R.batch, logits, grads);
    model_alloc_optimizer(&m);
    double gn = model_optimizer_step(&m, &R.opt, R.opt.lr);
    double e = fabs(gn - R.gnorm_ref) / R.gnorm_ref;
    printf("grad norm before clipping %.9f vs %.9f rel err %.3e (clip at %g, so the step is clipped: %s)\n", gn,
           R.gnorm_ref, e, R.opt.grad_clip, R.gnorm_ref > R.opt.grad_clip ? "yes" : "no");
    assert_true(R.gnorm_ref > R.opt.grad_clip);  // the fixture must exercise clipping
    assert_true(e <= TOL_GRAD);
    compare_step(&m, "own-grad", TOL_STEP_OWN, 0);
    model_destroy(&m);
    free(logits), free(grads);
}

// The optimizer alone: the reference gradients (rounded to F32) go into the engine's gradient buffer, then one
// clipped AdamW step must land on the reference's weights (1e-6) with the reference's update (1e-4; the update of
// a weight near 1 carries that weight's fp32 rounding, ~6e-8 of 1e-2).
static void test_step_ref_grads(void **state) {
    Model m;
    make_model(&m, R.w0);
    upload_reals(&m, m.grads, R.grad_ref, R.n_params);
    model_alloc_optimizer(&m);
    double gn = model_optimizer_step(&m, &R.opt, R.opt.lr);
    printf("grad norm of the uploaded reference gradients %.9f vs %.9f\n", gn, R.gnorm_ref);
    assert_true(fabs(gn - R.gnorm_ref) <= 1e-6 * R.gnorm_ref);
    compare_step(&m, "ref-grad", TOL_STEP_REF, TOL_DELTA_REF);
    model_destroy(&m);
}

// Control 1: reversing the state index of layer 0's A_log (an indexing mistake) must be visible far above the
// tolerances in the logits and in that tensor's gradient.
static void test_control_a_log_order(void **state) {
    size_t nl = (size_t)R.B * R.T * R.cfg.vocab_pad;
    float *w = pm_malloc(R.n_params * sizeof(float));
    memcpy(w, R.w0, R.n_params * sizeof(float));
    const ParamInfo *a = &R.infos[model_tensor_index(&R.cfg, 0, P_A_LOG)];
    int Cd = R.cfg.d_inner, N = R.cfg.d_state;
    for (int c = 0; c < Cd; c++)
        for (int n = 0; n < N; n++) w[a->offset + (size_t)c * N + n] = R.w0[a->offset + (size_t)c * N + (N - 1 - n)];
    float *logits = pm_malloc(nl * sizeof(float)), *grads = pm_malloc(R.n_params * sizeof(float));
    Model m;
    make_model(&m, w);
    run_fwd_bwd(&m, &R.batch, logits, grads);
    double el = rel_err_f(logits, R.logits_ref, nl);
    double eg = rel_err_f(grads + a->offset, R.grad_ref + a->offset, a->size);
    printf("control (A_log state order reversed in layer 0): logits rel err %.3e, A_log grad rel err %.3e\n", el, eg);
    assert_true(el > 10 * TOL_FWD);
    assert_true(eg > 10 * TOL_GRAD);
    model_destroy(&m);
    free(w), free(logits), free(grads);
}

// Control 2: the same tokens with the document boundaries erased (pos = t within the row) must give other logits:
// the fixture really exercises the conv and scan resets.
static void test_control_no_resets(void **state) {
    size_t M = (size_t)R.B * R.T, nl = M * R.cfg.vocab_pad;
    Batch b = batch_alloc(R.B, R.T);
    memcpy(b.tokens, R.batch.tokens, M * sizeof(int32_t));
    memcpy(b.targets, R.batch.targets, M * sizeof(int32_t));
    for (size_t i = 0; i < M; i++) b.pos[i] = (int32_t)(i % R.T);
    batch_count_valid(&b);
    float *logits = pm_malloc(nl * sizeof(float));
    Model m;
    make_model(&m, R.w0);
    model_forward(&m, &b, logits);
    double el = rel_err_f(logits, R.logits_ref, nl);
    printf("control (document boundaries erased): logits rel err %.3e\n", el);
    assert_true(el > 10 * TOL_FWD);
    model_destroy(&m);
    batch_free(&b);
    free(logits);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward),  cmocka_unit_test(test_step_own_grads),
        cmocka_unit_test(test_step_ref_grads),    cmocka_unit_test(test_control_a_log_order),
        cmocka_unit_test(test_control_no_resets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
