// test_ops_cpu.c — the CPU backend (fp32 build) against independent references:
// - packing: conv and scan on a packed row give each document exactly what running it alone in its own row
//   gives, and perturbing one document (its inputs or its output gradient) leaves every other document's
//   outputs and input gradients bit-identical;
// - matmul against a naive triple loop (strided ld, bias, transposes, accumulate);
// - AdamW against a scalar reimplementation of PyTorch's documented formula; sumsq against a double loop;
// - determinism: the ops that reduce across threads give bit-identical results with 1 and 2 threads.
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend.h"

_Static_assert(sizeof(real) == sizeof(float), "test_ops_cpu checks the fp32 build");

static const Backend *be;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void) {  // [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static real *arr(size_t n) { return calloc(n + 1, sizeof(real)); }
static real *rnd(size_t n, double lo, double hi) {  // ±[lo, hi], never zero
    real *x = arr(n);
    for (size_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * urand();
        x[i] = (real)(urand() < 0.5 ? -v : v);
    }
    return x;
}
static real *copy_of(const real *x, size_t n) {
    real *y = arr(n);
    memcpy(y, x, n * sizeof(real));
    return y;
}

// ----------------------------------------------------------------------------------------------------------
// A packed batch: 2 rows of T = 24 holding documents (start, len, first pos). Row 1 starts with the rest of a
// cut document (its first pos is 9, not 0: the row start alone must reset it).

#define PT 24
#define PM (2 * PT)
typedef struct {
    int start, len, pos0;
} Doc;
static const Doc docs[] = {{0, 7, 0}, {7, 1, 0}, {8, 10, 0}, {18, 6, 0}, {24, 5, 9}, {29, 12, 0}, {41, 7, 0}};
#define NDOCS (int)(sizeof(docs) / sizeof(docs[0]))
static int32_t ppos[PM];
static int doc_of[PM];

static void setup_pack(void) {
    for (int d = 0; d < NDOCS; d++)
        for (int i = 0; i < docs[d].len; i++) ppos[docs[d].start + i] = docs[d].pos0 + i, doc_of[docs[d].start + i] = d;
}

// The mixer inputs of the position-mixing ops, all with their production strides.
enum { C = 21, KC = 4, N = 3, DTR = 2, LDX = 2 * C, LDBC = DTR + 2 * N };  // C = 21: one full 16-channel block of the vectorized CPU scan plus a partial one
typedef struct {
    real *xz;     // (M, 2C): xi = first half, z = second half
    real *xdbl;   // (M, DTR + 2N): B, C after the dt columns
    real *dpre;   // (M, C)
    real *wconv, *bconv, *dt_bias, *A_log, *D;
} Inputs;
static Inputs make_inputs(void) {
    Inputs in = {rnd(PM * LDX, 0.1, 1), rnd(PM * LDBC, 0.1, 1), rnd(PM * C, 0.1, 1), rnd(C * KC, 0.1, 0.5),
                 rnd(C, 0.1, 0.5), arr(C), arr(C * N), arr(C)};
    for (int c = 0; c < C; c++) in.dt_bias[c] = (real)(-2 + urand()), in.D[c] = (real)(0.5 + urand());
    for (int i = 0; i < C * N; i++) in.A_log[i] = (real)(log(1 + i % N) + 0.2 * urand());
    return in;
}
static void free_inputs(Inputs *in) {
    free(in->xz), free(in->xdbl), free(in->dpre), free(in->wconv), free(in->bconv), free(in->dt_bias);
    free(in->A_log), free(in->D);
}

// Forward and backward of conv + scan over M tokens (the scan reads u = conv output, as in the mixer).
typedef struct {
    real *u, *y;                     // forward: (M, C), (M, C)
    real *dxz, *dxdbl, *du, *ddpre;  // backward input gradients: (M, 2C), (M, LDBC), (M, C), (M, C)
} Outputs;
static Outputs run_ops(const Inputs *in, const int32_t *pos, const real *dy, int M, int T) {
    Outputs o = {arr(M * C), arr(M * C), arr(M * LDX), arr(M * LDBC), arr(M * C), arr(M * C)};
    be->conv_silu_fwd(o.u, in->xz, LDX, in->wconv, in->bconv, pos, M, T, C, KC, NULL, NULL);
    be->scan_fwd(o.y, o.u, in->dpre, in->dt_bias, in->A_log, in->xdbl + DTR, in->xdbl + DTR + N, LDBC, in->D,
                 in->xz + C, LDX, pos, M, T, C, N, NULL, NULL, NULL);
    if (dy) {
        real *dwc = arr(C * KC), *dbc = arr(C), *ddtb = arr(C), *dAl = arr(C * N), *dD = arr(C), *yre = arr(M * C);
        be->scan_bwd(o.du, o.ddpre, o.dxdbl + DTR, o.dxdbl + DTR + N, o.dxz + C, ddtb, dAl, dD, dy, o.u, in->dpre,
                     in->dt_bias, in->A_log, in->xdbl + DTR, in->xdbl + DTR + N, LDBC, in->D, in->xz + C, LDX, pos,
                     M, T, C, N, NULL, yre, NULL, NULL);
        // the backward's copy of the forward's output (for the out_proj weight gradient): the forward's, bit for bit
        assert_memory_equal(yre, o.y, (size_t)M * C * sizeof(real));
        free(yre);
        be->conv_silu_bwd(o.dxz, LDX, dwc, dbc, o.du, in->xz, in->wconv, in->bconv, pos, M, T, C, KC, NULL, NULL);
        free(dwc), free(dbc), free(ddtb), free(dAl), free(dD);
    }
    return o;
}
static void free_outputs(Outputs *o) { free(o->u), free(o->y), free(o->dxz), free(o->dxdbl), free(o->du), free(o->ddpre); }

// Compare token rows [a, a+n) of x (ld lda) with rows [b, b+n) of y; exact when tol == 0.
static int rows_equal(const real *x, int a, const real *y, int b, int n, int ld, int cols, double tol) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cols; j++) {
            real p = x[(size_t)(a + i) * ld + j], q = y[(size_t)(b + i) * ld + j];
            if (tol == 0 ? memcmp(&p, &q, sizeof(real)) != 0 : fabs(p - q) > tol * fmax(1, fabs(q))) return 0;
        }
    return 1;
}

// Each document run alone, at the start of its own row of T tokens (the rest of that row filled with random
// tokens of another document), must get exactly the packed run's forward outputs and input gradients.
static void test_packed_equals_alone(void **state) {
    Inputs in = make_inputs();
    real *dy = rnd(PM * C, 0.1, 1);
    Outputs pk = run_ops(&in, ppos, dy, PM, PT);
    for (int d = 0; d < NDOCS; d++) {
        int s = docs[d].start, L = docs[d].len;
        Inputs al = make_inputs();  // random filler everywhere, then the document's own inputs at the row start
        memcpy(al.wconv, in.wconv, C * KC * sizeof(real)), memcpy(al.bconv, in.bconv, C * sizeof(real));
        memcpy(al.dt_bias, in.dt_bias, C * sizeof(real)), memcpy(al.A_log, in.A_log, C * N * sizeof(real));
        memcpy(al.D, in.D, C * sizeof(real));
        memcpy(al.xz, in.xz + (size_t)s * LDX, (size_t)L * LDX * sizeof(real));
        memcpy(al.xdbl, in.xdbl + (size_t)s * LDBC, (size_t)L * LDBC * sizeof(real));
        memcpy(al.dpre, in.dpre + (size_t)s * C, (size_t)L * C * sizeof(real));
        int32_t apos[PT];
        real *ady = rnd(PT * C, 0.1, 1);
        memcpy(ady, dy + (size_t)s * C, (size_t)L * C * sizeof(real));
        for (int i = 0; i < PT; i++) apos[i] = i < L ? docs[d].pos0 + i : i - L;  // filler: a document at L
        Outputs a = run_ops(&al, apos, ady, PT, PT);
        // the same arithmetic runs in the same order on the same values: bit-identical
        assert_true(rows_equal(pk.u, s, a.u, 0, L, C, C, 0));
        assert_true(rows_equal(pk.y, s, a.y, 0, L, C, C, 0));
        assert_true(rows_equal(pk.dxz, s, a.dxz, 0, L, LDX, 2 * C, 0));
        assert_true(rows_equal(pk.du, s, a.du, 0, L, C, C, 0));
        assert_true(rows_equal(pk.ddpre, s, a.ddpre, 0, L, C, C, 0));
        assert_true(rows_equal(pk.dxdbl + DTR, s, a.dxdbl + DTR, 0, L, LDBC, 2 * N, 0));
        free_outputs(&a), free_inputs(&al), free(ady);
    }
    free_outputs(&pk), free_inputs(&in), free(dy);
}

// Perturb one token of document d (its inputs, or its output gradient): every token of every other document
// keeps bit-identical outputs and input gradients, and the perturbed document does change.
static void test_perturb_isolated(void **state) {
    Inputs in = make_inputs();
    real *dy = rnd(PM * C, 0.1, 1);
    Outputs base = run_ops(&in, ppos, dy, PM, PT);
    for (int d = 0; d < NDOCS; d++)
        for (int which = 0; which < 2; which++) {  // 0: perturb inputs, 1: perturb the output gradient
            int t = docs[d].start + docs[d].len / 2;  // a token inside the document
            Inputs p = make_inputs();
            memcpy(p.xz, in.xz, PM * LDX * sizeof(real)), memcpy(p.xdbl, in.xdbl, PM * LDBC * sizeof(real));
            memcpy(p.dpre, in.dpre, PM * C * sizeof(real)), memcpy(p.wconv, in.wconv, C * KC * sizeof(real));
            memcpy(p.bconv, in.bconv, C * sizeof(real)), memcpy(p.dt_bias, in.dt_bias, C * sizeof(real));
            memcpy(p.A_log, in.A_log, C * N * sizeof(real)), memcpy(p.D, in.D, C * sizeof(real));
            real *pdy = copy_of(dy, PM * C);
            if (which == 0) {
                for (int j = 0; j < LDX; j++) p.xz[(size_t)t * LDX + j] += 0.5f;
                for (int j = 0; j < LDBC; j++) p.xdbl[(size_t)t * LDBC + j] -= 0.25f;
                for (int j = 0; j < C; j++) p.dpre[(size_t)t * C + j] += 0.3f;
            } else {
                for (int j = 0; j < C; j++) pdy[(size_t)t * C + j] *= -2;
            }
            Outputs o = run_ops(&p, ppos, pdy, PM, PT);
            for (int tt = 0; tt < PM; tt++) {
                if (doc_of[tt] == d) continue;  // only the other documents must be unchanged
                if (!rows_equal(o.u, tt, base.u, tt, 1, C, C, 0) || !rows_equal(o.y, tt, base.y, tt, 1, C, C, 0) ||
                    !rows_equal(o.dxz, tt, base.dxz, tt, 1, LDX, 2 * C, 0) ||
                    !rows_equal(o.du, tt, base.du, tt, 1, C, C, 0) ||
                    !rows_equal(o.ddpre, tt, base.ddpre, tt, 1, C, C, 0) ||
                    !rows_equal(o.dxdbl, tt, base.dxdbl, tt, 1, LDBC, LDBC, 0))
                    fail_msg("perturbing doc %d (%s) changed token %d of doc %d", d, which ? "dout" : "inputs", tt, doc_of[tt]);
            }
            // the perturbation is visible inside its own document (so the test above is not vacuous)
            if (which == 0) assert_false(rows_equal(o.y, t, base.y, t, 1, C, C, 0));
            assert_false(rows_equal(o.dxz, t, base.dxz, t, 1, LDX, 2 * C, 0));
            free_outputs(&o), free_inputs(&p), free(pdy);
        }
    free_outputs(&base), free_inputs(&in), free(dy);
}

// ----------------------------------------------------------------------------------------------------------
// matmul against a naive triple loop in double

static void test_matmul_naive(void **state) {
    int M = 37, Nn = 29, K = 45, ldi = K + 5, ldo = Nn + 3, ldd = K + 2, lddo = Nn + 7;
    real *inp = rnd((size_t)M * ldi, 0.1, 1), *W = rnd((size_t)Nn * K, 0.1, 1), *bias = rnd(Nn, 0.1, 1);
    real *out = rnd((size_t)M * ldo, 0.1, 1), *out0 = copy_of(out, (size_t)M * ldo);
    be->matmul_fwd(out, ldo, inp, ldi, W, bias, M, Nn, K);
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < Nn; n++) {
            double s = bias[n];
            for (int k = 0; k < K; k++) s += (double)inp[(size_t)m * ldi + k] * W[(size_t)n * K + k];
            assert_true(fabs(out[(size_t)m * ldo + n] - s) <= 1e-5 * (1 + fabs(s)));  // fp32 sums of 45 terms
        }
        for (int n = Nn; n < ldo; n++) assert_true(out[(size_t)m * ldo + n] == out0[(size_t)m * ldo + n]);
    }
    real *dout = rnd((size_t)M * lddo, 0.1, 1), *dinp = rnd((size_t)M * ldd, 0.1, 1), *dinp0 = copy_of(dinp, (size_t)M * ldd);
    real *dW = rnd((size_t)Nn * K, 0.1, 1), *dW0 = copy_of(dW, (size_t)Nn * K), *db = rnd(Nn, 0.1, 1), *db0 = copy_of(db, Nn);
    be->matmul_bwd(dinp, ldd, 1, dW, db, dout, lddo, inp, ldi, W, M, Nn, K);
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) {
            double s = dinp0[(size_t)m * ldd + k];
            for (int n = 0; n < Nn; n++) s += (double)dout[(size_t)m * lddo + n] * W[(size_t)n * K + k];
            assert_true(fabs(dinp[(size_t)m * ldd + k] - s) <= 1e-5 * (1 + fabs(s)));
        }
        for (int k = K; k < ldd; k++) assert_true(dinp[(size_t)m * ldd + k] == dinp0[(size_t)m * ldd + k]);
    }
    for (int n = 0; n < Nn; n++) {
        for (int k = 0; k < K; k++) {
            double s = dW0[(size_t)n * K + k];
            for (int m = 0; m < M; m++) s += (double)dout[(size_t)m * lddo + n] * inp[(size_t)m * ldi + k];
            assert_true(fabs(dW[(size_t)n * K + k] - s) <= 1e-5 * (1 + fabs(s)));
        }
        double s = db0[n];
        for (int m = 0; m < M; m++) s += dout[(size_t)m * lddo + n];
        assert_true(fabs(db[n] - s) <= 1e-5 * (1 + fabs(s)));
    }
    free(inp), free(W), free(bias), free(out), free(out0), free(dout), free(dinp), free(dinp0), free(dW), free(dW0);
    free(db), free(db0);
}

// ----------------------------------------------------------------------------------------------------------
// AdamW: torch.optim.AdamW's documented algorithm, written out per element in double:
//   g = grad * grad_scale;  theta = theta - lr * wd * theta  (decayed tensors only)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t)
//   theta = theta - lr * mhat / (sqrt(vhat) + eps)
static void test_adamw_reference(void **state) {
    size_t n = 1000;
    ParamSegment segs[3] = {{0, 300, 1}, {300, 200, 0}, {600, 400, 1}};  // 500..599 is in no segment
    real *p = rnd(n, 0.1, 1), *pa = arr(n), *m = arr(n), *v = arr(n), *g = arr(n);
    double *rp = malloc(n * sizeof(double)), *rm = calloc(n, sizeof(double)), *rv = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) rp[i] = p[i];
    real *p_start = copy_of(p, n);
    AdamWArgs a = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_scale = 0.5f};
    for (int step = 1; step <= 4; step++) {
        real *gr = rnd(n, 0.01, 2);
        memcpy(g, gr, n * sizeof(real));
        a.step = step;
        be->adamw(p, pa, g, m, v, segs, 3, &a);
        for (int s = 0; s < 3; s++)
            for (size_t i = segs[s].offset; i < segs[s].offset + segs[s].size; i++) {
                double gi = (double)gr[i] * (double)a.grad_scale;
                if (segs[s].decay) rp[i] -= (double)a.lr * (double)a.weight_decay * rp[i];
                rm[i] = a.beta1 * rm[i] + (1 - (double)a.beta1) * gi;
                rv[i] = a.beta2 * rv[i] + (1 - (double)a.beta2) * gi * gi;
                double mh = rm[i] / (1 - pow(a.beta1, step)), vh = rv[i] / (1 - pow(a.beta2, step));
                rp[i] -= (double)a.lr * mh / (sqrt(vh) + (double)a.eps);
            }
        for (int s = 0; s < 3; s++)
            for (size_t i = segs[s].offset; i < segs[s].offset + segs[s].size; i++) {
                // fp32 state vs double: a few ulps of the parameter (and of the lr-sized update)
                if (fabs(p[i] - rp[i]) > 1e-6 * (1 + fabs(rp[i])))
                    fail_msg("step %d param %zu: %.9g vs reference %.9g", step, i, (double)p[i], rp[i]);
                assert_true(fabs(m[i] - rm[i]) <= 1e-6 * (1 + fabs(rm[i])));
                assert_true(fabs(v[i] - rv[i]) <= 1e-6 * (1 + fabs(rv[i])));
                assert_true(pa[i] == p[i]);  // the compute copy
            }
        free(gr);
    }
    for (size_t i = 500; i < 600; i++) assert_true(p[i] == p_start[i] && pa[i] == 0 && m[i] == 0);  // untouched
    free(p), free(pa), free(m), free(v), free(g), free(rp), free(rm), free(rv), free(p_start);
}

// AdamWArgs.part_first / part_count: a part updates its segments only, and parts covering the table give the
// whole update's bits (the model's update ahead applies a step in parts: model.c).
static void test_adamw_parts(void **state) {
    size_t n = 1000;
    ParamSegment segs[3] = {{0, 300, 1}, {300, 200, 0}, {600, 400, 1}};
    real *p[2], *pa[2], *m[2], *v[2];
    real *p0 = rnd(n, 0.1, 1), *g = rnd(n, 0.01, 2);
    for (int k = 0; k < 2; k++) p[k] = copy_of(p0, n), pa[k] = arr(n), m[k] = arr(n), v[k] = arr(n);
    AdamWArgs a = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_scale = 0.5f};
    for (int step = 1; step <= 3; step++) {
        a.step = step;
        a.part_first = a.part_count = 0;
        be->adamw(p[0], pa[0], g, m[0], v[0], segs, 3, &a);  // whole
        a.part_first = 1, a.part_count = 2;                   // segments 1 and 2 first ...
        be->adamw(p[1], pa[1], g, m[1], v[1], segs, 3, &a);
        if (step == 1)  // ... which leave segment 0 as it was
            for (size_t i = 0; i < 300; i++) assert_true(p[1][i] == p0[i] && m[1][i] == 0 && pa[1][i] == 0);
        a.part_first = 0, a.part_count = 1;                   // ... then segment 0
        be->adamw(p[1], pa[1], g, m[1], v[1], segs, 3, &a);
    }
    assert_memory_equal(p[0], p[1], n * sizeof(real));
    assert_memory_equal(pa[0], pa[1], n * sizeof(real));
    assert_memory_equal(m[0], m[1], n * sizeof(real));
    assert_memory_equal(v[0], v[1], n * sizeof(real));
    for (size_t i = 0; i < 300; i++) assert_true(p[1][i] != p0[i]);  // (the parts did update segment 0)
    for (int k = 0; k < 2; k++) free(p[k]), free(pa[k]), free(m[k]), free(v[k]);
    free(p0), free(g);
}

// A part outside the segment table stops the program with one line naming it (as the CUDA backend does, through
// the same adamw_segment_range), instead of updating what it can and saying nothing.
static void test_adamw_part_out_of_range(void **state) {
    (void)state;
    ParamSegment segs[3] = {{0, 3, 1}, {3, 2, 0}, {5, 4, 1}};
    real *p = rnd(9, 0.1, 5), *pa = arr(9), *g = rnd(9, 0.01, 6), *m = arr(9), *v = arr(9);
    const int parts[3][2] = {{2, 2}, {-1, 1}, {3, 1}};  // past the end, before the start, starting at the end
    for (int k = 0; k < 3; k++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(20);  // (an unchecked part can index outside the table and run on: that fails too)
            dup2(fds[1], 2);
            AdamWArgs a = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1, .step = 1,
                           .part_first = parts[k][0], .part_count = parts[k][1]};
            be->adamw(p, pa, g, m, v, segs, 3, &a);
            _exit(0);
        }
        close(fds[1]);
        char msg[256] = {0};
        size_t got = 0;
        for (ssize_t r; got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0;) got += r;
        close(fds[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
        char want[64];
        snprintf(want, sizeof want, "adamw: segments %d .. %d of 3", parts[k][0], parts[k][0] + parts[k][1]);
        assert_non_null(strstr(msg, want));
    }
    free(p), free(pa), free(g), free(m), free(v);
}

static void test_sumsq(void **state) {
    size_t n = 200003;  // several of the op's blocks and a ragged end
    real *x = rnd(n, 0.01, 3);
    double want = 0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * (double)x[i];
    double got = be->sumsq(x, n);
    assert_true(fabs(got - want) <= 1e-12 * want);  // both sum exact float squares in double
    assert_true(be->sumsq(x, 0) == 0);
    assert_true(be->sumsq(x + 5, 1) == (double)x[5] * (double)x[5]);
    free(x);
}

// ----------------------------------------------------------------------------------------------------------
// deterministic = 1: the results must not depend on the number of threads

static void test_thread_count_invariance(void **state) {
    Inputs in = make_inputs();
    real *dy = rnd(PM * C, 0.1, 1);
    int Mc = 300, Cc = 8, Vp = 40;
    real *x = rnd((size_t)Mc * Cc, 0.1, 1), *wte = rnd((size_t)Vp * Cc, 0.1, 1);
    int32_t *tg = malloc(Mc * sizeof(int32_t));
    for (int m = 0; m < Mc; m++) tg[m] = m % 7 == 0 ? -1 : m % Vp;
    Outputs o[2];
    real *loss[2], *dx[2], *dwte[2];
    int threads[2] = {1, 2};
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(threads[r]);
        o[r] = run_ops(&in, ppos, dy, PM, PT);
        loss[r] = arr(Mc), dx[r] = arr((size_t)Mc * Cc), dwte[r] = arr((size_t)Vp * Cc);
        be->classifier(loss[r], dx[r], dwte[r], NULL, x, wte, tg, 0.01f, Mc, Cc, Vp, 0);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(o[0].y, o[1].y, PM * C * sizeof(real));
    assert_memory_equal(o[0].dxz, o[1].dxz, PM * LDX * sizeof(real));
    assert_memory_equal(o[0].dxdbl, o[1].dxdbl, PM * LDBC * sizeof(real));
    assert_memory_equal(o[0].ddpre, o[1].ddpre, PM * C * sizeof(real));
    assert_memory_equal(loss[0], loss[1], Mc * sizeof(real));
    assert_memory_equal(dx[0], dx[1], (size_t)Mc * Cc * sizeof(real));
    assert_memory_equal(dwte[0], dwte[1], (size_t)Vp * Cc * sizeof(real));
    for (int r = 0; r < 2; r++) free_outputs(&o[r]), free(loss[r]), free(dx[r]), free(dwte[r]);
    free_inputs(&in), free(dy), free(x), free(wte), free(tg);
}

int main(void) {
    be = backend_cpu();
    setup_pack();
    if (strcmp(be->name, "cpu") != 0 || be->act_bytes != sizeof(real) || be->f32_bytes != sizeof(real) ||
        be->deterministic != 1) {
        fprintf(stderr, "backend_cpu(): wrong name/sizes/deterministic flag\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_equals_alone), cmocka_unit_test(test_perturb_isolated),
        cmocka_unit_test(test_matmul_naive),        cmocka_unit_test(test_adamw_reference), cmocka_unit_test(test_adamw_parts),
        cmocka_unit_test(test_adamw_part_out_of_range),
        cmocka_unit_test(test_sumsq),               cmocka_unit_test(test_thread_count_invariance),
    };
    return cmocka_run_group_tests_name("ops_cpu references", tests, NULL, NULL);
}
