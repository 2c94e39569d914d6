// cuda_common.h — error checking and small bf16 helpers shared by the CUDA sources (backend_cuda.cu,
// cuda_scan.cu). Every CUDA and cuBLASLt call goes through cudaCheck / cublasCheck: a failure prints one
// line naming the call site and a hint, then exits (a half-computed training step is never useful).
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
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

// bf16 <-> fp32. Loads widen exactly; stores round to nearest even.
__device__ __forceinline__ float bf2f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ __nv_bfloat16 f2bf(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float pm_sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
