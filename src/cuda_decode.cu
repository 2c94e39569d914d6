// cuda_decode.cu — recurrent decoding on the GPU (cuda_decode.h). A token's pass is four kernels a layer:
//   1. the residual add and RMSNorm (every block forms the normed vector itself in shared memory, so no kernel
//      waits for a norm), in_proj's rows a warp each, and for the xi rows the conv step with SiLU (u);
//   2. x_proj's rows (few and long: a block each);
//   3. dt_proj's dot product, softplus and the SSM step, a thread per (channel, state), 16 lanes a channel;
//   4. out_proj's rows a warp each;
// then the final norm with the tied classifier (kernel 1's form). Every product reads the fp32 weights once with
// 16-byte loads: a token is bound by the weights' bytes over the memory bandwidth (~1.5 GB at 370m) plus its ~200
// launches, which a CUDA graph of the whole step (captured at the second token; PM_DECODE_GRAPH=0 launches each
// kernel instead) replays as one, each kernel launched as a dependent of the one before (dec_launch). A 370m
// token with the graph (docs/perf.md, forty-first session): v1, eight kernels a layer with cuBLAS's sgemv for the
// products, 1.39 ms; v2, these four, 1.11; v3, their weights loaded before each waits for the kernel before, 0.99.
// Lanes (v4): a decoder of S <= DEC_MAX_LANES lanes decodes S sequences at once (generate --samples), each with its
// own states; every kernel reads a weight once for all of them (a warp's row held in registers is dotted with the S
// lanes' vectors): at 370m a step of 8 lanes takes 3.06 ms against one lane's 1.01 (docs/perf.md, forty-fifth
// session). Each lane's arithmetic is the one-lane kernel's, in the
// same order: a lane's logits are the same bits whatever S is (tests/test_cuda_decode.c).
// The host decoder (generate.c) is the reference: tests/test_cuda_decode.c compares the two.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_decode.h"

extern "C" {
#include "util.h"
}

static constexpr int DEC_MAX_N = 16, DEC_MAX_K = 4;
static constexpr int DEC_MAX_LANES = CUDA_DECODE_MAX_LANES;

struct CudaDecoder {
    DecodeWeights w;
    DecodeLayerWeights *layers;  // (n_layer) host copy of the caller's table
    DecodeLayerWeights *layers_dev;  // (n_layer) the same on the device, for the prefill's kernel
    cudaStream_t stream;
    int S;  // lanes
    // device buffers, one allocation: the states, then one token's activations, each lane's in turn
    float *arena;
    float *saved;  // (the states' size) cuda_decoder_save's copy, allocated at its first call
    float *conv_state;  // (S, n_layer, d_inner, K-1) oldest first
    float *ssm_state;   // (S, n_layer, d_inner, N)
    float *a_neg;       // (n_layer, d_inner, N) exp(A_log) = -A, formed once
    float *res;                // (2, S, d_model) the residual stream, in two buffers (see dec_enqueue_step)
    float *h;                  // (S, d_model) a layer's output
    float *xz;                 // (S, 2 d_inner) xi | z
    float *u, *y;              // (S, d_inner)
    float *xdbl;               // (S, dt_rank + 2N) dt_low | B | C
    float *logits_dev;         // (S, vocab_pad)
    int *token_dev;            // (S) the tokens being fed
    int *token_host;           // (S) pinned
    float *logits;             // (S, vocab_pad) pinned host copy
    const void **ptrs_dev;     // (2 n_layer) prefill's xz and xdbl pointers
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int steps;  // tokens fed since creation (the graph is captured at the second)
    int use_graph, use_pdl;
};

__device__ __forceinline__ float dec_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float dec_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// The sums over a block of S values a thread (blockDim.x a multiple of 32, at most 1024), every lane's in one pass
// (scratch: S * 32 floats); every thread gets them. Each is summed in the one order whatever S is.
template <int S>
__device__ void dec_block_sums(float (&v)[S], float *scratch) {
#pragma unroll
    for (int s = 0; s < S; s++)
        for (int o = 16; o > 0; o >>= 1) v[s] += __shfl_xor_sync(0xffffffffu, v[s], o);
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int s = 0; s < S; s++) scratch[s * 32 + (threadIdx.x >> 5)] = v[s];
    __syncthreads();
#pragma unroll
    for (int s = 0; s < S; s++) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += scratch[s * 32 + w];
        v[s] = t;
    }
    __syncthreads();  // (scratch is reused by the caller's next sum)
}

// Programmatic dependent launch (sm_90): each kernel lets the next one start at once (launch_dependents), and
// the next one loads its weights, which no kernel writes, before it waits for the kernels before it to finish
// (wait: their writes are then visible). A token's chain of ~200 small kernels then overlaps each kernel's launch
// and weight loads with the tail of the one before. Launched without the attribute, both are no-ops.
__device__ __forceinline__ void dec_let_next_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void dec_wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static constexpr int DEC_ROWS = 8;     // rows (warps) a block in the row kernels
static constexpr int DEC_PREFETCH = 16;  // float4 of its row a lane holds in registers before the wait

// A warp's row of n4 float4: the lane's first DEC_PREFETCH pieces (j = lane + 32 i) into registers.
struct DecRow {
    float4 v[DEC_PREFETCH];
};
__device__ __forceinline__ void dec_row_load(DecRow &r, const float4 *w, int n4) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < DEC_PREFETCH; i++)
        if (lane + 32 * i < n4) r.v[i] = __ldg(w + lane + 32 * i);
}
// This warp's row of W (rows of n4 float4; a warp past the last row reads row 0 and stores nothing): its first
// pieces loaded, then the wait for the kernels before.
__device__ __forceinline__ const float4 *dec_row_begin(DecRow &wr, const float *W, int row, int rows, int n4) {
    const float4 *wrow = (const float4 *)W + (size_t)(row < rows ? row : 0) * n4;
    dec_row_load(wr, wrow, n4);
    dec_wait_for_previous();
    return wrow;
}
// acc[s] += a . b (one float4 piece of a lane's dot product; the one order every kernel uses)
__device__ __forceinline__ void dec_dot4(float &acc, const float4 a, const float4 b) {
    acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
// The row's dot products with the S lanes' vectors x (lane s at x + s * n4, 16-byte aligned), the rest of the row
// loaded now; every thread of the warp gets them.
// (S at compile time, as in every kernel below: each lane's loop is then exactly the one-lane kernel's; v4's first
// form, with a run-time S under a loop of DEC_MAX_LANES, made one lane 1.5x slower than v3's kernels.)
template <int S>
__device__ __forceinline__ void dec_row_dot(float (&acc)[S], const DecRow &r, const float4 *w, const float4 *x,
                                            int n4) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < S; s++) acc[s] = 0.f;
#pragma unroll
    for (int i = 0; i < DEC_PREFETCH; i++)
        if (lane + 32 * i < n4) {
#pragma unroll
            for (int s = 0; s < S; s++) dec_dot4(acc[s], r.v[i], x[(size_t)s * n4 + lane + 32 * i]);
        }
    for (int j = lane + 32 * DEC_PREFETCH; j < n4; j += 32) {
        const float4 a = __ldg(w + j);
#pragma unroll
        for (int s = 0; s < S; s++) dec_dot4(acc[s], a, x[(size_t)s * n4 + j]);
    }
#pragma unroll
    for (int s = 0; s < S; s++)
        for (int o = 16; o > 0; o >>= 1) acc[s] += __shfl_xor_sync(0xffffffffu, acc[s], o);
}

// Kernel 1, for each of the S lanes: r = res_in + h (res_in: the embedding row of token[s] where h is NULL),
// written to res_out by block 0; xn = r / rms(r) * normw in shared memory (S, dm); out[s][row] = W[row] . xn[s] for
// this block's DEC_ROWS rows (out (S, rows)). conv_state non-NULL (in_proj): rows < di are xi, whose conv step (state:
// K-1 previous xi a channel, oldest first; lane s's at conv_state + s * conv_lane) gives u (S, di).
template <int S>
__global__ void __launch_bounds__(DEC_ROWS * 32) dec_norm_rows_kernel(
    const float *res_in, const int *token, const float *h, float *res_out, const float *normw, float eps,
    const float *W, int rows, int dm, float *out, float *conv_state, size_t conv_lane, const float *cw,
    const float *cb, float *u, int di, int K) {
    extern __shared__ float4 dec_smem4[];
    __shared__ float scratch[S * 32];
    dec_let_next_start();
    const int row = blockIdx.x * DEC_ROWS + (threadIdx.x >> 5), n4 = dm / 4;
    DecRow wr;
    const float4 *wrow = dec_row_begin(wr, W, row, rows, n4);
    float ss[S];
#pragma unroll
    for (int s = 0; s < S; s++) {
        float *xs = (float *)dec_smem4 + (size_t)s * dm;  // (dm)
        const float *ri = h ? res_in + (size_t)s * dm : res_in + (size_t)token[s] * dm;
        const float *hs = h ? h + (size_t)s * dm : nullptr;
        ss[s] = 0.f;
        for (int i = threadIdx.x; i < dm; i += blockDim.x) {
            const float r = hs ? ri[i] + hs[i] : ri[i];
            xs[i] = r;
            ss[s] += r * r;
        }
    }
    dec_block_sums<S>(ss, scratch);
#pragma unroll
    for (int s = 0; s < S; s++) {
        float *xs = (float *)dec_smem4 + (size_t)s * dm;
        const float rstd = 1.0f / sqrtf(ss[s] / dm + eps);
        for (int i = threadIdx.x; i < dm; i += blockDim.x) {
            if (blockIdx.x == 0 && res_out) res_out[(size_t)s * dm + i] = xs[i];
            xs[i] = xs[i] * rstd * normw[i];
        }
    }
    __syncthreads();
    if (row >= rows) return;
    float acc[S];
    dec_row_dot<S>(acc, wr, wrow, dec_smem4, n4);
    if ((threadIdx.x & 31) != 0) return;
#pragma unroll
    for (int s = 0; s < S; s++) {
        out[(size_t)s * rows + row] = acc[s];
        if (conv_state && row < di) {
            float *st = conv_state + s * conv_lane + (size_t)row * (K - 1);
            float a = cb[row] + cw[row * K + K - 1] * acc[s];
            for (int k = 0; k < K - 1; k++) a += cw[row * K + k] * st[k];
            for (int k = 0; k < K - 2; k++) st[k] = st[k + 1];
            if (K > 1) st[K - 2] = acc[s];
            u[(size_t)s * di + row] = dec_silu(a);
        }
    }
}

// Kernels 2 and 4: out[s][row] = W[row] . x[s], W (rows, cols) row-major, cols % 4 == 0, x (S, cols), out (S,
// rows). Long rows (x_proj: few of them) take a block a row (rows = the grid), the others a warp.
static constexpr int DEC_LONG_PREFETCH = 8;  // float4 a thread of a long row holds before the wait
template <int S>
__global__ void __launch_bounds__(256) dec_long_rows_kernel(const float *W, const float *x, float *out, int cols) {
    __shared__ float scratch[S * 32];
    dec_let_next_start();
    const float4 *w = (const float4 *)(W + (size_t)blockIdx.x * cols), *x4 = (const float4 *)x;
    const int n4 = cols / 4;
    float4 wr[DEC_LONG_PREFETCH];
#pragma unroll
    for (int i = 0; i < DEC_LONG_PREFETCH; i++)
        if (threadIdx.x + 256 * i < n4) wr[i] = __ldg(w + threadIdx.x + 256 * i);
    dec_wait_for_previous();
    float acc[S];
#pragma unroll
    for (int s = 0; s < S; s++) acc[s] = 0.f;
#pragma unroll
    for (int i = 0; i < DEC_LONG_PREFETCH; i++)
        if (threadIdx.x + 256 * i < n4) {
#pragma unroll
            for (int s = 0; s < S; s++) dec_dot4(acc[s], wr[i], x4[(size_t)s * n4 + threadIdx.x + 256 * i]);
        }
    for (int j = threadIdx.x + 256 * DEC_LONG_PREFETCH; j < n4; j += 256) {
        const float4 a = __ldg(w + j);
#pragma unroll
        for (int s = 0; s < S; s++) dec_dot4(acc[s], a, x4[(size_t)s * n4 + j]);
    }
    dec_block_sums<S>(acc, scratch);
    if (threadIdx.x == 0)
#pragma unroll
        for (int s = 0; s < S; s++) out[(size_t)s * gridDim.x + blockIdx.x] = acc[s];
}

template <int S>
__global__ void __launch_bounds__(DEC_ROWS * 32) dec_rows_kernel(const float *W, const float *x, float *out,
                                                                 int rows, int cols) {
    dec_let_next_start();
    const int row = blockIdx.x * DEC_ROWS + (threadIdx.x >> 5), n4 = cols / 4;
    DecRow wr;
    const float4 *wrow = dec_row_begin(wr, W, row, rows, n4);
    if (row >= rows) return;
    float acc[S];
    dec_row_dot<S>(acc, wr, wrow, (const float4 *)x, n4);
    if ((threadIdx.x & 31) != 0) return;
#pragma unroll
    for (int s = 0; s < S; s++) out[(size_t)s * rows + row] = acc[s];
}

// Kernel 3, one token of the selective scan: a thread per (channel, state), 16 lanes a channel (N <= 16; lanes
// past N hold nothing); grid y = the decoder's lane s (its state at state + s * state_lane, its activations at
// their s-th rows). The lanes share dt_proj's dot product (delta's pre-activation), then each updates its state;
// y = (sum_n s_n C_n + D u) silu(z).
static constexpr int DEC_DT_PREFETCH = 12;  // dt_proj weights a lane holds before the wait (R <= 192)
__global__ void dec_ssm_kernel(float *state, size_t state_lane, const float *a_neg, const float *dt_w,
                               const float *dt_b, const float *xdbl, const float *u, const float *xz, const float *Dp,
                               float *y, int di, int N, int R) {
    dec_let_next_start();
    {
        const size_t s = blockIdx.y;
        state += s * state_lane, xdbl += s * (R + 2 * N), u += s * di, xz += s * 2 * di, y += s * di;
    }
    const int gid = blockIdx.x * blockDim.x + threadIdx.x, ch = gid >> 4, n = gid & 15;
    const bool live = ch < di && n < N;
    float wdt[DEC_DT_PREFETCH], a = 0.f, bias = 0.f, dd = 0.f;
#pragma unroll
    for (int i = 0; i < DEC_DT_PREFETCH; i++) wdt[i] = ch < di && n + 16 * i < R ? dt_w[(size_t)ch * R + n + 16 * i] : 0.f;
    if (live) a = a_neg[(size_t)ch * N + n], bias = dt_b[ch], dd = Dp[ch];
    dec_wait_for_previous();
    float dp = 0.f;
#pragma unroll
    for (int i = 0; i < DEC_DT_PREFETCH; i++)
        if (n + 16 * i < R) dp += wdt[i] * xdbl[n + 16 * i];
    if (ch < di)
        for (int r = n + 16 * DEC_DT_PREFETCH; r < R; r += 16) dp += dt_w[(size_t)ch * R + r] * xdbl[r];
    for (int o = 8; o > 0; o >>= 1) dp += __shfl_xor_sync(0xffffffffu, dp, o);
    float contrib = 0.f;
    if (live) {
        const float delta = dec_softplus(dp + bias), uv = u[ch];
        float *s = state + (size_t)ch * N + n;
        const float v = expf(-delta * a) * *s + delta * xdbl[R + n] * uv;
        *s = v;
        contrib = v * xdbl[R + N + n];
    }
    for (int o = 8; o > 0; o >>= 1) contrib += __shfl_xor_sync(0xffffffffu, contrib, o);
    if (live && n == 0) y[ch] = (contrib + dd * u[ch]) * dec_silu(xz[di + ch]);
}

__global__ void dec_exp_kernel(float *out, const float *in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = expf(in[i]);
}

// The states after a prompt of n tokens, from the parallel forward's xz and xdbl of every layer: a thread per
// (channel, layer) walks the tokens, forming u (the conv, taps before the start read 0) and delta (dt_proj's dot
// product, bias, softplus) as it goes, then the recurrence from s = 0. generate.c's host rebuild, on the device.
__global__ void dec_prefill_kernel(float *conv_state, float *ssm_state, const void *const *ptrs, DecodeWeights w,
                                   const DecodeLayerWeights *layers, const float *a_neg, int n) {
    const int di = w.d_inner, N = w.d_state, K = w.d_conv, R = w.dt_rank, nx = R + 2 * N;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x, l = blockIdx.y;
    if (ch >= di) return;
    const __nv_bfloat16 *xz = (const __nv_bfloat16 *)ptrs[l], *xdbl = (const __nv_bfloat16 *)ptrs[w.n_layer + l];
    const DecodeLayerWeights L = layers[l];
    float prev[DEC_MAX_K - 1], cw[DEC_MAX_K], s[DEC_MAX_N], a[DEC_MAX_N];
#pragma unroll
    for (int k = 0; k < DEC_MAX_K; k++) cw[k] = k < K ? L.conv_w[ch * K + k] : 0.f;
#pragma unroll
    for (int k = 0; k < DEC_MAX_K - 1; k++) prev[k] = 0.f;
#pragma unroll
    for (int k = 0; k < DEC_MAX_N; k++) s[k] = 0.f, a[k] = k < N ? a_neg[((size_t)l * di + ch) * N + k] : 0.f;
    const float cb = L.conv_b[ch], dtb = L.dt_b[ch];
    const float *dtw = L.dt_w + (size_t)ch * R;
    for (int t = 0; t < n; t++) {
        const float xi = bf2f(xz[(size_t)t * 2 * di + ch]);
        float acc = cb;  // taps in order, oldest first (prev holds the K-1 before this token); every index is a
                         // compile-time one, so the arrays stay in registers
#pragma unroll
        for (int k = 0; k < DEC_MAX_K - 1; k++)
            if (k < K - 1) acc += cw[k] * prev[k];
#pragma unroll
        for (int k = 0; k < DEC_MAX_K; k++)
            if (k == K - 1) acc += cw[k] * xi;
#pragma unroll
        for (int k = 0; k < DEC_MAX_K - 2; k++)
            if (k < K - 2) prev[k] = prev[k + 1];
#pragma unroll
        for (int k = 0; k < DEC_MAX_K - 1; k++)
            if (k == K - 2) prev[k] = xi;
        const float uv = dec_silu(acc);
        const __nv_bfloat16 *row = xdbl + (size_t)t * nx;
        float dp = 0.f;
        for (int r = 0; r < R; r++) dp += bf2f(row[r]) * dtw[r];
        const float dl = dec_softplus(dp + dtb), du = dl * uv;
#pragma unroll
        for (int k = 0; k < DEC_MAX_N; k++)
            if (k < N) s[k] = expf(-dl * a[k]) * s[k] + du * bf2f(row[R + k]);
    }
    float *cs = conv_state + ((size_t)l * di + ch) * (K - 1);
#pragma unroll
    for (int k = 0; k < DEC_MAX_K - 1; k++)
        if (k < K - 1) cs[k] = prev[k];
    float *ss = ssm_state + ((size_t)l * di + ch) * N;
#pragma unroll
    for (int k = 0; k < DEC_MAX_N; k++)
        if (k < N) ss[k] = s[k];
}

// A kernel launch on the decoder's stream, with programmatic dependent launch unless PM_DECODE_PDL=0.
template <typename... KArgs, typename... Args>
static void dec_launch(CudaDecoder *d, void (*kernel)(KArgs...), dim3 grid, unsigned block, size_t smem,
                       Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = dim3(block), cfg.dynamicSmemBytes = smem, cfg.stream = d->stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = d->use_pdl;
    cfg.attrs = attr, cfg.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&cfg, kernel, (KArgs)args...));
}

// Queues one token's pass for each of the S lanes (tokens read from token_dev) and the copy of their logits to the
// host.
template <int S>
static void dec_enqueue_step_s(CudaDecoder *d) {
    const DecodeWeights *w = &d->w;
    const int dm = w->d_model, di = w->d_inner, N = w->d_state, R = w->dt_rank, K = w->d_conv, nx = R + 2 * N;
    const size_t smem = sizeof(float) * dm * S, conv_lane = (size_t)w->n_layer * di * (K - 1);
    const size_t ssm_lane = (size_t)w->n_layer * di * N, rs = (size_t)S * dm;
    // the residual stream in two buffers (res, res + S dm): a layer reads one while its block 0 writes the other
    for (int l = 0; l < w->n_layer; l++) {
        const DecodeLayerWeights *L = &d->layers[l];
        const float *rin = l == 0 ? w->embedding : d->res + (size_t)(l & 1) * rs;
        dec_launch(d, dec_norm_rows_kernel<S>, pm_ceil_div(2 * di, DEC_ROWS), DEC_ROWS * 32, smem, rin,
                   (const int *)d->token_dev, l == 0 ? (const float *)nullptr : d->h,
                   d->res + (size_t)((l + 1) & 1) * rs, L->norm, w->norm_eps, L->in_proj, 2 * di, dm, d->xz,
                   d->conv_state + (size_t)l * di * (K - 1), conv_lane, L->conv_w, L->conv_b, d->u, di, K);
        dec_launch(d, dec_long_rows_kernel<S>, nx, 256, 0, L->x_proj, (const float *)d->u, d->xdbl, di);
        dec_launch(d, dec_ssm_kernel, dim3(pm_ceil_div((size_t)di * 16, 256), S), 256, 0,
                   d->ssm_state + (size_t)l * di * N, ssm_lane, (const float *)d->a_neg + (size_t)l * di * N, L->dt_w,
                   L->dt_b, (const float *)d->xdbl, (const float *)d->u, (const float *)d->xz, L->D, d->y, di, N, R);
        dec_launch(d, dec_rows_kernel<S>, pm_ceil_div(dm, DEC_ROWS), DEC_ROWS * 32, 0, L->out_proj,
                   (const float *)d->y, d->h, dm, di);
    }
    const int L = w->n_layer;
    dec_launch(d, dec_norm_rows_kernel<S>, pm_ceil_div(w->vocab_pad, DEC_ROWS), DEC_ROWS * 32, smem,
               L == 0 ? w->embedding : (const float *)d->res + (size_t)(L & 1) * rs, (const int *)d->token_dev,
               L == 0 ? (const float *)nullptr : d->h, (float *)nullptr, w->norm_f, w->norm_eps, w->embedding,
               w->vocab_pad, dm, d->logits_dev, (float *)nullptr, (size_t)0, (const float *)nullptr,
               (const float *)nullptr, (float *)nullptr, di, K);
    cudaCheck(cudaMemcpyAsync(d->logits, d->logits_dev, sizeof(float) * w->vocab_pad * S, cudaMemcpyDeviceToHost,
                              d->stream));
}

// F<S>(args) for the decoder's lane count (1 .. DEC_MAX_LANES)
#define DEC_BY_LANES(S_, F, ...)          \
    switch (S_) {                         \
        case 1: F<1>(__VA_ARGS__); break; \
        case 2: F<2>(__VA_ARGS__); break; \
        case 3: F<3>(__VA_ARGS__); break; \
        case 4: F<4>(__VA_ARGS__); break; \
        case 5: F<5>(__VA_ARGS__); break; \
        case 6: F<6>(__VA_ARGS__); break; \
        case 7: F<7>(__VA_ARGS__); break; \
        default: F<8>(__VA_ARGS__); break; \
    }
static_assert(DEC_MAX_LANES == 8, "DEC_BY_LANES");
static void dec_enqueue_step(CudaDecoder *d) { DEC_BY_LANES(d->S, dec_enqueue_step_s, d); }
// kernel 1's shared memory (lanes x d_model floats) where it is over the default 48 KB
template <int S>
static void dec_smem_optin(int bytes) {
    cudaCheck(cudaFuncSetAttribute(dec_norm_rows_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

extern "C" CudaDecoder *cuda_decoder_create(const DecodeWeights *w, int lanes) {
    if (lanes < 1 || lanes > DEC_MAX_LANES) {
        pm_error("GPU decoding takes 1 to %d lanes (asked for %d)", DEC_MAX_LANES, lanes);
        return NULL;
    }
    // kernel 1 holds every lane's normed vector in shared memory
    const size_t smem = sizeof(float) * (size_t)w->d_model * lanes;
    int dev = 0, smem_max = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (smem + 32 * DEC_MAX_LANES * sizeof(float) > (size_t)smem_max) {
        pm_error("GPU decoding: %d lanes of d_model %d need %zu bytes of shared memory a block (the GPU has %d)", lanes,
                 w->d_model, smem, smem_max);
        return NULL;
    }
    if (smem > 48 * 1024) DEC_BY_LANES(lanes, dec_smem_optin, (int)smem);
    if (w->d_state < 1 || w->d_state > DEC_MAX_N || w->d_conv < 1 || w->d_conv > DEC_MAX_K || w->d_model % 4) {
        pm_error("GPU decoding supports d_state <= %d, d_conv <= %d and d_model a multiple of 4 (the model has %d, "
                 "%d and %d)", DEC_MAX_N, DEC_MAX_K, w->d_state, w->d_conv, w->d_model);
        return NULL;
    }
    const void *mats[] = {w->embedding};  // the 16-byte loads need aligned rows (the flat layout gives them)
    bool aligned = pm_is_aligned(mats[0], 16);
    for (int l = 0; l < w->n_layer; l++)
        aligned = aligned && pm_is_aligned(w->layers[l].in_proj, 16) && pm_is_aligned(w->layers[l].x_proj, 16) &&
                  pm_is_aligned(w->layers[l].out_proj, 16);
    if (!aligned) {
        pm_error("GPU decoding: a weight matrix is not 16-byte aligned");
        return NULL;
    }
    CudaDecoder *d = (CudaDecoder *)pm_calloc(1, sizeof *d);
    d->w = *w;
    d->S = lanes;
    d->layers = (DecodeLayerWeights *)pm_malloc(sizeof(DecodeLayerWeights) * (w->n_layer ? w->n_layer : 1));
    memcpy(d->layers, w->layers, sizeof(DecodeLayerWeights) * w->n_layer);
    d->w.layers = d->layers;
    const size_t L = w->n_layer, di = w->d_inner, N = w->d_state, K = w->d_conv, dm = w->d_model, S = lanes;
    const size_t nx = w->dt_rank + 2 * N;
    // (each piece rounded up to 4 floats, so every one starts 16-byte aligned; so does each lane's row of the
    // activations, as d_model and the vectors the kernels read 16 bytes at a time, d_inner, are multiples of 4)
    const size_t sizes[] = {S * L * di * (K - 1), S * L * di * N, L * di * N, 2 * S * dm, S * dm, S * 2 * di, S * di,
                            S * di, S * nx, S * (size_t)w->vocab_pad};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += (sizes[i] + 3) / 4 * 4;
    cudaCheck(cudaMalloc(&d->arena, total * sizeof(float)));
    cudaCheck(cudaMemset(d->arena, 0, total * sizeof(float)));
    float **dst[] = {&d->conv_state, &d->ssm_state, &d->a_neg, &d->res, &d->h, &d->xz, &d->u, &d->y, &d->xdbl, &d->logits_dev};
    float *p = d->arena;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) *dst[i] = p, p += (sizes[i] + 3) / 4 * 4;
    cudaCheck(cudaMalloc(&d->token_dev, sizeof(int) * S));
    cudaCheck(cudaMalloc(&d->ptrs_dev, sizeof(void *) * 2 * (L ? L : 1)));
    cudaCheck(cudaMalloc(&d->layers_dev, sizeof(DecodeLayerWeights) * (L ? L : 1)));
    cudaCheck(cudaMemcpy(d->layers_dev, d->layers, sizeof(DecodeLayerWeights) * L, cudaMemcpyHostToDevice));
    cudaCheck(cudaMallocHost(&d->token_host, sizeof(int) * S));
    cudaCheck(cudaMallocHost(&d->logits, sizeof(float) * w->vocab_pad * S));
    cudaCheck(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    for (size_t l = 0; l < L; l++) {  // a_neg = exp(A_log), a layer at a time (the layers' tensors are apart)
        dec_exp_kernel<<<pm_ceil_div(di * N, 256), 256, 0, d->stream>>>(d->a_neg + l * di * N, d->layers[l].A_log,
                                                                       di * N);
        cudaLaunchCheck();
    }
    const char *g = getenv("PM_DECODE_GRAPH"), *pdl = getenv("PM_DECODE_PDL");
    d->use_graph = !(g && !strcmp(g, "0"));
    d->use_pdl = !(pdl && !strcmp(pdl, "0"));
    cudaCheck(cudaStreamSynchronize(d->stream));
    return d;
}

extern "C" void cuda_decoder_reset(CudaDecoder *d) {
    const size_t L = d->w.n_layer, di = d->w.d_inner, S = d->S;
    cudaCheck(cudaMemsetAsync(d->conv_state, 0, sizeof(float) * S * L * di * (d->w.d_conv - 1), d->stream));
    cudaCheck(cudaMemsetAsync(d->ssm_state, 0, sizeof(float) * S * L * di * d->w.d_state, d->stream));
    cudaCheck(cudaStreamSynchronize(d->stream));
}

// The states (conv then SSM: one range of the arena, with the conv part's rounding) copied aside, and back.
static size_t dec_state_floats(const CudaDecoder *d) {
    return (size_t)(d->ssm_state - d->conv_state) + (size_t)d->S * d->w.n_layer * d->w.d_inner * d->w.d_state;
}

extern "C" int cuda_decoder_lanes(const CudaDecoder *d) { return d->S; }

extern "C" void cuda_decoder_fill_lanes(CudaDecoder *d) {
    const size_t L = d->w.n_layer, di = d->w.d_inner;
    const size_t conv_lane = L * di * (d->w.d_conv - 1), ssm_lane = L * di * d->w.d_state;
    for (int s = 1; s < d->S; s++) {
        cudaCheck(cudaMemcpyAsync(d->conv_state + s * conv_lane, d->conv_state, conv_lane * sizeof(float),
                                  cudaMemcpyDeviceToDevice, d->stream));
        cudaCheck(cudaMemcpyAsync(d->ssm_state + s * ssm_lane, d->ssm_state, ssm_lane * sizeof(float),
                                  cudaMemcpyDeviceToDevice, d->stream));
    }
}

extern "C" void cuda_decoder_save(CudaDecoder *d) {
    if (!d->saved) cudaCheck(cudaMalloc(&d->saved, dec_state_floats(d) * sizeof(float)));
    cudaCheck(cudaMemcpyAsync(d->saved, d->conv_state, dec_state_floats(d) * sizeof(float), cudaMemcpyDeviceToDevice,
                              d->stream));
}

extern "C" void cuda_decoder_restore(CudaDecoder *d) {
    if (!d->saved) pm_die("cuda_decoder_restore: nothing saved");
    cudaCheck(cudaMemcpyAsync(d->conv_state, d->saved, dec_state_floats(d) * sizeof(float), cudaMemcpyDeviceToDevice,
                              d->stream));
}

extern "C" const float *cuda_decoder_step_lanes(CudaDecoder *d, const int *tokens) {
    for (int s = 0; s < d->S; s++) {
        if (tokens[s] < 0 || tokens[s] >= d->w.vocab_pad)
            pm_die("cuda_decoder_step: token %d outside [0, %d)", tokens[s], d->w.vocab_pad);
        d->token_host[s] = tokens[s];
    }
    cudaCheck(cudaMemcpyAsync(d->token_dev, d->token_host, sizeof(int) * d->S, cudaMemcpyHostToDevice, d->stream));
    // The first token runs eagerly; the second captures the pass, every later one replays it.
    if (d->use_graph && d->steps >= 1 && !d->exec) {
        cudaCheck(cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal));
        dec_enqueue_step(d);
        cudaCheck(cudaStreamEndCapture(d->stream, &d->graph));
        cudaCheck(cudaGraphInstantiate(&d->exec, d->graph, 0));
    }
    if (d->exec) cudaCheck(cudaGraphLaunch(d->exec, d->stream));
    else dec_enqueue_step(d);
    cudaCheck(cudaStreamSynchronize(d->stream));
    d->steps++;
    return d->logits;
}

extern "C" const float *cuda_decoder_step(CudaDecoder *d, int token) {
    int t[DEC_MAX_LANES];
    for (int s = 0; s < d->S; s++) t[s] = token;
    return cuda_decoder_step_lanes(d, t);
}

extern "C" const float *cuda_decoder_prefill(CudaDecoder *d, const void *const *acts, const float *xf_last, int n) {
    const DecodeWeights *w = &d->w;
    const int L = w->n_layer, dm = w->d_model;
    if (n < 1) pm_die("cuda_decoder_prefill: empty prompt");
    if (L > 0) {
        cudaCheck(cudaMemcpyAsync(d->ptrs_dev, acts, sizeof(void *) * 2 * L, cudaMemcpyHostToDevice, d->stream));
        dec_prefill_kernel<<<dim3(pm_ceil_div(w->d_inner, 64), L), 64, 0, d->stream>>>(
            d->conv_state, d->ssm_state, d->ptrs_dev, *w, d->layers_dev, d->a_neg, n);
        cudaLaunchCheck();
    }
    dec_rows_kernel<1><<<pm_ceil_div(w->vocab_pad, DEC_ROWS), DEC_ROWS * 32, 0, d->stream>>>(
        w->embedding, xf_last, d->logits_dev, w->vocab_pad, dm);
    cudaLaunchCheck();
    cudaCheck(cudaMemcpyAsync(d->logits, d->logits_dev, sizeof(float) * w->vocab_pad, cudaMemcpyDeviceToHost,
                              d->stream));
    cudaCheck(cudaStreamSynchronize(d->stream));  // (acts is read by the copy before the caller may free it)
    return d->logits;
}

extern "C" void cuda_decoder_free(CudaDecoder *d) {
    if (!d) return;
    cudaCheck(cudaStreamSynchronize(d->stream));
    if (d->exec) cudaGraphExecDestroy(d->exec);
    if (d->graph) cudaGraphDestroy(d->graph);
    cudaStreamDestroy(d->stream);
    cudaFree(d->arena), cudaFree(d->saved), cudaFree(d->token_dev), cudaFree(d->ptrs_dev), cudaFree(d->layers_dev);
    cudaFreeHost(d->token_host), cudaFreeHost(d->logits);
    free(d->layers);
    free(d);
}
