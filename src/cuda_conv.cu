// cuda_conv.cu — depthwise causal conv1d + SiLU with document resets, forward and backward, for the CUDA backend
// (cuda_conv.h). bf16 activations in and out, fp32 weights and arithmetic. Semantics: Backend.conv_silu_fwd /
// conv_silu_bwd (backend.h): a tap j steps back from token t is read only if j <= lim(t) = min(pos[t], t % T).
// Lab: dev/kernels/conv_lab.cu (checks against a CPU reference; times against the previous kernels and a few
// other configurations of these).
//
// Both passes are pure streams (130m: the forward reads xi and writes u, 50 MB each; the backward reads du and
// xi and writes dxi), so the design is about keeping enough bytes in flight to cover DRAM latency, with little
// work per byte:
// - A thread takes V adjacent channels (V = 4 in production: one 8-byte load or store of bf16x4 per token and
//   tensor; the lab also runs V = 8, which measured slower, see conv_vec) and
//   walks a run of L tokens, sliding a K-wide window of xi in registers; the K-1 halo tokens before the run are
//   re-read at its start. A warp's 32 lanes take 32 V adjacent channels of one run (512 contiguous bytes of a
//   token row at V = 8).
// - Loads run P tokens ahead of use through a ring of P slots per thread in shared memory, filled by cp.async
//   (LDGSTS): a load in flight holds no registers, so the backward (168 registers of windows, weights and dw
//   sums per thread) still keeps 8 tokens x 32 bytes in flight per thread. Slot n % P holds token n of the
//   run; step n refills the slot of token n - 1 (consumed by the step before, so no copy can land in a slot
//   still being read) with token n + P - 1, then waits for token n's copy.
// - lim(t) is computed once per token, spread over the lanes: lane l holds lim of token s + l of the current
//   32-token segment s (one coalesced 128-byte pos load, issued a segment ahead, and one division per lane per
//   32 tokens), and a step reads it with one warp shuffle: no pos load and no t % T per token.
// - The run length is picked per shape (conv_pick_run): the shortest of 32, 64, 128 tokens whose grid fits in
//   one wave of resident warps (more warps in flight; no half-empty last wave). With V = 4 the forward gets
//   runs of 64 at 130m (M = 16384, C = 1536) and 370m (C = 2048), the backward (four blocks of 4 warps per SM)
//   runs of 128: 1536 / 2048 warps, 11.6 / 15.5 per SM. (The numbers in the comments below were worked out
//   for V = 8.)
// - Steps where all K taps are valid (all but the K-1 tokens after a document or row start) run a copy of the
//   arithmetic with the tap tests folded away (a branch uniform across the warp).
// - The arithmetic per element is that of the previous kernels in backend_cuda.cu (conv_pre, dsilu, the same
//   operations in the same order), so u and dxi were bit-identical to theirs, except the sigmoid: one tanh since
//   the thirty-sixth session (conv_sigmoid; CONV_SIGMOID_TANH=0 builds the old form, bit-identical to them);
//   dw/db sum the same terms in another grouping.
// Other shapes (C or ldx not a multiple of 8, pointers not 16-byte aligned) run the same kernels with V = 4 or
// 2 (8- or 4-byte cp.async) or 1 (plain loads into a register ring: cp.async has no 2-byte form).
//
// Backward weight gradients without atomics: each thread sums dw/db over its run in token order; the W warps
// of a block (consecutive runs of the same channels) add theirs in warp order in shared memory, and each block
// writes one partial row [dw (C*K) | db (C)]; a column-sum kernel adds the G rows in a fixed order into dw and
// db. Every order is fixed by the shape and the run length (itself fixed by the shape, the SM count and the
// kernel's occupancy), so results repeat bit for bit run to run.
#include "cuda_conv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"

typedef __nv_bfloat16 bf16;

// Everything but the entry points has internal linkage (the kernel lab includes this file once more).
namespace {

// Bytes in flight: 4.16 TB/s x ~1 us of latency under load = ~32 KB per SM of reads and writes together.
//
// Forward: P = 8 tokens in flight per thread. At 130m (runs of 64: 1536 warps, 11.6 per SM): 8 x 16 B x 32 lanes
// x 11.6 = 47 KB of loads in flight per SM, ~3x the ~16 KB its reads (half of its bytes) need. 104 registers at
// K = 4, V = 8: 18 warps per SM fit, so 130m and 370m (2048 warps) are one wave. Blocks of 2 warps keep the
// blocks per SM even (5 or 6 at 130m).
#define CONV_FWD_P 8
#define CONV_FWD_W 2
// Backward: P = 8 tokens x (16 + 16 B) x 32 lanes = 8 KB per warp in flight: 95 KB per SM at 130m (runs of 64,
// 11.6 warps per SM), ~4x what its reads (2/3 of its bytes) need. The ring is 2 x 8 x 128 x 16 B = 32 KB of
// shared memory per block. The W = 4 runs of a block sum their dw/db partials in shared memory: G = M / (4 L)
// partial rows (64 at 130m: 2 MB, L2-resident for the column sum). At most 168 registers (3 blocks of 4 warps
// per SM): at K = 4, V = 8 the kernel needs all of them (weights, dw sums, windows: 136 live floats per
// thread), which is why its xi window stays in bf16 and its bias in shared memory (see the kernel); ptxas
// reports 168 and no spills (CUDA 13.0), a margin thin enough to recheck with -Xptxas -v after any change.
// The backward also does ~270 instructions per step (8 channels): ~27 us of issue at 130m at 4 per clock per
// SM, against a 36 us byte floor, so it relies on 12 warps per SM to overlap the two.
#define CONV_BWD_P 8
#define CONV_BWD_W 4
#define CONV_BWD_MINB 4  // production runs V <= 4 (113 registers at K = 4): four blocks of 4 warps per SM
#define CONV_RUN_MIN 32   // run lengths 32, 64, 128 (multiples of the 32-token lim segments)
#define CONV_RUN_MAX 128  // beyond one wave anyway: runs of 128 (halo re-reads 2%)

template <typename... Args>
static void conv_die(const char *fmt, Args... args) {  // one clear line and exit
    pm_cuda_die("cuda_conv", fmt, args...);
}

// ---------------------------------------------------------------------------------------------------------
// math (exactly as backend_cuda.cu had it)

// The conv's pre-activation at one token: bias + taps over the window x (x[K-1] the token itself), tap k read
// only if it is K-1-k <= lim steps back (document start). Every kernel sums in this one order.
template <int K>
__device__ __forceinline__ float conv_pre(float b, const float (&w)[K], const float (&x)[K], int lim) {
    float v = b;
#pragma unroll
    for (int k = 0; k < K; k++)
        if (K - 1 - k <= lim) v += w[k] * x[k];
    return v;
}
// sigmoid(v). TANH (production, CONV_SIGMOID_TANH): pm_sigmoid_tanh, one special-function instruction (tanh.approx
// runs at ex2's rate) where 1 / (1 + e^-v) takes two, as the scan computes it since v85. Both conv kernels wait on their chains through this value more
// than on bytes or ALU count (ncu, call289): with it the forward measured -6% at 370m and -1% at 130m, the backward
// -2.5% and -3.2% (call292), where 16 fewer ALU instructions a step changed nothing (call291). Every conv kernel
// uses the same form, so the recompute's u is the forward's, bit for bit.
#ifndef CONV_SIGMOID_TANH
#define CONV_SIGMOID_TANH 1
#endif
template <bool TANH = CONV_SIGMOID_TANH>
__device__ __forceinline__ float conv_sigmoid(float v) {
    return TANH ? pm_sigmoid_tanh(v) : pm_sigmoid(v);
}
// g * d silu(v) / dv
template <bool TANH = CONV_SIGMOID_TANH>
__device__ __forceinline__ float dsilu(float g, float v) {
    float s = conv_sigmoid<TANH>(v);
    return g * s * (1.0f + v * (1.0f - s));
}

// ---------------------------------------------------------------------------------------------------------
// V adjacent bf16 values: Raw<V> is the type of one load or store, Pack<V> the same bits as 32-bit words
// (V = 1: the value in the low half of one word)

template <int V> struct Raw;
template <> struct Raw<8> { typedef uint4 type; };
template <> struct Raw<4> { typedef uint2 type; };
template <> struct Raw<2> { typedef unsigned type; };
template <> struct Raw<1> { typedef unsigned short type; };

template <int V>
struct Pack {
    unsigned w[(V + 1) / 2];
};

template <int V>
__device__ __forceinline__ Pack<V> to_pack(typename Raw<V>::type r) {
    Pack<V> p;
    if constexpr (V == 8) p.w[0] = r.x, p.w[1] = r.y, p.w[2] = r.z, p.w[3] = r.w;
    else if constexpr (V == 4) p.w[0] = r.x, p.w[1] = r.y;
    else p.w[0] = r;
    return p;
}
template <int V>
__device__ __forceinline__ Pack<V> zero_pack() {
    Pack<V> p;
#pragma unroll
    for (int i = 0; i < (V + 1) / 2; i++) p.w[i] = 0;
    return p;
}
template <int V>
__device__ __forceinline__ Pack<V> ld_pack(const bf16 *p) {
    return to_pack<V>(*reinterpret_cast<const typename Raw<V>::type *>(p));
}
// Widen (exact): element s of the pack.
template <int V>
__device__ __forceinline__ float unpack1(const Pack<V> &p, int s) {
    return __uint_as_float(s & 1 ? p.w[s >> 1] & 0xffff0000u : p.w[s >> 1] << 16);
}
template <int V>
__device__ __forceinline__ void unpack(const Pack<V> &p, float (&f)[V]) {
#pragma unroll
    for (int s = 0; s < V; s++) f[s] = unpack1<V>(p, s);
}
// Round to nearest even (as f2bf) and store V values.
template <int V>
__device__ __forceinline__ void st_pack(bf16 *dst, const float (&f)[V]) {
    if constexpr (V == 1) {
        *dst = f2bf(f[0]);
    } else {
        unsigned w[V / 2];
#pragma unroll
        for (int i = 0; i < V / 2; i++) {
            __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
            w[i] = *reinterpret_cast<unsigned *>(&h);
        }
        typedef typename Raw<V>::type R;
        if constexpr (V == 8) *reinterpret_cast<R *>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
        else if constexpr (V == 4) *reinterpret_cast<R *>(dst) = make_uint2(w[0], w[1]);
        else *reinterpret_cast<R *>(dst) = w[0];
    }
}

// ---------------------------------------------------------------------------------------------------------
// the load ring: P slots per thread, slot = (token index in the run) % P

// ASYNC (V >= 2): the slots are this thread's column of a [P][NT] array of Raw<V> in shared memory, filled by
// cp.async (16 B: .cg, L2 only; 8 or 4 B: .ca); an invalid token (past the run or M) is zero-filled without
// reading global memory. Each step commits one group, so "this step's token has landed" is wait_group(P - 1)
// after the step's commit. Otherwise (V = 1): plain loads into P registers, issued as early.
template <int V, int P, int NT, bool ASYNC>
struct Ring {
    typedef typename Raw<V>::type R;
    R *slots;      // ASYNC: &shared[0][threadIdx.x]; slot i at slots[i * NT]
    Pack<V> r[P];  // !ASYNC

    __device__ __forceinline__ void issue(int i, const bf16 *src, bool valid) {
        if constexpr (ASYNC) {
            unsigned s = (unsigned)__cvta_generic_to_shared(slots + i * NT);
            int n = valid ? (int)sizeof(R) : 0;
            if constexpr (sizeof(R) == 16)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n)
                             : "memory");
            else
                asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src),
                             "n"((int)sizeof(R)), "r"(n)
                             : "memory");
        } else {
            r[i] = valid ? ld_pack<V>(src) : zero_pack<V>();
        }
    }
    __device__ __forceinline__ void commit() {
        if constexpr (ASYNC) asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    // wait until the oldest of the P groups in flight (this step's token) has landed
    __device__ __forceinline__ void wait() {
        if constexpr (ASYNC) asm volatile("cp.async.wait_group %0;\n" ::"n"(P - 1) : "memory");
    }
    __device__ __forceinline__ void drain() {
        if constexpr (ASYNC) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
    __device__ __forceinline__ Pack<V> get(int i) {
        if constexpr (ASYNC) return to_pack<V>(slots[i * NT]);
        else return r[i];
    }
};

// ---------------------------------------------------------------------------------------------------------
// per-run setup shared by both kernels

// Tap limits, one 32-token segment at a time: lane l holds lim of token s + l of the current segment s (-1 from
// token tl on: past M, or past what the kernel reads), and the pos of the next segment's token, loaded one
// segment ahead. next() must be called by the whole warp at each segment start s = t0, t0 + 32, ...
struct SegLims {
    int cur, pos_next;
    __device__ __forceinline__ void start(const int32_t *__restrict__ pos, int t0, int tl, int lane) {
        pos_next = t0 + lane < tl ? pos[t0 + lane] : -1;
    }
    __device__ __forceinline__ void next(const int32_t *__restrict__ pos, int s, int tl, int T, int lane) {
        int m = (s + lane) % T, p = pos_next;
        cur = p < m ? p : m;
        int tn = s + 32 + lane;
        pos_next = tn < tl ? pos[tn] : -1;
    }
    // lim of token s + i of the current segment (i uniform across the warp; every lane must call)
    __device__ __forceinline__ int at(int i) const { return __shfl_sync(0xffffffffu, cur, i & 31); }
};

// Weights w (C, K) and bias b (C) of channels c .. c+V-1 (fp32 master copies; scalar loads, as w's offset in
// the flat parameter buffer has no alignment guarantee).
template <int K, int V>
__device__ __forceinline__ void load_params(float (&wv)[V][K], float (&bv)[V], const float *__restrict__ w,
                                            const float *__restrict__ b, int c) {
#pragma unroll
    for (int s = 0; s < V; s++) {
#pragma unroll
        for (int k = 0; k < K; k++) wv[s][k] = w[(size_t)(c + s) * K + k];
        bv[s] = b[c + s];
    }
}

// xw[s][1 .. K-1] = xi at tokens t0-(K-1) .. t0-1 (0 before token 0: such taps are never valid anyway, since
// lim(t) <= t % T <= t), so that the first step's slide puts them in place.
template <int K, int V>
__device__ __forceinline__ void load_halo(float (&xw)[V][K], const bf16 *__restrict__ xc, int ldx, int t0) {
#pragma unroll
    for (int s = 0; s < V; s++)
#pragma unroll
        for (int k = 0; k < K; k++) xw[s][k] = 0.0f;
#pragma unroll
    for (int k = 0; k < K - 1; k++) {
        int t = t0 - (K - 1) + k;
        if (t >= 0) {
            float f[V];
            unpack<V>(ld_pack<V>(xc + (size_t)t * ldx), f);
#pragma unroll
            for (int s = 0; s < V; s++) xw[s][k + 1] = f[s];
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// forward: u[t, c] = silu(b[c] + sum_k w[c, k] xi[t-K+1+k, c]) over the valid taps
//
// Grid (runs / W, channel groups / 32), W warps per block: warp = one run of L tokens x 32 groups of V channels.
// Lanes past the last group shadow it (the shuffles need full warps) and store nothing.

template <int K, int V, int P, int W, bool TANH = CONV_SIGMOID_TANH>
__global__ void __launch_bounds__(32 * W)
    conv_fwd_kernel(bf16 *__restrict__ u, const bf16 *__restrict__ xi, int ldx, const float *__restrict__ w,
                    const float *__restrict__ b, const int32_t *__restrict__ pos, int M, int T, int C, int L) {
    constexpr int NT = 32 * W;
    constexpr bool ASYNC = V >= 2;
    static_assert(32 % P == 0, "lim segments of 32 tokens start at batch starts");
    typedef typename Raw<V>::type R;
    __shared__ __align__(16) R ring_sh[ASYNC ? P * NT : 1];  // [P][NT]: the ring's slots

    const int lane = threadIdx.x & 31;
    const int t0 = (blockIdx.x * W + (threadIdx.x >> 5)) * L;
    if (t0 >= M) return;  // the whole warp; no block barriers below
    const int t1 = min(t0 + L, M);
    const int NG = C / V, gi = blockIdx.y * 32 + lane;
    const bool active = gi < NG;
    const int c = (active ? gi : NG - 1) * V;  // first channel
    const bf16 *xc = xi + c;                   // column c of xi (row stride ldx)

    float wv[V][K], bv[V], xw[V][K];  // per channel: weights, bias, window xi[t-(K-1) .. t]
    load_params<K, V>(wv, bv, w, b, c);
    SegLims lims;
    lims.start(pos, t0, t1, lane);
    load_halo<K, V>(xw, xc, ldx, t0);

    Ring<V, P, NT, ASYNC> ring;
    ring.slots = ring_sh + threadIdx.x;
    auto issue = [&](int i, int t) {
        bool ok = t < t1;
        ring.issue(i, ok ? xc + (size_t)t * ldx : xc, ok);
        ring.commit();
    };
#pragma unroll
    for (int i = 0; i < P - 1; i++) issue(i, t0 + i);
    for (int tb = t0; tb < t1; tb += P) {
        if (((tb - t0) & 31) == 0) lims.next(pos, tb, t1, T, lane);
#pragma unroll
        for (int i = 0; i < P; i++) {
            const int t = tb + i;  // steps past t1 in the last batch compute garbage and store nothing
            issue((i + P - 1) % P, t + P - 1);
            ring.wait();
            float x[V], o[V];
            unpack<V>(ring.get(i), x);
            const int lm = lims.at(t - t0);
            auto channels = [&](int lim) {
#pragma unroll
                for (int s = 0; s < V; s++) {
#pragma unroll
                    for (int k = 0; k < K - 1; k++) xw[s][k] = xw[s][k + 1];
                    xw[s][K - 1] = x[s];
                    float v = conv_pre<K>(bv[s], wv[s], xw[s], lim);
                    o[s] = v * conv_sigmoid<TANH>(v);
                }
            };
            // all K taps valid (almost every token): a copy without the tests (uniform branch)
            if (lm >= K - 1) channels(K - 1);
            else channels(lm);
            if (active && t < t1) st_pack<V>(u + (size_t)t * C + c, o);
        }
    }
    ring.drain();
}

// ---------------------------------------------------------------------------------------------------------
// backward: dv[t] = du[t] * silu'(pre[t]); dxi[t'] = sum_j dv[t'+j] * w[K-1-j] over the taps valid at t'+j;
// dw[c, k] += sum_t dv[t] xi[t-(K-1)+k] (valid taps), db[c] += sum_t dv[t]
//
// Grid (G = runs / W, channel groups / 32), W warps per block on W consecutive runs of the same 32 V channels;
// each block writes partial row blockIdx.x of part (G, C*(K+1)) = [dw (C, K) | db (C)].
// A run of tokens t0 .. t1-1 steps through t1+K-2: the K-1 tokens after the run complete the dxi of its last
// tokens (their dw/db belong to the next run); past M they read as du = 0, lim = -1, as in the old kernels.
//
// dxi is accumulated forward ("push"): the step of token t adds dv[t] * w[K-1-j] to the partial dxi of token
// t - j (j <= lim(t)); the partial of token t - (K-1) is then complete and stored. Each partial gets its terms
// in the order j = 0, 1, .., K-1, the order of the old kernels' per-token gather, and the validity test needs
// only lim(t) (no window of past limits).

// The block's partial row of dw | db: row blockIdx.x of part (G, C*(K+1)) = [dw (C, K) | db (C)] for the
// block's 32 V channels (column block blockIdx.y), from each thread's sums over its tokens. sh: W * 32 * VS floats of
// shared memory (VS = V*(K+1)+1: odd, so lanes hit distinct banks); the block's threads all call it (barriers).
// Each lane puts its V*K dw then V db at sh[wp][lane][.], then each block column is summed over the warps in warp
// order by thread j of the block for output column j (contiguous stores).
template <int K, int V, int W>
__device__ __forceinline__ void conv_bwd_partial_row(float *sh, const float (&dwv)[V][K], const float (&dbv)[V],
                                                     float *__restrict__ part, int C) {
    constexpr int NT = 32 * W, VS = V * (K + 1) + 1;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    {
        float *my = sh + (wp * 32 + lane) * VS;
#pragma unroll
        for (int s = 0; s < V; s++) {
#pragma unroll
            for (int k = 0; k < K; k++) my[s * K + k] = dwv[s][k];
            my[V * K + s] = dbv[s];
        }
    }
    __syncthreads();
    const int CB = 32 * V, cbase = blockIdx.y * CB;  // the block's channels
    float *prow = part + (size_t)blockIdx.x * C * (K + 1);
    // dw: column j of the block's slice is channel cbase + j / K, tap j % K, at lane (j/K)/V, index
    // ((j/K) % V) * K + j % K = j - lane * V * K, i.e. flat lane * VS + that = j + lane * (V + 1)
    for (int j = threadIdx.x; j < CB * K; j += NT) {
        int cc = j / K;
        if (cbase + cc >= C) break;
        int f = j + (cc / V) * (V + 1);
        float a = sh[f];
#pragma unroll
        for (int q = 1; q < W; q++) a += sh[q * 32 * VS + f];
        prow[(size_t)cbase * K + j] = a;
    }
    for (int j = threadIdx.x; j < CB; j += NT) {
        if (cbase + j >= C) break;
        int f = (j / V) * VS + V * K + j % V;
        float a = sh[f];
#pragma unroll
        for (int q = 1; q < W; q++) a += sh[q * 32 * VS + f];
        prow[(size_t)C * K + cbase + j] = a;
    }
}

template <int K, int V, int P, int W, int MINB, bool TANH = CONV_SIGMOID_TANH>
__global__ void __launch_bounds__(32 * W, MINB)
    conv_bwd_kernel(bf16 *__restrict__ dxi, int ldx, float *__restrict__ part, const bf16 *__restrict__ du,
                    const bf16 *__restrict__ xi, const float *__restrict__ w, const float *__restrict__ b,
                    const int32_t *__restrict__ pos, int M, int T, int C, int L) {
    constexpr int NT = 32 * W;
    constexpr int VS = V * (K + 1) + 1;  // floats per lane in the partials (odd: lanes hit distinct banks)
    constexpr bool ASYNC = V >= 2;
    static_assert(32 % P == 0, "lim segments of 32 tokens start at batch starts");
    typedef typename Raw<V>::type R;
    constexpr int RING_BYTES = ASYNC ? 2 * P * NT * (int)sizeof(R) : 16;
    constexpr int PART_BYTES = W * 32 * VS * (int)sizeof(float);
    // The ring ([2][P][NT] Raw<V>: xi slots, then du slots) during the sweep; the warps' partials ([W][32][VS])
    // after it (a barrier between: every warp's ring is drained first).
    __shared__ __align__(16) unsigned char smem[RING_BYTES > PART_BYTES ? RING_BYTES : PART_BYTES];
    // At V = 8, K = 4 the bias waits in shared memory ([V][NT], each thread its own column), re-read at every
    // step (1 LDS per channel and step): with the xi window kept in bf16 (below), the registers this frees are
    // what it takes to fit 168 without spills.
    constexpr bool BIAS_SH = V * K >= 32;
    __shared__ float bias_sh[BIAS_SH ? V : 1][NT];

    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int t0 = (blockIdx.x * W + wp) * L;
    const int t1 = t0 < M ? min(t0 + L, M) : t0;  // empty for the warps past M of the last block
    const int NG = C / V, gi = blockIdx.y * 32 + lane;
    const bool active = gi < NG;
    const int c = (active ? gi : NG - 1) * V;

    float wv[V][K], bv[V];
    float dwv[V][K], dbv[V];  // this thread's dw/db over its run, in token order
    load_params<K, V>(wv, bv, w, b, c);
#pragma unroll
    for (int s = 0; s < V; s++) {
        if constexpr (BIAS_SH) bias_sh[s][threadIdx.x] = bv[s];
        dbv[s] = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) dwv[s][k] = 0.0f;
    }

    if (t1 > t0) {  // uniform across the warp
        const int tend = t1 + K - 1, tl = min(tend, M);  // steps t0 .. tend-1; tokens before tl are read
        const bf16 *xc = xi + c, *gc = du + c;
        SegLims lims;
        lims.start(pos, t0, tl, lane);
        // windows over tokens t-(K-1) .. t: xp = xi as loaded (bf16, widened where used: 4 V registers less
        // than floats, for V more widenings per step); acc = partial dxi (acc[s][K-1], token t's, starts at 0)
        Pack<V> xp[K];
        float acc[V][K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            // the halo: xp[1 .. K-1] = tokens t0-(K-1) .. t0-1, which the first step's slide puts in place
            // (xp[0] is slid out unread; tokens before 0 are zeros, never read: lim(t) <= t % T <= t)
            int t = t0 - K + k;
            xp[k] = k > 0 && t >= 0 ? ld_pack<V>(xc + (size_t)t * ldx) : zero_pack<V>();
#pragma unroll
            for (int s = 0; s < V; s++) acc[s][k] = 0.0f;
        }

        Ring<V, P, NT, ASYNC> rx, rg;  // xi, du
        rx.slots = reinterpret_cast<R *>(smem) + threadIdx.x;
        rg.slots = reinterpret_cast<R *>(smem) + P * NT + threadIdx.x;
        auto issue = [&](int i, int t) {
            bool ok = t < tl;
            rx.issue(i, ok ? xc + (size_t)t * ldx : xc, ok);
            rg.issue(i, ok ? gc + (size_t)t * C : gc, ok);
            rx.commit();  // one group per step holds both copies
        };
#pragma unroll
        for (int i = 0; i < P - 1; i++) issue(i, t0 + i);
        for (int tb = t0; tb < tend; tb += P) {
            if (((tb - t0) & 31) == 0) lims.next(pos, tb, tl, T, lane);
#pragma unroll
            for (int i = 0; i < P; i++) {
                const int t = tb + i;  // steps past tend in the last batch change nothing that is kept
                issue((i + P - 1) % P, t + P - 1);
                rx.wait();
                float g[V];
                unpack<V>(rg.get(i), g);
                const int lm = lims.at(t - t0);
                const int tp = t - (K - 1);  // its dxi completes at this step
                const bool in_run = t < t1, emit = tp >= t0 && tp < t1;
                float o[V];
#pragma unroll
                for (int k = 0; k < K - 1; k++) xp[k] = xp[k + 1];
                xp[K - 1] = rx.get(i);
                auto channels = [&](int lim, bool run) {
#pragma unroll
                    for (int s = 0; s < V; s++) {
                        float x[K];  // channel s of the window
#pragma unroll
                        for (int k = 0; k < K; k++) x[k] = unpack1<V>(xp[k], s);
                        // (the ring's asm statements clobber memory: bias_sh is re-read at each step, not kept)
                        const float bs = BIAS_SH ? bias_sh[s][threadIdx.x] : bv[s];
                        const float dv = dsilu<TANH>(g[s], conv_pre<K>(bs, wv[s], x, lim));
                        if (run) {
                            dbv[s] += dv;
#pragma unroll
                            for (int k = 0; k < K; k++)
                                if (K - 1 - k <= lim) dwv[s][k] += dv * x[k];
                        }
                        // token t - (K-1-k) gets its term j = K-1-k (valid when j <= lim(t))
#pragma unroll
                        for (int k = 0; k < K; k++)
                            if (K - 1 - k <= lim) acc[s][k] += dv * wv[s][k];
                        o[s] = acc[s][0];
#pragma unroll
                        for (int k = 0; k < K - 1; k++) acc[s][k] = acc[s][k + 1];
                        acc[s][K - 1] = 0.0f;
                    }
                };
                // Almost every step is inside the run with all K taps valid (a document start or a row start
                // limits the next K-1 tokens only): that case gets its own copy with the tests folded away
                // (the branch is uniform across the warp); the same operations in the same order either way.
                if (in_run && lm >= K - 1) channels(K - 1, true);
                else channels(lm, in_run);
                if (active && emit) st_pack<V>(dxi + (size_t)tp * ldx + c, o);
            }
        }
        rx.drain();  // nothing may still land in the ring once it holds the partials
    }
    __syncthreads();

    conv_bwd_partial_row<K, V, W>(reinterpret_cast<float *>(smem), dwv, dbv, part, C);
}

// ---------------------------------------------------------------------------------------------------------
// host side

// Channels per thread: the widest V in CONV_V_MAX, ..., 2 for which C and ldx are multiples of V and every pointer
// of a strided tensor is 2V-byte aligned (so every row's V-channel groups are); else 1.
// Production takes at most 4 channels per thread: the lab measured V = 4 faster than 8 on the H200 (fewer
// registers, more warps in flight; docs/perf.md, conv v6): forward 0.039 against 0.041 ms at 130m, backward
// (with 4 blocks per SM) 0.064 against 0.078 at 130m and 0.077 against 0.089 at 370m. The V = 8 kernels stay
// for the lab.
#define CONV_V_MAX 4
static int conv_vec(int C, int ldx, const void *p0, const void *p1, const void *p2) {
    for (int V = CONV_V_MAX; V >= 2; V /= 2) {
        const size_t a = 2 * (size_t)V;
        if (C % V == 0 && ldx % V == 0 && pm_is_aligned(p0, a) && pm_is_aligned(p1, a) && pm_is_aligned(p2, a))
            return V;
    }
    return 1;
}

// 0: nothing to do (M == 0); 1: run. Dies on a kernel width other than 1..4 or a nonsensical shape.
static int conv_check(int M, int T, int C, int K, int ldx) {
    if (K < 1 || K > 4) conv_die("kernel width K=%d unsupported (1..4)", K);
    if (M == 0) return 0;
    if (M < 0 || T <= 0 || C <= 0 || ldx < C) conv_die("bad shape M=%d T=%d C=%d ldx=%d", M, T, C, ldx);
    return 1;
}

// Run length for a grid of `cw` warps across the channels and M tokens, given `wave` resident warps on the
// GPU: the shortest of 32, 64, 128 whose grid fits in one wave, else 128.
static int conv_pick_run(int M, int cw, long wave) {
    int L = CONV_RUN_MIN;
    while (L < CONV_RUN_MAX && (long)cw * pm_ceil_div(M, L) > wave) L *= 2;
    return L;
}
// Resident warps of one kernel on the whole GPU (queried once per kernel).
template <typename F>
static long conv_wave(F kernel, int threads, int *cache) {
    if (*cache == 0) {
        int nb = 0;
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, kernel, threads, 0));
        *cache = nb > 0 ? nb : 1;
    }
    return (long)*cache * (threads / 32) * pm_cuda_sm_count();
}

// The forward with V channels per thread, P tokens in flight, W warps per block; L = 0: picked by the shape.
template <int K, int V, int P = CONV_FWD_P, int W = CONV_FWD_W, bool TANH = CONV_SIGMOID_TANH>
static void conv_fwd_launch(bf16 *u, const bf16 *xi, int ldx, const float *w, const float *b, const int32_t *pos,
                            int M, int T, int C, int L, cudaStream_t st) {
    static int blocks_per_sm = 0;
    auto kernel = conv_fwd_kernel<K, V, P, W, TANH>;
    int cw = (int)pm_ceil_div(C / V, 32);
    if (L <= 0) L = conv_pick_run(M, cw, conv_wave(kernel, 32 * W, &blocks_per_sm));
    dim3 grid(pm_ceil_div(M, (size_t)L * W), cw);
    kernel<<<grid, 32 * W, 0, st>>>(u, xi, ldx, w, b, pos, M, T, C, L);
    cudaLaunchCheck();
}
template <int V>
static void conv_fwd_v(bf16 *u, const bf16 *xi, int ldx, const float *w, const float *b, const int32_t *pos, int M,
                       int T, int C, int K, cudaStream_t st) {
    switch (K) {
        case 1: conv_fwd_launch<1, V>(u, xi, ldx, w, b, pos, M, T, C, 0, st); break;
        case 2: conv_fwd_launch<2, V>(u, xi, ldx, w, b, pos, M, T, C, 0, st); break;
        case 3: conv_fwd_launch<3, V>(u, xi, ldx, w, b, pos, M, T, C, 0, st); break;
        default: conv_fwd_launch<4, V>(u, xi, ldx, w, b, pos, M, T, C, 0, st); break;
    }
}

// Partial rows of a backward with runs of L tokens: one per block of CONV_BWD_W runs.
static int conv_bwd_rows(int M, int L) { return (int)pm_ceil_div(M, (size_t)L * CONV_BWD_W); }

// The backward kernel with V channels per thread, P tokens in flight, at most 65536 / (32 W MINB) registers;
// L = 0: picked by the shape. Writes the partial rows; returns how many (G).
template <int K, int V, int P = CONV_BWD_P, int MINB = CONV_BWD_MINB, bool TANH = CONV_SIGMOID_TANH>
static int conv_bwd_launch(bf16 *dxi, int ldx, float *part, const bf16 *du, const bf16 *xi, const float *w,
                           const float *b, const int32_t *pos, int M, int T, int C, int L, cudaStream_t st) {
    static int blocks_per_sm = 0;
    auto kernel = conv_bwd_kernel<K, V, P, CONV_BWD_W, MINB, TANH>;
    int cw = (int)pm_ceil_div(C / V, 32);
    if (L <= 0) L = conv_pick_run(M, cw, conv_wave(kernel, 32 * CONV_BWD_W, &blocks_per_sm));
    int G = conv_bwd_rows(M, L);
    dim3 grid(G, cw);
    kernel<<<grid, 32 * CONV_BWD_W, 0, st>>>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, L);
    cudaLaunchCheck();
    return G;
}
template <int V>
static int conv_bwd_v(bf16 *dxi, int ldx, float *part, const bf16 *du, const bf16 *xi, const float *w,
                      const float *b, const int32_t *pos, int M, int T, int C, int K, cudaStream_t st) {
    switch (K) {
        case 1: return conv_bwd_launch<1, V>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, 0, st);
        case 2: return conv_bwd_launch<2, V>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, 0, st);
        case 3: return conv_bwd_launch<3, V>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, 0, st);
        default: return conv_bwd_launch<4, V>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, 0, st);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// entry points (cuda_conv.h)

void cuda_conv_silu_fwd(bf16 *u, const bf16 *xi, int ldx, const float *w, const float *b, const int32_t *pos,
                        int M, int T, int C, int K, cudaStream_t st) {
    if (!conv_check(M, T, C, K, ldx)) return;
    switch (conv_vec(C, ldx, u, xi, xi)) {
        case 4: conv_fwd_v<4>(u, xi, ldx, w, b, pos, M, T, C, K, st); break;
        case 2: conv_fwd_v<2>(u, xi, ldx, w, b, pos, M, T, C, K, st); break;
        default: conv_fwd_v<1>(u, xi, ldx, w, b, pos, M, T, C, K, st); break;
    }
}

// The shortest runs give the most rows, whatever V and L are picked.
size_t cuda_conv_bwd_part_bytes(int M, int C, int K) {
    return (size_t)conv_bwd_rows(M, CONV_RUN_MIN) * C * (K + 1) * sizeof(float);
}

int cuda_conv_silu_bwd_part(bf16 *dxi, int ldx, float *part, const bf16 *du, const bf16 *xi, const float *w,
                            const float *b, const int32_t *pos, int M, int T, int C, int K, cudaStream_t st) {
    if (!conv_check(M, T, C, K, ldx)) return 0;
    // du (M, C) is contiguous: its rows are aligned when du is and C % V == 0 (checked along with ldx)
    switch (conv_vec(C, ldx, dxi, xi, du)) {
        case 4: return conv_bwd_v<4>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, K, st);
        case 2: return conv_bwd_v<2>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, K, st);
        default: return conv_bwd_v<1>(dxi, ldx, part, du, xi, w, b, pos, M, T, C, K, st);
    }
}
PmColsumJob cuda_conv_bwd_job(float *dw, float *db, const float *part, int G, int C, int K, int add) {
    return PmColsumJob{dw, db, NULL, part, G, C * (K + 1), C * K, 0, add, PM_COLSUM_SPLIT};
}

void cuda_conv_silu_bwd(bf16 *dxi, int ldx, float *dw, float *db, const bf16 *du, const bf16 *xi, const float *w,
                        const float *b, const int32_t *pos, int M, int T, int C, int K, float *part,
                        cudaStream_t st) {
    int G = cuda_conv_silu_bwd_part(dxi, ldx, part, du, xi, w, b, pos, M, T, C, K, st);
    if (G > 0) pm_colsum_job(cuda_conv_bwd_job(dw, db, part, G, C, K, 1), st);
}
