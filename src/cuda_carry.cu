// cuda_carry.cu — state carried into rows from the batch before (Backend.carry_*, backend.h; cuda_carry.h), for the
// CUDA backend: bf16 activations in and out, fp32 arithmetic and parameters. The CPU backend's "carried state"
// section (backend_cpu.c) is the reference; these compute the same, with the scan's and the conv's own forms of
// exp, softplus and sigmoid (ex2.approx, lg2.approx, tanh.approx).
//
// Not on the hot path (only rows that continue a document, and mostly only their first tokens), so the kernels are
// plain:
// - conv: a thread per (row, channel) rewrites u's first min(K-1, first[r]) tokens (forward); the backward takes a
//   thread per channel that walks the rows in order, so its dw/db sums need no second pass and the dxi corrections
//   of a row (at most K-1 tokens) are added in registers and stored once.
// - scan: a block of 128 channels (a thread each, its N states in registers: N = 16 compiled for it, N < 16 in the
//   same registers, N <= 64 in spilling arrays) walks one time segment of 128 tokens of a row (grid z), in chunks
//   whose B or C rows (the same for every channel) it stages in shared memory, with the chunk's per-thread inputs
//   loaded before its walk. A segment starts from the decay up to it, exp(A cum0), cum0 the sum of delta over the
//   segments before it (a first kernel sums delta per segment; each block adds the sums up in segment order).
//   State out: each segment's state from zero, then a kernel chains them in segment order from zero or h0.
// - scan backward: walk 1 (one kernel) sums q_t = sum_n A[n] w_t[n] over chunks of CARRY_QC tokens (the chunk sums
//   turned into suffix sums within the segment) and per segment. Walk 2 (the next kernel) recomputes the same
//   products (the same operations, so the same bits), adds dz, accumulates dA_log and ddt_bias in registers, keeps
//   q_t and softplus' of a q-chunk in shared memory and walks each q-chunk back at its end: d delta_s = (the later
//   segments' totals + the later chunks' sums) + the chunk's q_t for t >= s. dC_t[n] sums over channels: each warp
//   reduces its 32 channels' values by a transposing butterfly (16 shuffles for 16 values), the block adds its
//   warps' sums in warp order into one partial row per (block, token), and a kernel adds the blocks' rows in block
//   order into dC. ddt_bias and dA_log: a partial row per (row, segment), added in order by a last kernel (written,
//   =). Every order is fixed by the shape and first/last: the results repeat bit for bit.
// H200, B 8, T 2048, Cd 2048, N 16, every row carried over all its tokens (test_carry_timings): carry_scan_fwd
// 0.45 ms, carry_scan_bwd 1.69 ms, carry_state_out 0.42 ms, the conv ops ~0.01-0.02 ms (scan_fwd itself: 0.22 ms).
#include "cuda_carry.h"

#include "cuda_common.h"

typedef __nv_bfloat16 bf16;

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr int CARRY_NMAX = 64;  // the largest d_state (model.c checks N <= 64)
constexpr int CARRY_KMAX = 4;   // the largest conv width (as cuda_conv.cu)
constexpr int CARRY_CB = 128;   // channels (threads) a block of the scan kernels
constexpr int CARRY_TC = 16;    // tokens a staged chunk, forward and state out
constexpr int CARRY_TCB = 8;    // tokens a staged chunk, backward (four inputs a token in registers)
constexpr int CARRY_QC = 32;    // tokens a q-chunk of the backward (its q_t and softplus' in shared memory)
constexpr int CARRY_NW = CARRY_CB / 32;
constexpr int CARRY_SEG = 128;  // tokens a time segment (a multiple of CARRY_QC and of the chunks)
static_assert(CARRY_SEG % CARRY_QC == 0 && CARRY_QC % CARRY_TCB == 0 && CARRY_SEG % CARRY_TC == 0, "segments");

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
// d softplus / dv, exactly 1 on the linear branch
__device__ __forceinline__ float softplus_grad_f(float v) { return v > 20.f ? 1.f : sigmoid_f(v); }
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

// grid (ceil(C / 128)): thread = channel, walking the rows in order (dw, db need no second pass)
template <int K>
__global__ void __launch_bounds__(128)
    carry_conv_bwd_kernel(bf16 *__restrict__ dxi, int ldx, float *__restrict__ dw, float *__restrict__ db,
                          const bf16 *__restrict__ du, const bf16 *__restrict__ xi, const float *__restrict__ w,
                          const float *__restrict__ b, const int32_t *__restrict__ pos,
                          const int32_t *__restrict__ first, const bf16 *__restrict__ hist, int rows, int T, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float wk[K], dwa[K], dba = 0.f;
#pragma unroll
    for (int k = 0; k < K; k++) wk[k] = w[(size_t)c * K + k], dwa[k] = 0.f;
    const float bias = b[c];
    for (int r = 0; r < rows; r++) {
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
                const float g = dsilu_f(gt, pre), g0 = dsilu_f(gt, pre0), d = g - g0;
                // conv_silu_bwd gave the in-row taps (j <= min(pos, t)) the slope g0; the carried row's is g
#pragma unroll
                for (int j = 0; j <= t; j++)
                    if (j <= p) {
                        corr[t - j] += d * wk[K - 1 - j];
                        dwa[K - 1 - j] += d * bf2f(xi[(m - j) * ldx + c]);
                    }
#pragma unroll
                for (int j = t + 1; j <= K - 1; j++)
                    if (j <= p) dwa[K - 1 - j] += g * bf2f(h[(size_t)(K - 1 + t - j) * C + c]);
                dba += d;
            }
#pragma unroll
        for (int s = 0; s < K - 1; s++)
            if (s < f && s < T) {
                bf16 *q = dxi + (base + s) * ldx + c;
                *q = f2bf(bf2f(*q) + corr[s]);
            }
    }
#pragma unroll
    for (int k = 0; k < K; k++) dw[(size_t)c * K + k] = dwa[k];
    db[c] = dba;
}

// ---------------------------------------------------------------------------------------------------------
// scan
//
// Time segments: a row's range of tokens ([0, first[r]) for the forward and backward, [last[r], T) for the state
// out) is cut into segments of CARRY_SEG tokens, a block each (grid z), so that a row carried over all T = 2048 of
// its tokens keeps 16 blocks of channels busy, not one. A segment needs the decay of the carried state up to its
// start: P[n] = exp(A[n] cum0), cum0 the sum of delta over the segments before it, which a first kernel sums per
// segment (carry_dl_sums_kernel) and each block adds up in segment order. Every split is fixed by the shape and
// first/last, so results repeat bit for bit.

// A block's loads of a chunk's B or C rows (len tokens from row index m0, N values each) into S (TC, NA) as fp32.
template <int TC, int NA>
__device__ __forceinline__ void stage_rows(float (*S)[NA], const bf16 *__restrict__ X, int ldbc, size_t m0, int len,
                                           int N) {
    for (int i = threadIdx.x; i < len * N; i += blockDim.x) {
        const int j = i / N, n = i - j * N;
        S[j][n] = bf2f(X[(m0 + j) * ldbc + n]);
    }
}

// The token range [*a, *b) of row r that the op walks: mode 0 (forward, backward) [0, min(first[r], T)), mode 1
// (state out) [last[r], T); false where the row has none to walk (not carried / not carried out).
__device__ __forceinline__ bool carry_range(const int32_t *__restrict__ rng, int mode, int r, int T, int *a, int *b) {
    const int v = rng[r];
    if (mode == 0) {
        *a = 0, *b = v < T ? v : T;
        return v > 0;
    }
    *a = v, *b = T;
    return v >= 0;
}
__device__ __forceinline__ int seg_count(int a, int b) { return b > a ? (b - a + CARRY_SEG - 1) / CARRY_SEG : 0; }

// dls[(r * nseg + s) * Cd + c] = the sum of delta over segment s of row r's range (carry_range), for the segments
// s < count - skip_last (mode 0 reads only the segments before each one, mode 1 all of them). grid (ceil(Cd / 128),
// rows, nseg - skip_last).
__global__ void __launch_bounds__(128)
    carry_dl_sums_kernel(float *__restrict__ dls, const bf16 *__restrict__ dpre, const float *__restrict__ dt_bias,
                         const int32_t *__restrict__ rng, int mode, int skip_last, int T, int Cd, int nseg) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, s = blockIdx.z;
    int a, b;
    if (c >= Cd || !carry_range(rng, mode, r, T, &a, &b) || s >= seg_count(a, b) - skip_last) return;
    const int t0 = a + s * CARRY_SEG, t1 = t0 + CARRY_SEG < b ? t0 + CARRY_SEG : b;
    const float bias = dt_bias[c];
    const bf16 *dp = dpre + (size_t)r * T * Cd + c;
    float sum = 0.f;
#pragma unroll 8
    for (int t = t0; t < t1; t++) sum += softplus_f(bf2f(dp[(size_t)t * Cd]) + bias);
    dls[((size_t)r * nseg + s) * Cd + c] = sum;
}

// The sum of delta before segment s (its segments' sums in order): where the segment's walk starts its cum.
__device__ __forceinline__ float cum_before(const float *__restrict__ dls, int r, int s, int c, int Cd, int nseg) {
    float cum = 0.f;
    for (int i = 0; i < s; i++) cum += dls[((size_t)r * nseg + i) * Cd + c];
    return cum;
}

// grid (ceil(Cd / CB), rows, nseg): thread = (row, channel, segment). NC: the N the arrays hold (16 or 64); EXACT:
// N == NC (at compile time), else N < NC at run time (every loop over n is unrolled to NC with a test, so the
// arrays' indices stay constants: registers; NC = 64 spills).
template <int NC, bool EXACT>
__global__ void __launch_bounds__(CARRY_CB)
    carry_scan_fwd_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ dpre, const float *__restrict__ dt_bias,
                          const float *__restrict__ A_log, const bf16 *__restrict__ Cm, int ldbc,
                          const bf16 *__restrict__ z, int ldz, const int32_t *__restrict__ first,
                          const float *__restrict__ h0, const float *__restrict__ dls, int T, int Cd, int Nrt,
                          int nseg) {
    constexpr int NA = NC, TC = CARRY_TC;
    const int N = EXACT ? NC : Nrt;
    __shared__ float Cs[TC][NA];
    const int r = blockIdx.y, seg = blockIdx.z;
    int a, b;
    if (!carry_range(first, 0, r, T, &a, &b)) return;  // (the whole block)
    const int ts = seg * CARRY_SEG, te = ts + CARRY_SEG < b ? ts + CARRY_SEG : b;
    if (ts >= te) return;
    const int c = blockIdx.x * CARRY_CB + threadIdx.x;
    const bool act = c < Cd;
    const int cc = act ? c : Cd - 1;  // threads past Cd load channel Cd-1 and store nothing
    const float cum0 = cum_before(dls, r, seg, cc, Cd, nseg);
    float A2[NA], h[NA], P[NA];
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) {
        A2[n] = -__expf(A_log[(size_t)cc * N + n]) * LOG2E;  // exp(delta A) = 2^(delta A2)
        h[n] = h0[((size_t)r * Cd + cc) * N + n];
        P[n] = seg ? ex2_approx(cum0 * A2[n]) : 1.f;  // the decay before the segment
    }
    const float bias = dt_bias[cc];
    const size_t base = (size_t)r * T;
    for (int t0 = ts; t0 < te; t0 += TC) {
        const int len = te - t0 < TC ? te - t0 : TC;
        __syncthreads();  // the chunk before is done with Cs
        stage_rows<TC, NA>(Cs, Cm, ldbc, base + t0, len, N);
        float dp[TC], zz[TC], oo[TC];
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const size_t m = base + t0 + j;
                dp[j] = bf2f(dpre[m * Cd + cc]), zz[j] = bf2f(z[m * ldz + cc]), oo[j] = bf2f(out[m * Cd + cc]);
            }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const float dl = softplus_f(dp[j] + bias);
                float e = 0.f;
#pragma unroll
                for (int n = 0; n < NA; n++) if (EXACT || n < N) {
                    P[n] *= ex2_approx(dl * A2[n]);
                    e = fmaf(Cs[j][n] * P[n], h[n], e);
                }
                if (act) out[(base + t0 + j) * Cd + c] = f2bf(oo[j] + e * (zz[j] * sigmoid_f(zz[j])));
            }
    }
}

// One warp's sums over its 32 lanes of v[0..15]: afterwards lanes 2n and 2n+1 hold the sum of v[n] in v[0]
// (transposing butterfly: each level keeps half the values and adds the partner lane's copy of them; 16 shuffles).
template <int HALF>
__device__ __forceinline__ void tr_level(float (&v)[16], int lane) {
    const bool up = (lane & (2 * HALF)) != 0;
#pragma unroll
    for (int i = 0; i < HALF; i++) {
        const float keep = up ? v[i + HALF] : v[i], send = up ? v[i] : v[i + HALF];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 2 * HALF);
    }
}
__device__ __forceinline__ void warp_tr_sum16(float (&v)[16], int lane) {
    tr_level<8>(v, lane);  // lane bit 4
    tr_level<4>(v, lane);  // bit 3
    tr_level<2>(v, lane);  // bit 2
    tr_level<1>(v, lane);  // bit 1: v[0] is value (lane >> 1) summed over the 16 lanes of lane's bit 0
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
}

// The warp's sums of vv[0..N) into red[warp][0..N) (vv[n] for n >= N: 0).
template <int NA>
__device__ __forceinline__ void warp_sums(float (&vv)[NA], float *red, int N, int lane) {
    if constexpr (NA == 16) {
        warp_tr_sum16(vv, lane);
        if ((lane & 1) == 0 && (lane >> 1) < N) red[lane >> 1] = vv[0];
    } else {
        for (int n = 0; n < N; n++) {
            float s = vv[n];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0) red[n] = s;
        }
    }
}

// The backward's per-thread constants: A = -exp(A_log), A2 = A log2(e), the carried state h (0 past Cd).
template <int NA, bool EXACT>
__device__ __forceinline__ void bwd_setup(float (&A)[NA], float (&A2)[NA], float (&h)[NA], const float *A_log,
                                          const float *h0, int r, int cc, bool act, int Cd, int N) {
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) {
        A[n] = -__expf(A_log[(size_t)cc * N + n]);
        A2[n] = A[n] * LOG2E;
        h[n] = act ? h0[((size_t)r * Cd + cc) * N + n] : 0.f;
    }
}

// Backward walk 1, grid (ceil(Cd / CB), rows, nseg): the q-chunk sums of q_t = sum_n A[n] w_t[n] over the segment,
// turned into exclusive suffix sums within the segment (Qc (rows, nq, Cd): chunk k holds the sum of the segment's
// chunks after k), and the segment's total (segq (rows, nseg, Cd)).
template <int NC, bool EXACT>
__global__ void __launch_bounds__(CARRY_CB)
    carry_scan_bwd_q_kernel(float *__restrict__ Qc, float *__restrict__ segq, const bf16 *__restrict__ dout,
                            const bf16 *__restrict__ dpre, const float *__restrict__ dt_bias,
                            const float *__restrict__ A_log, const bf16 *__restrict__ Cm, int ldbc,
                            const bf16 *__restrict__ z, int ldz, const int32_t *__restrict__ first,
                            const float *__restrict__ h0, const float *__restrict__ dls, int T, int Cd, int Nrt,
                            int nq, int nseg) {
    constexpr int NA = NC, TC = CARRY_TCB, QC = CARRY_QC;
    const int N = EXACT ? NC : Nrt;
    __shared__ float Cs[TC][NA];
    const int r = blockIdx.y, seg = blockIdx.z;
    int a, b;
    if (!carry_range(first, 0, r, T, &a, &b)) return;  // (the whole block)
    const int ts = seg * CARRY_SEG, te = ts + CARRY_SEG < b ? ts + CARRY_SEG : b;
    if (ts >= te) return;
    const int c = blockIdx.x * CARRY_CB + threadIdx.x;
    const bool act = c < Cd;
    const int cc = act ? c : Cd - 1;
    float A[NA], A2[NA], h[NA], P[NA];
    bwd_setup<NA, EXACT>(A, A2, h, A_log, h0, r, cc, act, Cd, N);
    const float cum0 = cum_before(dls, r, seg, cc, Cd, nseg);
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) P[n] = seg ? ex2_approx(cum0 * A2[n]) : 1.f;
    const float bias = dt_bias[cc];
    const size_t base = (size_t)r * T;
    float *Qr = Qc + (size_t)r * nq * Cd + cc;  // Qr[k * Cd]: q-chunk k of the row
    float qsum = 0.f;
    for (int t0 = ts; t0 < te; t0 += TC) {
        const int len = te - t0 < TC ? te - t0 : TC;
        __syncthreads();
        stage_rows<TC, NA>(Cs, Cm, ldbc, base + t0, len, N);
        float dp[TC], zz[TC], go[TC];
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const size_t m = base + t0 + j;
                dp[j] = bf2f(dpre[m * Cd + cc]), zz[j] = bf2f(z[m * ldz + cc]), go[j] = bf2f(dout[m * Cd + cc]);
            }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const int t = t0 + j;
                const float dl = softplus_f(dp[j] + bias), g = go[j] * (zz[j] * sigmoid_f(zz[j]));
                float q = 0.f;
#pragma unroll
                for (int n = 0; n < NA; n++) if (EXACT || n < N) {
                    P[n] *= ex2_approx(dl * A2[n]);
                    const float ph = P[n] * h[n], vn = g * ph, wn = vn * Cs[j][n];
                    q = fmaf(A[n], wn, q);
                }
                qsum += q;
                if ((t + 1) % QC == 0 || t + 1 == te) {
                    if (act) Qr[(size_t)(t / QC) * Cd] = qsum;
                    qsum = 0.f;
                }
            }
    }
    if (act) {  // exclusive suffix sums within the segment (its chunks: ts / QC .. (te - 1) / QC), then its total
        float acc = 0.f;
        for (int k = (te - 1) / QC; k >= ts / QC; k--) {
            const float v = Qr[(size_t)k * Cd];
            Qr[(size_t)k * Cd] = acc;
            acc += v;
        }
        segq[((size_t)r * nseg + seg) * Cd + c] = acc;
    }
}

// Backward walk 2, grid (nblk = ceil(Cd / CB), rows, nseg): thread = (row, channel, segment). Writes dz and ddpre
// (+=), dCpart (nblk, M, N) — the block's channel sums of dC's terms, per token — and par (rows, nseg, Cd (1 + N))
// — the segment's ddt_bias | dA_log.
template <int NC, bool EXACT>
__global__ void __launch_bounds__(CARRY_CB)
    carry_scan_bwd_kernel(bf16 *__restrict__ ddpre, float *__restrict__ dCpart, bf16 *__restrict__ dz,
                          const float *__restrict__ Qc, const float *__restrict__ segq, float *__restrict__ par,
                          const bf16 *__restrict__ dout, const bf16 *__restrict__ dpre,
                          const float *__restrict__ dt_bias, const float *__restrict__ A_log,
                          const bf16 *__restrict__ Cm, int ldbc, const bf16 *__restrict__ z, int ldz,
                          const int32_t *__restrict__ first, const float *__restrict__ h0,
                          const float *__restrict__ dls, int M, int T, int Cd, int Nrt, int nq, int nseg) {
    constexpr int NA = NC, TC = CARRY_TCB, QC = CARRY_QC, NW = CARRY_NW;
    const int N = EXACT ? NC : Nrt;
    __shared__ float Cs[TC][NA];
    __shared__ float red[TC][NW][NA];
    __shared__ float qs[QC][CARRY_CB], sg[QC][CARRY_CB];  // a q-chunk's q_t and softplus', then d delta
    const int r = blockIdx.y, seg = blockIdx.z;
    int a, b;
    if (!carry_range(first, 0, r, T, &a, &b)) return;  // (the whole block)
    const int ts = seg * CARRY_SEG, te = ts + CARRY_SEG < b ? ts + CARRY_SEG : b;
    if (ts >= te) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = blockIdx.x * CARRY_CB + tid;
    const bool act = c < Cd;
    const int cc = act ? c : Cd - 1;  // threads past Cd: h = 0, so every term they add is 0; they store nothing
    float A[NA], A2[NA], h[NA], P[NA], dA[NA];
    bwd_setup<NA, EXACT>(A, A2, h, A_log, h0, r, cc, act, Cd, N);
    const float cum0 = cum_before(dls, r, seg, cc, Cd, nseg);
#pragma unroll
    for (int n = 0; n < NA; n++) if (EXACT || n < N) P[n] = seg ? ex2_approx(cum0 * A2[n]) : 1.f, dA[n] = 0.f;
    // d delta of the tokens after this segment's: the later segments' q totals, from the last
    float qafter = 0.f;
    for (int s = seg_count(a, b) - 1; s > seg; s--) qafter += segq[((size_t)r * nseg + s) * Cd + cc];
    const float *Qr = Qc + (size_t)r * nq * Cd + cc;
    const float bias = dt_bias[cc];
    const size_t base = (size_t)r * T;
    float cum = cum0, dtb = 0.f;
    for (int t0 = ts; t0 < te; t0 += TC) {
        const int len = te - t0 < TC ? te - t0 : TC;
        __syncthreads();  // the chunk before is done with Cs and red
        stage_rows<TC, NA>(Cs, Cm, ldbc, base + t0, len, N);
        float dp[TC], zz[TC], go[TC], dzo[TC];
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const size_t m = base + t0 + j;
                dp[j] = bf2f(dpre[m * Cd + cc]), zz[j] = bf2f(z[m * ldz + cc]), go[j] = bf2f(dout[m * Cd + cc]);
                dzo[j] = bf2f(dz[m * ldz + cc]);
            }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TC; j++)
            if (j < len) {
                const int t = t0 + j;
                const float v = dp[j] + bias, dl = softplus_f(v);
                cum += dl;
                const float s = sigmoid_f(zz[j]), g = go[j] * (zz[j] * s);
                float e = 0.f, q = 0.f, vv[NA];
#pragma unroll
                for (int n = 0; n < NA; n++) vv[n] = 0.f;
#pragma unroll
                for (int n = 0; n < NA; n++) if (EXACT || n < N) {
                    P[n] *= ex2_approx(dl * A2[n]);
                    const float ph = P[n] * h[n], vn = g * ph, wn = vn * Cs[j][n];
                    e = fmaf(Cs[j][n], ph, e);
                    q = fmaf(A[n], wn, q);
                    dA[n] = fmaf(wn * cum, A[n], dA[n]);  // dP/dA = cum P; dA/dA_log = A
                    vv[n] = vn;                           // dC_t[n]'s term
                }
                if (act) dz[(base + t) * ldz + c] = f2bf(dzo[j] + go[j] * e * (s * (1.f + zz[j] * (1.f - s))));
                qs[t % QC][tid] = q;
                sg[t % QC][tid] = softplus_grad_f(v);
                warp_sums<NA>(vv, &red[j][warp][0], N, lane);
                if ((t + 1) % QC == 0 || t + 1 == te) {
                    // the q-chunk's d delta, walked back from its end (the chunks after it summed in Qr and qafter)
                    const int k0 = t - t % QC;
                    float acc = act ? qafter + Qr[(size_t)(t / QC) * Cd] : 0.f;
                    for (int i = t % QC; i >= 0; i--) {
                        acc += qs[i][tid];
                        const float gd = acc * sg[i][tid];
                        sg[i][tid] = gd;
                        dtb += gd;
                    }
                    if (act) {
#pragma unroll 8
                        for (int i = 0; i <= t % QC; i++) {
                            bf16 *p = ddpre + (base + k0 + i) * Cd + c;
                            *p = f2bf(bf2f(*p) + sg[i][tid]);
                        }
                    }
                }
            }
        __syncthreads();  // red complete
        // the block's channel sums of the chunk's dC terms, warps added in order
        for (int i = tid; i < len * N; i += CARRY_CB) {
            const int j = i / N, n = i - j * N;
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < NW; w++) s += red[j][w][n];
            dCpart[((size_t)blockIdx.x * M + base + t0 + j) * N + n] = s;
        }
    }
    if (act) {
        float *pr = par + ((size_t)r * nseg + seg) * Cd * (N + 1);
        pr[c] = dtb;
#pragma unroll
        for (int n = 0; n < NA; n++) if (EXACT || n < N) pr[Cd + (size_t)c * N + n] = dA[n];
    }
}

// dC[m, n] += the blocks' partial sums in block order, for the carried tokens. Thread = (m, n).
__global__ void carry_dC_kernel(bf16 *__restrict__ dC, int ldbc, const float *__restrict__ part,
                                const int32_t *__restrict__ first, int M, int T, int N, int nblk) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    const size_t m = i / N;
    const int n = (int)(i - m * N), r = (int)(m / T), t = (int)(m - (size_t)r * T);
    if (t >= first[r]) return;  // (also rows with first[r] <= 0)
    float s = 0.f;
    for (int b = 0; b < nblk; b++) s += part[((size_t)b * M + m) * N + n];
    bf16 *p = dC + m * ldbc + n;
    *p = f2bf(bf2f(*p) + s);
}

// ddt_bias (Cd) | dA_log (Cd, N) = the carried rows' segments' partial rows added in order (0 where none is carried).
__global__ void carry_param_kernel(float *__restrict__ ddt_bias, float *__restrict__ dA_log,
                                   const float *__restrict__ par, const int32_t *__restrict__ first, int rows, int T,
                                   int Cd, int N, int nseg) {
    const size_t W = (size_t)Cd * (N + 1), j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= W) return;
    float s = 0.f;
    for (int r = 0; r < rows; r++) {
        int a, b;
        if (!carry_range(first, 0, r, T, &a, &b)) continue;
        for (int g = 0, ns = seg_count(a, b); g < ns; g++) s += par[((size_t)r * nseg + g) * W + j];
    }
    if (j < (size_t)Cd) ddt_bias[j] = s;
    else dA_log[j - Cd] = s;
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
    if (!carry_range(last, 1, r, T, &a, &b)) return;  // (the whole block)
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
    if (c >= Cd || !carry_range(last, 1, r, T, &a, &b)) return;
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

__global__ void add_f32_kernel(float *__restrict__ dst, const float *__restrict__ src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }
int nblocks(int Cd) { return (Cd + CARRY_CB - 1) / CARRY_CB; }
int nqchunks(int T) { return (T + CARRY_QC - 1) / CARRY_QC; }
int nsegments(int T) { return (T + CARRY_SEG - 1) / CARRY_SEG; }

// The workspace's pieces (cuda_carry_ws_bytes): each op takes what it needs from the start of one buffer.
struct CarryWs {
    float *dls, *dCpart, *Qc, *segq, *par, *part;
};
CarryWs carry_ws(void *ws, int M, int T, int Cd, int N) {
    const size_t rows = (size_t)M / T, nseg = nsegments(T);
    CarryWs w;
    char *p = (char *)ws;
    w.dls = (float *)p, p += align256(rows * nseg * Cd * sizeof(float));
    w.segq = (float *)p, p += align256(rows * nseg * Cd * sizeof(float));
    w.Qc = (float *)p, p += align256(rows * nqchunks(T) * Cd * sizeof(float));
    w.dCpart = (float *)p, p += align256((size_t)nblocks(Cd) * M * N * sizeof(float));
    w.par = (float *)p, p += align256(rows * nseg * Cd * (N + 1) * sizeof(float));
    w.part = w.Qc;  // (the state out's segment states, in place of the backward's pieces after dls)
    return w;
}
size_t carry_ws_end(int M, int T, int Cd, int N) {
    const size_t rows = (size_t)M / T, nseg = nsegments(T);
    const size_t bwd = 2 * align256(rows * nseg * Cd * sizeof(float)) + align256(rows * nqchunks(T) * Cd * sizeof(float)) +
                       align256((size_t)nblocks(Cd) * M * N * sizeof(float)) +
                       align256(rows * nseg * Cd * (N + 1) * sizeof(float));
    const size_t out = 2 * align256(rows * nseg * Cd * sizeof(float)) + align256(rows * nseg * Cd * N * sizeof(float));
    return bwd > out ? bwd : out;
}

// The delta sums of the segments (carry_dl_sums_kernel), where a row can have more than one.
void carry_dl_sums(float *dls, const bf16 *dpre, const float *dt_bias, const int32_t *rng, int mode, int M, int T,
                   int Cd, cudaStream_t st) {
    const int nseg = nsegments(T), skip = mode == 0 ? 1 : 0;
    if (nseg - skip <= 0) return;
    carry_dl_sums_kernel<<<dim3(pm_ceil_div(Cd, 128), M / T, nseg - skip), 128, 0, st>>>(dls, dpre, dt_bias, rng, mode,
                                                                                      skip, T, Cd, nseg);
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

void cuda_carry_conv_bwd(bf16 *dxi, int ldx, float *dw, float *db, const bf16 *du, const bf16 *xi, const float *w,
                         const float *b, const int32_t *pos, const int32_t *first, const bf16 *hist, int M, int T,
                         int C, int K, cudaStream_t st) {
    carry_check(M, T, C, 1);
    if (K < 1 || K > CARRY_KMAX) carry_die("conv width K=%d is not supported (1..%d)", K, CARRY_KMAX);
    const unsigned grid = pm_ceil_div(C, 128);
#define CARRY_CONV_BWD(KK) \
    carry_conv_bwd_kernel<KK><<<grid, 128, 0, st>>>(dxi, ldx, dw, db, du, xi, w, b, pos, first, hist, M / T, T, C)
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

void cuda_carry_scan_fwd(bf16 *out, const bf16 *dpre, const float *dt_bias, const float *A_log, const bf16 *Cm,
                         int ldbc, const bf16 *z, int ldz, const int32_t *first, const float *h0, int M, int T, int Cd,
                         int N, void *ws, cudaStream_t st) {
    carry_check(M, T, Cd, N);
    if (M == 0) return;
    const CarryWs w = carry_ws(ws, M, T, Cd, N);
    const int nseg = nsegments(T);
    carry_dl_sums(w.dls, dpre, dt_bias, first, 0, M, T, Cd, st);
    CARRY_BY_N(carry_scan_fwd_kernel, dim3(nblocks(Cd), M / T, nseg), CARRY_CB, out, dpre, dt_bias, A_log, Cm, ldbc, z,
               ldz, first, h0, w.dls, T, Cd, N, nseg);
}

void cuda_carry_scan_bwd(bf16 *ddpre, bf16 *dC, bf16 *dz, float *ddt_bias, float *dA_log, const bf16 *dout,
                         const bf16 *dpre, const float *dt_bias, const float *A_log, const bf16 *Cm, int ldbc,
                         const bf16 *z, int ldz, const int32_t *first, const float *h0, int M, int T, int Cd, int N,
                         void *ws, cudaStream_t st) {
    carry_check(M, T, Cd, N);
    if (M == 0) {  // nothing carried: the parameter parts are 0
        cudaCheck(cudaMemsetAsync(ddt_bias, 0, (size_t)Cd * sizeof(float), st));
        cudaCheck(cudaMemsetAsync(dA_log, 0, (size_t)Cd * N * sizeof(float), st));
        return;
    }
    const int rows = M / T, nblk = nblocks(Cd), nq = nqchunks(T), nseg = nsegments(T);
    const CarryWs w = carry_ws(ws, M, T, Cd, N);
    const dim3 grid(nblk, rows, nseg);
    carry_dl_sums(w.dls, dpre, dt_bias, first, 0, M, T, Cd, st);
    CARRY_BY_N(carry_scan_bwd_q_kernel, grid, CARRY_CB, w.Qc, w.segq, dout, dpre, dt_bias, A_log, Cm, ldbc, z, ldz,
               first, h0, w.dls, T, Cd, N, nq, nseg);
    CARRY_BY_N(carry_scan_bwd_kernel, grid, CARRY_CB, ddpre, w.dCpart, dz, w.Qc, w.segq, w.par, dout, dpre, dt_bias,
               A_log, Cm, ldbc, z, ldz, first, h0, w.dls, M, T, Cd, N, nq, nseg);
    carry_dC_kernel<<<pm_ceil_div((size_t)M * N, 256), 256, 0, st>>>(dC, ldbc, w.dCpart, first, M, T, N, nblk);
    cudaLaunchCheck();
    carry_param_kernel<<<pm_ceil_div((size_t)Cd * (N + 1), 256), 256, 0, st>>>(ddt_bias, dA_log, w.par, first, rows, T,
                                                                               Cd, N, nseg);
    cudaLaunchCheck();
}

void cuda_carry_state_out(float *h_out, bf16 *hist_out, const bf16 *u, const bf16 *dpre, const float *dt_bias,
                          const float *A_log, const bf16 *Bm, int ldbc, const bf16 *xi, int ldx, const int32_t *first,
                          const int32_t *last, const float *h0, int M, int T, int Cd, int N, int K, void *ws,
                          cudaStream_t st) {
    carry_check(M, T, Cd, N);
    if (K < 1 || K > CARRY_KMAX) carry_die("conv width K=%d is not supported (1..%d)", K, CARRY_KMAX);
    if (M == 0) return;
    const int nseg = nsegments(T);
    const CarryWs w = carry_ws(ws, M, T, Cd, N);
    carry_dl_sums(w.dls, dpre, dt_bias, last, 1, M, T, Cd, st);
    CARRY_BY_N(carry_state_seg_kernel, dim3(nblocks(Cd), M / T, nseg), CARRY_CB, w.part, u, dpre, dt_bias, A_log, Bm,
               ldbc, last, T, Cd, N, nseg);
    CARRY_BY_N(carry_state_out_kernel, dim3(pm_ceil_div(Cd, 128), M / T), 128, h_out, hist_out, w.part, w.dls, A_log,
               xi, ldx, first, last, h0, T, Cd, N, K, nseg);
}
#undef CARRY_BY_N

void cuda_carry_add_f32(float *dst, const float *src, size_t n, cudaStream_t st) {
    if (n == 0) return;
    size_t g = (n + 255) / 256, cap = (size_t)pm_cuda_sm_count() * 32;
    add_f32_kernel<<<(unsigned)(g < cap ? g : cap), 256, 0, st>>>(dst, src, n);
    cudaLaunchCheck();
}
