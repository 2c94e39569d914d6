// backend_cuda.cu — the CUDA backend (backend.h) in bf16 mixed precision: ACT = bf16, F32 = fp32.
// GEMMs go through cuBLASLt (bf16 operands, fp32 accumulation); everything else is a small kernel here,
// except the selective scan (cuda_scan.cu). All work is queued on one stream (g_main), except what the model
// brackets with side_begin/side_end (the backward's weight gradients), which goes to a second one (g_side);
// upload/download synchronize.
//
// Determinism: every reduction here runs in a fixed order (per-block partials, then one ordered pass), so
// results repeat bit for bit run to run. Only two ops differ by mode: embedding_bwd (atomics when not
// deterministic, a sorted segmented sum when deterministic) and scan_bwd (the scan kernels' own flag).
//
// Workspaces (sort buffers, partial sums, classifier logits, scan workspace) are allocated lazily on first
// use and only grow, so after the first training step a step allocates nothing.
#include <cooperative_groups.h>
#include <cub/device/device_radix_sort.cuh>
#include <math.h>
#include <string.h>

#include <cublas_v2.h>

#include "cuda_carry.h"
#include "cuda_common.h"
#include "cuda_conv.h"
#include "cuda_scan.h"

extern "C" {
#include "backend.h"
#include "util.h"
}

typedef __nv_bfloat16 bf16;

// ---------------------------------------------------------------------------------------------------------
// global state

static cudaStream_t g_main;    // the compute stream
static cudaStream_t g_side;    // side_begin .. side_end (created on first use)
static cudaStream_t g_stream;  // where ops are queued now: g_main, or g_side inside side_begin .. side_end
static cublasLtHandle_t g_lt;
static void *g_lt_ws, *g_lt_ws_side;  // cuBLASLt workspaces of g_main and g_side (GEMMs on both may run at once)
// the workspace of the stream ops are queued on now
static void *lt_ws(void) { return g_stream == g_side ? g_lt_ws_side : g_lt_ws; }
static int side_enabled(void);  // PM_SIDE_STREAM (the side stream's section)
static const size_t LT_WS_BYTES = 32u << 20;

// A lazily grown device buffer.
typedef struct {
    void *p;
    size_t bytes;
} Scratch;

// What a scratch grows to for a request of `bytes`: a little headroom so near-equal sizes don't reallocate.
static size_t scratch_grown(size_t bytes) { return bytes + bytes / 8; }

static void *scratch_get(Scratch *s, size_t bytes) {
    if (bytes > s->bytes) {
        if (s->p) cudaCheck(cudaFree(s->p));  // cudaFree synchronizes: no kernel still uses the old one
        size_t b = scratch_grown(bytes);
        cudaCheck(cudaMalloc(&s->p, b));
        s->bytes = b;
    }
    return s->p;
}

// s_big holds the classifier's logits chunk and, later in the step, the scan backward's workspace: both are
// used only inside one op on the one stream, never at the same time, so sharing saves the smaller of the two
// (~200 MB of scan checkpoints) from the peak.
static Scratch s_sort, s_norm_part, s_conv_part, s_colsum_part, s_big, s_sumsq, s_adam;

// ---------------------------------------------------------------------------------------------------------
// deterministic block reductions (fixed tree: warp shuffles, then warp sums added in warp order)

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block; every thread gets the result. `sh` holds >= 32 T. Blocks of a multiple of 32 threads.
template <typename T>
__device__ T block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // sh may still be read from a previous call
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    T t = 0;
    for (int i = 0; i < nw; i++) t += sh[i];
    return t;
}

// Backend.grads_write: while set, the ops' parameter gradients are written (=), not added (+=), but for
// embedding_bwd's and the classifier's dwte after its first chunk. Read when an op is queued.
static int g_grads_write;
static void cu_grads_write(int on) { g_grads_write = on; }

// ---------------------------------------------------------------------------------------------------------
// the reduction queue (Backend.defer_reductions)
//
// Why: the norm, conv and scan backwards each end in a small column reduction of partial rows into parameter
// gradients (24 to 864 blocks, 1.5-6 MB): three launches a layer, ~13 us of a 130m layer on the critical path
// (ninth session's ncu table: 6 + 3.5 + 3.3 us) for ~2 us of bytes. Their partial rows go to slices of one ring
// buffer and their reductions to a batch (PmColsumBatch, cuda_common.h). Deferring (the model's backward
// without a hook), the batch runs as one launch when the ring or the batch is full and when deferral ends;
// otherwise each reduction runs at once, a batch of one. Either way the same kernel adds the same rows in the
// same order: the same bits. Everything here is on the main stream, so a slice is reused only after the launch
// that read it; an op queued on the side stream reduces at once from its own scratch instead.
// The ring holds RED_RING_FACTOR times the largest request (the conv's partial rows): 31 MB at 130m B8, 42 MB
// at 370m B8 and 1.4b B4, 4-5 layers' reductions (6 launches a 130m step instead of 73, 11 at 370m and 1.4b).
#define RED_RING_FACTOR 8
static Scratch s_red_ring;
static size_t g_red_used;       // bytes of the ring handed out since the last launch
static int g_red_defer;         // Backend.defer_reductions
static PmColsumBatch g_red;     // the queued jobs
static int g_red_launches;      // for tests: launches of queued jobs
static int g_red_batch_max = PM_COLSUM_MAXJOBS;  // jobs a launch takes (red_read_batch_max)

// Jobs a launch takes: PM_COLSUM_MAXJOBS, or fewer with PM_REDUCTION_BATCH (tests: launches in the middle of a
// backward, and slices reused after them). Read when deferral begins, not per queued job.
static void red_read_batch_max(void) {
    const char *e = getenv("PM_REDUCTION_BATCH");
    const int n = e ? atoi(e) : 0;
    g_red_batch_max = n >= 1 && n < PM_COLSUM_MAXJOBS ? n : PM_COLSUM_MAXJOBS;
}
static size_t red_align(size_t b) { return (b + 255) & ~(size_t)255; }
static size_t red_ring_bytes(size_t largest) { return RED_RING_FACTOR * red_align(largest); }

static void red_flush(void) {
    if (g_red.njobs) g_red_launches++;
    pm_colsum_batch(&g_red, g_main);
    g_red_used = 0;
}
// Where an op's partial rows of `bytes` go: a slice of the ring (main stream), else *own (side stream; NULL: the
// op's own workspace, where it reduces them itself).
static float *red_part(size_t bytes, Scratch *own) {
    if (g_stream != g_main) return own ? (float *)scratch_get(own, bytes) : NULL;
    const size_t b = red_align(bytes);
    if (red_ring_bytes(b) > s_red_ring.bytes) {
        red_flush();  // (the jobs queued so far read the old ring; growing frees it)
        if (s_red_ring.p) cudaCheck(cudaFree(s_red_ring.p));
        s_red_ring.bytes = red_ring_bytes(b);
        cudaCheck(cudaMalloc(&s_red_ring.p, s_red_ring.bytes));
    }
    if (g_red_used + b > s_red_ring.bytes || g_red.njobs >= g_red_batch_max) red_flush();
    float *p = (float *)((char *)s_red_ring.p + g_red_used);
    g_red_used += b;
    return p;
}
// The reduction of partial rows red_part gave: queued while deferring, else run now.
static void red_job(const PmColsumJob &jb) {
    if (g_stream != g_main) return pm_colsum_job(jb, g_stream);
    pm_colsum_add(&g_red, jb);
    if (!g_red_defer) red_flush();
}
// Column sums of G partial rows (red_part) into one parameter gradient of W values.
static void colsum_final(float *dst, const float *part, int G, int W) {
    red_job(PmColsumJob{dst, NULL, NULL, part, G, W, W, 0, !g_grads_write, PM_COLSUM_SPLIT});
}
static void cu_defer_reductions(int on) {
    g_red_defer = on;
    if (on) red_read_batch_max();
    else red_flush();
}
extern "C" int backend_cuda_reduction_launches(void) { return g_red_launches; }
extern "C" int backend_cuda_device_info(int *sms) {  // what the kernels' plans see (pm_cuda_device)
    const PmCudaDevice *d = pm_cuda_device();
    *sms = d->sms;
    return d->cc_major * 10 + d->cc_minor;
}

extern "C" int backend_cuda_device_uuid(char *buf, size_t n) {
    int dev = 0;
    cudaDeviceProp prop;
    if (n) buf[0] = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();  // (not sticky: clear it so the next CUDA call does not report it)
        return -1;
    }
    const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return 0;
}

// ---------------------------------------------------------------------------------------------------------
// memory

static void *cu_alloc(size_t bytes) {
    void *p = NULL;
    cudaCheck(cudaMalloc(&p, bytes ? bytes : 1));
    cudaCheck(cudaMemsetAsync(p, 0, bytes ? bytes : 1, g_stream));
    return p;
}
static void cu_free(void *p) {
    if (p) cudaCheck(cudaFree(p));
}
static void cu_upload(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_stream));
    cudaCheck(cudaStreamSynchronize(g_stream));
}
static void cu_download(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_stream));
    cudaCheck(cudaStreamSynchronize(g_stream));
}
static void cu_memzero(void *p, size_t bytes) { cudaCheck(cudaMemsetAsync(p, 0, bytes, g_stream)); }
static void cu_synchronize(void) {
    cudaCheck(cudaStreamSynchronize(g_main));
    if (g_side) cudaCheck(cudaStreamSynchronize(g_side));
}

// Bench hooks (backend.h, optional part). Events come from a free list that only grows, so after the first
// profiled step recording one creates nothing. They are recorded on g_main, where every kernel, cuBLASLt
// and cuBLAS call and CUB sort of this backend (and the scan's kernels) is queued outside side_begin ..
// side_end, so a pair brackets exactly the work enqueued between the two calls (the model queues nothing on the
// side stream while it runs profiling hooks).
static cudaEvent_t *g_ev_free;
static int g_ev_nfree, g_ev_cap;

static void *cu_event_record(void) {
    cudaEvent_t e;
    if (g_ev_nfree > 0) e = g_ev_free[--g_ev_nfree];
    else cudaCheck(cudaEventCreate(&e));  // default flags: timing enabled
    cudaCheck(cudaEventRecord(e, g_main));
    return (void *)e;
}
static float cu_event_elapsed_ms(void *a, void *b) {
    float ms = 0.0f;
    cudaCheck(cudaEventSynchronize((cudaEvent_t)b));  // a was recorded before b on the same stream
    cudaCheck(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ms;
}
static void cu_event_release(void *e) {
    if (!e) return;
    if (g_ev_nfree == g_ev_cap) {
        g_ev_cap = g_ev_cap ? 2 * g_ev_cap : 256;
        g_ev_free = (cudaEvent_t *)pm_realloc(g_ev_free, sizeof(cudaEvent_t) * g_ev_cap);
    }
    g_ev_free[g_ev_nfree++] = (cudaEvent_t)e;
}
// Device-to-device copy on the stream (asynchronous, like every op: bench synchronizes around it).
static void cu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_stream));
}

// Backend.spin: 8 independent chains a thread, 2048 threads an SM (8 blocks of 256), the step loop unrolled so
// that its own instructions take a few percent of the issue slots. FMA: fp32 multiply-adds on the CUDA cores.
// EXP: the scan's ex2_approx on the special-function unit (2^-x keeps x in [0.5, 1]).
// The sink is written only if the chains sum to -1, which they never do; the compiler cannot know that.
__device__ float g_spin_sink;
template <int KIND>
__global__ void __launch_bounds__(256) spin_kernel(int steps) {
    float x[8];
#pragma unroll
    for (int j = 0; j < 8; j++) x[j] = 0.5f + 0.01f * j + 1e-7f * threadIdx.x;
#pragma unroll 16
    for (int i = 0; i < steps; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (KIND == PM_SPIN_FMA)
                x[j] = fmaf(x[j], 0.9999f, 0.0001f);
            else
                x[j] = ex2_approx(-x[j]);
        }
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) s += x[j];
    if (s == -1.f) g_spin_sink = s;
}
static double cu_spin(int kind, double n) {
    const int blocks = pm_cuda_device()->sms * 8, threads = 256;
    const double per = (kind == PM_SPIN_FMA ? 2.0 : 1.0) * 8 * blocks * threads;  // operations a step
    const double s = n / per;
    const int steps = s < 16 ? 16 : s > 1e9 ? 1000000000 : (int)s;
    if (kind == PM_SPIN_FMA)
        spin_kernel<PM_SPIN_FMA><<<blocks, threads, 0, g_stream>>>(steps);
    else
        spin_kernel<PM_SPIN_EXP><<<blocks, threads, 0, g_stream>>>(steps);
    cudaCheck(cudaGetLastError());
    return per * steps;
}

static int cu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? 0 : -1;
}

__global__ void f32_to_bf16_kernel(bf16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = f2bf(src[i]);
}
__global__ void bf16_to_f32_kernel(float *dst, const bf16 *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = bf2f(src[i]);
}
static unsigned elementwise_grid(size_t n) {
    size_t g = (n + 255) / 256, cap = (size_t)pm_cuda_sm_count() * 32;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}
__device__ __forceinline__ uint2 f4_to_bf16x4(float4 f) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(f.x, f.y), hi = __floats2bfloat162_rn(f.z, f.w);
    uint2 u;
    memcpy(&u.x, &lo, 4);
    memcpy(&u.y, &hi, 4);
    return u;
}

// 8 values a thread and step: two 16-byte loads, one 16-byte store (src 16- and dst 16-byte aligned; n8 pieces of
// 8). The same rounding as f32_to_bf16_kernel (round to nearest even), so the same bits. With Model.cast_weights
// the backward and forward cast each layer's weights with this (~160 MB a 1.4b layer), where the scalar kernel's
// 2-byte stores ran well below the copy rate.
__global__ void f32_to_bf16_x8_kernel(uint4 *dst, const float4 *src, size_t n8) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        const float4 a = src[2 * i], b = src[2 * i + 1];
        const uint2 lo = f4_to_bf16x4(a), hi = f4_to_bf16x4(b);
        dst[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
}
static void cu_f32_to_act(void *dst, const void *src, size_t n) {
    if (n == 0) return;
    size_t n8 = (uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0 ? n / 8 : 0;
    if (n8) {
        f32_to_bf16_x8_kernel<<<elementwise_grid(n8), 256, 0, g_stream>>>((uint4 *)dst, (const float4 *)src, n8);
        cudaLaunchCheck();
    }
    if (n > n8 * 8)  // the tail, or everything where the pointers are not aligned
        f32_to_bf16_kernel<<<elementwise_grid(n - n8 * 8), 256, 0, g_stream>>>((bf16 *)dst + n8 * 8,
                                                                              (const float *)src + n8 * 8, n - n8 * 8);
    cudaLaunchCheck();
}
static void cu_act_to_f32(void *dst, const void *src, size_t n) {
    if (n == 0) return;
    bf16_to_f32_kernel<<<elementwise_grid(n), 256, 0, g_stream>>>((float *)dst, (const bf16 *)src, n);
    cudaLaunchCheck();
}

// ---------------------------------------------------------------------------------------------------------
// embedding

// out (M, C) F32 = wte[tokens]; one block per token.
__global__ void embedding_fwd_kernel(float *out, const int32_t *tokens, const bf16 *wte, int C) {
    int m = blockIdx.x;
    const bf16 *row = wte + (size_t)tokens[m] * C;
    float *o = out + (size_t)m * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = bf2f(row[c]);
}
static void cu_embedding_fwd(void *out, const int32_t *tokens, const void *wte, int M, int C) {
    if (M == 0) return;
    embedding_fwd_kernel<<<M, 256, 0, g_stream>>>((float *)out, tokens, (const bf16 *)wte, C);
    cudaLaunchCheck();
}

// Non-deterministic: each token adds its row with atomics.
__global__ void embedding_bwd_atomic_kernel(float *dwte, const float *dout, const int32_t *tokens, int C) {
    int m = blockIdx.x;
    float *row = dwte + (size_t)tokens[m] * C;
    const float *d = dout + (size_t)m * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&row[c], d[c]);
}

__global__ void iota_kernel(int32_t *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = i;
}

// Deterministic: tokens sorted (stable, so equal tokens keep increasing token index). The block at the
// first sorted slot of each distinct token sums that token's rows in that order and adds once.
__global__ void embedding_bwd_sorted_kernel(float *dwte, const float *dout, const int32_t *keys,
                                            const int32_t *idx, int M, int C) {
    int i = blockIdx.x;
    int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return;
    float *row = dwte + (size_t)tok * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = 0.0f;
        for (int j = i; j < M && keys[j] == tok; j++) s += dout[(size_t)idx[j] * C + c];
        row[c] += s;
    }
}

static void embedding_bwd_impl(void *dwte, const void *dout, const int32_t *tokens, int M, int C, int V,
                               int deterministic) {
    if (M == 0) return;
    if (!deterministic) {
        embedding_bwd_atomic_kernel<<<M, 256, 0, g_stream>>>((float *)dwte, (const float *)dout, tokens, C);
        cudaLaunchCheck();
        return;
    }
    int bits = 1;
    while (bits < 31 && (1 << bits) < V) bits++;
    size_t temp_bytes = 0;
    cudaCheck(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const int32_t *)NULL, (int32_t *)NULL,
                                              (const int32_t *)NULL, (int32_t *)NULL, M, 0, bits, g_stream));
    size_t arr = ((size_t)M * sizeof(int32_t) + 255) & ~(size_t)255;
    char *ws = (char *)scratch_get(&s_sort, 3 * arr + temp_bytes);
    int32_t *keys = (int32_t *)ws, *idx_in = (int32_t *)(ws + arr), *idx = (int32_t *)(ws + 2 * arr);
    iota_kernel<<<pm_ceil_div(M, 256), 256, 0, g_stream>>>(idx_in, M);
    cudaLaunchCheck();
    cudaCheck(cub::DeviceRadixSort::SortPairs(ws + 3 * arr, temp_bytes, tokens, keys, idx_in, idx, M, 0, bits,
                                              g_stream));
    embedding_bwd_sorted_kernel<<<M, 256, 0, g_stream>>>((float *)dwte, (const float *)dout, keys, idx, M, C);
    cudaLaunchCheck();
}
static void cu_embedding_bwd_det(void *dwte, const void *dout, const int32_t *tokens, int M, int C, int V) {
    embedding_bwd_impl(dwte, dout, tokens, M, C, V, 1);
}
static void cu_embedding_bwd_fast(void *dwte, const void *dout, const int32_t *tokens, int M, int C, int V) {
    embedding_bwd_impl(dwte, dout, tokens, M, C, V, 0);
}

// ---------------------------------------------------------------------------------------------------------
// 16-byte vector helpers: four fp32 values travel as a float4, four bf16 values as a uint2 (8 bytes).

__device__ __forceinline__ float4 bf16x4_to_f4(uint2 u) {
    __nv_bfloat162 lo, hi;
    memcpy(&lo, &u.x, 4);
    memcpy(&hi, &u.y, 4);
    float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
    return make_float4(a.x, a.y, b.x, b.y);
}

// ---------------------------------------------------------------------------------------------------------
// residual add + RMSNorm

// One warp per token (NORM_WARPS tokens per block; warp shuffles only, no block barriers). Pass 1 reads
// res_in (+ h), writes res_out and sums squares; pass 2 re-reads res_out (this lane's own writes, from L1/L2)
// to write xn. res_out may alias res_in: each element is read and then written by the same lane. When it
// does and h is NULL (the backward's recompute of xn), res_out already holds the sum, so pass 1 only reads.
#define NORM_WARPS 8
__global__ void __launch_bounds__(NORM_WARPS * 32) add_rmsnorm_fwd_kernel(float *res_out, bf16 *xn, float *rstd,
                                                                           const float *res_in, const bf16 *h,
                                                                           const float *w, int M, int C, float eps,
                                                                           int write_res) {
    int m = blockIdx.x * NORM_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (m >= M) return;
    size_t base = (size_t)m * C;
    float ss = 0.0f;
#pragma unroll 4
    for (int c = lane; c < C; c += 32) {
        float v = res_in[base + c];
        if (h) v += bf2f(h[base + c]);
        if (write_res) res_out[base + c] = v;
        ss += v * v;
    }
    ss = warp_sum(ss);
    float r = rsqrtf(ss / C + eps);
#pragma unroll 4
    for (int c = lane; c < C; c += 32) xn[base + c] = f2bf(res_out[base + c] * r * w[c]);
    if (lane == 0) rstd[m] = r;
}
// The same with the token's row held in registers (C % 4 == 0, C <= 128 * NV, 16-byte aligned rows): lane l
// owns float4 columns l, l + 32, ... (NV of them, the last ones idle when C < 128 * NV). Every load of the row
// (res_in as float4, h as bf16x4) is issued before the first use — NV * 24 bytes in flight per lane where the
// scalar kernel had one 4-byte load per dependent step — and pass 2 reads nothing back. w is __restrict__ (only
// read, never aliased), so its loads need not wait behind the stores before them.
template <int NV>
__global__ void __launch_bounds__(NORM_WARPS * 32) add_rmsnorm_fwd4_kernel(float4 *res_out, uint2 *xn, float *rstd,
                                                                            const float4 *res_in, const uint2 *h,
                                                                            const float4 *__restrict__ w, int M,
                                                                            int C4, float eps, int write_res) {
    int m = blockIdx.x * NORM_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (m >= M) return;
    size_t base = (size_t)m * C4;
    float4 x[NV];
    uint2 hv[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane + 32 * i;
        if (c < C4) {
            x[i] = res_in[base + c];
            if (h) hv[i] = h[base + c];
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane + 32 * i;
        if (c < C4) {
            if (h) {
                float4 f = bf16x4_to_f4(hv[i]);
                x[i].x += f.x, x[i].y += f.y, x[i].z += f.z, x[i].w += f.w;
            }
            if (write_res) res_out[base + c] = x[i];
            ss += x[i].x * x[i].x + x[i].y * x[i].y + x[i].z * x[i].z + x[i].w * x[i].w;
        }
    }
    ss = warp_sum(ss);
    float r = rsqrtf(ss / (4 * C4) + eps);
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane + 32 * i;
        if (c < C4) {
            float4 wv = w[c];
            xn[base + c] = f4_to_bf16x4(make_float4(x[i].x * r * wv.x, x[i].y * r * wv.y, x[i].z * r * wv.z,
                                                    x[i].w * r * wv.w));
        }
    }
    if (lane == 0) rstd[m] = r;
}

// NV for the row-in-registers norm kernels: float4 columns per lane, C/128 rounded up to an instantiated width
// (0: none fits, take the scalar kernels). Widths cover the presets: 128 (tiny) .. 2560 (2.8b) in the forward;
// the backward holds 2.5x the registers per column and stops at 2048 (1.4b; NV 20 would need > 255).
static int norm_nv(int C, int max_nv) {
    static const int widths[] = {2, 4, 6, 8, 12, 16, 20};
    int need = pm_ceil_div(C, 128);
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (need <= widths[i] && widths[i] <= max_nv) return widths[i];
    return 0;
}
#define NORM_NV_LAUNCH(N, KERNEL, GRID, BLOCK, SMEM, ...) KERNEL<N><<<GRID, BLOCK, SMEM, g_stream>>>(__VA_ARGS__)
#define NORM_NV_CASE(N, KERNEL, ...) \
    case N: NORM_NV_LAUNCH(N, KERNEL, __VA_ARGS__); break;
#define NORM_NV_DISPATCH(NV, KERNEL, ...)                                   \
    switch (NV) {                                                           \
        NORM_NV_CASE(2, KERNEL, __VA_ARGS__)                                \
        NORM_NV_CASE(4, KERNEL, __VA_ARGS__)                                \
        NORM_NV_CASE(6, KERNEL, __VA_ARGS__)                                \
        NORM_NV_CASE(8, KERNEL, __VA_ARGS__)                                \
        NORM_NV_CASE(12, KERNEL, __VA_ARGS__)                               \
        NORM_NV_CASE(16, KERNEL, __VA_ARGS__)                               \
        default: pm_die("internal error: norm width %d", NV);               \
    }
#define NORM_NV_DISPATCH20(NV, KERNEL, ...)                                 \
    if (NV == 20) {                                                         \
        NORM_NV_LAUNCH(20, KERNEL, __VA_ARGS__);                            \
    } else {                                                                \
        NORM_NV_DISPATCH(NV, KERNEL, __VA_ARGS__)                           \
    }

static void cu_add_rmsnorm_fwd(void *res_out, void *xn, void *rstd, const void *res_in, const void *h,
                               const void *w, int M, int C, float eps) {
    if (M == 0) return;
    int write_res = !(res_out == res_in && h == NULL);
    int nv = C % 4 == 0 ? norm_nv(C, 20) : 0;
    if (nv && pm_is_aligned(res_out, 16) && pm_is_aligned(res_in, 16) && pm_is_aligned(w, 16) &&
        pm_is_aligned(xn, 8) && pm_is_aligned(h, 8)) {
        NORM_NV_DISPATCH20(nv, add_rmsnorm_fwd4_kernel, pm_ceil_div(M, NORM_WARPS), NORM_WARPS * 32, 0,
                         (float4 *)res_out, (uint2 *)xn, (float *)rstd, (const float4 *)res_in, (const uint2 *)h,
                         (const float4 *)w, M, C / 4, eps, write_res);
        cudaLaunchCheck();
        return;
    }
    add_rmsnorm_fwd_kernel<<<pm_ceil_div(M, NORM_WARPS), NORM_WARPS * 32, 0, g_stream>>>(
        (float *)res_out, (bf16 *)xn, (float *)rstd, (const float *)res_in, (const bf16 *)h, (const float *)w, M, C,
        eps, write_res);
    cudaLaunchCheck();
}

// With r = rstd, g = dxn * w:  dres[c] += r*g[c] - r^3/C * res[c] * sum_j g[j]*res[j];  dw[c] += dxn*res*r.
// One warp per token (a warp-level reduction, no block barriers: tokens proceed independently); the row is
// read twice, the second time from L1. dw is a separate column reduction (rmsnorm_dw_partial_kernel), so the
// token kernel keeps no per-channel state and the order of every sum is fixed.
__global__ void __launch_bounds__(NORM_WARPS * 32) rmsnorm_bwd_kernel(float *dres, bf16 *dres_act,
                                                                       const bf16 *dxn, const float *res,
                                                                       const float *w, const float *rstd, int M,
                                                                       int C) {
    int m = blockIdx.x * NORM_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (m >= M) return;
    size_t base = (size_t)m * C;
    float r = rstd[m], dot = 0.0f;
    for (int c = lane; c < C; c += 32) dot += bf2f(dxn[base + c]) * w[c] * res[base + c];
    dot = warp_sum(dot);
    float k = r * r * r * dot / C;
    for (int c = lane; c < C; c += 32) {
        float v = dres[base + c] + r * bf2f(dxn[base + c]) * w[c] - k * res[base + c];
        dres[base + c] = v;
        if (dres_act) dres_act[base + c] = f2bf(v);
    }
}

// part[g][c] = sum over tokens g*R .. g*R+R-1 of dxn * res * rstd (thread per channel: coalesced rows).
__global__ void rmsnorm_dw_partial_kernel(float *part, const bf16 *dxn, const float *res, const float *rstd,
                                          int M, int C, int R) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, g = blockIdx.y;
    if (c >= C) return;
    int m1 = (g + 1) * R < M ? (g + 1) * R : M;
    float s = 0.0f;
    for (int m = g * R; m < m1; m++) s += bf2f(dxn[(size_t)m * C + c]) * res[(size_t)m * C + c] * rstd[m];
    part[(size_t)g * C + c] = s;
}

// The backward with the row in registers and dw fused in (C % 4 == 0, C <= 128 * NV, aligned rows). Warp wp of
// a block takes NORM_BWD_R consecutive tokens; per token it issues all its dxn (bf16x4) and res (float4) loads
// at once, reduces the dot product by shuffles, then streams dres (read, update, write) without re-reading dxn
// or res. dw: each warp keeps its running sum over its tokens in its own slice of shared memory (lane-owned
// columns, so no two threads touch one word), then the block adds the NORM_BWD_WARPS slices in warp order and
// writes one partial row; colsum_final adds the rows in order. dw no longer needs a second pass over dxn and
// res (6 of the 22 bytes per element the v4 kernels moved), and every sum has an order fixed by M alone.
#define NORM_BWD_WARPS 4
#define NORM_BWD_R 8  // tokens per warp: 16384 tokens (130m B8) give 2048 warps, 512 partial rows
// Blocks per SM the register budget must allow (a cap of 65536 / (128 * MINB) registers): unbounded, ptxas
// hoists every load of the row and more (NV 6: 96 registers, NV 16: 255); capped, it still keeps a whole
// row's loads in flight, which is what the bandwidth needs.
#define NORM_BWD_MINB(NV) ((NV) <= 6 ? 5 : (NV) <= 8 ? 4 : (NV) <= 12 ? 3 : 2)
template <int NV>
__global__ void __launch_bounds__(NORM_BWD_WARPS * 32, NORM_BWD_MINB(NV))
    rmsnorm_bwd4_kernel(float4 *dres, uint2 *dres_act, float4 *part, const uint2 *dxn, const float4 *res,
                        const float4 *__restrict__ w, const float *rstd, int M, int C4) {
    extern __shared__ float4 shdw[];  // (NORM_BWD_WARPS, C4): each warp's dw sums
    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    float4 *mydw = shdw + (size_t)wp * C4;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane + 32 * i;
        if (c < C4) mydw[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    int m0 = (blockIdx.x * NORM_BWD_WARPS + wp) * NORM_BWD_R;
    for (int m = m0; m < m0 + NORM_BWD_R && m < M; m++) {
        // Every load of the token first (dxn kept as bf16x4: 2 registers per column, not 4): the dres loads
        // must not wait behind earlier stores, where the compiler may not move them itself (dres_act may alias
        // dxn, as backend.h does not forbid).
        size_t base = (size_t)m * C4;
        uint2 d[NV];
        float4 x[NV], v[NV];
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane + 32 * i;
            if (c < C4) d[i] = dxn[base + c], x[i] = res[base + c], v[i] = dres[base + c];
        }
        float r = rstd[m], dot = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane + 32 * i;
            if (c < C4) {
                float4 wv = w[c], g = bf16x4_to_f4(d[i]);
                dot += g.x * wv.x * x[i].x + g.y * wv.y * x[i].y + g.z * wv.z * x[i].z + g.w * wv.w * x[i].w;
            }
        }
        dot = warp_sum(dot);
        float k = r * r * r * dot / (4 * C4);
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane + 32 * i;
            if (c < C4) {
                float4 wv = w[c], g = bf16x4_to_f4(d[i]), s = mydw[c];
                v[i].x = v[i].x + r * g.x * wv.x - k * x[i].x;
                v[i].y = v[i].y + r * g.y * wv.y - k * x[i].y;
                v[i].z = v[i].z + r * g.z * wv.z - k * x[i].z;
                v[i].w = v[i].w + r * g.w * wv.w - k * x[i].w;
                dres[base + c] = v[i];
                if (dres_act) dres_act[base + c] = f4_to_bf16x4(v[i]);
                s.x += g.x * x[i].x * r, s.y += g.y * x[i].y * r, s.z += g.z * x[i].z * r, s.w += g.w * x[i].w * r;
                mydw[c] = s;
            }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C4; c += blockDim.x) {
        float4 t = shdw[c];
        for (int j = 1; j < NORM_BWD_WARPS; j++) {
            float4 a = shdw[(size_t)j * C4 + c];
            t.x += a.x, t.y += a.y, t.z += a.z, t.w += a.w;
        }
        part[(size_t)blockIdx.x * C4 + c] = t;
    }
}

// Partial rows of rmsnorm_bwd's weight gradient for M tokens: the vectorized kernel's (one per block of
// NORM_BWD_WARPS warps of NORM_BWD_R tokens each) or the scalar path's (64 tokens each). Fixed by M, so the
// summation order never depends on the GPU.
#define NORM_DW_R 64
static int norm_bwd_groups(int M, int vec) { return (int)pm_ceil_div(M, vec ? NORM_BWD_WARPS * NORM_BWD_R : NORM_DW_R); }

static void cu_rmsnorm_bwd(void *dres, void *dres_act, void *dw, const void *dxn, const void *res,
                           const void *w, const void *rstd, int M, int C) {
    if (M == 0) return;
    int nv = C % 4 == 0 ? norm_nv(C, 16) : 0;
    if (nv && pm_is_aligned(dres, 16) && pm_is_aligned(res, 16) && pm_is_aligned(w, 16) &&
        pm_is_aligned(dxn, 8) && pm_is_aligned(dres_act, 8)) {
        int G = norm_bwd_groups(M, 1);
        float *part = red_part((size_t)G * C * sizeof(float), &s_norm_part);
        size_t smem = (size_t)NORM_BWD_WARPS * C * sizeof(float);  // <= 32 KB (C <= 2048): no opt-in needed
        NORM_NV_DISPATCH(nv, rmsnorm_bwd4_kernel, G, NORM_BWD_WARPS * 32, smem, (float4 *)dres, (uint2 *)dres_act,
                         (float4 *)part, (const uint2 *)dxn, (const float4 *)res, (const float4 *)w,
                         (const float *)rstd, M, C / 4);
        cudaLaunchCheck();
        colsum_final((float *)dw, part, G, C);
        return;
    }
    rmsnorm_bwd_kernel<<<pm_ceil_div(M, NORM_WARPS), NORM_WARPS * 32, 0, g_stream>>>(
        (float *)dres, (bf16 *)dres_act, (const bf16 *)dxn, (const float *)res, (const float *)w,
        (const float *)rstd, M, C);
    cudaLaunchCheck();
    int G = norm_bwd_groups(M, 0);
    float *part = red_part((size_t)G * C * sizeof(float), &s_norm_part);
    dim3 grid(pm_ceil_div(C, 256), G);
    rmsnorm_dw_partial_kernel<<<grid, 256, 0, g_stream>>>(part, (const bf16 *)dxn, (const float *)res,
                                                          (const float *)rstd, M, C, NORM_DW_R);
    cudaLaunchCheck();
    colsum_final((float *)dw, part, G, C);
}

// ---------------------------------------------------------------------------------------------------------
// GEMMs through cuBLASLt. cuBLAS is column-major: a row-major (R, C) matrix with row stride ld is, to it, a
// column-major C x R matrix with leading dimension ld. So row-major Y (M, N) = X (M, K) @ W^T becomes
// column-major Y' (N x M) = W' (K x N, transposed) @ X' (K x M): D = op(A) op(B) with A = W, B = X.
// Descriptors and the chosen algorithm are cached per shape (the heuristic query costs more than a small GEMM).

// The fast (non-deterministic) backend times the heuristic's candidates of a shape the first time it meets it
// again in a later optimizer step (the backend counts its adamw calls as steps) and keeps the fastest; the
// deterministic one always runs the first candidate, so its results never depend on a timing. A shape seen in
// one step only is never tuned: the single and pad policies meet a new M at almost every step, and tuning each
// would cost more than it saves (a first version tuned on a shape's third use and made `single` 2.4x slower on
// real documents), and recurring lengths would still be tuned in the middle of such a run: once more than
// GEMM_TUNE_SHAPES shapes have been planned, the workload is taken to be shape-varying and nothing more is tuned
// (measured on the H200, 370m T=4096: single 8.4-11.4K tok/s with tuning, 14.5K without).
// (asking for up to 64 found no more than 8 at any 130m or 370m shape, and no faster step: call235)
#define GEMM_CANDS 8
static long g_steps;      // adamw calls so far
static long g_plans_made;  // GEMM plans made so far (distinct shapes, and re-made evicted ones)
#define GEMM_TUNE_SHAPES 48
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldd, dtype, beta1, bias, align;
    int batch;                        // > 1: a strided batch of that many GEMMs, operands sa, sb, sd elements apart
    long long sa, sb, sd;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;        // the heuristic's first choice: what the deterministic backend runs
    cublasLtMatmulAlgo_t algo_fast;   // the fastest candidate when timed (the fast backend's), once tuned
    long born;                        // g_steps when the plan was made
    int tuned;                        // 0 not yet, 1 algo_fast valid
    int bias_ok;   // the bias epilogue had a kernel; otherwise bias is added by a separate kernel
    int gemm_ex;   // cuBLASLt offered no kernel at all: classic cublasGemmEx (handles any layout)
    int pick_n;    // the lab's pick (gemm_picked_algo): 1 + how many candidates g_pick_cands holds; 0 not asked yet
} GemmPlan;

#define GEMM_CACHE 256
static GemmPlan g_plans[GEMM_CACHE];
static int g_nplans;
static cublasHandle_t g_cublas;  // only for the cublasGemmEx fallback
static cudaStream_t g_cublas_stream;  // the stream g_cublas is set to
// Points g_cublas at the stream ops are queued on now, with that stream's workspace (cublasSetStream resets it).
static void cublas_to_current_stream(void) {
    if (g_cublas_stream == g_stream) return;
    cublasCheck(cublasSetStream(g_cublas, g_stream));
    cublasCheck(cublasSetWorkspace(g_cublas, lt_ws(), LT_WS_BYTES));
    g_cublas_stream = g_stream;
}

static int ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 2 && (a % al) != 0) al >>= 1;
    return al;
}

// Asks the heuristic for up to n algorithms of plan p (its descriptor and layouts) into res; *found = how many.
static cublasStatus_t plan_heuristic(GemmPlan *p, int n, cublasLtMatmulHeuristicResult_t *res, int *found) {
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = LT_WS_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                     sizeof ws));
    uint32_t al = (uint32_t)p->align;
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al, sizeof al));
    *found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, n, res,
                                                       found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    if (st == CUBLAS_STATUS_SUCCESS && *found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    return st;
}

// Builds p->desc for this plan (a fresh descriptor each try, so a failed bias attempt leaves nothing behind)
// and asks the heuristic for one algorithm (asking for GEMM_CANDS costs more, and the single and pad policies
// make new plans at every step: gemm_tune asks for the rest when a shape comes back). Returns the cuBLAS status,
// with CUBLAS_STATUS_NOT_SUPPORTED when the heuristic found nothing.
static cublasStatus_t plan_try(GemmPlan *p, int with_bias) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    p->desc = NULL;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (with_bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_32F;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = plan_heuristic(p, 1, &res, &found);
    if (st == CUBLAS_STATUS_SUCCESS) p->algo = res.algo;
    return st;
}

static GemmPlan *gemm_plan(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldd, cudaDataType_t dtype,
                           int beta1, int bias, int align, int batch, long long sa, long long sb, long long sd) {
    for (int i = 0; i < g_nplans; i++) {
        GemmPlan *p = &g_plans[i];
        if (p->ta == ta && p->tb == tb && p->m == m && p->n == n && p->k == k && p->lda == lda &&
            p->ldb == ldb && p->ldd == ldd && p->dtype == (int)dtype && p->beta1 == beta1 && p->bias == bias &&
            p->align == align && p->batch == batch && p->sa == sa && p->sb == sb && p->sd == sd)
            return p;
    }
    // A full cache (the single and pad policies give a new M at every step) recycles its slots round robin; the
    // heuristic's choice for a shape does not change, so a re-created plan runs the same algorithm.
    static int next_evict;
    GemmPlan *p;
    if (g_nplans < GEMM_CACHE) {
        p = &g_plans[g_nplans++];
    } else {
        p = &g_plans[next_evict];
        next_evict = (next_evict + 1) % GEMM_CACHE;
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->ld);
    }
    memset(p, 0, sizeof *p);
    p->ta = ta, p->tb = tb, p->m = m, p->n = n, p->k = k, p->lda = lda, p->ldb = ldb, p->ldd = ldd;
    p->dtype = (int)dtype, p->beta1 = beta1, p->bias = bias, p->align = align;
    p->batch = batch, p->sa = sa, p->sb = sb, p->sd = sd;
    p->born = g_steps;
    g_plans_made++;
    // stored shapes (column-major): A is m x k (or k x m when transposed), B is k x n (or n x k)
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, dtype, m, n, ldd));
    if (batch > 1) {
        const int32_t bc = batch;
        const cublasLtMatrixLayout_t l[3] = {p->la, p->lb, p->ld};
        const int64_t st[3] = {sa, sb, sd};
        for (int i = 0; i < 3; i++) {
            cublasCheck(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
            cublasCheck(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i],
                                                         sizeof st[i]));
        }
    }
    cublasStatus_t sbias = bias ? plan_try(p, 1) : CUBLAS_STATUS_NOT_SUPPORTED;
    p->bias_ok = bias && sbias == CUBLAS_STATUS_SUCCESS;
    if (bias && !p->bias_ok && getenv("PM_CUDA_VERBOSE"))
        fprintf(stderr, "packmamba: note: no cuBLASLt bias epilogue for m=%d n=%d k=%d (status %d): separate kernel\n",
                m, n, k, (int)sbias);
    if (!p->bias_ok) {
        cublasStatus_t s0 = plan_try(p, 0);
        if (s0 != CUBLAS_STATUS_SUCCESS) {
            p->gemm_ex = 1;
            fprintf(stderr,
                    "packmamba: note: cuBLASLt has no kernel for %s GEMM m=%d n=%d k=%d lda=%d ldb=%d ldd=%d "
                    "align=%d (status %d%s); using cublasGemmEx\n",
                    dtype == CUDA_R_32F ? "an fp32-out" : "a bf16-out", m, n, k, lda, ldb, ldd, align, (int)s0,
                    bias ? ", bias epilogue also refused" : "");
        }
    }
    return p;
}

// out[m, n] (ldo, bf16) += bias[n] where the bias epilogue had no kernel.
__global__ void add_bias_kernel(bf16 *out, int ldo, const float *bias, int M, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (n < N) out[(size_t)m * ldo + n] = f2bf(bf2f(out[(size_t)m * ldo + n]) + bias[n]);
}

static int ranges_overlap(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

// A cuBLASLt algorithm's tile id and split-K count (-1 where it does not say): which kernel it is, for the logs.
static void algo_tile_split(const cublasLtMatmulAlgo_t *algo, int *tile, int *split) {
    size_t got;
    *tile = *split = -1;
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile, sizeof *tile, &got);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split, sizeof *split, &got);
}

// The heuristic's candidates for plan p that run within our workspace, best first, into cand (GEMM_CANDS room);
// returns how many.
static int plan_candidates(GemmPlan *p, cublasLtMatmulAlgo_t *cand) {
    cublasLtMatmulHeuristicResult_t res[GEMM_CANDS];
    int found = 0, ncand = 0;
    if (plan_heuristic(p, GEMM_CANDS, res, &found) != CUBLAS_STATUS_SUCCESS) return 0;
    for (int i = 0; i < found; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= LT_WS_BYTES) cand[ncand++] = res[i].algo;
    return ncand;
}

// The lab's pick (backend_cuda_gemm_pick, dev/kernels/energy_lab.c): every cuBLASLt GEMM runs the heuristic's
// candidate #g_gemm_pick (the first where it has fewer) in place of the tuned or first choice; what the last one
// ran is kept for backend_cuda_gemm_picked. -1: off (always, outside the lab).
static int g_gemm_pick = -1, g_pick_found, g_pick_ran;
static cublasLtMatmulAlgo_t g_pick_algo;
// Each plan slot's candidates for the pick, allocated at the first pick (the lab's alone: the training never
// pays for them); a recycled slot's pick_n is 0 again, so its stale row is asked anew.
static cublasLtMatmulAlgo_t (*g_pick_cands)[GEMM_CANDS];
static const cublasLtMatmulAlgo_t *gemm_picked_algo(GemmPlan *p) {
    if (!g_pick_cands)
        g_pick_cands = (cublasLtMatmulAlgo_t(*)[GEMM_CANDS])pm_calloc(GEMM_CACHE, sizeof *g_pick_cands);
    cublasLtMatmulAlgo_t *cand = g_pick_cands[p - g_plans];
    if (p->pick_n == 0) p->pick_n = 1 + plan_candidates(p, cand);  // (asked once: the query costs ~a GEMM)
    g_pick_found = p->pick_n - 1;
    if (g_pick_found == 0) return &p->algo;
    g_pick_ran = g_gemm_pick < g_pick_found ? g_gemm_pick : 0;
    g_pick_algo = cand[g_pick_ran];
    return &g_pick_algo;
}

// Times every candidate of plan p on these operands (mean of 5 runs after one warm-up, CUDA events) and keeps
// the fastest in p->algo_fast; a candidate must beat the heuristic's first choice by 2% to replace it, so
// timing noise does not flip between near-equal kernels. The runs write a scratch copy of D when the plan
// accumulates (beta = 1) or D overlaps an operand; otherwise D itself, which the real call then overwrites.
// Candidates that fail to run are skipped. PM_GEMM_TUNE=0 turns tuning off; PM_CUDA_VERBOSE=1 reports it.
static int g_gemm_tunings;  // plans passed through gemm_tune (backend_cuda_gemm_tunings)
static void gemm_tune(GemmPlan *p, const bf16 *A, const bf16 *B, void *D) {
    p->tuned = 1;
    p->algo_fast = p->algo;
    g_gemm_tunings++;
    cublasLtMatmulAlgo_t cand[GEMM_CANDS];
    const int ncand = plan_candidates(p, cand);
    if (ncand < 2) return;
    // work on the other stream (the backward's weight gradients) could run beside the candidates and skew their
    // times, whichever stream this shape is tuned on
    if (g_side) cudaCheck(cudaDeviceSynchronize());
    size_t esz = p->dtype == CUDA_R_32F ? 4 : 2, nb = p->batch > 1 ? (size_t)p->batch - 1 : 0;
    size_t dbytes = ((size_t)p->ldd * (p->n - 1) + p->m + nb * p->sd) * esz;
    size_t abytes = ((size_t)p->lda * ((p->ta ? p->m : p->k) - 1) + (p->ta ? p->k : p->m) + nb * p->sa) * 2;
    size_t bbytes = ((size_t)p->ldb * ((p->tb ? p->k : p->n) - 1) + (p->tb ? p->n : p->k) + nb * p->sb) * 2;
    void *Dt = D, *tmp = NULL;
    if (p->beta1 || ranges_overlap(D, dbytes, A, abytes) || ranges_overlap(D, dbytes, B, bbytes)) {
        if (cudaMalloc(&tmp, dbytes) != cudaSuccess) {
            cudaGetLastError();  // no room for a scratch copy: keep the heuristic's choice
            return;
        }
        cudaCheck(cudaMemsetAsync(tmp, 0, dbytes, g_stream));
        Dt = tmp;
    }
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    float alpha = 1.0f, beta = 0.0f, best_ms = 0.0f, first_ms = 0.0f;
    int best = -1;
    for (int i = 0; i < ncand; i++) {
        const int REPS = 5;
        cublasStatus_t st = cublasLtMatmul(g_lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, Dt, p->ld, Dt, p->ld,
                                           &cand[i], lt_ws(), LT_WS_BYTES, g_stream);
        if (st != CUBLAS_STATUS_SUCCESS) continue;
        cudaCheck(cudaEventRecord(e0, g_stream));
        for (int r = 0; r < REPS; r++)
            cublasLtMatmul(g_lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, Dt, p->ld, Dt, p->ld, &cand[i],
                           lt_ws(), LT_WS_BYTES, g_stream);
        cudaCheck(cudaEventRecord(e1, g_stream));
        cudaCheck(cudaEventSynchronize(e1));
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        ms /= REPS;
        if (i == 0) first_ms = ms;
        if (best < 0 || ms < best_ms) best = i, best_ms = ms;
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    if (tmp) cudaCheck(cudaFree(tmp));
    if (best > 0 && first_ms > 0.0f && best_ms < 0.98f * first_ms) p->algo_fast = cand[best];
    if (getenv("PM_CUDA_VERBOSE")) {
        // (the first and the fastest candidate's tile and split-K count: what a slow shape's kernel is)
        int tile[2], split[2];
        algo_tile_split(&cand[0], &tile[0], &split[0]);
        algo_tile_split(best >= 0 ? &cand[best] : &cand[0], &tile[1], &split[1]);
        fprintf(stderr, "packmamba: GEMM m=%d n=%d k=%d ta=%d tb=%d %s batch %d: %d candidates, first %.4f ms "
                "(tile %d split %d), best #%d %.4f ms (tile %d split %d)\n", p->m, p->n, p->k, p->ta, p->tb,
                p->dtype == CUDA_R_32F ? "f32-out" : "bf16-out", p->batch > 1 ? p->batch : 1, ncand, first_ms,
                tile[0], split[0], best, best_ms, tile[1], split[1]);
    }
}

static int gemm_tune_enabled(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("PM_GEMM_TUNE");
        on = !(e && e[0] == '0');
    }
    return on;
}

// Optimizer steps a plan waits before it is tuned: GEMM_TUNE_AFTER_STEPS unless PM_GEMM_TUNE_AFTER=n says n.
// Until the thirty-eighth session a shape was tuned in the step after the one that made it, in a run's first
// second, before the card has settled at its power limit (where a long run stays). Tuned at the tenth or twelfth
// step instead, the median step was 0.6-2.2% shorter in 7 of 7 interleaved pairs (370m, 130m, 1.4b; timed after 14
// warm-up steps either way; dev/calls/call306.sh, call307.sh); tok/s (the mean step, which the power controller's
// dips make noisier) +0.5% on average at 370m, 1.4b the same. The picks differ in a few shapes a run, by small
// margins, so why the later tuning gains is not known; it costs nothing a run of more than a few steps would notice.
// (They are also the cheapest candidates sustained at the power limit, within 1.3%: energy_lab gemms, call314.)
#define GEMM_TUNE_AFTER_STEPS 10
static long gemm_tune_after(void) {
    static long n = -1;
    if (n < 0) {
        const char *e = getenv("PM_GEMM_TUNE_AFTER");
        n = e && atol(e) > 0 ? atol(e) : GEMM_TUNE_AFTER_STEPS;
    }
    return n;
}

// Column-major D (m x n, ldd) = op(A) op(B) + beta * D (+ bias[row] broadcast over columns, bf16 D only); with
// batch > 1, that many such GEMMs, operand i sa, sb, sd elements past operand 0's (no bias).
// tune: the fast backend's calls (may run a timed candidate, see gemm_tune); 0 for the deterministic backend.
static void gemm_batch(int ta, int tb, int m, int n, int k, const bf16 *A, int lda, long long sa, const bf16 *B,
                       int ldb, long long sb, void *D, int ldd, long long sd, cudaDataType_t dtype, int beta1,
                       const float *bias, int tune, int batch) {
    if (m == 0 || n == 0 || batch <= 0) return;
    if (k == 0) {
        if (!beta1) pm_die("gemm with k = 0 and overwrite is not supported");
        return;
    }
    if (batch == 1) sa = sb = sd = 0;
    if (batch > 1 && bias) pm_die("gemm: a batch with a bias is not supported");
    const size_t esz = dtype == CUDA_R_32F ? 4 : 2;
    // every operand of the batch must have the alignment the plan promises cuBLASLt
    int align = ptr_align(A);
    const int al[5] = {ptr_align(B), ptr_align(D), ptr_align((const void *)(uintptr_t)(sa * 2)),
                       ptr_align((const void *)(uintptr_t)(sb * 2)), ptr_align((const void *)(uintptr_t)(sd * esz))};
    for (int i = 0; i < 5; i++)
        if (al[i] < align) align = al[i];
    GemmPlan *p = gemm_plan(ta, tb, m, n, k, lda, ldb, ldd, dtype, beta1, bias != NULL, align, batch, sa, sb, sd);
    float alpha = 1.0f, beta = beta1 ? 1.0f : 0.0f;
    if (p->gemm_ex) {
        cublas_to_current_stream();
        cublasCheck(cublasGemmStridedBatchedEx(g_cublas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                               m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, B, CUDA_R_16BF, ldb, sb,
                                               &beta, D, dtype, ldd, sd, batch, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
    } else {
        if (p->bias_ok)
            cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                       sizeof bias));
        if (tune && !p->tuned && g_steps >= p->born + gemm_tune_after() && g_plans_made <= GEMM_TUNE_SHAPES &&
            gemm_tune_enabled())
            gemm_tune(p, A, B, D);
        const cublasLtMatmulAlgo_t *algo = tune && p->tuned ? &p->algo_fast : &p->algo;
        if (g_gemm_pick >= 0) algo = gemm_picked_algo(p);
        cublasCheck(cublasLtMatmul(g_lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, D, p->ld, D, p->ld, algo,
                                   lt_ws(), LT_WS_BYTES, g_stream));
    }
    if (bias && !p->bias_ok) {
        dim3 grid(pm_ceil_div(m, 256), n);
        add_bias_kernel<<<grid, 256, 0, g_stream>>>((bf16 *)D, ldd, bias, n, m);
        cudaLaunchCheck();
    }
}
static void gemm(int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *B, int ldb, void *D,
                 int ldd, cudaDataType_t dtype, int beta1, const float *bias, int tune) {
    gemm_batch(ta, tb, m, n, k, A, lda, 0, B, ldb, 0, D, ldd, 0, dtype, beta1, bias, tune, 1);
}

static void matmul_fwd(void *out, int ldo, const void *inp, int ldi, const void *W, const void *bias, int M, int N,
                       int K, int tune) {
    // column-major out' (N x M, ld ldo) = W' (stored K x N, ld K) transposed @ inp' (stored K x M, ld ldi)
    gemm(1, 0, N, M, K, (const bf16 *)W, K, (const bf16 *)inp, ldi, out, ldo, CUDA_R_16BF, 0,
         (const float *)bias, tune);
}
static void cu_matmul_fwd(void *out, int ldo, const void *inp, int ldi, const void *W, const void *bias, int M,
                          int N, int K) {
    matmul_fwd(out, ldo, inp, ldi, W, bias, M, N, K, 1);
}
static void cu_matmul_fwd_det(void *out, int ldo, const void *inp, int ldi, const void *W, const void *bias, int M,
                              int N, int K) {
    matmul_fwd(out, ldo, inp, ldi, W, bias, M, N, K, 0);
}

// Partial column sums of a bf16 (M, N) matrix (ld): part[g][n] = sum of rows g*R .. g*R+R-1.
__global__ void colsum_partial_bf16_kernel(float *part, const bf16 *x, int ld, int M, int N, int R) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, g = blockIdx.y;
    if (n >= N) return;
    int m1 = (g + 1) * R < M ? (g + 1) * R : M;
    float s = 0.0f;
    for (int m = g * R; m < m1; m++) s += bf2f(x[(size_t)m * ld + n]);
    part[(size_t)g * N + n] = s;
}

// matmul_bwd's weight gradient for `count` operand sets (Backend.matmul_dw_batch; 1: matmul_bwd's own), one
// strided batch: dW_i^T (K x N, ld K) += inp_i^T (K x M, ld ldi) @ dout_i (M x N: dout^T stored N x M, transposed)
static void matmul_dw_batch(void *dW, size_t sW, const void *dout, int lddo, size_t sdout, const void *inp, int ldi,
                            size_t sinp, int count, int M, int N, int K, int tune) {
    if (M == 0) return;
    gemm_batch(0, 1, K, N, M, (const bf16 *)inp, ldi, (long long)sinp, (const bf16 *)dout, lddo, (long long)sdout,
               dW, K, (long long)sW, CUDA_R_32F, !g_grads_write, NULL, tune, count);
}

static void matmul_bwd(void *dinp, int ldd, int accumulate_dinp, void *dW, void *dbias, const void *dout, int lddo,
                       const void *inp, int ldi, const void *W, int M, int N, int K, int tune) {
    if (M == 0) return;
    const bf16 *dout_ = (const bf16 *)dout;
    // dinp^T (K x M) = W (as K x N, ld K) @ dout^T (N x M, ld lddo)
    if (dinp)
        gemm(0, 0, K, M, N, (const bf16 *)W, K, dout_, lddo, dinp, ldd, CUDA_R_16BF, accumulate_dinp, NULL,
             tune);
    if (dW) matmul_dw_batch(dW, 0, dout, lddo, 0, inp, ldi, 0, 1, M, N, K, tune);
    if (dbias) {
        int R = 64, G = (M + R - 1) / R;
        float *part = red_part((size_t)G * N * sizeof(float), &s_colsum_part);
        dim3 grid(pm_ceil_div(N, 256), G);
        colsum_partial_bf16_kernel<<<grid, 256, 0, g_stream>>>(part, dout_, lddo, M, N, R);
        cudaLaunchCheck();
        colsum_final((float *)dbias, part, G, N);
    }
}
static void cu_matmul_bwd(void *dinp, int ldd, int accumulate_dinp, void *dW, void *dbias, const void *dout,
                          int lddo, const void *inp, int ldi, const void *W, int M, int N, int K) {
    matmul_bwd(dinp, ldd, accumulate_dinp, dW, dbias, dout, lddo, inp, ldi, W, M, N, K, 1);
}
static void cu_matmul_bwd_det(void *dinp, int ldd, int accumulate_dinp, void *dW, void *dbias, const void *dout,
                              int lddo, const void *inp, int ldi, const void *W, int M, int N, int K) {
    matmul_bwd(dinp, ldd, accumulate_dinp, dW, dbias, dout, lddo, inp, ldi, W, M, N, K, 0);
}
static void cu_matmul_dw_batch(void *dW, size_t sW, const void *dout, int lddo, size_t sdout, const void *inp, int ldi,
                               size_t sinp, int count, int M, int N, int K) {
    matmul_dw_batch(dW, sW, dout, lddo, sdout, inp, ldi, sinp, count, M, N, K, 1);
}
static void cu_matmul_dw_batch_det(void *dW, size_t sW, const void *dout, int lddo, size_t sdout, const void *inp,
                                   int ldi, size_t sinp, int count, int M, int N, int K) {
    matmul_dw_batch(dW, sW, dout, lddo, sdout, inp, ldi, sinp, count, M, N, K, 0);
}

// ---------------------------------------------------------------------------------------------------------
// depthwise causal conv1d + SiLU with document resets: the kernels are in cuda_conv.cu (4 channels per thread,
// a ring of tokens loaded ahead through cp.async, deterministic weight gradients)

// Rows carried in (first, hist; cuda_carry.cu): the forward rewrites their first K-1 outputs after the conv kernel;
// the backward corrects their dxi after it and adds one partial row, the carried taps' dw, db parts, to the conv's
// column reduction (so the sum stays one job, held back with the others).
static void cu_conv_silu_fwd(void *u, const void *xi, int ldx, const void *w, const void *b, const int32_t *pos,
                             int M, int T, int C, int K, const int32_t *first, const void *hist) {
    cuda_conv_silu_fwd((bf16 *)u, (const bf16 *)xi, ldx, (const float *)w, (const float *)b, pos, M, T, C, K,
                       g_stream);
    if (first && M > 0)
        cuda_carry_conv_fwd((bf16 *)u, (const bf16 *)xi, ldx, (const float *)w, (const float *)b, pos, first,
                            (const bf16 *)hist, M, T, C, K, g_stream);
}

static void cu_conv_silu_bwd(void *dxi, int ldx, void *dw, void *db, const void *du, const void *xi,
                             const void *w, const void *b, const int32_t *pos, int M, int T, int C, int K,
                             const int32_t *first, const void *hist) {
    if (M == 0) return;
    const size_t row = (size_t)C * (K + 1) * sizeof(float);
    float *part = red_part(cuda_conv_bwd_part_bytes(M, C, K) + (first ? row : 0), &s_conv_part);
    int G = cuda_conv_silu_bwd_part((bf16 *)dxi, ldx, part, (const bf16 *)du, (const bf16 *)xi, (const float *)w,
                                    (const float *)b, pos, M, T, C, K, g_stream);
    if (first && G > 0) {  // row G: the carried rows' parts
        cuda_carry_conv_bwd_part((bf16 *)dxi, ldx, part + (size_t)G * C * (K + 1), (const bf16 *)du,
                                 (const bf16 *)xi, (const float *)w, (const float *)b, pos, first, (const bf16 *)hist,
                                 M, T, C, K, g_stream);
        G++;
    }
    red_job(cuda_conv_bwd_job((float *)dw, (float *)db, part, G, C, K, !g_grads_write));
}

// ---------------------------------------------------------------------------------------------------------
// selective scan: cuda_scan.cu

static void cu_scan_fwd(void *out, const void *u, const void *dpre, const void *dt_bias, const void *A_log,
                        const void *Bm, const void *Cm, int ldbc, const void *D, const void *z, int ldz,
                        const int32_t *pos, int M, int T, int Cd, int N, void *states, const int32_t *first,
                        const void *h0) {
    if (M == 0) return;
    const bool carry = first && h0;
    cuda_scan_fwd_ex((bf16 *)out, (const bf16 *)u, (const bf16 *)dpre, (const float *)dt_bias,
                     (const float *)A_log, (const bf16 *)Bm, (const bf16 *)Cm, ldbc, (const float *)D, (const bf16 *)z,
                     ldz, pos, M, T, Cd, N, (float *)states, g_stream, carry ? first : NULL,
                     carry ? (const float *)h0 : NULL);  // (checks its own launches)
}
static size_t cu_scan_states_bytes(int M, int T, int Cd, int N) { return cuda_scan_states_bytes(M, T, Cd, N); }

static void scan_bwd_impl(void *du, void *ddpre, void *dB, void *dC, void *dz, void *ddt_bias, void *dA_log,
                          void *dD, const void *dout, const void *u, const void *dpre, const void *dt_bias,
                          const void *A_log, const void *Bm, const void *Cm, int ldbc, const void *D,
                          const void *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                          const void *states, void *out, const int32_t *first, const void *h0, int det) {
    if (M == 0) return;
    const bool carry = first && h0;
    size_t wsb = cuda_scan_workspace_bytes(M, T, Cd, N);
    void *ws = wsb ? scratch_get(&s_big, wsb) : NULL;
    // the parameter gradients' partial rows: to the reduction queue (on the side stream, the scan's workspace)
    float *par = red_part(cuda_scan_param_part_bytes(M, T, Cd, N), NULL);
    int rows = cuda_scan_bwd_ex((bf16 *)du, (bf16 *)ddpre, (bf16 *)dB, (bf16 *)dC, (bf16 *)dz, (float *)ddt_bias,
                                (float *)dA_log, (float *)dD, (const bf16 *)dout, (const bf16 *)u, (const bf16 *)dpre,
                                (const float *)dt_bias, (const float *)A_log, (const bf16 *)Bm, (const bf16 *)Cm, ldbc,
                                (const float *)D, (const bf16 *)z, ldz, pos, M, T, Cd, N, (const float *)states,
                                (bf16 *)out, ws, wsb ? s_big.bytes : 0, det, g_stream, !g_grads_write, par,
                                carry ? first : NULL, carry ? (const float *)h0 : NULL);  // (checks its own launches)
    if (par)
        red_job(cuda_scan_param_job((float *)ddt_bias, (float *)dA_log, (float *)dD, par, rows, Cd, N,
                                    !g_grads_write));
}
#define SCAN_BWD_ARGS                                                                                       \
    void *du, void *ddpre, void *dB, void *dC, void *dz, void *ddt_bias, void *dA_log, void *dD,             \
        const void *dout, const void *u, const void *dpre, const void *dt_bias, const void *A_log,           \
        const void *Bm, const void *Cm, int ldbc, const void *D, const void *z, int ldz, const int32_t *pos, \
        int M, int T, int Cd, int N, const void *states, void *out, const int32_t *first, const void *h0
#define SCAN_BWD_PASS                                                                                             \
    du, ddpre, dB, dC, dz, ddt_bias, dA_log, dD, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, M, T, \
        Cd, N, states, out, first, h0
static void cu_scan_bwd_det(SCAN_BWD_ARGS) { scan_bwd_impl(SCAN_BWD_PASS, 1); }
static void cu_scan_bwd_fast(SCAN_BWD_ARGS) { scan_bwd_impl(SCAN_BWD_PASS, 0); }

// ---------------------------------------------------------------------------------------------------------
// state carried into rows from the batch before (Backend.carry_*): cuda_carry.cu. Deterministic in both modes.

// the carry kernels' workspace (the state out's segment sums and states), one per stream: the side stream's must not
// be shared with work queued on the main stream
static Scratch s_carry, s_carry_side;
static void *carry_ws(int M, int T, int Cd, int N) {
    const size_t b = cuda_carry_ws_bytes(M, T, Cd, N);
    return b ? scratch_get(g_stream == g_main ? &s_carry : &s_carry_side, b) : NULL;
}

static void cu_carry_state_out(void *h_out, void *hist_out, const void *u, const void *dpre, const void *dt_bias,
                               const void *A_log, const void *Bm, int ldbc, const void *xi, int ldx,
                               const int32_t *first, const int32_t *last, const void *h0, int M, int T, int Cd, int N,
                               int K, const void *states) {
    cuda_carry_state_out((float *)h_out, (bf16 *)hist_out, (const bf16 *)u, (const bf16 *)dpre,
                         (const float *)dt_bias, (const float *)A_log, (const bf16 *)Bm, ldbc, (const bf16 *)xi, ldx,
                         first, last, (const float *)h0, M, T, Cd, N, K, (const float *)states, carry_ws(M, T, Cd, N),
                         g_stream);
}
// ---------------------------------------------------------------------------------------------------------
// classifier: tied LM head + softmax cross-entropy, chunked over tokens
//
// Per chunk of tokens (classifier_chunk): logits (chunk, Vp) fp32 = x @ wte^T (cuBLASLt, fp32 out); a pair of
// blocks per token (softmax_xent_pair_kernel; one block streaming the row twice where half a row does not fit in
// shared memory) finds max and sum of exp, writes the loss, and (backward) overwrites the row with bf16 dlogits =
// (softmax - onehot) * scale, packed into the row's first half (row stride 2*Vp bf16); then dx = dlogits @ wte
// and dwte += dlogits^T @ x. Only a (chunk, Vp) fp32 buffer ever exists. With bf16_logits (training), the same
// in bf16: logits (chunk, Vp) bf16, one block per token (softmax_xent_bf16_kernel), dlogits in place (stride Vp).
// (Tried, eighth session: the dwte GEMMs on the side stream beside the next chunk's logits GEMM and softmax, the
// buffer as two half chunks used in turn. The 130m classifier took 7.14-7.16 ms a step with the side stream,
// 7.21-7.25 without (one call), against ~6.8 with whole chunks in earlier calls: the GEMM's and the softmax's
// blocks each take most of an SM's shared memory, so they hardly run side by side, and half chunks cost more.)

// Chunk size: M/4 tokens (at least CL_CHUNK_MIN, at most CL_CHUNK_MAX, a multiple of 256). The fp32 chunk is
// the backend's largest buffer (4096 x 50280 x 4 B = 824 MB); a quarter of the batch keeps it a small share of
// the peak at B4 (1.4b: 2048 tokens, 412 MB) while 130m/370m B8 (M = 16384) still get 4096-token GEMMs.
#define CL_CHUNK_MIN 1024
#define CL_CHUNK_MAX 4096
#define CL_THREADS 512

static int classifier_chunk(int M) {
    int c = (M / 4 + 255) / 256 * 256;
    if (c < CL_CHUNK_MIN) c = CL_CHUNK_MIN;
    if (c > CL_CHUNK_MAX) c = CL_CHUNK_MAX;
    return M < c ? M : c;
}
// bf16 logits: twice the tokens in the same bytes (cu_workspace_bytes counts the fp32 chunk). Fewer chunks mean
// fewer passes of the dwte GEMM over its fp32 (C, Vp) output (read and written once a chunk): the 130m classifier
// 6.18 -> 6.05 ms a step at 8192 tokens, 5.95 at 16384 (+1.3 GiB); docs/perf.md, eleventh session.
static int classifier_chunk_bf16(int M) {
    const int c = 2 * classifier_chunk(M);
    return M < c ? M : c;
}

__global__ void __launch_bounds__(CL_THREADS) softmax_xent_kernel(float *logits, float *loss,
                                                                   const int32_t *targets, int Vp,
                                                                   float loss_scale, int backward) {
    __shared__ float shm[32], shs[32];
    int m = blockIdx.x;
    float *row = logits + (size_t)m * Vp;
    int tgt = targets[m];
    int valid = tgt >= 0 && tgt < Vp;
    // online max / sum of exp per thread
    float mx = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
        float v = row[j];
        if (v > mx) {
            s = s * __expf(mx - v) + 1.0f;
            mx = v;
        } else {
            s += __expf(v - mx);
        }
    }
    // combine (mx, s) pairs: warp shuffles, then warp results in warp order (deterministic)
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, mx, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(mx, m2);
        s = (mx == -INFINITY ? 0.0f : s * __expf(mx - mn)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
        mx = mn;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        shm[warp] = mx;
        shs[warp] = s;
    }
    __syncthreads();
    float M_ = -INFINITY;
    for (int i = 0; i < nw; i++) M_ = fmaxf(M_, shm[i]);
    float S = 0.0f;
    for (int i = 0; i < nw; i++)
        if (shm[i] != -INFINITY) S += shs[i] * __expf(shm[i] - M_);
    float lse = M_ + __logf(S);
    float lt = valid ? row[tgt] : 0.0f;
    if (threadIdx.x == 0) loss[m] = valid ? lse - lt : 0.0f;
    if (!backward) return;
    float scale = valid ? loss_scale : 0.0f;
    bf16 *drow = (bf16 *)row;
    // In-place narrowing: iteration i reads floats [i*bd, (i+1)*bd) and then writes bf16 slots of the same
    // indices, i.e. bytes of floats < (i+1)*bd/2: all already read (the barrier orders iteration 0's reads
    // before its writes; later iterations write strictly below anything still to be read).
    for (int j0 = 0; j0 < Vp; j0 += blockDim.x) {
        int j = j0 + threadIdx.x;
        float v = j < Vp ? row[j] : 0.0f;
        __syncthreads();
        if (j < Vp) drow[j] = f2bf((__expf(v - lse) - (j == tgt ? 1.0f : 0.0f)) * scale);
    }
}

// The same, with the row held in shared memory, split over a cluster of two blocks (Vp a multiple of 4; half a
// row, 100 KB for GPT-2's 50280, within a block's shared memory). The fp32 row is read from global memory once
// (16-byte loads) instead of twice: a second pass would miss the caches, as hundreds of resident 201 KB rows are
// more than the L2. Half a row per block lets two blocks share an SM, so one block's loads overlap the other's
// exp passes and stores (v1 held the whole row in one block per SM, 1.9x its byte floor). The two halves'
// maxima and sums of exp are exchanged through distributed shared memory and combined in rank order, so both
// blocks get the same bits (deterministic). exp(v - max) is computed once and kept in shared memory: the
// dlogits pass only scales it.
// Clusters exist from compute capability 9.0 (Hopper): in a build that also targets older GPUs their device pass
// compiles this kernel empty, and softmax_xent never launches it there (pm_cuda_device()->cc_major).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define PM_CLUSTER_PAIR
#define PM_HAS_CLUSTERS 0
#else
#define PM_CLUSTER_PAIR __cluster_dims__(2, 1, 1)
#define PM_HAS_CLUSTERS 1
#endif
#define CLS_THREADS 512  // two blocks per SM (half a row of shared memory each), 64 registers
#define TMA_PIECE 32768u  // bytes per cp.async.bulk of the pair kernel's half row
__global__ void PM_CLUSTER_PAIR __launch_bounds__(CLS_THREADS, 2)
    softmax_xent_pair_kernel(float *logits, float *loss, const int32_t *targets, int Vp, float loss_scale,
                             int backward) {
#if PM_HAS_CLUSTERS
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    extern __shared__ float4 half4[];  // (H4): this block's half of the row, then exp(v - max)
    __shared__ float sh[32];
    __shared__ float part[2];  // this block's max, then its sum of exp (read by the partner)
    const int rank = (int)cluster.block_rank(), m = blockIdx.x / 2, V4 = Vp / 4, H4 = (V4 + 1) / 2;
    const int j0 = rank * H4, j1 = min(V4, j0 + H4);  // float4 range of this half
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const float4 *row4 = (const float4 *)(logits + (size_t)m * Vp);
    // v2 (2026-11-30): the half row comes in by the copy engine (cp.async.bulk, TMA), all of it in flight at once,
    // instead of 512 threads' float4 loads (4 each in flight: the load phase ran well below the copy bandwidth);
    // the threads wait on an mbarrier, then take the max from shared memory
    __shared__ __align__(8) unsigned long long bar;
    const unsigned bar_s = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_s));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned bytes = (unsigned)(j1 - j0) * 16u, dst = (unsigned)__cvta_generic_to_shared(half4);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_s), "r"(bytes) : "memory");
        for (unsigned off = 0; off < bytes; off += TMA_PIECE) {  // pieces of at most TMA_PIECE bytes
            const unsigned n = bytes - off < TMA_PIECE ? bytes - off : TMA_PIECE;
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst + off),
                "l"((const char *)(row4 + j0) + off), "r"(n), "r"(bar_s)
                : "memory");
        }
    }
    {
        unsigned done = 0;
        while (!done)
            asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(bar_s)
                         : "memory");
    }
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) {
        float4 v = half4[j];
        mx = fmaxf(mx, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) sh[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = -INFINITY;
        for (int i = 0; i < nw; i++) b = fmaxf(b, sh[i]);
        part[0] = b;
    }
    const int tgt = targets[m], valid = tgt >= 0 && tgt < Vp;
    float lt = 0.0f;  // the target's logit: read here, before any thread overwrites its slot with an exp below
    if (valid && tgt / 4 >= j0 && tgt / 4 < j1) lt = ((const float *)half4)[tgt - 4 * j0];
    // both halves loaded and both maxima published: from here on the partner may overwrite this block's half of
    // the row in global memory with its bf16 dlogits (the narrowing below writes into the row's first half)
    cluster.sync();
    const float *pm = cluster.map_shared_rank(part, rank ^ 1);
    const float M_ = fmaxf(rank == 0 ? part[0] : pm[0], rank == 0 ? pm[0] : part[0]);
    float s = 0.0f;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) {
        float4 v = half4[j];
        v.x = __expf(v.x - M_), v.y = __expf(v.y - M_), v.z = __expf(v.z - M_), v.w = __expf(v.w - M_);
        half4[j] = v;
        s += (v.x + v.y) + (v.z + v.w);
    }
    s = block_sum(s, sh);  // fixed order: deterministic
    if (threadIdx.x == 0) part[1] = s;
    cluster.sync();
    const float S = rank == 0 ? part[1] + pm[1] : pm[1] + part[1];  // rank 0's sum first in both blocks
    const float lse = M_ + __logf(S);
    if (valid && tgt / 4 >= j0 && tgt / 4 < j1 && threadIdx.x == 0) loss[m] = lse - lt;
    if (!valid && rank == 0 && threadIdx.x == 0) loss[m] = 0.0f;
    if (backward) {
        const float scale = valid ? loss_scale : 0.0f, inv = scale / S;
        // bf16 dlogits into the row's first half (row stride 2*Vp bf16); 4 values = 8 bytes per store
        uint2 *drow = (uint2 *)(logits + (size_t)m * Vp);
        for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) {
            float4 e = half4[j];
            int k = 4 * (j0 + j);
            __nv_bfloat162 p0 = __floats2bfloat162_rn(e.x * inv - (k == tgt ? scale : 0.0f),
                                                      e.y * inv - (k + 1 == tgt ? scale : 0.0f));
            __nv_bfloat162 p1 = __floats2bfloat162_rn(e.z * inv - (k + 2 == tgt ? scale : 0.0f),
                                                      e.w * inv - (k + 3 == tgt ? scale : 0.0f));
            uint2 o;
            memcpy(&o.x, &p0, 4);
            memcpy(&o.y, &p1, 4);
            drow[j0 + j] = o;
        }
    }
    cluster.sync();  // the partner's last reads of this block's part[] are done before it exits
#endif
}

static int g_cls_smem_set;   // dynamic shared memory the pair kernel is currently allowed

// bf16 logits (Backend.classifier's bf16_logits; the training default): the logits GEMM writes bf16, as the
// reference implementation's autocast LM head does, and this kernel takes a row: one block of 512 threads holds
// the whole row in registers (NPT 16-byte pieces a thread, all loads in flight at once), so the row is read from
// global memory once; max and sum of exp are reduced over the block in a fixed order (deterministic); dlogits
// (bf16) overwrite the row in place (row stride Vp). Half the bytes of the fp32 path through the GEMM's output
// and the softmax: the 130m classifier 6.77 -> 6.08 ms a step (docs/perf.md, ninth session).
#define CLB_THREADS 512
template <int NPT>
__global__ void __launch_bounds__(CLB_THREADS) softmax_xent_bf16_kernel(bf16 *logits, float *loss,
                                                                        const int32_t *targets, int Vp,
                                                                        float loss_scale, int backward) {
    __shared__ float shm[CLB_THREADS / 32], shs[CLB_THREADS / 32];
    const int m = blockIdx.x, n8 = Vp / 8, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    uint4 *row = (uint4 *)(logits + (size_t)m * Vp);
    const int tgt = targets[m], valid = tgt >= 0 && tgt < Vp;
    const float lt = valid ? bf2f(logits[(size_t)m * Vp + tgt]) : 0.0f;  // before anyone overwrites the row
    uint4 v[NPT];
#pragma unroll
    for (int i = 0; i < NPT; i++) {
        const int idx = i * CLB_THREADS + tid;
        v[i] = idx < n8 ? row[idx] : make_uint4(0xFF80FF80u, 0xFF80FF80u, 0xFF80FF80u, 0xFF80FF80u);  // -inf
    }
    auto each_pair = [&](auto fn) {  // fn(two neighbouring logits) over this thread's pieces, in order
#pragma unroll
        for (int i = 0; i < NPT; i++) {
            const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v[i];
#pragma unroll
            for (int e = 0; e < 4; e++) fn(__bfloat1622float2(h[e]));
        }
    };
    float mx = -INFINITY;
    each_pair([&](float2 f) { mx = fmaxf(mx, fmaxf(f.x, f.y)); });
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) shm[warp] = mx;
    __syncthreads();
    float M_ = -INFINITY;
    for (int i = 0; i < CLB_THREADS / 32; i++) M_ = fmaxf(M_, shm[i]);
    float s = 0.0f;
    each_pair([&](float2 f) { s += __expf(f.x - M_) + __expf(f.y - M_); });
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) shs[warp] = s;
    __syncthreads();
    float S = 0.0f;
    for (int i = 0; i < CLB_THREADS / 32; i++) S += shs[i];
    const float lse = M_ + __logf(S);
    if (tid == 0) loss[m] = valid ? lse - lt : 0.0f;
    if (!backward) return;
    const float scale = valid ? loss_scale : 0.0f;
#pragma unroll
    for (int i = 0; i < NPT; i++) {
        const int idx = i * CLB_THREADS + tid;
        if (idx >= n8) break;
        const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v[i];
        uint4 o;
        __nv_bfloat162 *oh = (__nv_bfloat162 *)&o;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float2 f = __bfloat1622float2(h[e]);
            const int k = 8 * idx + 2 * e;
            oh[e] = __floats2bfloat162_rn((__expf(f.x - lse) - (k == tgt ? 1.0f : 0.0f)) * scale,
                                          (__expf(f.y - lse) - (k + 1 == tgt ? 1.0f : 0.0f)) * scale);
        }
        row[idx] = o;
    }
}
// 16-byte pieces per thread, or 0 where the bf16 path does not apply: Vp a multiple of 8 and at most 53248 (13
// pieces: 128 registers a thread, no spills; 16 spilled)
static int cls_bf16_npt(int Vp) {
    if (Vp % 8) return 0;
    const int npt = (Vp / 8 + CLB_THREADS - 1) / CLB_THREADS;
    return npt <= 8 ? 8 : npt <= 13 ? 13 : 0;
}

static void softmax_xent(float *logits, float *loss, const int32_t *targets, int mc, int Vp, float loss_scale,
                         int backward) {
    size_t smem = (size_t)((Vp / 4 + 1) / 2) * 16;  // half a row, in float4
    const PmCudaDevice *dv = pm_cuda_device();
    if (dv->cc_major >= 9 && Vp % 4 == 0 && smem + 512 <= (size_t)dv->smem_block) {
        if ((int)smem > g_cls_smem_set) {
            cudaCheck(cudaFuncSetAttribute(softmax_xent_pair_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
            g_cls_smem_set = (int)smem;
        }
        softmax_xent_pair_kernel<<<2 * mc, CLS_THREADS, smem, g_stream>>>(logits, loss, targets, Vp, loss_scale,
                                                                          backward);
    } else {
        softmax_xent_kernel<<<mc, CL_THREADS, 0, g_stream>>>(logits, loss, targets, Vp, loss_scale, backward);
    }
    cudaLaunchCheck();
}

// The bf16 softmax of mc rows of (mc, Vp) bf16 logits: npt 16-byte pieces per thread (cls_bf16_npt).
static void softmax_xent_bf16(bf16 *logits, float *loss, const int32_t *targets, int mc, int Vp, float loss_scale,
                              int backward, int npt) {
    auto kern = npt == 8 ? softmax_xent_bf16_kernel<8> : softmax_xent_bf16_kernel<13>;
    kern<<<mc, CLB_THREADS, 0, g_stream>>>(logits, loss, targets, Vp, loss_scale, backward);
    cudaLaunchCheck();
}

static void classifier(void *loss, void *dx, void *dwte, float *logits_out, const void *x, const void *wte,
                       const int32_t *targets, float loss_scale, int M, int C, int Vp, int bf16_logits, int tune) {
    const bf16 *x_ = (const bf16 *)x, *wte_ = (const bf16 *)wte;
    const int npt = logits_out || !bf16_logits ? 0 : cls_bf16_npt(Vp);  // > 0: bf16 logits
    const int chunk = npt ? classifier_chunk_bf16(M) : classifier_chunk(M);
    if (chunk == 0) return;
    // (chunk, Vp) logits, fp32 or bf16; then the bf16 dlogits in place, with row stride ldl (in bf16 elements)
    void *logits = scratch_get(&s_big, (size_t)chunk * Vp * (npt ? sizeof(bf16) : sizeof(float)));
    const int ldl = npt ? Vp : 2 * Vp;
    for (int m0 = 0; m0 < M; m0 += chunk) {
        int mc = M - m0 < chunk ? M - m0 : chunk;
        const bf16 *xc = x_ + (size_t)m0 * C;
        // logits^T (Vp x mc, ld Vp) = wte (C x Vp stored, transposed) @ x^T (C x mc)
        gemm(1, 0, Vp, mc, C, wte_, C, xc, C, logits, Vp, npt ? CUDA_R_16BF : CUDA_R_32F, 0, NULL, tune);
        if (logits_out)
            cudaCheck(cudaMemcpyAsync(logits_out + (size_t)m0 * Vp, logits, (size_t)mc * Vp * sizeof(float),
                                      cudaMemcpyDeviceToHost, g_stream));
        if (npt)
            softmax_xent_bf16((bf16 *)logits, (float *)loss + m0, targets + m0, mc, Vp, loss_scale, dx != NULL, npt);
        else
            softmax_xent((float *)logits, (float *)loss + m0, targets + m0, mc, Vp, loss_scale, dx != NULL);
        if (dx) {
            const bf16 *dl = (const bf16 *)logits;  // (mc, Vp) bf16, row stride ldl
            // dwte first: it still reads this chunk of x, so dx may overwrite x in place (as on the CPU).
            // dwte^T (C x Vp, ld C) += x^T (C x mc) @ dlogits (mc x Vp: stored Vp x mc, transposed)
            // (written, not added, by the first chunk under Backend.grads_write)
            if (dwte)
                gemm(0, 1, C, Vp, mc, xc, C, dl, ldl, dwte, C, CUDA_R_32F, !(g_grads_write && m0 == 0), NULL, tune);
            // dx^T (C x mc) = wte (C x Vp, ld C) @ dlogits^T (Vp x mc, ld ldl)
            gemm(0, 0, C, mc, Vp, wte_, C, dl, ldl, (bf16 *)dx + (size_t)m0 * C, C, CUDA_R_16BF, 0, NULL, tune);
        }
    }
    if (logits_out) cudaCheck(cudaStreamSynchronize(g_stream));
}
static void cu_classifier(void *loss, void *dx, void *dwte, float *logits_out, const void *x, const void *wte,
                          const int32_t *targets, float loss_scale, int M, int C, int Vp, int bf16_logits) {
    classifier(loss, dx, dwte, logits_out, x, wte, targets, loss_scale, M, C, Vp, bf16_logits, 1);
}
static void cu_classifier_det(void *loss, void *dx, void *dwte, float *logits_out, const void *x, const void *wte,
                              const int32_t *targets, float loss_scale, int M, int C, int Vp, int bf16_logits) {
    classifier(loss, dx, dwte, logits_out, x, wte, targets, loss_scale, M, C, Vp, bf16_logits, 0);
}

// The largest the scratch buffers above get in a training step of this shape (s_big: the classifier's chunk or
// the scan's workspace; the norm and conv partials), plus cuBLASLt's workspace and 64 MB for what the libraries
// and the small buffers (GEMM plans, the optimizer's piece table, segment summaries) hold: checked against the
// bench's measured peaks in docs/perf.md.
static size_t cu_workspace_bytes(int M, int T, int C, int Cd, int N, int K, int Vp) {
    size_t chunk = (size_t)classifier_chunk(M) * Vp * sizeof(float);
    size_t scan = cuda_scan_workspace_bytes(M, T, Cd, N);
    int g4 = norm_bwd_groups(M, 1), g1 = norm_bwd_groups(M, 0);
    size_t norm = (size_t)(g4 > g1 ? g4 : g1) * C * sizeof(float), conv = cuda_conv_bwd_part_bytes(M, Cd, K),
           par = cuda_scan_param_part_bytes(M, T, Cd, N), part = norm > conv ? norm : conv;
    return scratch_grown(chunk > scan ? chunk : scan) + red_ring_bytes(part > par ? part : par) +
           LT_WS_BYTES * (side_enabled() ? 2 : 1) + ((size_t)64 << 20);
}

// ---------------------------------------------------------------------------------------------------------
// the side stream (Backend.side_begin / side_end / side_wait)
//
// Why: a layer's weight-gradient GEMMs are off the backward's critical path (nothing in the layers below reads
// them), so on a second stream they run beside the next kernels of the chain: the byte-bound norm and conv
// backward, the narrow x_proj / dt_proj GEMMs, whose SMs would otherwise sit partly idle. The model orders every
// hazard with side_wait (model.c, backward_body); the kernels and their inputs are the same, so are the bits.
// PM_SIDE_STREAM=0 queues everything on the main stream (A/B runs); =2 (tests) holds each piece of side work
// back ~0.3 ms first, so that a missing side_wait lets the main stream overwrite a side op's inputs and
// shows up as different bits. The main stream has the highest priority and the side stream the lowest
// (PM_STREAM_PRIORITY=0: both the default): the backward queues a layer's recompute on the side stream to run
// beside the scan backward on the SMs the scan's grid leaves free, and the scan's blocks must take their SMs
// first (started after a byte-bound kernel, the scan waited for it: +0.3 ms a layer in scan_lab `beside`).
// (Priorities alone, before that, measured no different: 130m 304.5-305.2K tok/s with them, 303.3-303.8K without.)
static void create_stream(cudaStream_t *s, int highest) {
    int least = 0, greatest = 0;
    const char *e = getenv("PM_STREAM_PRIORITY");
    if (!(e && e[0] == '0')) cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, highest ? greatest : least));
}

static const int SIDE_RING = 64;  // ticket k's event is g_side_done[k % SIDE_RING]
static cudaEvent_t g_side_fork, g_side_done[SIDE_RING];
static int g_side_tickets;

static int side_mode(void) {  // read each call: the tests switch it
    const char *e = getenv("PM_SIDE_STREAM");
    return e && e[0] == '0' ? 0 : e && e[0] == '2' ? 2 : 1;
}
static int side_enabled(void) { return side_mode() != 0; }

__global__ void spin_kernel(unsigned long long ns) {  // PM_SIDE_STREAM=2: holds its stream back ns
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

static void cu_side_begin(void) {
    const int mode = side_mode();
    if (!mode || g_stream != g_main) return;
    if (!g_side) {
        create_stream(&g_side, 0);
        cudaCheck(cudaEventCreateWithFlags(&g_side_fork, cudaEventDisableTiming));
        for (int i = 0; i < SIDE_RING; i++) cudaCheck(cudaEventCreateWithFlags(&g_side_done[i], cudaEventDisableTiming));
        cudaCheck(cudaMalloc(&g_lt_ws_side, LT_WS_BYTES));
    }
    cudaCheck(cudaEventRecord(g_side_fork, g_main));  // the side work starts after everything queued so far
    cudaCheck(cudaStreamWaitEvent(g_side, g_side_fork, 0));
    if (mode == 2) {
        spin_kernel<<<1, 1, 0, g_side>>>(300000ull);
        cudaLaunchCheck();
    }
    g_stream = g_side;
}
static int cu_side_end(void) {
    if (g_stream != g_side) return 0;
    g_stream = g_main;
    const int k = ++g_side_tickets;
    cudaCheck(cudaEventRecord(g_side_done[k % SIDE_RING], g_side));
    return k;
}
// A slot recorded again since (ticket k + SIDE_RING, later work on the same in-order stream) only waits longer.
static void cu_side_wait(int ticket) {
    if (ticket > 0) cudaCheck(cudaStreamWaitEvent(g_main, g_side_done[ticket % SIDE_RING], 0));
}
// Backend.fence_stream: `stream` waits for what the main and the side stream hold now. cudaStreamWaitEvent takes
// the event's latest record at the call, so the two events are recorded again at every fence.
static void cu_fence_stream(void *stream) {
    static cudaEvent_t main_now, side_now;
    if (!main_now) {
        cudaCheck(cudaEventCreateWithFlags(&main_now, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&side_now, cudaEventDisableTiming));
    }
    cudaCheck(cudaEventRecord(main_now, g_main));
    cudaCheck(cudaStreamWaitEvent((cudaStream_t)stream, main_now, 0));
    if (g_side) {
        cudaCheck(cudaEventRecord(side_now, g_side));
        cudaCheck(cudaStreamWaitEvent((cudaStream_t)stream, side_now, 0));
    }
    static int hold = -1;  // PM_FENCE_HOLD, read once: fixed for a process (tests run whole jobs with it)
    if (hold < 0) {
        const char *e = getenv("PM_FENCE_HOLD");
        hold = e && e[0] == '1';
    }
    if (hold) {
        spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(1000000ull);
        cudaLaunchCheck();
    }
}

// ---------------------------------------------------------------------------------------------------------
// global gradient norm and AdamW

// Fixed block count (not the SM count: the summation order is the same on every GPU). 1024 blocks of 128
// threads are all resident at once on an H200 (<= 64 registers: 8 blocks per SM), so there is no second,
// partly empty wave; each thread keeps SUMSQ_U float4 loads (64 bytes) in flight per step.
#define SUMSQ_BLOCKS 1024
#define SUMSQ_THREADS 128
#define SUMSQ_U 4
// x + head is 16-byte aligned (head = 0..3 leading elements, added by thread 0 first); nb float4 groups
// follow, group i taken by thread i mod (grid size), in increasing i; the tail (0..3 elements) is added last,
// element j by thread j. The order is fixed by n and x's alignment.
__global__ void __launch_bounds__(SUMSQ_THREADS, 8) sumsq_partial_kernel(double *part, const float *x, size_t n,
                                                                      int head) {
    __shared__ double sh[32];
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    double s = 0.0;
    if (tid == 0)
        for (int j = 0; j < head; j++) s += (double)x[j] * x[j];
    const float4 *x4 = (const float4 *)(x + head);
    size_t nb = (n - head) / 4;
    for (size_t i = tid; i < nb; i += SUMSQ_U * stride) {
        float4 v[SUMSQ_U];
#pragma unroll
        for (int u = 0; u < SUMSQ_U; u++)
            if (i + u * stride < nb) v[u] = x4[i + u * stride];
#pragma unroll
        for (int u = 0; u < SUMSQ_U; u++)
            if (i + u * stride < nb) {
                s += (double)v[u].x * v[u].x;
                s += (double)v[u].y * v[u].y;
                s += (double)v[u].z * v[u].z;
                s += (double)v[u].w * v[u].w;
            }
    }
    size_t tail0 = head + 4 * nb;
    if (tid < n - tail0) s += (double)x[tail0 + tid] * x[tail0 + tid];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void sumsq_final_kernel(double *out, const double *part, int G) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int i = threadIdx.x; i < G; i += blockDim.x) s += part[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) *out = s;
}
static double cu_sumsq(const void *x, size_t n) {
    if (n == 0) return 0.0;
    // a fixed block count (not the SM count): the summation order is the same on every GPU
    size_t per = 4 * SUMSQ_THREADS;
    int G = (int)((n + per - 1) / per < SUMSQ_BLOCKS ? (n + per - 1) / per : SUMSQ_BLOCKS);
    int head = (int)((16 - (uintptr_t)x % 16) % 16 / 4);  // floats are 4-byte aligned
    if ((size_t)head > n) head = (int)n;
    double *ws = (double *)scratch_get(&s_sumsq, (SUMSQ_BLOCKS + 1) * sizeof(double));
    sumsq_partial_kernel<<<G, SUMSQ_THREADS, 0, g_stream>>>(ws + 1, (const float *)x, n, head);
    cudaLaunchCheck();
    sumsq_final_kernel<<<1, 256, 0, g_stream>>>(ws, ws + 1, G);
    cudaLaunchCheck();
    double r;
    cu_download(&r, ws, sizeof r);
    return r;
}

// One launch over every segment: the host cuts each segment into ADAM_CHUNK-element pieces, and block b
// updates piece b, so each block knows its segment's decay flag without searching.
#define ADAM_CHUNK 4096
typedef struct {
    size_t start;
    unsigned count, decay;
} AdamPiece;

static ParamSegment *g_adam_segs;  // host copy of the segment table the device piece table was built from
static int g_adam_nsegs;
static int *g_adam_seg_piece;      // (nsegs + 1) the first piece of each segment (AdamWArgs.part_*), then the count

// The update of one element, exactly as the v4 kernel computed it (the CPU backend differs by rounding only:
// it decays by one product, p * (1 - lr*wd), and computes the bias corrections in double).
__device__ __forceinline__ void adam_one(float &p, float &m, float &v, float g, int decay, float lr, float b1,
                                         float b2, float eps, float wd, float gscale, float bc1, float bc2_sqrt) {
    float gr = g * gscale;
    if (decay) p -= lr * wd * p;
    m = b1 * m + (1.0f - b1) * gr;
    v = b2 * v + (1.0f - b2) * gr * gr;
    p -= (lr / bc1) * m / (sqrtf(v) / bc2_sqrt + eps);
}

// Block b updates piece b. With vec set (every array 16-byte aligned at the same element phase, pa 8-byte:
// always for one process; see cu_adamw), the piece's aligned middle goes as float4 groups (bf16x4 for pa):
// each thread first loads all ADAM_G of its groups (p, g, m, v: 256 bytes in flight, where the scalar loop
// had 16 bytes per dependent step), then updates and stores them; the 0..3 elements before the first aligned
// element and after the last group are done one by one. Without vec the whole piece goes one by one.
#define ADAM_THREADS 256
#define ADAM_G (ADAM_CHUNK / 4 / ADAM_THREADS)  // float4 groups per thread: a piece is at most ADAM_CHUNK long
static_assert(ADAM_CHUNK % (4 * ADAM_THREADS) == 0, "each thread takes exactly ADAM_G groups of a full piece");
__global__ void __launch_bounds__(ADAM_THREADS) adamw_kernel(float *__restrict__ p, bf16 *__restrict__ pa,
                                                             const float *__restrict__ g, float *__restrict__ m,
                                                             float *__restrict__ v, const AdamPiece *pieces,
                                                             int vec, int phase, float lr, float b1, float b2,
                                                             float eps, float wd, float gscale, float bc1,
                                                             float bc2_sqrt) {
    AdamPiece pc = pieces[blockIdx.x];
    size_t s = pc.start, e = s + pc.count, a0 = e, a1 = e;  // vector groups cover [a0, a1)
    if (vec) {
        a0 = s + (4 - (s + phase) % 4) % 4;
        if (a0 > e) a0 = e;
        a1 = a0 + (e - a0) / 4 * 4;
    }
    int dc = pc.decay;
    for (size_t k = s + threadIdx.x; k < a0; k += blockDim.x) {
        float pk = p[k], mk = m[k], vk = v[k];
        adam_one(pk, mk, vk, g[k], dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
        p[k] = pk, m[k] = mk, v[k] = vk;
        if (pa) pa[k] = f2bf(pk);
    }
    for (size_t k = a1 + threadIdx.x; k < e; k += blockDim.x) {
        float pk = p[k], mk = m[k], vk = v[k];
        adam_one(pk, mk, vk, g[k], dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
        p[k] = pk, m[k] = mk, v[k] = vk;
        if (pa) pa[k] = f2bf(pk);
    }
    int ng = (int)((a1 - a0) / 4);
    float4 *p4 = (float4 *)(p + a0), *m4 = (float4 *)(m + a0), *v4 = (float4 *)(v + a0);
    const float4 *g4 = (const float4 *)(g + a0);
    float4 P[ADAM_G], G_[ADAM_G], Mo[ADAM_G], V[ADAM_G];
#pragma unroll
    for (int j = 0; j < ADAM_G; j++) {
        int q = threadIdx.x + j * ADAM_THREADS;
        if (q < ng) P[j] = p4[q], G_[j] = g4[q], Mo[j] = m4[q], V[j] = v4[q];
    }
#pragma unroll
    for (int j = 0; j < ADAM_G; j++) {
        int q = threadIdx.x + j * ADAM_THREADS;
        if (q < ng) {
            adam_one(P[j].x, Mo[j].x, V[j].x, G_[j].x, dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
            adam_one(P[j].y, Mo[j].y, V[j].y, G_[j].y, dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
            adam_one(P[j].z, Mo[j].z, V[j].z, G_[j].z, dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
            adam_one(P[j].w, Mo[j].w, V[j].w, G_[j].w, dc, lr, b1, b2, eps, wd, gscale, bc1, bc2_sqrt);
            p4[q] = P[j], m4[q] = Mo[j], v4[q] = V[j];
            if (pa) ((uint2 *)(pa + a0))[q] = f4_to_bf16x4(P[j]);
        }
    }
}

static void cu_adamw(void *params, void *params_act, const void *grads, void *m, void *v,
                     const ParamSegment *segs, int nsegs, const AdamWArgs *a) {
    int s0, s1;
    adamw_segment_range(a, nsegs, &s0, &s1);
    if (s0 == 0) g_steps++;  // the optimizer steps the GEMM tuning counts (gemm_tune): a step's first part
    if (nsegs != g_adam_nsegs || memcmp(segs, g_adam_segs, nsegs * sizeof *segs) != 0) {
        size_t np = 0;
        for (int i = 0; i < nsegs; i++) np += (segs[i].size + ADAM_CHUNK - 1) / ADAM_CHUNK;
        if (np > 0x7fffffff) pm_die("adamw: too many parameter pieces (%zu)", np);
        AdamPiece *h = (AdamPiece *)pm_malloc((np ? np : 1) * sizeof *h);
        g_adam_seg_piece = (int *)pm_realloc(g_adam_seg_piece, (nsegs + 1) * sizeof *g_adam_seg_piece);
        size_t q = 0;
        for (int i = 0; i < nsegs; i++) {
            g_adam_seg_piece[i] = (int)q;
            for (size_t o = 0; o < segs[i].size; o += ADAM_CHUNK) {
                h[q].start = segs[i].offset + o;
                h[q].count = (unsigned)(segs[i].size - o < ADAM_CHUNK ? segs[i].size - o : ADAM_CHUNK);
                h[q].decay = segs[i].decay ? 1u : 0u;
                q++;
            }
        }
        void *d = scratch_get(&s_adam, (np ? np : 1) * sizeof *h);
        cu_upload(d, h, np * sizeof *h);
        free(h);
        g_adam_segs = (ParamSegment *)pm_realloc(g_adam_segs, (nsegs ? nsegs : 1) * sizeof *segs);
        memcpy(g_adam_segs, segs, nsegs * sizeof *segs);
        g_adam_nsegs = nsegs;
        g_adam_seg_piece[nsegs] = (int)np;
    }
    const int p0 = g_adam_seg_piece[s0], np = g_adam_seg_piece[s1] - p0;
    if (np == 0) return;
    float bc1 = 1.0f - powf(a->beta1, (float)a->step), bc2 = 1.0f - powf(a->beta2, (float)a->step);
    // The float4 path needs element k at the same 16-byte phase in params, grads, m and v (and params_act's
    // 8-byte phase to match): true for one process (every array starts a cudaMalloc), and for the sharded
    // optimizer (dist.c), which offsets a rank's moment buffers to the phase of params + lo. Arrays out of step
    // take the one-by-one loop.
    uintptr_t ph = (uintptr_t)params % 16;
    int vec = (uintptr_t)grads % 16 == ph && (uintptr_t)m % 16 == ph && (uintptr_t)v % 16 == ph && ph % 4 == 0 &&
              (!params_act || (uintptr_t)params_act % 8 == ph / 2);
    adamw_kernel<<<np, ADAM_THREADS, 0, g_stream>>>(
        (float *)params, (bf16 *)params_act, (const float *)grads, (float *)m, (float *)v,
        (const AdamPiece *)s_adam.p + p0, vec, (int)(ph / 4), a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
        a->grad_scale, bc1, sqrtf(bc2));
    cudaLaunchCheck();
}

// ---------------------------------------------------------------------------------------------------------
// construction

static Backend g_backends[2];
static int g_inited;  // 0: not tried, 1: ready, -1: no usable GPU
static char g_init_err[512];  // why not, repeated to every later caller

static int cuda_init(void) {
    if (g_inited) return g_inited;
    g_inited = -1;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the (non-sticky) error so later CUDA calls start clean
        snprintf(g_init_err, sizeof g_init_err, "no usable CUDA GPU: %s (%s)", cudaGetErrorString(e),
                 pm_cuda_hint(e));
        return -1;
    }
    if (n == 0) {
        snprintf(g_init_err, sizeof g_init_err, "no CUDA GPU found (cudaGetDeviceCount returned 0)");
        return -1;
    }
    create_stream(&g_main, 1);
    g_stream = g_main;
    cublasStatus_t s = cublasLtCreate(&g_lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(g_init_err, sizeof g_init_err, "cuBLASLt could not be initialized (status %d)", (int)s);
        return -1;
    }
    cudaCheck(cudaMalloc(&g_lt_ws, LT_WS_BYTES));
    s = cublasCreate(&g_cublas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(g_init_err, sizeof g_init_err, "cuBLAS could not be initialized (status %d)", (int)s);
        return -1;
    }
    // on a stream, with that stream's cuBLASLt workspace: the two never run at once on one stream
    cublas_to_current_stream();
    for (int d = 0; d < 2; d++) {
        Backend *b = &g_backends[d];
        b->name = "cuda";
        b->act_bytes = sizeof(bf16);
        b->f32_bytes = sizeof(float);
        b->deterministic = d;
        b->alloc = cu_alloc;
        b->free = cu_free;
        b->upload = cu_upload;
        b->download = cu_download;
        b->memzero = cu_memzero;
        b->synchronize = cu_synchronize;
        b->f32_to_act = cu_f32_to_act;
        b->act_to_f32 = cu_act_to_f32;
        b->embedding_fwd = cu_embedding_fwd;
        b->embedding_bwd = d ? cu_embedding_bwd_det : cu_embedding_bwd_fast;
        b->add_rmsnorm_fwd = cu_add_rmsnorm_fwd;
        b->rmsnorm_bwd = cu_rmsnorm_bwd;
        b->matmul_fwd = d ? cu_matmul_fwd_det : cu_matmul_fwd;
        b->matmul_bwd = d ? cu_matmul_bwd_det : cu_matmul_bwd;
        b->matmul_dw_batch = d ? cu_matmul_dw_batch_det : cu_matmul_dw_batch;
        b->conv_silu_fwd = cu_conv_silu_fwd;
        b->conv_silu_bwd = cu_conv_silu_bwd;
        b->scan_fwd = cu_scan_fwd;
        b->scan_states_bytes = cu_scan_states_bytes;
        b->scan_bwd = d ? cu_scan_bwd_det : cu_scan_bwd_fast;
        b->carry_state_out = cu_carry_state_out;
        b->classifier = d ? cu_classifier_det : cu_classifier;
        b->sumsq = cu_sumsq;
        b->adamw = cu_adamw;
        b->side_begin = cu_side_begin;
        b->side_end = cu_side_end;
        b->side_wait = cu_side_wait;
        b->grads_write = cu_grads_write;
        b->defer_reductions = cu_defer_reductions;
        b->fence_stream = cu_fence_stream;
        b->event_record = cu_event_record;
        b->event_elapsed_ms = cu_event_elapsed_ms;
        b->event_release = cu_event_release;
        b->copy = cu_copy;
        b->spin = cu_spin;
        b->mem_info = cu_mem_info;
        b->workspace_bytes = cu_workspace_bytes;
        b->carry_workspace_bytes = cuda_carry_ws_bytes;
    }
    g_inited = 1;
    return 1;
}

extern "C" int backend_cuda_gemm_tunings(void) { return g_gemm_tunings; }
extern "C" void backend_cuda_gemm_pick(int pick) { g_gemm_pick = pick < 0 ? -1 : pick; }
extern "C" int backend_cuda_gemm_picked(int *ran, int *tile, int *split) {
    *ran = g_pick_ran, *tile = -1, *split = -1;
    if (g_pick_found == 0) return 0;
    algo_tile_split(&g_pick_algo, tile, split);
    return g_pick_found;
}
extern "C" int backend_cuda_gemm_tune_after(void) { return gemm_tune_enabled() ? (int)gemm_tune_after() : 0; }
extern "C" int backend_cuda_side_tickets(void) { return g_side_tickets; }

extern "C" const Backend *backend_cuda(int deterministic) {
    if (cuda_init() != 1) {
        pm_error("%s", g_init_err);
        return NULL;
    }
    return &g_backends[deterministic ? 1 : 0];
}
