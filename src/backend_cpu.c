// backend_cpu.c — the reference backend: plain C loops in `real` (float, or double in the pmcore64 test
// build), OpenBLAS for the matrix products, OpenMP across independent tokens / channels. Every reduction runs
// in a fixed order that does not depend on the thread count, so results are bit-identical run to run.
// Ops and their exact semantics are documented in backend.h; comments here say how and why.
// Speed (docs/cpu_perf.md): the conv and scan loops run over channels innermost, in `#pragma omp simd` loops
// with a branch-free exp/log1p in the float build, compiled -O3 -fno-trapping-math (set in CMakeLists.txt).
#include <cblas.h>
#include <omp.h>
#include <tgmath.h>  // exp, sqrt, ... in the type of their argument: float or double with `real`
#include <string.h>

#include "backend.h"
#include "util.h"

// ----------------------------------------------------------------------------------------------------------
// BLAS in `real`: row-major C = alpha * op(A) @ op(B) + beta * C, dispatched on sizeof(real) so the same
// source builds the float and the double library.

static void gemm(int transA, int transB, int M, int N, int K, real alpha, const real *A, int lda,
                 const real *B, int ldb, real beta, real *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // BLAS leaves C untouched only if beta == 1; make the K = 0 case explicit
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
    enum CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
    if (sizeof(real) == sizeof(double))
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, (double)alpha, (const double *)(const void *)A, lda,
                    (const double *)(const void *)B, ldb, (double)beta, (double *)(void *)C, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, (float)alpha, (const float *)(const void *)A, lda,
                    (const float *)(const void *)B, ldb, (float)beta, (float *)(void *)C, ldc);
}

static inline real sigmoidr(real x) { return 1 / (1 + exp(-x)); }
static inline real siluf(real x) { return x * sigmoidr(x); }
// d/dx [x * sigmoid(x)] = s + x * s * (1 - s)
static inline real silu_grad(real x) {
    real s = sigmoidr(x);
    return s * (1 + x * (1 - s));
}
// softplus with the reference's linear branch above 20 (its derivative there is exactly 1)
static inline real softplusr(real v) { return v > 20 ? v : log1p(exp(v)); }
static inline real softplus_grad(real v) { return v > 20 ? 1 : sigmoidr(v); }

// Token t starts a new document (conv taps and the scan state do not reach before it) when its position is 0
// or it is the first token of its row. Returns how many steps back from t are still in t's document.
static inline int steps_back(const int32_t *pos, int t, int T) {
    int tt = t % T;
    return pos[t] < tt ? pos[t] : tt;
}

// ----------------------------------------------------------------------------------------------------------
// Vectorizable float math for the conv and scan hot loops. libm's expf/log1pf are opaque calls that stop GCC
// from vectorizing a loop (they were ~20% of a training step); these are branch-free plain C, so inside
// `#pragma omp simd` loops they become vector code. Accuracy: exp within ~1 ulp over the float range (degree-7
// Taylor on |r| <= ln2/2, truncation < 1e-8 relative), log1p within ~2 ulp. The float64 build (PM_REAL=double,
// used by the finite-difference tests) keeps libm through the `sizeof(real)` switches below, which the
// compiler resolves at compile time.

static inline float f32_of_bits(int32_t i) {
    union { int32_t i; float f; } v = {.i = i};
    return v.f;
}
static inline int32_t bits_of_f32(float f) {
    union { float f; int32_t i; } v = {.f = f};
    return v.i;
}

// e^x = 2^k e^r with k = round(x / ln2), r = x - k ln2 (ln2 split in a hi part exact in the product and a lo
// part), e^r by Horner. Below -87.3 the result would be subnormal: return 0 (flush). Above 88 clamp (finite;
// only SiLU/sigmoid of huge negative inputs get there, where the exact value rounds the same way to ~0). NaN in,
// NaN out (a diverged run must see its NaN), without converting NaN to an integer (undefined; UBSan found it): the
// clamp works on a copy that fmaxf makes finite.
static inline float exp_f32(float x) {
    float xc = fminf(fmaxf(x, -87.3f), 88.0f);
    float kf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest integer
    float r = xc - kf * 0.693145751953125f;                             // ln2 hi: 16 significant bits
    r = r - kf * 1.42860682030941723e-6f;                               // ln2 lo
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    float y = p * f32_of_bits((uint32_t)((int32_t)kf + 127) << 23);
    return x < -87.3f ? 0.0f : x == x ? y : x;
}

// log1p(y) for y >= 0. w = 1 + y rounded, c = y - (w - 1) its rounding error (exact), log1p(y) = log(w) + c/w.
// log(w) = e ln2 + log(1 + f), w = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt(2)); with s = f / (2 + f),
// log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R), R = 2 s^2/3 + 2 s^4/5 + ... (|s| <= 0.172, to s^8).
// Arranged as in fdlibm so that the exact f carries the leading part and the rounded s only a small correction.
static inline float log1p_f32(float y) {
    float w = 1.0f + y;
    float c = y - (w - 1.0f);
    int32_t wb = bits_of_f32(w);
    int32_t e = ((wb >> 23) & 0xff) - 127;
    float m = f32_of_bits((wb & 0x007fffff) | 0x3f800000);  // mantissa in [1, 2)
    int big = m > 1.41421356f;
    m = big ? 0.5f * m : m;
    e = big ? e + 1 : e;
    float f = m - 1.0f;  // exact (Sterbenz)
    float hfsq = 0.5f * f * f, s = f / (2.0f + f), z = s * s;
    float R = 2.0f / 9;
    R = R * z + 2.0f / 7;
    R = R * z + 2.0f / 5;
    R = R * z + 2.0f / 3;
    R = R * z;
    float ef = (float)e;
    return ef * 0.693145751953125f - ((hfsq - (s * (hfsq + R) + (ef * 1.42860682030941723e-6f + c / w))) - f);
}

static inline real exp_r(real x) { return sizeof(real) == sizeof(float) ? (real)exp_f32((float)x) : exp(x); }
static inline real sigmoid_v(real x) { return 1 / (1 + exp_r(-x)); }
static inline real silu_v(real x) { return x * sigmoid_v(x); }
static inline real silu_grad_v(real x) {
    real s = sigmoid_v(x);
    return s * (1 + x * (1 - s));
}
// softplus, same branch at 20 as softplusr; below it max(v, 0) + log1p(e^-|v|) (= log1p(e^v), no overflow)
static inline real softplus_v(real v) {
    if (sizeof(real) != sizeof(float)) return softplusr(v);
    float av = v < 0 ? -(float)v : (float)v;
    float sp = (v > 0 ? (float)v : 0.0f) + log1p_f32(exp_f32(-av));
    return v > 20 ? v : (real)sp;
}
static inline real softplus_grad_v(real v) { return v > 20 ? 1 : sigmoid_v(v); }

// The conv/scan kernels are built twice on x86-64: for x86-64-v3 (AVX2 + FMA, 8 floats a vector) and the
// baseline (SSE2), picked at load time by the CPU, so no -march flag is needed. Results differ between the two
// only in rounding (FMA), never between runs or thread counts on one machine.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PM_NO_CLONES)
#define PM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define PM_CLONES
#endif

// Per-thread scratch that grows to the largest request and is then reused by every later call on that thread
// (scan kernels call this once per work unit; the size is bounded by T * N * 16 reals).
static real *thread_scratch(size_t n) {
    static _Thread_local real *buf;
    static _Thread_local size_t cap;
    if (n > cap) {
        free(buf);
        size_t bytes = (n * sizeof(real) + 63) / 64 * 64;
        buf = aligned_alloc(64, bytes);
        if (!buf) pm_die("backend_cpu: out of memory for %zu bytes of scan scratch", bytes);
        cap = n;
    }
    return buf;
}

// Whole-call scratch buffers (the conv's dxc, the scan's partial sums, the classifier's logits), kept per
// calling thread and grown to the largest request: allocating them fresh every call cost more in page faults
// (the kernel zero-filling new pages) than the work done in them. Bounded by the largest single request, about
// one (M, d_inner) activation. Slots are distinct buffers that one op may use at the same time.
enum { SCR_CONV, SCR_SCAN_B, SCR_SCAN_C, SCR_SCAN_P, SCR_CLS, SCR_NSLOTS };
static real *call_scratch(int slot, size_t n, int zero) {
    static _Thread_local real *buf[SCR_NSLOTS];
    static _Thread_local size_t cap[SCR_NSLOTS];
    if (n == 0) n = 1;
    if (n > cap[slot]) {
        free(buf[slot]);
        buf[slot] = pm_malloc(n * sizeof(real));
        cap[slot] = n;
    }
    if (zero) memset(buf[slot], 0, n * sizeof(real));
    return buf[slot];
}


// ----------------------------------------------------------------------------------------------------------
// memory: host memory, so upload/download are copies and ACT == F32 == real

static void *cpu_alloc(size_t bytes) { return pm_calloc(1, bytes ? bytes : 1); }
static void cpu_free(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memmove(dst, src, bytes);
}
static void cpu_memzero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}
static void cpu_synchronize(void) {}
static void cpu_convert(void *dst, const void *src, size_t n) { cpu_copy(dst, src, n * sizeof(real)); }

// Backend.spin: every thread runs SPIN_W independent chains in `omp simd` loops (vector registers full, no memory
// traffic), multiply-adds or the scan's exp (exp_r, here on the FMA pipe). The sink keeps the chains alive.
enum { SPIN_W = 64 };
static volatile double g_spin_sink;
static double cpu_spin(int kind, double n) {
    const int nt = omp_get_max_threads();
    const double per = (kind == PM_SPIN_FMA ? 2.0 : 1.0) * SPIN_W * nt;  // operations a step of every thread
    const long steps = n / per < 1 ? 1 : (long)(n / per);
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
        real x[SPIN_W];
        for (int j = 0; j < SPIN_W; j++) x[j] = (real)(0.5 + 0.001 * j + 1e-6 * omp_get_thread_num());
        for (long i = 0; i < steps; i++) {
            if (kind == PM_SPIN_FMA) {
#pragma omp simd
                for (int j = 0; j < SPIN_W; j++) x[j] = x[j] * (real)0.9999 + (real)0.0001;
            } else {
#pragma omp simd
                for (int j = 0; j < SPIN_W; j++) x[j] = exp_r(-x[j]);  // stays in [e^-1, 1]
            }
        }
        for (int j = 0; j < SPIN_W; j++) sink += x[j];
    }
    g_spin_sink = sink;
    return per * (double)steps;
}

// ----------------------------------------------------------------------------------------------------------
// embedding

static void embedding_fwd(void *out_, const int32_t *tokens, const void *wte_, int M, int C) {
    real *out = out_;        // (M, C)
    const real *wte = wte_;  // (V, C)
#pragma omp parallel for
    for (int m = 0; m < M; m++) memcpy(out + (size_t)m * C, wte + (size_t)tokens[m] * C, C * sizeof(real));
}

static void embedding_bwd(void *dwte_, const void *dout_, const int32_t *tokens, int M, int C, int V) {
    real *dwte = dwte_;        // (V, C)
    const real *dout = dout_;  // (M, C)
    // Parallel over column blocks: each thread owns its columns and adds the tokens in order, so repeated
    // tokens accumulate in the same order whatever the thread count.
    const int CB = 64;
    int nb = (C + CB - 1) / CB;
#pragma omp parallel for
    for (int b = 0; b < nb; b++) {
        int c0 = b * CB, c1 = c0 + CB < C ? c0 + CB : C;
        for (int m = 0; m < M; m++) {
            real *d = dwte + (size_t)tokens[m] * C;
            const real *g = dout + (size_t)m * C;
            for (int c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}

// ----------------------------------------------------------------------------------------------------------
// fused residual add + RMSNorm

static void add_rmsnorm_fwd(void *res_out_, void *xn_, void *rstd_, const void *res_in_, const void *h_,
                            const void *w_, int M, int C, float eps) {
    real *res_out = res_out_, *xn = xn_, *rstd = rstd_;  // (M, C), (M, C), (M)
    const real *res_in = res_in_, *h = h_, *w = w_;      // (M, C), (M, C) or NULL, (C)
#pragma omp parallel for
    for (int m = 0; m < M; m++) {
        const real *ri = res_in + (size_t)m * C;
        real *ro = res_out + (size_t)m * C;
        real ss = 0;
        for (int c = 0; c < C; c++) {
            real r = h ? ri[c] + h[(size_t)m * C + c] : ri[c];
            ro[c] = r;
            ss += r * r;
        }
        real s = 1 / sqrt(ss / C + (real)eps);
        rstd[m] = s;
        real *o = xn + (size_t)m * C;
        for (int c = 0; c < C; c++) o[c] = ro[c] * s * w[c];
    }
}

// Backend.grads_write: while set, parameter gradients are written (=), not added (+=), except embedding_bwd's and
// the classifier's dwte after its first chunk.
static int g_grads_write;
static void grads_write(int on) { g_grads_write = on; }

static void rmsnorm_bwd(void *dres_, void *dres_act_, void *dw_, const void *dxn_, const void *res_,
                        const void *w_, const void *rstd_, int M, int C) {
    real *dres = dres_, *dres_act = dres_act_, *dw = dw_;           // (M, C), (M, C) or NULL, (C)
    const real *dxn = dxn_, *res = res_, *w = w_, *rstd = rstd_;  // (M, C), (M, C), (C), (M)
    // xn_i = w_i r_i s with s = (mean(r^2) + eps)^-1/2, ds/dr_j = -s^3 r_j / C, so
    // dr_j = s (w_j g_j - r_j s^2 mean_i(w_i g_i r_i)).
#pragma omp parallel for
    for (int m = 0; m < M; m++) {
        const real *g = dxn + (size_t)m * C, *r = res + (size_t)m * C;
        real s = rstd[m];
        real dot = 0;
        for (int c = 0; c < C; c++) dot += w[c] * g[c] * r[c];
        real k = s * s * dot / C;
        real *d = dres + (size_t)m * C;
        for (int c = 0; c < C; c++) d[c] += s * (w[c] * g[c] - r[c] * k);
        if (dres_act) memmove(dres_act + (size_t)m * C, d, C * sizeof(real));  // may alias on the CPU
    }
    // dw_c += sum over tokens of g r s: parallel over channels, tokens in order (deterministic).
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        real acc = 0;
        for (int m = 0; m < M; m++) acc += dxn[(size_t)m * C + c] * res[(size_t)m * C + c] * rstd[m];
        dw[c] = g_grads_write ? acc : dw[c] + acc;
    }
}

// ----------------------------------------------------------------------------------------------------------
// matmul: out = inp @ W^T + bias

static void matmul_fwd(void *out_, int ldo, const void *inp_, int ldi, const void *W_, const void *bias_,
                       int M, int N, int K) {
    real *out = out_;                                      // (M, N) row stride ldo
    const real *inp = inp_, *W = W_, *bias = bias_;        // (M, K) ldi, (N, K), (N) or NULL
    gemm(0, 1, M, N, K, 1, inp, ldi, W, K, 0, out, ldo);
    if (bias) {
#pragma omp parallel for
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) out[(size_t)m * ldo + n] += bias[n];
    }
}

static void matmul_bwd(void *dinp_, int ldd, int accumulate_dinp, void *dW_, void *dbias_, const void *dout_,
                       int lddo, const void *inp_, int ldi, const void *W_, int M, int N, int K) {
    real *dinp = dinp_, *dW = dW_, *dbias = dbias_;       // (M, K) ldd, (N, K), (N)
    const real *dout = dout_, *inp = inp_, *W = W_;       // (M, N) lddo, (M, K) ldi, (N, K)
    if (dinp) gemm(0, 0, M, K, N, 1, dout, lddo, W, K, accumulate_dinp ? 1 : 0, dinp, ldd);  // dout @ W
    if (dW) gemm(1, 0, N, K, M, 1, dout, lddo, inp, ldi, g_grads_write ? 0 : 1, dW, K);    // dout^T @ inp
    if (dbias) {
#pragma omp parallel for
        for (int n = 0; n < N; n++) {
            real acc = 0;
            for (int m = 0; m < M; m++) acc += dout[(size_t)m * lddo + n];
            dbias[n] = g_grads_write ? acc : dbias[n] + acc;
        }
    }
}

// one matmul_bwd per layer, in order: the same bits as the model's own calls
static void matmul_dw_batch(void *dW, size_t sW, const void *dout, int lddo, size_t sdout, const void *inp, int ldi,
                            size_t sinp, int count, int M, int N, int K) {
    for (int i = 0; i < count; i++)
        matmul_bwd(NULL, 0, 0, (real *)dW + i * sW, NULL, (const real *)dout + i * sdout, lddo,
                   (const real *)inp + i * sinp, ldi, NULL, M, N, K);
}

// ----------------------------------------------------------------------------------------------------------
// depthwise causal conv1d with document resets, then SiLU. Loops run over channels innermost (contiguous in
// the token-major layout, so they vectorize); the taps are added in the same order (bias, then k = 0..K-1)
// as the per-channel definition.

// (K, C) copy of the (C, K) conv weight, so the tap-k weights of consecutive channels are contiguous
static real *conv_weight_t(const real *w, int C, int K) {
    real *wT = pm_malloc((size_t)K * C * sizeof(real) + 1);
    for (int c = 0; c < C; c++)
        for (int k = 0; k < K; k++) wT[(size_t)k * C + c] = w[(size_t)c * K + k];
    return wT;
}

// o[c] = pre-activation of token t: b[c] + sum of the taps still inside t's document. Tap k reads j = K-1-k
// steps back.
PM_CLONES static void conv_pre_row(real *restrict o, const real *xi, int ldx, const real *wT, const real *b, int t,
                                   int back, int C, int K) {
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = b[c];
    for (int k = 0; k < K; k++) {
        int j = K - 1 - k;
        if (j > back) continue;
        const real *x = xi + (size_t)(t - j) * ldx, *wk = wT + (size_t)k * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] += wk[c] * x[c];
    }
}

PM_CLONES static void silu_row(real *o, int C) {
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = silu_v(o[c]);
}

// g[c] = du[c] * silu'(pre[c]), in place on pre
PM_CLONES static void silu_grad_row(real *restrict pre, const real *restrict du, int C) {
#pragma omp simd
    for (int c = 0; c < C; c++) pre[c] = du[c] * silu_grad_v(pre[c]);
}

// the carried rows' parts of the conv (the carried-state section below)
static void conv_carry_fwd(real *u, const real *xi, int ldx, const real *w, const real *b, const int32_t *pos,
                           const int32_t *first, const real *hist, int M, int T, int C, int K);
static void conv_carry_bwd(real *dxi, int ldx, real *dw, real *db, const real *du, const real *xi, const real *w,
                           const real *b, const int32_t *pos, const int32_t *first, const real *hist, int M, int T,
                           int C, int K);

static void conv_silu_fwd(void *u_, const void *xi_, int ldx, const void *w_, const void *b_,
                          const int32_t *pos, int M, int T, int C, int K, const int32_t *first, const void *hist) {
    real *u = u_;                                // (M, C)
    const real *xi = xi_, *w = w_, *b = b_;      // (M, C) ldx, (C, K), (C)
    real *wT = conv_weight_t(w, C, K);           // (K, C)
#pragma omp parallel for
    for (int t = 0; t < M; t++) {
        real *o = u + (size_t)t * C;
        conv_pre_row(o, xi, ldx, wT, b, t, steps_back(pos, t, T), C, K);
        silu_row(o, C);
    }
    free(wT);
    if (first) conv_carry_fwd(u, xi, ldx, w, b, pos, first, hist, M, T, C, K);
}

#define CONV_CB 64  // channels per dw/db work unit
static void conv_silu_bwd(void *dxi_, int ldx, void *dw_, void *db_, const void *du_, const void *xi_,
                          const void *w_, const void *b_, const int32_t *pos, int M, int T, int C, int K,
                          const int32_t *first, const void *hist) {
    real *dxi = dxi_, *dw = dw_, *db = db_;               // (M, C) ldx, (C, K), (C)
    const real *du = du_, *xi = xi_, *w = w_, *b = b_;    // (M, C), (M, C) ldx, (C, K), (C)
    real *wT = conv_weight_t(w, C, K);                    // (K, C)
    // dxc (M, C): gradient at the pre-activation, recomputed from xi (scratch for this call only)
    real *dxc = call_scratch(SCR_CONV, (size_t)M * C, 0);
#pragma omp parallel for
    for (int t = 0; t < M; t++) {
        real *g = dxc + (size_t)t * C;
        conv_pre_row(g, xi, ldx, wT, b, t, steps_back(pos, t, T), C, K);
        silu_grad_row(g, du + (size_t)t * C, C);
    }
    // dxi[s, c] gathers from the outputs t = s + j that read s, i.e. those with j <= steps_back(t): a tap
    // never crosses a document start, so neither does its gradient.
#pragma omp parallel for
    for (int s = 0; s < M; s++) {
        real *d = dxi + (size_t)s * ldx;
        for (int c = 0; c < C; c++) d[c] = 0;
        for (int j = 0; j < K && s + j < M; j++) {
            int t = s + j;
            if (j > steps_back(pos, t, T)) continue;
            const real *wk = wT + (size_t)(K - 1 - j) * C, *g = dxc + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < C; c++) d[c] += wk[c] * g[c];
        }
    }
    // dw, db: per block of channels, tokens in order (the same per-channel order as a channel-by-channel loop)
    int nb = (C + CONV_CB - 1) / CONV_CB;
#pragma omp parallel for
    for (int bi = 0; bi < nb; bi++) {
        int c0 = bi * CONV_CB, cw = C - c0 < CONV_CB ? C - c0 : CONV_CB;
        real *acc = pm_malloc(((size_t)K + 1) * CONV_CB * sizeof(real));  // dw taps (K, CONV_CB), then db
        real *dbl = acc + (size_t)K * CONV_CB;
        for (int k = 0; k < K; k++)
            for (int i = 0; i < cw; i++) acc[k * CONV_CB + i] = g_grads_write ? 0 : dw[(size_t)(c0 + i) * K + k];
        for (int i = 0; i < cw; i++) dbl[i] = 0;
        for (int t = 0; t < M; t++) {
            const real *g = dxc + (size_t)t * C + c0;
            int back = steps_back(pos, t, T);
            for (int i = 0; i < cw; i++) dbl[i] += g[i];
            for (int k = 0; k < K; k++) {
                int j = K - 1 - k;
                if (j > back) continue;
                const real *x = xi + (size_t)(t - j) * ldx + c0;
                real *a = acc + k * CONV_CB;
#pragma omp simd
                for (int i = 0; i < cw; i++) a[i] += g[i] * x[i];
            }
        }
        for (int k = 0; k < K; k++)
            for (int i = 0; i < cw; i++) dw[(size_t)(c0 + i) * K + k] = acc[k * CONV_CB + i];
        for (int i = 0; i < cw; i++) db[c0 + i] = g_grads_write ? dbl[i] : db[c0 + i] + dbl[i];
        free(acc);
    }
    free(wT);
    if (first) conv_carry_bwd(dxi, ldx, dw, db, du, xi, w, b, pos, first, hist, M, T, C, K);
}

// ----------------------------------------------------------------------------------------------------------
// selective scan. Rows are independent (each starts from 0 or its carried state h0), and so are channels. The
// work unit is one row and a block of SCAN_CB consecutive channels: the block is the vector (lane j = channel
// c0 + j, contiguous in the token-major layout), the N states of each channel live in s (N, SCAN_CB), and the
// unit walks its T tokens. A last partial block (Cd not a multiple of SCAN_CB) runs with zero-filled lanes:
// u = 0 there keeps their states, outputs and gradient contributions exactly 0.
#define SCAN_CB 16

// Load w (<= SCAN_CB) values into a full zero-padded lane array.
static inline void lanes_load(real *restrict dst, const real *restrict src, int w) {
    if (w == SCAN_CB) {
        memcpy(dst, src, SCAN_CB * sizeof(real));
    } else {
        for (int j = 0; j < SCAN_CB; j++) dst[j] = j < w ? src[j] : 0;
    }
}
static inline void lanes_store(real *restrict dst, const real *restrict src, int w) {
    if (w == SCAN_CB) {
        memcpy(dst, src, SCAN_CB * sizeof(real));
    } else {
        for (int j = 0; j < w; j++) dst[j] = src[j];
    }
}

// Per-block constants: A (N, SCAN_CB) = -exp(A_log) of the block's channels, padded lanes 0.
static void scan_block_A(real *A, const real *A_log, int c0, int w, int N) {
    for (int n = 0; n < N; n++)
        for (int j = 0; j < SCAN_CB; j++) A[n * SCAN_CB + j] = j < w ? -exp(A_log[(size_t)(c0 + j) * N + n]) : 0;
}

// The state a row starts from (backend.h: scan_fwd's first, h0): its carried state h0[r] (Cd, N), or NULL for 0.
static const real *carried_row(const int32_t *first, const void *h0, int r, int Cd, int N) {
    return first && h0 && first[r] > 0 ? (const real *)h0 + (size_t)r * Cd * N : NULL;
}
// s (N, SCAN_CB) = the block's lanes of h0r (Cd, N), or 0 (h0r NULL; padded lanes 0)
static void scan_state_init(real *s, const real *h0r, int c0, int w, int N) {
    for (int n = 0; n < N; n++)
        for (int j = 0; j < SCAN_CB; j++) s[n * SCAN_CB + j] = h0r && j < w ? h0r[(size_t)(c0 + j) * N + n] : 0;
}

PM_CLONES static void scan_fwd_unit(real *out, const real *u, const real *dpre, const real *dt_bias,
                                    const real *A_log, const real *Bm, const real *Cm, int ldbc, const real *D,
                                    const real *z, int ldz, const int32_t *pos, int T, int Cd, int N, int t0,
                                    int t1, int c0, int w, const real *h0r) {
    real *A = thread_scratch(2 * (size_t)N * SCAN_CB);  // A (N, SCAN_CB), then the states s (N, SCAN_CB)
    real *s = A + (size_t)N * SCAN_CB;
    (void)T;
    _Alignas(64) real dtb[SCAN_CB], Dc[SCAN_CB], uu[SCAN_CB], dl[SCAN_CB], zz[SCAN_CB], y[SCAN_CB];
    scan_block_A(A, A_log, c0, w, N);
    lanes_load(dtb, dt_bias + c0, w);
    lanes_load(Dc, D + c0, w);
    scan_state_init(s, h0r, c0, w, N);
    for (int t = t0; t < t1; t++) {
        if (pos[t] == 0) memset(s, 0, (size_t)N * SCAN_CB * sizeof(real));
        lanes_load(uu, u + (size_t)t * Cd + c0, w);
        lanes_load(dl, dpre + (size_t)t * Cd + c0, w);
        lanes_load(zz, z + (size_t)t * ldz + c0, w);
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) {
            dl[j] = softplus_v(dl[j] + dtb[j]);  // delta
            y[j] = 0;
        }
        const real *Bt = Bm + (size_t)t * ldbc, *Ct = Cm + (size_t)t * ldbc;
        for (int n = 0; n < N; n++) {
            real bn = Bt[n], cn = Ct[n], *sn = s + n * SCAN_CB;
            const real *An = A + n * SCAN_CB;
#pragma omp simd
            for (int j = 0; j < SCAN_CB; j++) {
                sn[j] = exp_r(dl[j] * An[j]) * sn[j] + dl[j] * bn * uu[j];
                y[j] += sn[j] * cn;
            }
        }
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) y[j] = (y[j] + Dc[j] * uu[j]) * silu_v(zz[j]);
        lanes_store(out + (size_t)t * Cd + c0, y, w);
    }
}

static void scan_fwd(void *out_, const void *u_, const void *dpre_, const void *dt_bias_, const void *A_log_,
                     const void *Bm_, const void *Cm_, int ldbc, const void *D_, const void *z_, int ldz,
                     const int32_t *pos, int M, int T, int Cd, int N, void *states, const int32_t *first,
                     const void *h0) {
    (void)states;  // the CPU backend keeps no scan states (scan_states_bytes is NULL): its backward recomputes
    real *out = out_;                                                // (M, Cd)
    const real *u = u_, *dpre = dpre_, *z = z_;                      // (M, Cd), (M, Cd), (M, Cd) ldz
    const real *dt_bias = dt_bias_, *A_log = A_log_, *D = D_;        // (Cd), (Cd, N), (Cd)
    const real *Bm = Bm_, *Cm = Cm_;                                 // (M, N) ldbc
    int nrows = (M + T - 1) / T, nb = (Cd + SCAN_CB - 1) / SCAN_CB;
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < nrows; r++)
        for (int b = 0; b < nb; b++) {
            int c0 = b * SCAN_CB, w = Cd - c0 < SCAN_CB ? Cd - c0 : SCAN_CB;
            int t1 = (r + 1) * T < M ? (r + 1) * T : M;
            scan_fwd_unit(out, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T, Cd, N, r * T, t1, c0, w,
                          carried_row(first, h0, r, Cd, N));
        }
}

// acc[n] += sum over the lanes of v[n][:], as a fixed pairwise tree (16 -> 8 -> 4 -> 2 -> 1), which
// vectorizes and does not depend on anything but the data. Destroys v.
static inline void lanes_sum_add(real *restrict acc, real *restrict v, int N) {
    for (int n = 0; n < N; n++) {
        real *x = v + n * SCAN_CB;
#pragma omp simd
        for (int j = 0; j < 8; j++) x[j] += x[j + 8];
#pragma omp simd
        for (int j = 0; j < 4; j++) x[j] += x[j + 4];
        acc[n] += (x[0] + x[2]) + (x[1] + x[3]);
    }
}

// Scan backward for one (row, channel block) unit. Recompute the forward over the row, keeping every state
// s_t (T, N, SCAN_CB), decay a_t (T, N, SCAN_CB) and delta_t (T, SCAN_CB) in the thread's scratch (keeping a_t
// saves a second exp per element on the way back), then walk back with h = dL/ds_t (the
// total gradient into the state, including what flows back from s_{t+1}):
//   s_t = a_t s_{t-1} + delta_t B_t u_t,  a_t = exp(delta_t A)
//   dL/ds_t = dy_t C_t + a_{t+1} dL/ds_{t+1}   (the second term is 0 when t+1 starts a document)
// dB/dC contributions (summed over the block's lanes) are added into gB/gC (M, N); the per-channel parameter
// gradients go to pp (Cd, N + 2) of this row. outp (M, Cd), if not NULL: the forward's output again, from the
// same states summed in the forward's order (tests hold it to scan_fwd's bits).
PM_CLONES static void scan_bwd_unit(real *du, real *ddpre, real *gB, real *gC, real *dz, real *pp, real *outp,
                                    const real *dout, const real *u, const real *dpre, const real *dt_bias,
                                    const real *A_log, const real *Bm, const real *Cm, int ldbc, const real *D,
                                    const real *z, int ldz, const int32_t *pos, int T, int Cd, int N, int t0,
                                    int t1, int c0, int w, const real *h0r) {
    const size_t NL = (size_t)N * SCAN_CB;
    real *A = thread_scratch((2 * (size_t)T * N + 8 * (size_t)N + T) * SCAN_CB);
    real *h = A + NL, *dA = h + NL, *tB = dA + NL, *tC = tB + NL, *dAa = tC + NL, *sz = dAa + NL;
    real *s_in = sz + NL;        // the state before the row's first token (N, SCAN_CB): h0's lanes or 0
    real *delt = s_in + NL;      // delta (T, SCAN_CB)
    real *S = delt + (size_t)T * SCAN_CB;  // states (T, N, SCAN_CB)
    real *Ea = S + (size_t)T * NL;         // decays a_t = exp(delta_t A) (T, N, SCAN_CB)
    _Alignas(64) real dtb[SCAN_CB], Dc[SCAN_CB], uu[SCAN_CB], zz[SCAN_CB], go[SCAN_CB], y[SCAN_CB],
        dy[SCAN_CB], duu[SCAN_CB], dd[SCAN_CB], ddtb[SCAN_CB], dDc[SCAN_CB], yo[SCAN_CB];
    scan_block_A(A, A_log, c0, w, N);
    lanes_load(dtb, dt_bias + c0, w);
    lanes_load(Dc, D + c0, w);
    memset(sz, 0, NL * sizeof(real));
    scan_state_init(s_in, h0r, c0, w, N);
    // forward recompute: S[t - t0] = s_t, delt[t - t0] = delta_t
    for (int t = t0; t < t1; t++) {
        real *st = S + (size_t)(t - t0) * NL, *at = Ea + (size_t)(t - t0) * NL, *dl = delt + (size_t)(t - t0) * SCAN_CB;
        const real *sp = pos[t] == 0 ? sz : t == t0 ? s_in : st - NL;  // s_{t-1}: zeros at a start
        lanes_load(uu, u + (size_t)t * Cd + c0, w);
        lanes_load(dl, dpre + (size_t)t * Cd + c0, w);
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) dl[j] = softplus_v(dl[j] + dtb[j]);
        const real *Bt = Bm + (size_t)t * ldbc;
        for (int n = 0; n < N; n++) {
            real bn = Bt[n];
            const real *An = A + n * SCAN_CB, *spn = sp + n * SCAN_CB;
            real *stn = st + n * SCAN_CB, *atn = at + n * SCAN_CB;
#pragma omp simd
            for (int j = 0; j < SCAN_CB; j++) {
                atn[j] = exp_r(dl[j] * An[j]);
                stn[j] = atn[j] * spn[j] + dl[j] * bn * uu[j];
            }
        }
    }
    // backward
    memset(h, 0, NL * sizeof(real));
    memset(dA, 0, NL * sizeof(real));
    memset(ddtb, 0, sizeof ddtb);
    memset(dDc, 0, sizeof dDc);
    for (int t = t1 - 1; t >= t0; t--) {
        const real *st = S + (size_t)(t - t0) * NL, *at = Ea + (size_t)(t - t0) * NL;
        const real *dl = delt + (size_t)(t - t0) * SCAN_CB;
        const int start = pos[t] == 0 || t == t0;  // (nothing flows on before the row's first token)
        const real *sp = pos[t] == 0 ? sz : t == t0 ? s_in : st - NL;
        lanes_load(uu, u + (size_t)t * Cd + c0, w);
        lanes_load(zz, z + (size_t)t * ldz + c0, w);
        lanes_load(go, dout + (size_t)t * Cd + c0, w);
        const real *Bt = Bm + (size_t)t * ldbc, *Ct = Cm + (size_t)t * ldbc;
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) y[j] = 0;
        for (int n = 0; n < N; n++) {
            real cn = Ct[n];
            const real *stn = st + n * SCAN_CB;
#pragma omp simd
            for (int j = 0; j < SCAN_CB; j++) y[j] += stn[j] * cn;
        }
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) {
            y[j] += Dc[j] * uu[j];                        // the gate's input, as in scan_fwd_unit
            dy[j] = go[j] * silu_v(zz[j]);                // through the gate
            yo[j] = y[j] * silu_v(zz[j]);                 // the forward's output
            y[j] = go[j] * y[j] * silu_grad_v(zz[j]);     // dz
            duu[j] = dy[j] * Dc[j];
            dd[j] = 0;                                    // dL/ddelta
            dDc[j] += dy[j] * uu[j];
        }
        lanes_store(dz + (size_t)t * ldz + c0, y, w);
        if (outp) lanes_store(outp + (size_t)t * Cd + c0, yo, w);
        for (int n = 0; n < N; n++) {
            real bn = Bt[n], cn = Ct[n];
            const real *stn = st + n * SCAN_CB, *spn = sp + n * SCAN_CB, *An = A + n * SCAN_CB;
            const real *atn = at + n * SCAN_CB;
            real *hn = h + n * SCAN_CB, *dAn = dA + n * SCAN_CB, *tBn = tB + n * SCAN_CB, *tCn = tC + n * SCAN_CB;
#pragma omp simd
            for (int j = 0; j < SCAN_CB; j++) {
                tCn[j] = dy[j] * stn[j];
                hn[j] += dy[j] * cn;                      // h = dL/ds_t
                tBn[j] = hn[j] * dl[j] * uu[j];
                duu[j] += hn[j] * dl[j] * bn;
                dd[j] += hn[j] * bn * uu[j];
                real a = atn[j];
                real da = hn[j] * spn[j];                 // dL/da_t (0 at a start: s_{t-1} = 0 there; h0 is a constant)
                dd[j] += da * a * An[j];
                dAn[j] += da * a * dl[j];
                hn[j] = start ? 0 : hn[j] * a;            // flows on to s_{t-1}; nothing crosses a start
            }
        }
        lanes_sum_add(gC + (size_t)t * N, tC, N);
        lanes_sum_add(gB + (size_t)t * N, tB, N);
        lanes_store(du + (size_t)t * Cd + c0, duu, w);
        lanes_load(y, dpre + (size_t)t * Cd + c0, w);
#pragma omp simd
        for (int j = 0; j < SCAN_CB; j++) {
            dd[j] = dd[j] * softplus_grad_v(y[j] + dtb[j]);
            ddtb[j] += dd[j];
        }
        lanes_store(ddpre + (size_t)t * Cd + c0, dd, w);
    }
    int P = N + 2;
    for (int j = 0; j < w; j++) {
        real *p = pp + (size_t)(c0 + j) * P;
        for (int n = 0; n < N; n++) p[n] = dA[n * SCAN_CB + j] * A[n * SCAN_CB + j];  // dA/dA_log = A
        p[N] = ddtb[j];
        p[N + 1] = dDc[j];
    }
}

// dB and dC sum over channels for each token: to keep that sum in a fixed order independent of the thread
// count, the channel blocks are split into G fixed groups; unit (group, row) runs its blocks in order, adding
// into its group's partial (G, M, N) buffers, which are then summed over groups in order. The per-channel
// parameter gradients (ddt_bias, dD, dA_log) go to per-row partials (nrows, Cd, N + 2), summed over rows in
// order.
#define SCAN_GROUPS 16
static void scan_bwd(void *du_, void *ddpre_, void *dB_, void *dC_, void *dz_, void *ddt_bias_, void *dA_log_,
                     void *dD_, const void *dout_, const void *u_, const void *dpre_, const void *dt_bias_,
                     const void *A_log_, const void *Bm_, const void *Cm_, int ldbc, const void *D_,
                     const void *z_, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                     const void *states, void *out_, const int32_t *first, const void *h0) {
    (void)states;
    real *du = du_, *ddpre = ddpre_, *dz = dz_, *outp = out_;        // (M, Cd), (M, Cd), (M, Cd) ldz, (M, Cd)
    real *dB = dB_, *dC = dC_;                                       // (M, N) ldbc
    real *ddt_bias = ddt_bias_, *dA_log = dA_log_, *dD = dD_;        // (Cd), (Cd, N), (Cd)
    const real *dout = dout_, *u = u_, *dpre = dpre_, *z = z_;       // (M, Cd) ..., z ldz
    const real *dt_bias = dt_bias_, *A_log = A_log_, *D = D_;        // (Cd), (Cd, N), (Cd)
    const real *Bm = Bm_, *Cm = Cm_;                                 // (M, N) ldbc
    int nrows = (M + T - 1) / T, nb = (Cd + SCAN_CB - 1) / SCAN_CB;
    int G = nb < SCAN_GROUPS ? nb : SCAN_GROUPS;
    int P = N + 2;  // per-channel partial: dA (N), ddt_bias, dD
    real *dBp = call_scratch(SCR_SCAN_B, (size_t)G * M * N, 1);   // (G, M, N)
    real *dCp = call_scratch(SCR_SCAN_C, (size_t)G * M * N, 1);   // (G, M, N)
    real *pp = call_scratch(SCR_SCAN_P, (size_t)nrows * Cd * P, 0);  // (nrows, Cd, N + 2), all written
#pragma omp parallel for collapse(2) schedule(static)
    for (int g = 0; g < G; g++)
        for (int r = 0; r < nrows; r++) {
            int b0 = (int)((long)nb * g / G), b1 = (int)((long)nb * (g + 1) / G);
            int t0 = r * T, t1 = (r + 1) * T < M ? (r + 1) * T : M;
            for (int b = b0; b < b1; b++) {
                int c0 = b * SCAN_CB, w = Cd - c0 < SCAN_CB ? Cd - c0 : SCAN_CB;
                scan_bwd_unit(du, ddpre, dBp + (size_t)g * M * N, dCp + (size_t)g * M * N, dz,
                              pp + (size_t)r * Cd * P, outp, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                              pos, T, Cd, N, t0, t1, c0, w, carried_row(first, h0, r, Cd, N));
            }
        }
    // reduce the partials in a fixed order
#pragma omp parallel for
    for (int t = 0; t < M; t++)
        for (int n = 0; n < N; n++) {
            real b = 0, c = 0;
            for (int g = 0; g < G; g++) {
                b += dBp[((size_t)g * M + t) * N + n];
                c += dCp[((size_t)g * M + t) * N + n];
            }
            dB[(size_t)t * ldbc + n] = b;
            dC[(size_t)t * ldbc + n] = c;
        }
#pragma omp parallel for
    for (int c = 0; c < Cd; c++) {
        if (g_grads_write) {  // written, not added: start from zero
            for (int n = 0; n < N; n++) dA_log[(size_t)c * N + n] = 0;
            ddt_bias[c] = dD[c] = 0;
        }
        for (int r = 0; r < nrows; r++) {
            const real *p = pp + ((size_t)r * Cd + c) * P;
            for (int n = 0; n < N; n++) dA_log[(size_t)c * N + n] += p[n];
            ddt_bias[c] += p[N];
            dD[c] += p[N + 1];
        }
    }
}

// ----------------------------------------------------------------------------------------------------------
// tied LM head + cross-entropy, in chunks of tokens so the logits scratch is (CHUNK, Vp), not (M, Vp)

#define CLS_CHUNK 256
static void classifier(void *loss_, void *dx_, void *dwte_, float *logits_out, const void *x_, const void *wte_,
                       const int32_t *targets, float loss_scale, int M, int C, int Vp, int bf16_logits) {
    (void)bf16_logits;  // ACT is fp32 here
    real *loss = loss_, *dx = dx_, *dwte = dwte_;  // (M), (M, C) or NULL, (Vp, C)
    const real *x = x_, *wte = wte_;               // (M, C), (Vp, C)
    int chunk = M < CLS_CHUNK ? M : CLS_CHUNK;
    real *lg = call_scratch(SCR_CLS, (size_t)chunk * Vp, 0);  // (chunk, Vp) logits, then dlogits
    for (int m0 = 0; m0 < M; m0 += chunk) {
        int mc = M - m0 < chunk ? M - m0 : chunk;
        gemm(0, 1, mc, Vp, C, 1, x + (size_t)m0 * C, C, wte, C, 0, lg, Vp);  // x @ wte^T
#pragma omp parallel for
        for (int i = 0; i < mc; i++) {
            real *l = lg + (size_t)i * Vp;
            int m = m0 + i, tgt = targets[m];
            if (logits_out)
                for (int v = 0; v < Vp; v++) logits_out[(size_t)m * Vp + v] = (float)l[v];
            real mx = l[0];
            for (int v = 1; v < Vp; v++) mx = l[v] > mx ? l[v] : mx;
            real se = 0;
            for (int v = 0; v < Vp; v++) se += exp(l[v] - mx);
            real lse = mx + log(se);
            int ignored = tgt < 0;
            loss[m] = ignored ? 0 : lse - l[tgt];
            if (dx) {  // dlogits = loss_scale * (softmax - onehot), 0 on ignored tokens
                real sc = ignored ? 0 : loss_scale;
                for (int v = 0; v < Vp; v++) l[v] = sc * exp(l[v] - lse);
                if (!ignored) l[tgt] -= sc;
            }
        }
        if (dx) {  // dwte first: it still reads this chunk of x, so dx may even overwrite x in place
            const int add = !(g_grads_write && m0 == 0);  // (grads_write: the first chunk writes dwte)
            gemm(1, 0, Vp, C, mc, 1, lg, Vp, x + (size_t)m0 * C, C, add, dwte, C);  // dlogits^T @ x
            gemm(0, 0, mc, C, Vp, 1, lg, Vp, wte, C, 0, dx + (size_t)m0 * C, C);  // dlogits @ wte
        }
    }
}

// ----------------------------------------------------------------------------------------------------------
// optimizer helpers

// Fixed-size blocks summed in parallel, then the block sums in order: deterministic for any thread count.
#define SUMSQ_BLOCK 65536
static double sumsq(const void *x_, size_t n) {
    const real *x = x_;
    size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    if (nb == 0) return 0;
    double *part = pm_malloc(nb * sizeof(double));
#pragma omp parallel for
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < n ? i0 + SUMSQ_BLOCK : n;
        double acc = 0;
        for (size_t i = i0; i < i1; i++) acc += (double)x[i] * (double)x[i];
        part[b] = acc;
    }
    double total = 0;
    for (size_t b = 0; b < nb; b++) total += part[b];
    free(part);
    return total;
}

// torch.optim.AdamW: p *= 1 - lr*wd (decayed segments only); m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
static void adamw(void *params_, void *params_act_, const void *grads_, void *m_, void *v_,
                  const ParamSegment *segs, int nsegs, const AdamWArgs *a) {
    real *p = params_, *pa = params_act_, *mm = m_, *vv = v_;
    const real *g = grads_;
    real b1 = a->beta1, b2 = a->beta2;
    real bc1 = 1 - pow(b1, a->step), bc2 = 1 - pow(b2, a->step);
    real step_size = a->lr / bc1, bc2_sqrt = sqrt(bc2);
    int s0, s1;
    adamw_segment_range(a, nsegs, &s0, &s1);
    for (int s = s0; s < s1; s++) {
        real decay = segs[s].decay ? 1 - (real)a->lr * (real)a->weight_decay : 1;
        size_t o = segs[s].offset, n = segs[s].size;
#pragma omp parallel for
        for (size_t i = o; i < o + n; i++) {
            real gi = g[i] * (real)a->grad_scale;
            mm[i] = b1 * mm[i] + (1 - b1) * gi;
            vv[i] = b2 * vv[i] + (1 - b2) * gi * gi;
            real pi = p[i] * decay;
            pi -= step_size * mm[i] / (sqrt(vv[i]) / bc2_sqrt + (real)a->eps);
            p[i] = pi;
            if (pa) pa[i] = pi;
        }
    }
}

// ----------------------------------------------------------------------------------------------------------
// carried state (backend.h: conv_silu_fwd/bwd's first, hist; carry_state_out). Written for clarity, not speed: they touch only
// the first tokens of rows that continue a document (and one walk over a carried row's last segment), and are the reference
// for the GPU's.

// The history taps of token t (0 <= t < K-1) of a carried row: pre-activation terms reading the previous piece.
static real conv_hist_taps(const real *hist, const real *w, int t, int pos_t, int c, int C, int K) {
    real acc = 0;
    for (int j = t + 1; j <= K - 1 && j <= pos_t; j++) acc += w[(size_t)c * K + (K - 1 - j)] * hist[(size_t)(K - 1 + t - j) * C + c];
    return acc;
}
// The in-row pre-activation of token t of row base (conv_silu_fwd's: bias, then the taps inside the document).
static real conv_row_pre(const real *xi, int ldx, const real *w, const real *b, const int32_t *pos, int base, int t,
                         int T, int c, int K) {
    const int back = steps_back(pos, base + t, T);
    real acc = b[c];
    for (int k = 0; k < K; k++) {
        const int j = K - 1 - k;
        if (j <= back) acc += w[(size_t)c * K + k] * xi[(size_t)(base + t - j) * ldx + c];
    }
    return acc;
}

// conv_silu_fwd's carried rows: rewrites u's first min(K-1, first[r]) tokens with the history taps included.
// u (M, C); xi (M, C) ldx; w (C, K); b (C); hist (rows, K-1, C)
static void conv_carry_fwd(real *u, const real *xi, int ldx, const real *w, const real *b, const int32_t *pos,
                           const int32_t *first, const real *hist, int M, int T, int C, int K) {
    const int rows = M / T;
    for (int r = 0; r < rows; r++) {
        if (first[r] <= 0) continue;
        const int base = r * T, nt = first[r] < K - 1 ? first[r] : K - 1;
        const real *h = hist + (size_t)r * (K - 1) * C;
        for (int t = 0; t < nt; t++)
            for (int c = 0; c < C; c++) {
                const real pre = conv_row_pre(xi, ldx, w, b, pos, base, t, T, c, K) +
                                 conv_hist_taps(h, w, t, pos[base + t], c, C, K);
                u[(size_t)(base + t) * C + c] = silu_v(pre);
            }
    }
}

// conv_silu_bwd's carried rows, after its in-row pass: corrects dxi for those tokens' SiLU slopes (the in-row pass
// gave them the slope without the history taps) and adds the corrections and the history taps' parts to dw, db.
// dxi (M, C) ldx; dw (C, K); db (C)
static void conv_carry_bwd(real *dxi, int ldx, real *dw, real *db, const real *du, const real *xi, const real *w,
                           const real *b, const int32_t *pos, const int32_t *first, const real *hist, int M, int T,
                           int C, int K) {
    const int rows = M / T;
    for (int r = 0; r < rows; r++) {
        if (first[r] <= 0) continue;
        const int base = r * T, nt = first[r] < K - 1 ? first[r] : K - 1;
        const real *h = hist + (size_t)r * (K - 1) * C;
        for (int t = 0; t < nt; t++) {
            const int back = steps_back(pos, base + t, T), pt = pos[base + t];
            for (int c = 0; c < C; c++) {
                const real pre0 = conv_row_pre(xi, ldx, w, b, pos, base, t, T, c, K);
                const real pre = pre0 + conv_hist_taps(h, w, t, pt, c, C, K);
                const real g_t = du[(size_t)(base + t) * C + c];
                const real g = g_t * silu_grad_v(pre), g0 = g_t * silu_grad_v(pre0), delta = g - g0;
                // conv_silu_bwd gave the in-row taps g0; the carried row's true slope is g
                for (int j = 0; j <= back && j < K; j++) {
                    dxi[(size_t)(base + t - j) * ldx + c] += delta * w[(size_t)c * K + (K - 1 - j)];
                    dw[(size_t)c * K + (K - 1 - j)] += delta * xi[(size_t)(base + t - j) * ldx + c];
                }
                for (int j = t + 1; j <= K - 1 && j <= pt; j++)
                    dw[(size_t)c * K + (K - 1 - j)] += g * h[(size_t)(K - 1 + t - j) * C + c];
                db[c] += delta;
            }
        }
    }
}

// delta of token t, channel c (scan_fwd's)
static inline real carry_delta(const real *dpre, const real *dt_bias, size_t t, int Cd, int c) {
    return softplus_v(dpre[t * Cd + c] + dt_bias[c]);
}

static void carry_state_out(void *h_out_, void *hist_out_, const void *u_, const void *dpre_, const void *dt_bias_,
                            const void *A_log_, const void *Bm_, int ldbc, const void *xi_, int ldx,
                            const int32_t *first, const int32_t *last, const void *h0_, int M, int T, int Cd, int N,
                            int K, const void *states) {
    (void)states;  // (the CPU keeps none: it walks the last segment)
    real *h_out = h_out_, *hist_out = hist_out_;
    const real *u = u_, *dpre = dpre_, *dt_bias = dt_bias_, *A_log = A_log_, *Bm = Bm_, *xi = xi_, *h0 = h0_;
    const int rows = M / T;
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < Cd; c++) {
            if (last[r] < 0) continue;
            real *s = h_out + ((size_t)r * Cd + c) * N;
            const int from_h0 = last[r] == 0 && first[r] > 0;
            real A[64];
            for (int n = 0; n < N; n++) s[n] = from_h0 ? h0[((size_t)r * Cd + c) * N + n] : 0, A[n] = -exp(A_log[(size_t)c * N + n]);
            for (int t = r * T + last[r]; t < (r + 1) * T; t++) {
                const real dl = carry_delta(dpre, dt_bias, (size_t)t, Cd, c), ut = u[(size_t)t * Cd + c];
                for (int n = 0; n < N; n++)
                    s[n] = exp_r(dl * A[n]) * s[n] + dl * Bm[(size_t)t * ldbc + n] * ut;
            }
            for (int k = 0; k < K - 1; k++)
                hist_out[((size_t)r * (K - 1) + k) * Cd + c] = xi[(size_t)(r * T + T - (K - 1) + k) * ldx + c];
        }
}

// ----------------------------------------------------------------------------------------------------------

const Backend *backend_cpu(void) {
    static const Backend b = {
        .name = "cpu",
        .act_bytes = sizeof(real),
        .f32_bytes = sizeof(real),
        .deterministic = 1,
        .alloc = cpu_alloc,
        .free = cpu_free,
        .upload = cpu_copy,
        .download = cpu_copy,
        .memzero = cpu_memzero,
        .synchronize = cpu_synchronize,
        .f32_to_act = cpu_convert,
        .act_to_f32 = cpu_convert,
        .embedding_fwd = embedding_fwd,
        .embedding_bwd = embedding_bwd,
        .add_rmsnorm_fwd = add_rmsnorm_fwd,
        .rmsnorm_bwd = rmsnorm_bwd,
        .matmul_fwd = matmul_fwd,
        .matmul_bwd = matmul_bwd,
        .matmul_dw_batch = matmul_dw_batch,
        .conv_silu_fwd = conv_silu_fwd,
        .conv_silu_bwd = conv_silu_bwd,
        .scan_fwd = scan_fwd,
        .scan_bwd = scan_bwd,
        .carry_state_out = carry_state_out,
        .classifier = classifier,
        .sumsq = sumsq,
        .adamw = adamw,
        .grads_write = grads_write,
        .spin = cpu_spin,
    };
    return &b;
}
