// cuda_carry.cu — state carried into rows from the batch before (backend.h's carried-state section; cuda_carry.h), for the
// CUDA backend: bf16 activations in and out, fp32 arithmetic and parameters. The CPU backend's "carried state"
// section (backend_cpu.c) is the reference; these compute the same, with the scan's and the conv's own forms of
// exp, softplus and sigmoid (ex2.approx, lg2.approx, tanh.approx).
//
// Not on the hot path (only rows that continue a document, and mostly only their first tokens), so the kernels are
// plain:
// - conv (conv_silu_fwd/bwd's carried rows, run after the conv kernels by backend_cuda.cu): a thread per (row,
//   channel) rewrites u's first min(K-1, first[r]) tokens (forward); the backward's threads each take a channel
//   and a group of rows, add a row's dxi corrections (at most K-1 tokens) in registers and store them once, and the
//   block sums the dw/db parts of its groups into one more partial row of the conv's own column reduction.
// - scan: none here. v1-v3 added the carried state's part beside the scan kernels (which started every row from 0):
//   a forward kernel as costly as the scan's, and in v1-v2 a backward too (docs/perf.md); since v5 the scan kernels
//   start a carried row from its state (cuda_scan.cu's ScanInit), and their own backward is the carried rows'.
// - state out: from the forward's scan states, the last checkpoint walked over the row's last <= 16 tokens (v4);
//   without them (eval, or a memory budget that keeps none), a block of 128 channels, a thread each, walks one
//   128-token segment of a row (grid z) from zero, in chunks whose B rows it stages in shared memory, after a kernel
//   has summed delta per segment; a last kernel chains the segments' states in order from zero or h0.
// Every order is fixed by the shape and first/last: the results repeat bit for bit.
// H200, B 8, T 2048, Cd 2048, N 16, every row carried over all its tokens (test_carry_timings): docs/perf.md,
// forty-fourth session.
#include "cuda_carry.h"

#include "cuda_common.h"
#include "cuda_scan.h"  // PM_SCAN_CKPT_TOKENS

typedef __nv_bfloat16 bf16;

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr int CARRY_NMAX = 64;  // the largest d_state (model.c checks N <= 64)
constexpr int CARRY_KMAX = 4;   // the largest conv width (as cuda_conv.cu)
constexpr int CARRY_CB = 128;   // channels (threads) a block of the state out's segment kernel
constexpr int CARRY_TC = 16;    // tokens a staged chunk of it
constexpr int CARRY_CKK = PM_SCAN_CKPT_TOKENS;  // the scan states' checkpoint interval (cuda_scan.h)
constexpr int CARRY_SEG = 128;  // tokens a time segment (a multiple of the chunks)
static_assert(CARRY_SEG % CARRY_TC == 0, "segments");

template <typename... Args>
void carry_die(const char *fmt, Args... args) {
    pm_cuda_die("cuda_carry", fmt, args...);
}

void carry_check(int M, int T, int Cd, int N) {
    if (T <= 0 || M < 0 || Cd <= 0 || M % T != 0) carry_die("bad shape M=%d T=%d C=%d", M, T, Cd);
    if (N <= 0 || N > CARRY_NMAX) carry_die("d_state N=%d is not supported (1..%d)", N, CARRY_NMAX);
}

// ---- math: the scan's (cuda_scan.cu) and the conv's (cuda_conv.cu) forms ----
// softplus(v) = ln(1 + e^v), v itself above 20 (the reference's threshold)
__device__ __forceinline__ float softplus_f(float v) {
    return v > 20.f ? v : lg2_approx(1.f + ex2_approx(v * LOG2E)) * 0.69314718055994531f;
}
__device__ __forceinline__ float sigmoid_f(float v) { return pm_sigmoid_tanh(v); }
// g * d silu(v) / dv (the conv's dsilu)
__device__ __forceinline__ float dsilu_f(float g, float v) {
    const float s = sigmoid_f(v);
    return g * s * (1.0f + v * (1.0f - s));
}

// ---------------------------------------------------------------------------------------------------------
// conv

// The pre-activations of token t (< K-1) of a carried row (m its index): pre0 the in-row one (conv_silu_fwd's: bias,
// then the taps k in order whose j = K-1-k steps back stay in the document and the row, as the conv kernels' conv_pre
// sums them), pre with the history taps (t < j <= pos[t]) in their places in the same order. K at compile time, so
// every array index is a constant (registers, no local memory).
template <int K>
__device__ __forceinline__ void carry_conv_pre(const bf16 *__restrict__ xi, int ldx, const bf16 *__restrict__ h,
                                               const float (&wk)[K], float bias, size_t m, int t, int p, int c, int C,
                                               float &pre0, float &pre) {
    pre0 = bias, pre = bias;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = K - 1 - k;
        if (j > p) continue;
        if (j <= t) {
            const float x = bf2f(xi[(m - j) * ldx + c]);
            pre0 += wk[k] * x;
            pre += wk[k] * x;
        } else {
            pre += wk[k] * bf2f(h[(size_t)(K - 1 + t - j) * C + c]);
        }
    }
}

// grid (ceil(C / 128), rows): thread = (row, channel)
template <int K>
__global__ void __launch_bounds__(128)
    carry_conv_fwd_kernel(bf16 *__restrict__ u, const bf16 *__restrict__ xi, int ldx, const float *__restrict__ w,
                          const float *__restrict__ b, const int32_t *__restrict__ pos,
                          const int32_t *__restrict__ first, const bf16 *__restrict__ hist, int T, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= C) return;
    const int f = first[r];
    if (f <= 0) return;
    const size_t base = (size_t)r * T;
    const bf16 *h = hist + (size_t)r * (K - 1) * C;
    float wk[K];
#pragma unroll
    for (int k = 0; k < K; k++) wk[k] = w[(size_t)c * K + k];
    const float bias = b[c];
#pragma unroll
    for (int t = 0; t < K - 1; t++)
        if (t < f && t < T) {
            const size_t m = base + t;
            float pre0, pre;
            carry_conv_pre<K>(xi, ldx, h, wk, bias, m, t, pos[m], c, C, pre0, pre);
            u[m * C + c] = f2bf(pre * sigmoid_f(pre));
        }
}

// The carried rows' part of the conv backward (v6): grid (ceil(C / 32)), block (32 channels, CARRY_RG row groups);
// thread (c, g) walks rows g, g + RG, ... in order, corrects their dxi in place (each (row, channel) is one thread's)
// and sums its dw, db parts in registers; the block adds the groups' sums in group order and writes them as one
// partial row prow (C * K dw values, then C db values: the conv backward's layout, cuda_conv_bwd_job), which the
// conv's own column reduction adds with its rows. (v1-v5: a thread per channel walked every row, 12 blocks at 130m;
// its dw, db went to a buffer that two add kernels then added to the gradients, after flushing the held-back
// reductions: bwd.conv +0.55 ms a 130m T=512 B8 step carried, against +0.17 with v6, docs/perf.md.)
constexpr int CARRY_RG = 4;
template <int K>
__global__ void __launch_bounds__(32 * CARRY_RG)
    carry_conv_bwd_kernel(bf16 *__restrict__ dxi, int ldx, float *__restrict__ prow, const bf16 *__restrict__ du,
                          const bf16 *__restrict__ xi, const float *__restrict__ w, const float *__restrict__ b,
                          const int32_t *__restrict__ pos, const int32_t *__restrict__ first,
                          const bf16 *__restrict__ hist, int rows, int T, int C) {
    __shared__ float red[CARRY_RG][K + 1][32];
    const int lane = threadIdx.x, g = threadIdx.y, c = blockIdx.x * 32 + lane;
    const bool act = c < C;
    float dwa[K], dba = 0.f;
#pragma unroll
    for (int k = 0; k < K; k++) dwa[k] = 0.f;
    if (act) {
        float wk[K];
#pragma unroll
        for (int k = 0; k < K; k++) wk[k] = w[(size_t)c * K + k];
        const float bias = b[c];
        for (int r = g; r < rows; r += CARRY_RG) {
            const int f = first[r];
            if (f <= 0) continue;
            const size_t base = (size_t)r * T;
            const bf16 *h = hist + (size_t)r * (K - 1) * C;
            float corr[K];  // dxi corrections of the row's tokens 0 .. K-2
#pragma unroll
            for (int s = 0; s < K; s++) corr[s] = 0.f;
#pragma unroll
            for (int t = 0; t < K - 1; t++)
                if (t < f && t < T) {
                    const size_t m = base + t;
                    const int p = pos[m];
                    float pre0, pre;
                    carry_conv_pre<K>(xi, ldx, h, wk, bias, m, t, p, c, C, pre0, pre);
                    const float gt = bf2f(du[m * C + c]);
                    const float gs = dsilu_f(gt, pre), g0 = dsilu_f(gt, pre0), d = gs - g0;
                    // conv_silu_bwd gave the in-row taps (j <= min(pos, t)) the slope g0; the carried row's is gs
#pragma unroll
                    for (int j = 0; j <= t; j++)
                        if (j <= p) {
                            corr[t - j] += d * wk[K - 1 - j];
                            dwa[K - 1 - j] += d * bf2f(xi[(m - j) * ldx + c]);
                        }
#pragma unroll
                    for (int j = t + 1; j <= K - 1; j++)
                        if (j <= p) dwa[K - 1 - j] += gs * bf2f(h[(size_t)(K - 1 + t - j) * C + c]);
                    dba += d;
                }
#pragma unroll
            for (int s = 0; s < K - 1; s++)
                if (s < f && s < T) {
                    bf16 *q = dxi + (base + s) * ldx + c;
                    *q = f2bf(bf2f(*q) + corr[s]);
                }
        }
    }
#pragma unroll
    for (int k = 0; k < K; k++) red[g][k][lane] = dwa[k];
    red[g][K][lane] = dba;
    __syncthreads();
    if (g != 0 || !act) return;
#pragma unroll
    for (int k = 0; k <= K; k++) {
        float v = red[0][k][lane];
#pragma unroll
        for (int i = 1; i < CARRY_RG; i++) v += red[i][k][lane];
        if (k < K) prow[(size_t)c * K + k] = v;
        else prow[(size_t)C * K + c] = v;
    }
}

// ---------------------------------------------------------------------------------------------------------
// state out
//
// Time segments (where the forward's states are not given): a row's last document segment [last[r], T) is cut into
// segments of CARRY_SEG tokens, a block each (grid z), so that a row of T = 2048 keeps 16 blocks of channels busy,
// not one; each segment's state from zero, then chained in segment order with the decay over each, exp(A sum of its
// delta) (carry_dl_sums_kernel). Every split is fixed by the shape and last, so results repeat bit for bit.

// A block's loads of a chunk's B or C rows (len tokens from row index m0, N values each) into S (TC, NA) as fp32.
template <int TC, int NA>
__device__ __forceinline__ void stage_rows(float (*S)[NA], const bf16 *__restrict__ X, int ldbc, size_t m0, int len,
                                           int N) {
    for (int i = threadIdx.x; i < len * N; i += blockDim.x) {
        const int j = i / N, n = i - j * N;
        S[j][n] = bf2f(X[(m0 + j) * ldbc + n]);
    }
}

// The token range [*a, *b) = [last[r], T) of row r that the state out walks; false where the row goes on in no
// next batch.
__device__ __forceinline__ bool carry_range(const int32_t *__restrict__ last, int r, int T, int *a, int *b) {
    const int v = last[r];
    *a = v, *b = T;
    return v >= 0;
}
__device__ __forceinline__ int seg_count(int a, int b) { return b > a ? (b - a + CARRY_SEG - 1) / CARRY_SEG : 0; }

// dls[(r * nseg + s) * Cd + c] = the sum of delta over segment s of row r's range (carry_range). grid
// (ceil(Cd / 128), rows, nseg).
__global__ void __launch_bounds__(128)
    carry_dl_sums_kernel(float *__restrict__ dls, const bf16 *__restrict__ dpre, const float *__restrict__ dt_bias,
                         const int32_t *__restrict__ last, int T, int Cd, int nseg) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, s = blockIdx.z;
    int a, b;
    if (c >= Cd || !carry_range(last, r, T, &a, &b) || s >= seg_count(a, b)) return;
    const int t0 = a + s * CARRY_SEG, t1 = t0 + CARRY_SEG < b ? t0 + CARRY_SEG : b;
    const float bias = dt_bias[c];
    const bf16 *dp = dpre + (size_t)r * T * Cd + c;
    float sum = 0.f;
#pragma unroll 8
    for (int t = t0; t < t1; t++) sum += softplus_f(bf2f(dp[(size_t)t * Cd]) + bias);
    dls[((size_t)r * nseg + s) * Cd + c] = sum;
}


// State out, grid (ceil(Cd / CB), rows, nseg): thread = (row, channel, segment): the state after the segment's last
// token, walked from zero over the segment, into part (rows, nseg, Cd, N).
template <int NC, bool EXACT>
__global__ void __launch_bounds__(CARRY_CB)
    carry_state_seg_kernel(float *__restrict__ part, const bf16 *__restrict__ u, const bf16 *__restrict__ dpre,
                           const float *__restrict__ dt_bias, const float *__restrict__ A_log,
                           const bf16 *__restrict__ Bm, int ldbc, const int32_t *__restrict__ last, int T, int Cd,
                           int Nrt, int nseg) {
    constexpr int NA = NC, TC = CARRY_TC;
    const int N = EXACT ? NC : Nrt;
    __shared__ float Bs[TC][NA];
    const int r = blockIdx.y, seg = blockIdx.z;
    int a, b;
    if (!carry_range(last, r, T, &a, &b)) return;  // (the whole block)
    const int ts = a + seg * CARRY_SEG, te = ts + CARRY_SEG < b ? ts + CARRY_SEG : b;
    if (ts >= te) return;
    const int c = blockIdx.x * CARRY_CB + threadIdx.x;
    const bool act = c < Cd;
    const int cc = act ? c : Cd - 1;
    float A2[NA], s[NA];
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) {
        A2[n] = -__expf(A_log[(size_t)cc * N + n]) * LOG2E;
        s[n] = 0.f;
    }
    const float bias = dt_bias[cc];
    const size_t base = (size_t)r * T;
    for (int t0 = ts; t0 < te; t0 += TC) {
        const int len = te - t0 < TC ? te - t0 : TC;
        __syncthreads();
        stage_rows<TC, NA>(Bs, Bm, ldbc, base + t0, len, N);
        float dp[TC], uu[TC];
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const size_t m = base + t0 + j;
                dp[j] = bf2f(dpre[m * Cd + cc]), uu[j] = bf2f(u[m * Cd + cc]);
            }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const float dl = softplus_f(dp[j] + bias), du = dl * uu[j];
#pragma unroll
                for (int n = 0; n < NA; n++) if (EXACT || n < N) s[n] = fmaf(ex2_approx(dl * A2[n]), s[n], du * Bs[j][n]);
            }
    }
    if (!act) return;
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) part[(((size_t)r * nseg + seg) * Cd + c) * N + n] = s[n];
}

// State out, thread = (row, channel): h_out = the segments' states chained in order (each after the decay of the
// state before it over the segment, exp(A sum of the segment's delta)), from zero or h0; hist_out = the row's last
// K-1 xi.
template <int NC, bool EXACT>
__global__ void __launch_bounds__(128)
    carry_state_out_kernel(float *__restrict__ h_out, bf16 *__restrict__ hist_out, const float *__restrict__ part,
                           const float *__restrict__ dls, const float *__restrict__ A_log, const bf16 *__restrict__ xi,
                           int ldx, const int32_t *__restrict__ first, const int32_t *__restrict__ last,
                           const float *__restrict__ h0, int T, int Cd, int Nrt, int K, int nseg) {
    constexpr int NA = NC;
    const int N = EXACT ? NC : Nrt;
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    int a, b;
    if (c >= Cd || !carry_range(last, r, T, &a, &b)) return;
    const bool from_h0 = a == 0 && first[r] > 0;
    float A2[NA], s[NA];
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) {
        A2[n] = -__expf(A_log[(size_t)c * N + n]) * LOG2E;
        s[n] = from_h0 ? h0[((size_t)r * Cd + c) * N + n] : 0.f;
    }
    for (int g = 0, ns = seg_count(a, b); g < ns; g++) {
        const float d = dls[((size_t)r * nseg + g) * Cd + c];
        const float *pg = part + (((size_t)r * nseg + g) * Cd + c) * N;
#pragma unroll
        for (int n = 0; n < NA; n++) if (EXACT || n < N) s[n] = fmaf(ex2_approx(d * A2[n]), s[n], pg[n]);
    }
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) h_out[((size_t)r * Cd + c) * N + n] = s[n];
    for (int k = 0; k < K - 1; k++) {
        const long long m = (long long)r * T + T - (K - 1) + k;  // (T >= K-1: in the row)
        hist_out[((size_t)r * (K - 1) + k) * Cd + c] = m >= 0 ? xi[(size_t)m * ldx + c] : f2bf(0.f);
    }
}

// State out from the forward's scan states (v4), thread = (row, channel): the state before the last checkpoint's
// token t0 (which holds the carried part where the row is one document carried in), walked over the row's last
// tokens; where the last document starts at or after t0, from zero (or h0: a carried row of T <= 16) at its start.
// N = 16 (the scan's); ckpt (rows, nck, Cd, N), every CARRY_CKK tokens. (v6 loaded the <= 16 tokens' inputs
// first, B rows staged by the block: 0.017-0.019 ms at B8 T2048 d_inner 2048 against this loop's 0.015-0.017, so
// not kept: the time is the launch and one short dependent walk, not the loads' latency; docs/perf.md.)
__global__ void __launch_bounds__(128)
    carry_state_ckpt_kernel(float *__restrict__ h_out, bf16 *__restrict__ hist_out, const float *__restrict__ ckpt,
                            const bf16 *__restrict__ u, const bf16 *__restrict__ dpre,
                            const float *__restrict__ dt_bias, const float *__restrict__ A_log,
                            const bf16 *__restrict__ Bm, int ldbc, const bf16 *__restrict__ xi, int ldx,
                            const int32_t *__restrict__ first, const int32_t *__restrict__ last,
                            const float *__restrict__ h0, int T, int Cd, int K) {
    constexpr int N = 16;
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= Cd || last[r] < 0) return;
    const int lr = last[r], nck = (T + CARRY_CKK - 1) / CARRY_CKK, t0 = (nck - 1) * CARRY_CKK;
    const bool from_ck = lr < t0, from_h0 = !from_ck && lr == 0 && first[r] > 0;
    const float *s0 = from_ck ? ckpt + (((size_t)r * nck + nck - 1) * Cd + c) * N : h0 + ((size_t)r * Cd + c) * N;
    float A2[N], s[N];
#pragma unroll
    for (int n = 0; n < N; n++) {
        A2[n] = -__expf(A_log[(size_t)c * N + n]) * LOG2E;
        s[n] = from_ck || from_h0 ? s0[n] : 0.f;
    }
    const float bias = dt_bias[c];
    for (int t = from_ck ? t0 : lr; t < T; t++) {
        const size_t m = (size_t)r * T + t;
        const float dl = softplus_f(bf2f(dpre[m * Cd + c]) + bias), du = dl * bf2f(u[m * Cd + c]);
        const bf16 *Bt = Bm + m * ldbc;
#pragma unroll
        for (int n = 0; n < N; n++) s[n] = fmaf(ex2_approx(dl * A2[n]), s[n], du * bf2f(Bt[n]));
    }
#pragma unroll
    for (int n = 0; n < N; n++) h_out[((size_t)r * Cd + c) * N + n] = s[n];
    for (int k = 0; k < K - 1; k++) {
        const long long m = (long long)r * T + T - (K - 1) + k;  // (T >= K-1: in the row)
        hist_out[((size_t)r * (K - 1) + k) * Cd + c] = m >= 0 ? xi[(size_t)m * ldx + c] : f2bf(0.f);
    }
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }
int nblocks(int Cd) { return (Cd + CARRY_CB - 1) / CARRY_CB; }
int nsegments(int T) { return (T + CARRY_SEG - 1) / CARRY_SEG; }

// The workspace's pieces (cuda_carry_ws_bytes): the segments' delta sums (rows, nseg, Cd), then the state out's
// segment states (rows, nseg, Cd, N).
struct CarryWs {
    float *dls, *part;
};
CarryWs carry_ws(void *ws, int M, int T, int Cd, int N) {
    (void)N;
    const size_t rows = (size_t)M / T, nseg = nsegments(T);
    CarryWs w;
    w.dls = (float *)ws;
    w.part = (float *)((char *)ws + align256(rows * nseg * Cd * sizeof(float)));
    return w;
}
size_t carry_ws_end(int M, int T, int Cd, int N) {
    const size_t rows = (size_t)M / T, nseg = nsegments(T);
    return align256(rows * nseg * Cd * sizeof(float)) + align256(rows * nseg * Cd * N * sizeof(float));
}

// The delta sums of the segments (carry_dl_sums_kernel).
void carry_dl_sums(float *dls, const bf16 *dpre, const float *dt_bias, const int32_t *last, int M, int T, int Cd,
                   cudaStream_t st) {
    const int nseg = nsegments(T);
    carry_dl_sums_kernel<<<dim3(pm_ceil_div(Cd, 128), M / T, nseg), 128, 0, st>>>(dls, dpre, dt_bias, last, T, Cd,
                                                                               nseg);
    cudaLaunchCheck();
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// entry points

void cuda_carry_conv_fwd(bf16 *u, const bf16 *xi, int ldx, const float *w, const float *b, const int32_t *pos,
                         const int32_t *first, const bf16 *hist, int M, int T, int C, int K, cudaStream_t st) {
    carry_check(M, T, C, 1);
    if (K < 1 || K > CARRY_KMAX) carry_die("conv width K=%d is not supported (1..%d)", K, CARRY_KMAX);
    if (M == 0 || K == 1) return;  // (K = 1: no taps before the token)
    const dim3 grid(pm_ceil_div(C, 128), M / T);
#define CARRY_CONV_FWD(KK) \
    carry_conv_fwd_kernel<KK><<<grid, 128, 0, st>>>(u, xi, ldx, w, b, pos, first, hist, T, C)
    if (K == 2) CARRY_CONV_FWD(2);
    else if (K == 3) CARRY_CONV_FWD(3);
    else CARRY_CONV_FWD(4);
#undef CARRY_CONV_FWD
    cudaLaunchCheck();
}

void cuda_carry_conv_bwd_part(bf16 *dxi, int ldx, float *prow, const bf16 *du, const bf16 *xi, const float *w,
                              const float *b, const int32_t *pos, const int32_t *first, const bf16 *hist, int M, int T,
                              int C, int K, cudaStream_t st) {
    carry_check(M, T, C, 1);
    if (K < 1 || K > CARRY_KMAX) carry_die("conv width K=%d is not supported (1..%d)", K, CARRY_KMAX);
    const unsigned grid = pm_ceil_div(C, 32);
    const dim3 block(32, CARRY_RG);
#define CARRY_CONV_BWD(KK) \
    carry_conv_bwd_kernel<KK><<<grid, block, 0, st>>>(dxi, ldx, prow, du, xi, w, b, pos, first, hist, M / T, T, C)
    if (K == 1) CARRY_CONV_BWD(1);
    else if (K == 2) CARRY_CONV_BWD(2);
    else if (K == 3) CARRY_CONV_BWD(3);
    else CARRY_CONV_BWD(4);
#undef CARRY_CONV_BWD
    cudaLaunchCheck();
}

size_t cuda_carry_ws_bytes(int M, int T, int Cd, int N) {
    if (T <= 0 || M <= 0 || Cd <= 0 || N <= 0) return 0;
    return carry_ws_end(M, T, Cd, N);
}

// (N == 16: the kernels for 16 states; N < 16: the same with a run-time N; else arrays of 64)
#define CARRY_BY_N(KERNEL, GRID, BLOCK, ...)                                            \
    do {                                                                               \
        if (N == 16) KERNEL<16, true><<<GRID, BLOCK, 0, st>>>(__VA_ARGS__);            \
        else if (N < 16) KERNEL<16, false><<<GRID, BLOCK, 0, st>>>(__VA_ARGS__);       \
        else KERNEL<64, false><<<GRID, BLOCK, 0, st>>>(__VA_ARGS__);                   \
        cudaLaunchCheck();                                                             \
    } while (0)

void cuda_carry_state_out(float *h_out, bf16 *hist_out, const bf16 *u, const bf16 *dpre, const float *dt_bias,
                          const float *A_log, const bf16 *Bm, int ldbc, const bf16 *xi, int ldx, const int32_t *first,
                          const int32_t *last, const float *h0, int M, int T, int Cd, int N, int K,
                          const float *states, void *ws, cudaStream_t st) {
    carry_check(M, T, Cd, N);
    if (K < 1 || K > CARRY_KMAX) carry_die("conv width K=%d is not supported (1..%d)", K, CARRY_KMAX);
    if (M == 0) return;
    if (states && N == 16) {  // v4: at most 16 tokens a row from the last checkpoint
        carry_state_ckpt_kernel<<<dim3(pm_ceil_div(Cd, 128), M / T), 128, 0, st>>>(
            h_out, hist_out, states, u, dpre, dt_bias, A_log, Bm, ldbc, xi, ldx, first, last, h0, T, Cd, K);
        cudaLaunchCheck();
        return;
    }
    const int nseg = nsegments(T);
    const CarryWs w = carry_ws(ws, M, T, Cd, N);
    carry_dl_sums(w.dls, dpre, dt_bias, last, M, T, Cd, st);
    CARRY_BY_N(carry_state_seg_kernel, dim3(nblocks(Cd), M / T, nseg), CARRY_CB, w.part, u, dpre, dt_bias, A_log, Bm,
               ldbc, last, T, Cd, N, nseg);
    CARRY_BY_N(carry_state_out_kernel, dim3(pm_ceil_div(Cd, 128), M / T), 128, h_out, hist_out, w.part, w.dls, A_log,
               xi, ldx, first, last, h0, T, Cd, N, K, nseg);
}
#undef CARRY_BY_N
