// test_ops_f64.c — finite-difference checks of the backward of every CPU op, in the float64 build
// (pmcore64, real = double).
//
// Each test draws random non-zero inputs, defines a scalar objective L = sum(out * R) with a fixed random R,
// runs the op's backward with dout = R, and compares every analytic gradient entry with the central difference
// (L(x + eps) - L(x - eps)) / (2 eps).
// Tolerance: with eps = 1e-6 in double, the truncation error of the central difference is ~eps^2 * L''' ~ 1e-12
// and the rounding error is ~1e-16 * |term| / eps ~ 1e-10 (the objective is summed in long double so the size
// of the whole sum does not add its own rounding), so a correct gradient agrees to ~1e-8 (measured worst: 5e-8);
// a wrong one (missing term, wrong index, a leak across a document start) is off by O(1). We require the relative
// error |num - ana| / max(|num|, |ana|, 1e-2) <= 1e-6 (the 1e-2 floor keeps near-zero entries from turning
// rounding noise into large relative errors).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"

_Static_assert(sizeof(real) == sizeof(double), "test_ops_f64 must link the float64 build (pmcore64)");

#define FD_EPS 1e-6
#define FD_TOL 1e-6
#define FD_FLOOR 1e-2

static const Backend *be;

// ---- small helpers ----

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {  // [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
// uniform in ±[lo, hi]: never zero, random sign
static void fill(real *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * urand();
        x[i] = urand() < 0.5 ? -v : v;
    }
}
static real *arr(size_t n) { return calloc(n + 1, sizeof(real)); }
static real *rnd(size_t n) {
    real *x = arr(n);
    fill(x, n, 0.1, 1.0);
    return x;
}
static real *copy_of(const real *x, size_t n) {
    real *y = arr(n);
    memcpy(y, x, n * sizeof(real));
    return y;
}

// long double: the objective sums many terms of which one changes; summing in extended precision keeps that
// sum's own rounding (ulp of |L|) far below the difference being measured
typedef long double (*Objective)(void *ctx);

// Compare the analytic gradient g (n entries of x, stride 1) with central differences of f wrt x.
static void check_grad(const char *what, real *x, const real *g, size_t n, Objective f, void *ctx) {
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < n; i++) {
        real save = x[i];
        x[i] = save + FD_EPS;
        long double lp = f(ctx);
        x[i] = save - FD_EPS;
        long double lm = f(ctx);
        x[i] = save;
        double num = (double)((lp - lm) / (2 * FD_EPS));
        double den = fmax(fmax(fabs(num), fabs(g[i])), FD_FLOOR);
        double err = fabs(num - g[i]) / den;
        if (err > worst) worst = err;
        if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
        if (err > FD_TOL) fail_msg("%s[%zu]: analytic %.12g vs numeric %.12g (rel err %.3g)", what, i, (double)g[i], num, err);
    }
    // a gradient that is all zero would make the check vacuous: the inputs are chosen so that it is not
    if (!(gmax > 1e-3)) fail_msg("%s: gradient is (near) zero everywhere (max %.3g)", what, gmax);
    print_message("  %-14s %4zu entries, worst rel err %.2e\n", what, n, worst);
}

// Same, for a strided column slice x[m * ld + j], j < cols, with the gradient in g[m * ldg + j].
static void check_grad_ld(const char *what, real *x, int ld, const real *g, int ldg, int rows, int cols,
                          Objective f, void *ctx) {
    real *gc = arr((size_t)rows * cols);
    for (int m = 0; m < rows; m++)
        for (int j = 0; j < cols; j++) gc[(size_t)m * cols + j] = g[(size_t)m * ldg + j];
    double worst = 0;
    for (int m = 0; m < rows; m++)
        for (int j = 0; j < cols; j++) {
            real *p = x + (size_t)m * ld + j;
            real save = *p;
            *p = save + FD_EPS;
            long double lp = f(ctx);
            *p = save - FD_EPS;
            long double lm = f(ctx);
            *p = save;
            double num = (double)((lp - lm) / (2 * FD_EPS)), ana = gc[(size_t)m * cols + j];
            double err = fabs(num - ana) / fmax(fmax(fabs(num), fabs(ana)), FD_FLOOR);
            if (err > worst) worst = err;
            if (err > FD_TOL) fail_msg("%s[%d, %d]: analytic %.12g vs numeric %.12g (rel err %.3g)", what, m, j, ana, num, err);
        }
    double gmax = 0;
    for (size_t i = 0; i < (size_t)rows * cols; i++) gmax = fmax(gmax, fabs(gc[i]));
    if (!(gmax > 1e-3)) fail_msg("%s: gradient is (near) zero everywhere (max %.3g)", what, gmax);
    print_message("  %-14s %4d entries, worst rel err %.2e\n", what, rows * cols, worst);
    free(gc);
}

static long double dot(const real *a, int lda, const real *b, int ldb, int rows, int cols) {
    long double s = 0;
    for (int m = 0; m < rows; m++)
        for (int j = 0; j < cols; j++) s += (long double)a[(size_t)m * lda + j] * b[(size_t)m * ldb + j];
    return s;
}

// entries outside the op's columns must keep their sentinel value
static void assert_untouched(const real *x, int ld, int rows, int c0, int c1, real sentinel) {
    for (int m = 0; m < rows; m++)
        for (int j = c0; j < c1; j++)
            if (x[(size_t)m * ld + j] != sentinel) fail_msg("wrote outside its columns at [%d, %d]", m, j);
}

// ---- embedding ----

typedef struct {
    real *wte, *out, *R;
    int32_t *tok;
    int M, C;
} EmbCtx;
static long double emb_obj(void *p) {
    EmbCtx *c = p;
    be->embedding_fwd(c->out, c->tok, c->wte, c->M, c->C);
    return dot(c->out, c->C, c->R, c->C, c->M, c->C);
}
static void test_embedding(void **state) {
    int M = 9, C = 5, V = 7;
    int32_t tok[9] = {3, 1, 3, 6, 0, 3, 2, 1, 5};  // repeats: their gradients must add up
    EmbCtx c = {rnd((size_t)V * C), arr((size_t)M * C), rnd((size_t)M * C), tok, M, C};
    real *dwte = rnd((size_t)V * C), *dwte0 = copy_of(dwte, (size_t)V * C);
    be->embedding_bwd(dwte, c.R, tok, M, C, V);
    for (size_t i = 0; i < (size_t)V * C; i++) dwte[i] -= dwte0[i];  // accumulates: subtract the start value
    // row 4 (token 4) is never used: its gradient must stay exactly zero, the check below covers the rest
    for (int j = 0; j < C; j++) assert_true(dwte[4 * C + j] == 0);
    check_grad("dwte", c.wte, dwte, (size_t)V * C, emb_obj, &c);
    free(c.wte), free(c.out), free(c.R), free(dwte), free(dwte0);
}

// ---- fused residual add + RMSNorm ----

typedef struct {
    real *res_in, *h, *w, *res_out, *xn, *rstd, *R, *R2;
    int M, C;
} NormCtx;
// L = sum(xn * R) + sum(res_out * R2): res_out also feeds the next layer, whose gradient arrives in dres
static long double norm_obj(void *p) {
    NormCtx *c = p;
    be->add_rmsnorm_fwd(c->res_out, c->xn, c->rstd, c->res_in, c->h, c->w, c->M, c->C, 1e-5f);
    return dot(c->xn, c->C, c->R, c->C, c->M, c->C) + dot(c->res_out, c->C, c->R2, c->C, c->M, c->C);
}
static void test_rmsnorm(void **state) {
    int M = 6, C = 7;
    size_t n = (size_t)M * C;
    NormCtx c = {rnd(n), rnd(n), rnd(C), arr(n), arr(n), arr(M), rnd(n), rnd(n), M, C};
    norm_obj(&c);
    // independent check of rstd
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += pow(c.res_in[m * C + j] + c.h[m * C + j], 2);
        assert_true(fabs(c.rstd[m] - 1 / sqrt(ss / C + 1e-5)) < 1e-12);
    }
    real *dres = copy_of(c.R2, n), *dres_act = arr(n), *dw = rnd(C), *dw0 = copy_of(dw, C);
    be->rmsnorm_bwd(dres, dres_act, dw, c.R, c.res_out, c.w, c.rstd, M, C);
    assert_memory_equal(dres, dres_act, n * sizeof(real));
    for (int j = 0; j < C; j++) dw[j] -= dw0[j];
    check_grad("dres_in", c.res_in, dres, n, norm_obj, &c);
    check_grad("dh", c.h, dres, n, norm_obj, &c);
    check_grad("dw", c.w, dw, C, norm_obj, &c);

    // h = NULL and res_out aliasing res_in (the last layer's norm on the residual alone)
    real *res = copy_of(c.res_in, n), *xn2 = arr(n), *rstd2 = arr(M);
    be->add_rmsnorm_fwd(res, xn2, rstd2, res, NULL, c.w, M, C, 1e-5f);
    assert_memory_equal(res, c.res_in, n * sizeof(real));
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += pow(c.res_in[m * C + j], 2);
        for (int j = 0; j < C; j++)
            assert_true(fabs(xn2[m * C + j] - c.res_in[m * C + j] * c.w[j] / sqrt(ss / C + 1e-5)) < 1e-12);
    }
    free(res), free(xn2), free(rstd2);
    free(c.res_in), free(c.h), free(c.w), free(c.res_out), free(c.xn), free(c.rstd), free(c.R), free(c.R2);
    free(dres), free(dres_act), free(dw), free(dw0);
}

// ---- matmul ----

typedef struct {
    real *inp, *W, *bias, *out, *R;
    int ldi, ldo, M, N, K;
} MmCtx;
static long double mm_obj(void *p) {
    MmCtx *c = p;
    be->matmul_fwd(c->out, c->ldo, c->inp, c->ldi, c->W, c->bias, c->M, c->N, c->K);
    return dot(c->out, c->ldo, c->R, c->N, c->M, c->N);
}
static void test_matmul(void **state) {
    int M = 6, N = 5, K = 4, ldi = K + 3, ldo = N + 2, ldd = K + 1, lddo = N + 4;
    MmCtx c = {rnd((size_t)M * ldi), rnd((size_t)N * K), rnd(N), arr((size_t)M * ldo), rnd((size_t)M * N), ldi, ldo, M, N, K};
    // dout with its own row stride, holding R in its first N columns
    real *dout = rnd((size_t)M * lddo);
    for (int m = 0; m < M; m++)
        for (int j = 0; j < N; j++) dout[(size_t)m * lddo + j] = c.R[(size_t)m * N + j];
    // accumulate_dinp: dinp starts with random values and the columns K..ldd-1 hold a sentinel
    real *dinp = arr((size_t)M * ldd);
    fill(dinp, (size_t)M * ldd, 0.1, 1);
    for (int m = 0; m < M; m++) dinp[(size_t)m * ldd + K] = 42;
    real *dinp0 = copy_of(dinp, (size_t)M * ldd);
    real *dW = rnd((size_t)N * K), *dW0 = copy_of(dW, (size_t)N * K), *db = rnd(N), *db0 = copy_of(db, N);
    be->matmul_bwd(dinp, ldd, 1, dW, db, dout, lddo, c.inp, ldi, c.W, M, N, K);
    assert_untouched(dinp, ldd, M, K, ldd, 42);
    for (size_t i = 0; i < (size_t)M * ldd; i++) dinp[i] -= dinp0[i];
    for (size_t i = 0; i < (size_t)N * K; i++) dW[i] -= dW0[i];
    for (int j = 0; j < N; j++) db[j] -= db0[j];
    check_grad_ld("dinp(acc)", c.inp, ldi, dinp, ldd, M, K, mm_obj, &c);
    check_grad("dW", c.W, dW, (size_t)N * K, mm_obj, &c);
    check_grad("dbias", c.bias, db, N, mm_obj, &c);

    // overwrite mode (accumulate_dinp = 0) gives the same gradient whatever dinp held; NULL dW/dbias allowed
    real *dinp2 = rnd((size_t)M * ldd);
    be->matmul_bwd(dinp2, ldd, 0, NULL, NULL, dout, lddo, c.inp, ldi, c.W, M, N, K);
    for (int m = 0; m < M; m++)
        for (int j = 0; j < K; j++)
            assert_true(fabs(dinp2[(size_t)m * ldd + j] - dinp[(size_t)m * ldd + j]) < 1e-12);
    // no bias: out = inp @ W^T exactly as the objective without the bias term
    real *bias = c.bias;
    c.bias = NULL;
    check_grad_ld("dinp(nobias)", c.inp, ldi, dinp, ldd, M, K, mm_obj, &c);
    c.bias = bias;
    free(c.inp), free(c.W), free(c.bias), free(c.out), free(c.R), free(dout), free(dinp), free(dinp0), free(dinp2);
    free(dW), free(dW0), free(db), free(db0);
}

// ---- conv1d + SiLU ----

// Two rows of T = 10: row 0 holds documents of 4, 3 and 3 tokens; row 1 starts mid-document (pos 6 at the row
// start: a piece of a cut document, still a reset) then a new document.
#define CT 10
static const int32_t conv_pos[2 * CT] = {0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 6, 7, 8, 9, 10, 0, 1, 2, 3, 4};

typedef struct {
    real *xi, *w, *b, *u, *R;
    int ldx, M, T, C, K;
} ConvCtx;
static long double conv_obj(void *p) {
    ConvCtx *c = p;
    be->conv_silu_fwd(c->u, c->xi, c->ldx, c->w, c->b, conv_pos, c->M, c->T, c->C, c->K, NULL, NULL);
    return dot(c->u, c->C, c->R, c->C, c->M, c->C);
}
static void test_conv(void **state) {
    int T = CT, M = 2 * CT, C = 17, K = 4, ldx = 2 * C;  // 17: a full 16-channel block + 1; xi is the first half of a wider (M, 2C) buffer
    ConvCtx c = {rnd((size_t)M * ldx), rnd((size_t)C * K), rnd(C), arr((size_t)M * C), rnd((size_t)M * C), ldx, M, T, C, K};
    real *dxi = arr((size_t)M * ldx);
    for (size_t i = 0; i < (size_t)M * ldx; i++) dxi[i] = 42;  // sentinel: the z half must stay as it is
    real *dw = rnd((size_t)C * K), *dw0 = copy_of(dw, (size_t)C * K), *db = rnd(C), *db0 = copy_of(db, C);
    be->conv_silu_bwd(dxi, ldx, dw, db, c.R, c.xi, c.w, c.b, conv_pos, M, T, C, K, NULL, NULL);
    assert_untouched(dxi, ldx, M, C, ldx, 42);
    for (size_t i = 0; i < (size_t)C * K; i++) dw[i] -= dw0[i];
    for (int j = 0; j < C; j++) db[j] -= db0[j];
    check_grad_ld("dxi", c.xi, ldx, dxi, ldx, M, C, conv_obj, &c);
    check_grad("dw_conv", c.w, dw, (size_t)C * K, conv_obj, &c);
    check_grad("db_conv", c.b, db, C, conv_obj, &c);
    free(c.xi), free(c.w), free(c.b), free(c.u), free(c.R), free(dxi), free(dw), free(dw0), free(db), free(db0);
}

// ---- selective scan ----

// Two rows of T = 12: row 0 holds documents of 5, 4 and 3 tokens; row 1 continues a cut document (pos 7 at the
// row start) for 4 tokens, then documents of 6 and 2 tokens.
#define ST 12
static const int32_t scan_pos[2 * ST] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2, 7, 8, 9, 10, 0, 1, 2, 3, 4, 5, 0, 1};

typedef struct {
    real *u, *dpre, *dt_bias, *A_log, *xdbl, *D, *xz, *out, *R;
    int ldbc, ldz, dtr, M, T, Cd, N;
} ScanCtx;
// B and C are column slices of the x_proj output xdbl (M, dtr + 2N); z is the second half of xz (M, 2 Cd)
static real *scan_B(ScanCtx *c) { return c->xdbl + c->dtr; }
static real *scan_C(ScanCtx *c) { return c->xdbl + c->dtr + c->N; }
static real *scan_z(ScanCtx *c) { return c->xz + c->Cd; }
static long double scan_obj(void *p) {
    ScanCtx *c = p;
    be->scan_fwd(c->out, c->u, c->dpre, c->dt_bias, c->A_log, scan_B(c), scan_C(c), c->ldbc, c->D, scan_z(c),
                 c->ldz, scan_pos, c->M, c->T, c->Cd, c->N, NULL, NULL, NULL);
    return dot(c->out, c->Cd, c->R, c->Cd, c->M, c->Cd);
}
static void test_scan(void **state) {
    // 17 channels: a full 16-channel block of the CPU kernels plus a partial one
    int T = ST, M = 2 * ST, Cd = 17, N = 4, dtr = 2, ldbc = dtr + 2 * N, ldz = 2 * Cd;
    size_t mc = (size_t)M * Cd;
    ScanCtx c = {rnd(mc), rnd(mc), rnd(Cd), arr((size_t)Cd * N), rnd((size_t)M * ldbc), arr(Cd), rnd((size_t)M * ldz),
                 arr(mc), rnd(mc), ldbc, ldz, dtr, M, T, Cd, N};
    // realistic parameter ranges: A_log around ln(n+1) (so A in [-5, -1]), D around 1, dt bias so that delta
    // spans ~0.2..1 (softplus well inside its smooth branch)
    for (int i = 0; i < Cd * N; i++) c.A_log[i] = log(1 + i % N) + 0.3 * (urand() - 0.5);
    for (int i = 0; i < Cd; i++) c.D[i] = 0.5 + urand(), c.dt_bias[i] = -1 + urand();

    real *du = arr(mc), *ddpre = arr(mc), *dxdbl = arr((size_t)M * ldbc), *dxz = arr((size_t)M * ldz);
    for (size_t i = 0; i < (size_t)M * ldbc; i++) dxdbl[i] = 42;  // sentinels: dt columns untouched
    for (size_t i = 0; i < (size_t)M * ldz; i++) dxz[i] = 42;      // and the xi half untouched
    real *ddtb = rnd(Cd), *ddtb0 = copy_of(ddtb, Cd), *dAl = rnd((size_t)Cd * N), *dAl0 = copy_of(dAl, (size_t)Cd * N);
    real *dD = rnd(Cd), *dD0 = copy_of(dD, Cd), *yre = arr(mc);
    be->scan_bwd(du, ddpre, dxdbl + dtr, dxdbl + dtr + N, dxz + Cd, ddtb, dAl, dD, c.R, c.u, c.dpre, c.dt_bias,
                 c.A_log, scan_B(&c), scan_C(&c), ldbc, c.D, scan_z(&c), ldz, scan_pos, M, T, Cd, N, NULL, yre, NULL, NULL);
    // the backward's second output: the forward's output again, from the states it recomputes
    scan_obj(&c);
    for (size_t i = 0; i < mc; i++) assert_true(fabs((double)(yre[i] - c.out[i])) <= 1e-12 * (1 + fabs((double)c.out[i])));
    assert_untouched(dxdbl, ldbc, M, 0, dtr, 42);
    assert_untouched(dxz, ldz, M, 0, Cd, 42);
    for (int i = 0; i < Cd; i++) ddtb[i] -= ddtb0[i], dD[i] -= dD0[i];
    for (int i = 0; i < Cd * N; i++) dAl[i] -= dAl0[i];

    check_grad("du", c.u, du, mc, scan_obj, &c);
    check_grad("ddpre", c.dpre, ddpre, mc, scan_obj, &c);
    check_grad_ld("dB", scan_B(&c), ldbc, dxdbl + dtr, ldbc, M, N, scan_obj, &c);
    check_grad_ld("dC", scan_C(&c), ldbc, dxdbl + dtr + N, ldbc, M, N, scan_obj, &c);
    check_grad_ld("dz", scan_z(&c), ldz, dxz + Cd, ldz, M, Cd, scan_obj, &c);
    check_grad("ddt_bias", c.dt_bias, ddtb, Cd, scan_obj, &c);
    check_grad("dA_log", c.A_log, dAl, (size_t)Cd * N, scan_obj, &c);
    check_grad("dD", c.D, dD, Cd, scan_obj, &c);

    // the linear branch of softplus (v > 20): delta = v exactly, derivative 1
    for (int i = 0; i < Cd; i++) c.dt_bias[i] = 25;
    for (size_t i = 0; i < mc; i++) c.dpre[i] *= 0.01;  // tiny A so that exp(delta A) stays representable
    for (int i = 0; i < Cd * N; i++) c.A_log[i] = -4 + 0.5 * urand();
    be->scan_bwd(du, ddpre, dxdbl + dtr, dxdbl + dtr + N, dxz + Cd, ddtb, dAl, dD, c.R, c.u, c.dpre, c.dt_bias,
                 c.A_log, scan_B(&c), scan_C(&c), ldbc, c.D, scan_z(&c), ldz, scan_pos, M, T, Cd, N, NULL, NULL, NULL, NULL);
    check_grad("ddpre(v>20)", c.dpre, ddpre, mc, scan_obj, &c);

    free(c.u), free(c.dpre), free(c.dt_bias), free(c.A_log), free(c.xdbl), free(c.D), free(c.xz), free(c.out), free(c.R);
    free(yre), free(du), free(ddpre), free(dxdbl), free(dxz), free(ddtb), free(ddtb0), free(dAl), free(dAl0), free(dD), free(dD0);
}

// ---- carried state (backend.h: the ops' first, h0 / hist; carry_state_out) ----

// Three rows of T = 12: row 0 starts afresh (documents of 7 and 5 tokens); row 1 continues a document (pos 12 at the
// row start) for 5 tokens, then a new one; row 2 continues a document throughout (pos 24 ..).
#define KT 12
static const int32_t carry_pos[3 * KT] = {0,  1,  2,  3,  4,  5,  6,  0,  1,  2,  3,  4,  12, 13, 14, 15, 16, 0,
                                          1,  2,  3,  4,  5,  6,  24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
static const int32_t carry_first[3] = {0, 5, KT};

typedef struct {
    ConvCtx cv;
    real *hist;
} CarryConvCtx;
static long double carry_conv_obj(void *p) {
    CarryConvCtx *c = p;
    be->conv_silu_fwd(c->cv.u, c->cv.xi, c->cv.ldx, c->cv.w, c->cv.b, carry_pos, c->cv.M, c->cv.T, c->cv.C, c->cv.K,
                      carry_first, c->hist);
    return dot(c->cv.u, c->cv.C, c->cv.R, c->cv.C, c->cv.M, c->cv.C);
}
// The conv with carried inputs (conv_silu_fwd/bwd's first, hist): its backward against finite differences of the
// forward with them; the parameter gradients added to what was there.
static void test_carry_conv(void **state) {
    int T = KT, M = 3 * KT, C = 17, K = 4, ldx = 2 * C;
    CarryConvCtx c = {{rnd((size_t)M * ldx), rnd((size_t)C * K), rnd(C), arr((size_t)M * C), rnd((size_t)M * C), ldx, M,
                       T, C, K},
                      rnd((size_t)3 * (K - 1) * C)};
    real *dxi = arr((size_t)M * ldx), *dw = rnd((size_t)C * K), *db = rnd(C), *dw0 = copy_of(dw, (size_t)C * K);
    real *db0 = copy_of(db, C);
    be->conv_silu_bwd(dxi, ldx, dw, db, c.cv.R, c.cv.xi, c.cv.w, c.cv.b, carry_pos, M, T, C, K, carry_first, c.hist);
    for (size_t i = 0; i < (size_t)C * K; i++) dw[i] -= dw0[i];
    for (int j = 0; j < C; j++) db[j] -= db0[j];
    check_grad_ld("dxi", c.cv.xi, ldx, dxi, ldx, M, C, carry_conv_obj, &c);
    check_grad("dw_conv", c.cv.w, dw, (size_t)C * K, carry_conv_obj, &c);
    check_grad("db_conv", c.cv.b, db, C, carry_conv_obj, &c);
    free(c.cv.xi), free(c.cv.w), free(c.cv.b), free(c.cv.u), free(c.cv.R), free(c.hist);
    free(dxi), free(dw), free(db), free(dw0), free(db0);
}

typedef struct {
    ScanCtx sc;
    real *h0;
} CarryScanCtx;
static long double carry_scan_obj(void *p) {
    CarryScanCtx *c = p;
    ScanCtx *s = &c->sc;
    be->scan_fwd(s->out, s->u, s->dpre, s->dt_bias, s->A_log, scan_B(s), scan_C(s), s->ldbc, s->D, scan_z(s), s->ldz,
                 carry_pos, s->M, s->T, s->Cd, s->N, NULL, carry_first, c->h0);
    return dot(s->out, s->Cd, s->R, s->Cd, s->M, s->Cd);
}
// The scan started from a carried state (scan_fwd's first, h0): scan_bwd with the same against finite differences
// of scan_fwd, for every input (h0 held constant, as the backward takes it). Its copy of the forward's output is
// the forward's, and the rows that carry nothing are the zero-start scan's.
static void test_carry_scan(void **state) {
    int T = KT, M = 3 * KT, Cd = 17, N = 4, dtr = 2, ldbc = dtr + 2 * N, ldz = 2 * Cd;
    size_t mc = (size_t)M * Cd;
    CarryScanCtx c = {{rnd(mc), rnd(mc), rnd(Cd), arr((size_t)Cd * N), rnd((size_t)M * ldbc), arr(Cd),
                       rnd((size_t)M * ldz), arr(mc), rnd(mc), ldbc, ldz, dtr, M, T, Cd, N},
                      rnd((size_t)3 * Cd * N)};
    ScanCtx *s = &c.sc;
    for (int i = 0; i < Cd * N; i++) s->A_log[i] = log(1 + i % N) + 0.3 * (urand() - 0.5);
    for (int i = 0; i < Cd; i++) s->D[i] = 0.5 + urand(), s->dt_bias[i] = -1 + urand();
    for (size_t i = 0; i < mc; i++) s->dpre[i] *= 0.5;  // delta ~0.2..1: the carried state decays over a few tokens
    real *du = arr(mc), *ddpre = arr(mc), *dxdbl = arr((size_t)M * ldbc), *dxz = arr((size_t)M * ldz);
    real *ddtb = arr(Cd), *dAl = arr((size_t)Cd * N), *dD = arr(Cd), *yre = arr(mc), *y0 = arr(mc);
    be->scan_bwd(du, ddpre, dxdbl + dtr, dxdbl + dtr + N, dxz + Cd, ddtb, dAl, dD, s->R, s->u, s->dpre, s->dt_bias,
                 s->A_log, scan_B(s), scan_C(s), ldbc, s->D, scan_z(s), ldz, carry_pos, M, T, Cd, N, NULL, yre,
                 carry_first, c.h0);
    carry_scan_obj(&c);
    assert_memory_equal(yre, s->out, mc * sizeof(real));  // the backward's copy of the output: the forward's bits
    // row 0 carries nothing: its outputs are the zero-start scan's, bit for bit
    be->scan_fwd(y0, s->u, s->dpre, s->dt_bias, s->A_log, scan_B(s), scan_C(s), ldbc, s->D, scan_z(s), ldz, carry_pos,
                 M, T, Cd, N, NULL, NULL, NULL);
    assert_memory_equal(y0, s->out, (size_t)T * Cd * sizeof(real));
    double moved = 0;  // and the carried rows' are not (the test would pass with h0 ignored otherwise)
    for (size_t i = (size_t)T * Cd; i < mc; i++) moved = fmax(moved, fabs((double)(y0[i] - s->out[i])));
    assert_true(moved > 1e-3);
    check_grad("du", s->u, du, mc, carry_scan_obj, &c);
    check_grad("ddpre", s->dpre, ddpre, mc, carry_scan_obj, &c);
    check_grad_ld("dB", scan_B(s), ldbc, dxdbl + dtr, ldbc, M, N, carry_scan_obj, &c);
    check_grad_ld("dC", scan_C(s), ldbc, dxdbl + dtr + N, ldbc, M, N, carry_scan_obj, &c);
    check_grad_ld("dz", scan_z(s), ldz, dxz + Cd, ldz, M, Cd, carry_scan_obj, &c);
    check_grad("ddt_bias", s->dt_bias, ddtb, Cd, carry_scan_obj, &c);
    check_grad("dA_log", s->A_log, dAl, (size_t)Cd * N, carry_scan_obj, &c);
    check_grad("dD", s->D, dD, Cd, carry_scan_obj, &c);
    free(s->u), free(s->dpre), free(s->dt_bias), free(s->A_log), free(s->xdbl), free(s->D), free(s->xz), free(s->out);
    free(s->R), free(c.h0), free(du), free(ddpre), free(dxdbl), free(dxz), free(ddtb), free(dAl), free(dD), free(yre);
    free(y0);
}

// A document of 3T' tokens in one row of 3T', against the same document in three rows of T' carried from row to row
// (carry_state_out after each, conv_silu_fwd's hist and scan_fwd's h0 into the next): the conv's and the scan's outputs agree to rounding, and
// the state the last row leaves is the unbroken walk's. The unbroken walk is the ops' own (the definition), so
// this checks that the carried pieces add up to it.
static void test_carry_equals_unbroken(void **state) {
    const int Tp = 9, L = 3 * Tp, C = 6, K = 4, N = 4, dtr = 2, ldbc = dtr + 2 * N, ldx = 2 * C;
    real *xz = rnd((size_t)L * ldx), *w = rnd((size_t)C * K), *b = rnd(C), *dpre = rnd((size_t)L * C), *dtb = rnd(C);
    real *A_log = arr((size_t)C * N), *xdbl = rnd((size_t)L * ldbc), *D = rnd(C);
    for (int i = 0; i < C * N; i++) A_log[i] = log(1 + i % N) - 1.5;  // slow decay: the state matters rows later
    for (size_t i = 0; i < (size_t)L * C; i++) dpre[i] *= 0.3;
    int32_t *pos = malloc(L * sizeof(int32_t));
    for (int t = 0; t < L; t++) pos[t] = t;
    // unbroken: one row of L
    real *u1 = arr((size_t)L * C), *y1 = arr((size_t)L * C);
    be->conv_silu_fwd(u1, xz, ldx, w, b, pos, L, L, C, K, NULL, NULL);
    be->scan_fwd(y1, u1, dpre, dtb, A_log, xdbl + dtr, xdbl + dtr + N, ldbc, D, xz + C, ldx, pos, L, L, C, N, NULL, NULL, NULL);
    // carried: rows of Tp, one at a time (each a batch of one row), the state passed on
    real *u = arr((size_t)L * C), *y = arr((size_t)L * C), *h[2] = {arr((size_t)C * N), arr((size_t)C * N)};
    real *hist[2] = {arr((size_t)(K - 1) * C), arr((size_t)(K - 1) * C)};
    for (int r = 0; r < 3; r++) {
        const size_t o = (size_t)r * Tp;
        const int32_t first = r > 0 ? Tp : 0, last = r < 2 ? 0 : -1;
        const int in = r & 1, out = in ^ 1;
        be->conv_silu_fwd(u + o * C, xz + o * ldx, ldx, w, b, pos + o, Tp, Tp, C, K, &first, hist[in]);
        be->scan_fwd(y + o * C, u + o * C, dpre + o * C, dtb, A_log, xdbl + o * ldbc + dtr, xdbl + o * ldbc + dtr + N,
                     ldbc, D, xz + o * ldx + C, ldx, pos + o, Tp, Tp, C, N, NULL, &first, h[in]);
        if (last >= 0)
            be->carry_state_out(h[out], hist[out], u + o * C, dpre + o * C, dtb, A_log, xdbl + o * ldbc + dtr, ldbc,
                                xz + o * ldx, ldx, &first, &last, h[in], Tp, Tp, C, N, K, NULL);
    }
    double worst_u = 0, worst_y = 0;
    for (size_t i = 0; i < (size_t)L * C; i++) {
        worst_u = fmax(worst_u, fabs((double)(u[i] - u1[i])) / (1e-3 + fabs((double)u1[i])));
        worst_y = fmax(worst_y, fabs((double)(y[i] - y1[i])) / (1e-3 + fabs((double)y1[i])));
    }
    print_message("  carried vs unbroken: u %.2e, y %.2e\n", worst_u, worst_y);
    assert_true(worst_u < 1e-12);
    assert_true(worst_y < 1e-12);
    // and the control: without the carried state the later rows differ (the test can tell)
    real *y0 = arr((size_t)L * C);
    for (int r = 0; r < 3; r++) {
        const size_t o = (size_t)r * Tp;
        be->scan_fwd(y0 + o * C, u1 + o * C, dpre + o * C, dtb, A_log, xdbl + o * ldbc + dtr, xdbl + o * ldbc + dtr + N,
                     ldbc, D, xz + o * ldx + C, ldx, pos + o, Tp, Tp, C, N, NULL, NULL, NULL);
    }
    double diff = 0;
    for (size_t i = (size_t)Tp * C; i < (size_t)L * C; i++) diff = fmax(diff, fabs((double)(y0[i] - y1[i])));
    assert_true(diff > 1e-3);
    free(xz), free(w), free(b), free(dpre), free(dtb), free(A_log), free(xdbl), free(D), free(pos), free(u1), free(y1);
    free(u), free(y), free(h[0]), free(h[1]), free(hist[0]), free(hist[1]), free(y0);
}

// ---- classifier ----

typedef struct {
    real *x, *wte, *loss;
    int32_t *tgt;
    float scale;
    int M, C, Vp;
} ClsCtx;
// the backward seeds dloss[m] = loss_scale on every non-ignored token: L = loss_scale * sum(loss)
static long double cls_obj(void *p) {
    ClsCtx *c = p;
    be->classifier(c->loss, NULL, NULL, NULL, c->x, c->wte, c->tgt, c->scale, c->M, c->C, c->Vp, 0);
    long double s = 0;
    for (int m = 0; m < c->M; m++) s += c->loss[m];
    return c->scale * s;
}
static void test_classifier(void **state) {
    int M = 300, C = 4, Vp = 9;  // M > 256 so that the op runs more than one chunk of tokens
    ClsCtx c = {rnd((size_t)M * C), rnd((size_t)Vp * C), arr(M), calloc(M, sizeof(int32_t)), 0.37f, M, C, Vp};
    for (int m = 0; m < M; m++) c.tgt[m] = m % 5 == 2 ? -1 : (int32_t)(urand() * Vp);  // every 5th ignored
    for (size_t i = 0; i < (size_t)M * C; i++) c.x[i] *= 3;  // spread the logits out
    real *dx = rnd((size_t)M * C), *dwte = rnd((size_t)Vp * C), *dwte0 = copy_of(dwte, (size_t)Vp * C);
    float *logits = calloc((size_t)M * Vp, sizeof(float));
    be->classifier(c.loss, dx, dwte, logits, c.x, c.wte, c.tgt, c.scale, M, C, Vp, 0);
    // independent forward: naive logits and log-sum-exp
    for (int m = 0; m < M; m++) {
        double lg[16], mx = -1e300, se = 0;
        for (int v = 0; v < Vp; v++) {
            lg[v] = 0;
            for (int k = 0; k < C; k++) lg[v] += c.x[m * C + k] * c.wte[v * C + k];
            assert_true(fabs(logits[(size_t)m * Vp + v] - lg[v]) <= 1e-6 * fmax(1, fabs(lg[v])));  // stored as float
            mx = fmax(mx, lg[v]);
        }
        for (int v = 0; v < Vp; v++) se += exp(lg[v] - mx);
        double want = c.tgt[m] < 0 ? 0 : mx + log(se) - lg[c.tgt[m]];
        assert_true(fabs(c.loss[m] - want) <= 1e-12 * fmax(1, want));
    }
    for (size_t i = 0; i < (size_t)Vp * C; i++) dwte[i] -= dwte0[i];
    // ignored tokens get no gradient
    for (int m = 0; m < M; m++)
        if (c.tgt[m] < 0)
            for (int k = 0; k < C; k++) assert_true(dx[m * C + k] == 0);
    check_grad("dx", c.x, dx, (size_t)M * C, cls_obj, &c);
    check_grad("dwte", c.wte, dwte, (size_t)Vp * C, cls_obj, &c);
    free(c.x), free(c.wte), free(c.loss), free(c.tgt), free(dx), free(dwte), free(dwte0), free(logits);
}

int main(void) {
    be = backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding), cmocka_unit_test(test_rmsnorm), cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_conv),      cmocka_unit_test(test_scan),    cmocka_unit_test(test_classifier),
        cmocka_unit_test(test_carry_conv), cmocka_unit_test(test_carry_scan), cmocka_unit_test(test_carry_equals_unbroken),
    };
    return cmocka_run_group_tests_name("ops_f64 finite differences", tests, NULL, NULL);
}
