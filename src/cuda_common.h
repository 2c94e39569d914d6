// cuda_common.h — what the CUDA sources (backend_cuda.cu, cuda_scan.cu, cuda_conv.cu) share: error checking, small
// bf16 helpers, pointer alignment, the device facts their plans read, and the deterministic column sum. Every CUDA
// and cuBLASLt call goes through cudaCheck / cublasCheck: a failure prints one line naming the call site and a
// hint, then exits (a half-computed training step is never useful).
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// A hint for the errors users actually hit, so the one error line says what to do about it.
static inline const char *pm_cuda_hint(cudaError_t e) {
    switch (e) {
        case cudaErrorMemoryAllocation:
            return "out of GPU memory: lower the batch size or the sequence length";
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorInvalidDeviceFunction:
            return "this binary has no kernels for this GPU: rebuild with CMAKE_CUDA_ARCHITECTURES set to the "
                   "GPU's compute capability";
        case cudaErrorIllegalAddress:
        case cudaErrorMisalignedAddress:
            return "a kernel accessed memory out of bounds: rerun under compute-sanitizer";
        case cudaErrorInsufficientDriver:
            return "no NVIDIA driver is loaded, or it is older than this binary's CUDA runtime";
        case cudaErrorNoDevice:
            return "no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)";
        default:
            return "a CUDA call failed";
    }
}

static inline void pm_cuda_fail(cudaError_t e, const char *call, const char *file, int line) {
    fprintf(stderr, "packmamba: CUDA error '%s' at %s:%d in %s (%s)\n", cudaGetErrorString(e), file, line, call,
            pm_cuda_hint(e));
    exit(1);
}

static inline void pm_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line) {
    const char *hint = s == CUBLAS_STATUS_NOT_SUPPORTED ? "this matrix shape/layout has no cuBLASLt kernel"
                       : s == CUBLAS_STATUS_ALLOC_FAILED ? "out of GPU memory"
                       : s == CUBLAS_STATUS_NOT_INITIALIZED ? "cuBLASLt could not start (driver or library)"
                                                            : "a cuBLASLt call failed";
    fprintf(stderr, "packmamba: cuBLAS error %d at %s:%d in %s (%s)\n", (int)s, file, line, call, hint);
    exit(1);
}

#define cudaCheck(call)                                                   \
    do {                                                                  \
        cudaError_t pm_e_ = (call);                                       \
        if (pm_e_ != cudaSuccess) pm_cuda_fail(pm_e_, #call, __FILE__, __LINE__); \
    } while (0)

#define cublasCheck(call)                                                            \
    do {                                                                             \
        cublasStatus_t pm_s_ = (call);                                               \
        if (pm_s_ != CUBLAS_STATUS_SUCCESS) pm_cublas_fail(pm_s_, #call, __FILE__, __LINE__); \
    } while (0)

// After every kernel launch: catches bad launch configurations at once (cheap: no synchronization).
#define cudaLaunchCheck() cudaCheck(cudaGetLastError())

static inline unsigned pm_ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
// p is a multiple of `bytes` (vector loads and stores need their width's alignment)
static inline int pm_is_aligned(const void *p, size_t bytes) { return (uintptr_t)p % bytes == 0; }

// bf16 <-> fp32. Loads widen exactly; stores round to nearest even.
__device__ __forceinline__ float bf2f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ __nv_bfloat16 f2bf(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float pm_sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

// One special-function-unit instruction each (flush to zero but tanh): the scan's exps, logs, reciprocals and
// tanh, and the bench's exp ceiling (Backend.spin), which must time the same instruction.
__device__ __forceinline__ float ex2_approx(float x) {  // 2^x
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float lg2_approx(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float tanh_approx(float x) {  // max abs error 7.8e-6 (dev/kernels/mufu_lab.cu, call254)
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
// sigmoid(x) as 0.5 tanh(x / 2) + 0.5: one special-function instruction where 1 / (1 + e^-x) takes two (max abs
// error 3.9e-6 against double; mufu_lab). The scan's (sigmoid_f, v85) and the conv's (conv_sigmoid, conv v10).
__device__ __forceinline__ float pm_sigmoid_tanh(float x) { return fmaf(0.5f, tanh_approx(0.5f * x), 0.5f); }

// One clear line naming the CUDA source (`who`) and exit, like pm_die (the kernel files are also linked
// standalone by the kernel labs, without util.c).
static inline void pm_cuda_die(const char *who, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "packmamba: %s: ", who);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

// What the kernels' plans need to know of the current device, queried once (the H200's values if a query
// fails): SMs, shared memory per block (opt-in) and per SM, compute capability (major, minor).
typedef struct {
    int sms, smem_block, smem_sm, cc_major, cc_minor;
} PmCudaDevice;
static inline const PmCudaDevice *pm_cuda_device(void) {
    static PmCudaDevice d = {0, 0, 0, 0, 0};
    if (d.sms == 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.smem_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
            d.sms <= 0)
            d = PmCudaDevice{132, 232448, 233472, 9, 0};
    }
    return &d;
}
static inline int pm_cuda_sm_count(void) { return pm_cuda_device()->sms; }

// dst[j] += sum_{g < G} part[g * W + j] for j < W1, dst2[j - W1] += for W1 <= j < W (= instead of += when add is
// 0: gradients written by their first writer, Backend.grads_write): the second pass of every
// deterministic column reduction (per-group partial rows in a fixed partition, then this). A block takes 32
// adjacent columns (coalesced rows) and splits the G rows among PM_COLSUM_Y thread rows: thread row y sums g = y,
// y + PM_COLSUM_Y, ... in order, then row 0 adds the PM_COLSUM_Y sums in order. The order is fixed by G alone, so
// results repeat bit for bit; the split keeps many loads in flight where a single thread per column would walk
// all G rows alone. Two gradients that share one partial row (the conv's dw and db) take one launch.
#define PM_COLSUM_Y 16

// One such reduction as a job, so that several can run in one launch (pm_colsum_batch; the CUDA backend's
// reduction queue, Backend.defer_reductions). kind PM_COLSUM_SPLIT: column j goes to dst[j] (j < W1) or
// dst2[j - W1]. kind PM_COLSUM_SCAN: the scan's parameter rows (2 + n, W1 = Cd channels): row 0 to ddt_bias
// (dst[c]), row 1 to dD (dst2[c]), row 2 + i to dA_log (dst3[c * n + i]).
enum { PM_COLSUM_SPLIT = 0, PM_COLSUM_SCAN = 1 };
typedef struct {
    float *dst, *dst2, *dst3;
    const float *part;  // (G, W) f32
    int G, W, W1, n, add, kind;
} PmColsumJob;
#define PM_COLSUM_MAXJOBS 48  // per launch: the jobs travel as a kernel parameter (< 4 KB)
typedef struct {
    PmColsumJob job[PM_COLSUM_MAXJOBS];
    int block0[PM_COLSUM_MAXJOBS + 1];  // job i takes blocks block0[i] .. block0[i + 1] - 1
    int njobs;
} PmColsumBatch;

// Block `b` (32 columns) of job `jb`: the sum described above, then the store into the job's destination.
static __device__ __forceinline__ void pm_colsum_block(const PmColsumJob &jb, int b) {
    __shared__ float sh[PM_COLSUM_Y][33];
    const int j = b * 32 + threadIdx.x, y = threadIdx.y, W = jb.W, G = jb.G;
    float s = 0.0f;
    if (j < W)
        for (int g = y; g < G; g += PM_COLSUM_Y) s += jb.part[(size_t)g * W + j];
    sh[y][threadIdx.x] = s;
    __syncthreads();
    if (y == 0 && j < W) {
        float t = 0.0f;
        for (int i = 0; i < PM_COLSUM_Y; i++) t += sh[i][threadIdx.x];
        float *d;
        if (jb.kind == PM_COLSUM_SPLIT) {
            d = j < jb.W1 ? jb.dst + j : jb.dst2 + (j - jb.W1);
        } else {
            const int r = j / jb.W1, c = j - r * jb.W1;
            d = r == 0 ? jb.dst + c : r == 1 ? jb.dst2 + c : jb.dst3 + (size_t)c * jb.n + (r - 2);
        }
        *d = jb.add ? *d + t : t;
    }
}
static __global__ void __launch_bounds__(32 * PM_COLSUM_Y) pm_colsum_batch_kernel(const __grid_constant__ PmColsumBatch b) {
    int i = 0;
    while (i + 1 < b.njobs && (int)blockIdx.x >= b.block0[i + 1]) i++;
    pm_colsum_block(b.job[i], (int)blockIdx.x - b.block0[i]);
}
static inline int pm_colsum_blocks(const PmColsumJob &jb) { return (jb.W + 31) / 32; }
// Adds job to batch *b (b->njobs < PM_COLSUM_MAXJOBS).
static inline void pm_colsum_add(PmColsumBatch *b, const PmColsumJob &jb) {
    if (b->njobs == 0) b->block0[0] = 0;
    b->job[b->njobs] = jb;
    b->block0[b->njobs + 1] = b->block0[b->njobs] + pm_colsum_blocks(jb);
    b->njobs++;
}
// Runs the batch's jobs (one launch) and empties it.
static inline void pm_colsum_batch(PmColsumBatch *b, cudaStream_t st) {
    if (b->njobs == 0) return;
    pm_colsum_batch_kernel<<<b->block0[b->njobs], dim3(32, PM_COLSUM_Y), 0, st>>>(*b);
    cudaLaunchCheck();
    b->njobs = 0;
}
// One job at once.
static inline void pm_colsum_job(const PmColsumJob &jb, cudaStream_t st) {
    PmColsumBatch b;
    b.njobs = 0;
    pm_colsum_add(&b, jb);
    pm_colsum_batch(&b, st);
}
static inline void pm_colsum(float *dst, float *dst2, int W1, const float *part, int G, int W, int add,
                             cudaStream_t st) {
    PmColsumJob jb = {dst, dst2, NULL, part, G, W, W1, 0, add, PM_COLSUM_SPLIT};
    pm_colsum_job(jb, st);
}
