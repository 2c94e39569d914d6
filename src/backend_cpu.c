// backend_cpu.c — the reference backend: plain C loops in `real` (float, or double in the pmcore64 test
// build), OpenBLAS for the matrix products, OpenMP across independent tokens / channels. Every reduction runs
// in a fixed order that does not depend on the thread count, so results are bit-identical run to run.
// Ops and their exact semantics are documented in backend.h; comments here say how and why.
#include <cblas.h>
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
        dw[c] += acc;
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
    if (dW) gemm(1, 0, N, K, M, 1, dout, lddo, inp, ldi, 1, dW, K);                        // dout^T @ inp
    if (dbias) {
#pragma omp parallel for
        for (int n = 0; n < N; n++) {
            real acc = 0;
            for (int m = 0; m < M; m++) acc += dout[(size_t)m * lddo + n];
            dbias[n] += acc;
        }
    }
}

// ----------------------------------------------------------------------------------------------------------
// depthwise causal conv1d with document resets, then SiLU

// Pre-activation xc[t, c] = b[c] + sum over taps still inside t's document. Tap k reads j = K-1-k steps back.
static inline real conv_pre(const real *xi, int ldx, const real *w, const real *b, int t, int c, int back,
                            int K) {
    real acc = b[c];
    for (int k = 0; k < K; k++) {
        int j = K - 1 - k;
        if (j <= back) acc += w[(size_t)c * K + k] * xi[(size_t)(t - j) * ldx + c];
    }
    return acc;
}

static void conv_silu_fwd(void *u_, const void *xi_, int ldx, const void *w_, const void *b_,
                          const int32_t *pos, int M, int T, int C, int K) {
    real *u = u_;                                // (M, C)
    const real *xi = xi_, *w = w_, *b = b_;      // (M, C) ldx, (C, K), (C)
#pragma omp parallel for
    for (int t = 0; t < M; t++) {
        int back = steps_back(pos, t, T);
        for (int c = 0; c < C; c++) u[(size_t)t * C + c] = siluf(conv_pre(xi, ldx, w, b, t, c, back, K));
    }
}

static void conv_silu_bwd(void *dxi_, int ldx, void *dw_, void *db_, const void *du_, const void *xi_,
                          const void *w_, const void *b_, const int32_t *pos, int M, int T, int C, int K) {
    real *dxi = dxi_, *dw = dw_, *db = db_;               // (M, C) ldx, (C, K), (C)
    const real *du = du_, *xi = xi_, *w = w_, *b = b_;    // (M, C), (M, C) ldx, (C, K), (C)
    // dxc (M, C): gradient at the pre-activation, recomputed from xi (scratch for this call only)
    real *dxc = pm_malloc((size_t)M * C * sizeof(real) + 1);
#pragma omp parallel for
    for (int t = 0; t < M; t++) {
        int back = steps_back(pos, t, T);
        for (int c = 0; c < C; c++)
            dxc[(size_t)t * C + c] = du[(size_t)t * C + c] * silu_grad(conv_pre(xi, ldx, w, b, t, c, back, K));
    }
    // dxi[s, c] gathers from the outputs t = s + j that read s, i.e. those with j <= steps_back(t): a tap
    // never crosses a document start, so neither does its gradient.
#pragma omp parallel for
    for (int s = 0; s < M; s++) {
        for (int c = 0; c < C; c++) dxi[(size_t)s * ldx + c] = 0;
        for (int j = 0; j < K && s + j < M; j++) {
            int t = s + j;
            if (j > steps_back(pos, t, T)) continue;
            for (int c = 0; c < C; c++) dxi[(size_t)s * ldx + c] += w[(size_t)c * K + (K - 1 - j)] * dxc[(size_t)t * C + c];
        }
    }
    // dw, db: per channel, tokens in order
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        real dbc = 0;
        for (int t = 0; t < M; t++) {
            real g = dxc[(size_t)t * C + c];
            int back = steps_back(pos, t, T);
            dbc += g;
            for (int k = 0; k < K; k++) {
                int j = K - 1 - k;
                if (j <= back) dw[(size_t)c * K + k] += g * xi[(size_t)(t - j) * ldx + c];
            }
        }
        db[c] += dbc;
    }
    free(dxc);
}

// ----------------------------------------------------------------------------------------------------------
// selective scan. Rows are independent (the state restarts at every row start), and so are channels, so the
// work unit is one (row, channel) pair walking its T tokens with the N-wide state in a local array.

static void scan_fwd(void *out_, const void *u_, const void *dpre_, const void *dt_bias_, const void *A_log_,
                     const void *Bm_, const void *Cm_, int ldbc, const void *D_, const void *z_, int ldz,
                     const int32_t *pos, int M, int T, int Cd, int N) {
    real *out = out_;                                                // (M, Cd)
    const real *u = u_, *dpre = dpre_, *z = z_;                      // (M, Cd), (M, Cd), (M, Cd) ldz
    const real *dt_bias = dt_bias_, *A_log = A_log_, *D = D_;        // (Cd), (Cd, N), (Cd)
    const real *Bm = Bm_, *Cm = Cm_;                                 // (M, N) ldbc
    int nrows = (M + T - 1) / T;
#pragma omp parallel
    {
        real *s = pm_malloc(2 * (size_t)N * sizeof(real));  // s (N) state, A (N)
        real *A = s + N;
#pragma omp for collapse(2) schedule(static)
        for (int r = 0; r < nrows; r++)
            for (int c = 0; c < Cd; c++) {
                for (int n = 0; n < N; n++) A[n] = -exp(A_log[(size_t)c * N + n]);
                int t1 = (r + 1) * T < M ? (r + 1) * T : M;
                for (int t = r * T; t < t1; t++) {
                    if (pos[t] == 0 || t % T == 0)
                        for (int n = 0; n < N; n++) s[n] = 0;
                    real uu = u[(size_t)t * Cd + c];
                    real delta = softplusr(dpre[(size_t)t * Cd + c] + dt_bias[c]);
                    const real *Bt = Bm + (size_t)t * ldbc, *Ct = Cm + (size_t)t * ldbc;
                    real y = 0;
                    for (int n = 0; n < N; n++) {
                        s[n] = exp(delta * A[n]) * s[n] + delta * Bt[n] * uu;
                        y += s[n] * Ct[n];
                    }
                    out[(size_t)t * Cd + c] = (y + D[c] * uu) * siluf(z[(size_t)t * ldz + c]);
                }
            }
        free(s);
    }
}

// Scan backward. Per (row, channel): recompute the forward over the row, keeping every state s_t (T, N) and
// delta_t in a per-thread buffer (recompute per row; no (M, Cd, N) buffer), then walk back with
// h = dL/ds_t (the total gradient into the state, including what flows back from s_{t+1}).
//   s_t = a_t s_{t-1} + delta_t B_t u_t,  a_t = exp(delta_t A)
//   dL/ds_t = dy_t C_t + a_{t+1} dL/ds_{t+1}   (the second term is 0 when t+1 starts a document)
// dB and dC sum over channels for each token: to keep that sum in a fixed order independent of the thread
// count, channels are split into G fixed groups; unit (group, row) adds its channels in order into its own
// partial (G, M, N) buffers, which are then summed over groups in order. The per-channel parameter gradients
// (ddt_bias, dD, dA_log) go to per-row partials (nrows, Cd, N + 2), summed over rows in order.
#define SCAN_GROUPS 16
static void scan_bwd(void *du_, void *ddpre_, void *dB_, void *dC_, void *dz_, void *ddt_bias_, void *dA_log_,
                     void *dD_, const void *dout_, const void *u_, const void *dpre_, const void *dt_bias_,
                     const void *A_log_, const void *Bm_, const void *Cm_, int ldbc, const void *D_,
                     const void *z_, int ldz, const int32_t *pos, int M, int T, int Cd, int N) {
    real *du = du_, *ddpre = ddpre_, *dz = dz_;                      // (M, Cd), (M, Cd), (M, Cd) ldz
    real *dB = dB_, *dC = dC_;                                       // (M, N) ldbc
    real *ddt_bias = ddt_bias_, *dA_log = dA_log_, *dD = dD_;        // (Cd), (Cd, N), (Cd)
    const real *dout = dout_, *u = u_, *dpre = dpre_, *z = z_;       // (M, Cd) ..., z ldz
    const real *dt_bias = dt_bias_, *A_log = A_log_, *D = D_;        // (Cd), (Cd, N), (Cd)
    const real *Bm = Bm_, *Cm = Cm_;                                 // (M, N) ldbc
    int nrows = (M + T - 1) / T;
    int G = Cd < SCAN_GROUPS ? Cd : SCAN_GROUPS;
    int P = N + 2;  // per-channel partial: dA (N), ddt_bias, dD
    real *dBp = pm_calloc((size_t)G * M * N + 1, sizeof(real));   // (G, M, N)
    real *dCp = pm_calloc((size_t)G * M * N + 1, sizeof(real));   // (G, M, N)
    real *pp = pm_calloc((size_t)nrows * Cd * P + 1, sizeof(real));  // (nrows, Cd, N + 2)
#pragma omp parallel
    {
        real *S = pm_malloc(((size_t)T * N + (size_t)T + 3 * (size_t)N) * sizeof(real));  // states (T, N)
        real *delt = S + (size_t)T * N;  // delta (T)
        real *A = delt + T;              // A (N)
        real *h = A + N;                 // dL/ds (N)
        real *dA = h + N;                // dL/dA (N)
#pragma omp for collapse(2) schedule(static)
        for (int g = 0; g < G; g++)
            for (int r = 0; r < nrows; r++) {
                int c0 = (int)((long)Cd * g / G), c1 = (int)((long)Cd * (g + 1) / G);
                int t0 = r * T, t1 = (r + 1) * T < M ? (r + 1) * T : M;
                real *gB = dBp + (size_t)g * M * N, *gC = dCp + (size_t)g * M * N;
                for (int c = c0; c < c1; c++) {
                    for (int n = 0; n < N; n++) A[n] = -exp(A_log[(size_t)c * N + n]);
                    // forward recompute: S[t - t0] = s_t, delt[t - t0] = delta_t
                    for (int t = t0; t < t1; t++) {
                        real *st = S + (size_t)(t - t0) * N;
                        const real *sp = (pos[t] == 0 || t % T == 0) ? NULL : st - N;  // s_{t-1}, none at a start
                        real uu = u[(size_t)t * Cd + c];
                        real delta = softplusr(dpre[(size_t)t * Cd + c] + dt_bias[c]);
                        delt[t - t0] = delta;
                        const real *Bt = Bm + (size_t)t * ldbc;
                        for (int n = 0; n < N; n++) st[n] = (sp ? exp(delta * A[n]) * sp[n] : 0) + delta * Bt[n] * uu;
                    }
                    // backward
                    for (int n = 0; n < N; n++) h[n] = 0, dA[n] = 0;
                    real ddtb = 0, dDc = 0;
                    for (int t = t1 - 1; t >= t0; t--) {
                        const real *st = S + (size_t)(t - t0) * N;
                        int start = pos[t] == 0 || t % T == 0;
                        const real *sp = start ? NULL : st - N;
                        real uu = u[(size_t)t * Cd + c], zz = z[(size_t)t * ldz + c];
                        real delta = delt[t - t0];
                        const real *Bt = Bm + (size_t)t * ldbc, *Ct = Cm + (size_t)t * ldbc;
                        real *gBt = gB + (size_t)t * N, *gCt = gC + (size_t)t * N;
                        real y = D[c] * uu;
                        for (int n = 0; n < N; n++) y += st[n] * Ct[n];
                        real go = dout[(size_t)t * Cd + c];
                        real dy = go * siluf(zz);                  // through the gate
                        dz[(size_t)t * ldz + c] = go * y * silu_grad(zz);
                        real duu = dy * D[c], ddelta = 0;
                        dDc += dy * uu;
                        for (int n = 0; n < N; n++) {
                            gCt[n] += dy * st[n];
                            h[n] += dy * Ct[n];                    // h = dL/ds_t
                            gBt[n] += h[n] * delta * uu;
                            duu += h[n] * delta * Bt[n];
                            ddelta += h[n] * Bt[n] * uu;
                            if (sp) {
                                real a = exp(delta * A[n]);
                                real da = h[n] * sp[n];            // dL/da_t
                                ddelta += da * a * A[n];
                                dA[n] += da * a * delta;
                                h[n] *= a;                         // flows on to s_{t-1}
                            } else {
                                h[n] = 0;                          // nothing crosses a document start
                            }
                        }
                        du[(size_t)t * Cd + c] = duu;
                        real v = dpre[(size_t)t * Cd + c] + dt_bias[c];
                        real dv = ddelta * softplus_grad(v);
                        ddpre[(size_t)t * Cd + c] = dv;
                        ddtb += dv;
                    }
                    real *p = pp + ((size_t)r * Cd + c) * P;
                    for (int n = 0; n < N; n++) p[n] = dA[n] * A[n];  // A = -exp(A_log): dA/dA_log = A
                    p[N] = ddtb;
                    p[N + 1] = dDc;
                }
            }
        free(S);
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
    for (int c = 0; c < Cd; c++)
        for (int r = 0; r < nrows; r++) {
            const real *p = pp + ((size_t)r * Cd + c) * P;
            for (int n = 0; n < N; n++) dA_log[(size_t)c * N + n] += p[n];
            ddt_bias[c] += p[N];
            dD[c] += p[N + 1];
        }
    free(dBp);
    free(dCp);
    free(pp);
}

// ----------------------------------------------------------------------------------------------------------
// tied LM head + cross-entropy, in chunks of tokens so the logits scratch is (CHUNK, Vp), not (M, Vp)

#define CLS_CHUNK 256
static void classifier(void *loss_, void *dx_, void *dwte_, float *logits_out, const void *x_, const void *wte_,
                       const int32_t *targets, float loss_scale, int M, int C, int Vp) {
    real *loss = loss_, *dx = dx_, *dwte = dwte_;  // (M), (M, C) or NULL, (Vp, C)
    const real *x = x_, *wte = wte_;               // (M, C), (Vp, C)
    int chunk = M < CLS_CHUNK ? M : CLS_CHUNK;
    real *lg = pm_malloc((size_t)chunk * Vp * sizeof(real) + 1);  // (chunk, Vp) logits, then dlogits
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
            gemm(1, 0, Vp, C, mc, 1, lg, Vp, x + (size_t)m0 * C, C, 1, dwte, C);  // dlogits^T @ x
            gemm(0, 0, mc, C, Vp, 1, lg, Vp, wte, C, 0, dx + (size_t)m0 * C, C);  // dlogits @ wte
        }
    }
    free(lg);
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
    for (int s = 0; s < nsegs; s++) {
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
        .conv_silu_fwd = conv_silu_fwd,
        .conv_silu_bwd = conv_silu_bwd,
        .scan_fwd = scan_fwd,
        .scan_bwd = scan_bwd,
        .classifier = classifier,
        .sumsq = sumsq,
        .adamw = adamw,
    };
    return &b;
}
