// cuda_conv.h — the depthwise causal conv1d + SiLU kernels of the CUDA backend (cuda_conv.cu), with document
// resets. Semantics are exactly those of Backend.conv_silu_fwd / conv_silu_bwd in backend.h, with ACT = bf16 and
// F32 = float: a tap j steps back from token t is read only if j <= min(pos[t], t % T). K (the kernel width) is
// 1..4. Every result is bit-identical run to run (no atomics; all sums in a fixed order).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_common.h"  // PmColsumJob

// u (M, C) contiguous = silu(b + causal depthwise conv of xi (M, C) with row stride ldx); w (C, K), b (C).
void cuda_conv_silu_fwd(__nv_bfloat16 *u, const __nv_bfloat16 *xi, int ldx, const float *w, const float *b,
                        const int32_t *pos, int M, int T, int C, int K, cudaStream_t st);

// Bytes of the partial-sum buffer `part` that cuda_conv_silu_bwd needs for (M, C, K) (any ldx or alignment).
size_t cuda_conv_bwd_part_bytes(int M, int C, int K);

// Given du (M, C) contiguous, recompute the pre-activation and write dxi (M, C) with row stride ldx (overwrite;
// columns C .. ldx-1 untouched); dw (C, K) += and db (C) += their gradients. `part` is scratch of at least
// cuda_conv_bwd_part_bytes(M, C, K) bytes (device memory; its contents on entry do not matter).
void cuda_conv_silu_bwd(__nv_bfloat16 *dxi, int ldx, float *dw, float *db, const __nv_bfloat16 *du,
                        const __nv_bfloat16 *xi, const float *w, const float *b, const int32_t *pos, int M, int T,
                        int C, int K, float *part, cudaStream_t st);
// The backward in two: dxi and the G partial rows of dw | db in part (returns G; 0 when M is 0), then their
// reduction as a job (pm_colsum_job with add 1 is what cuda_conv_silu_bwd does; the backend queues it, with add 0
// under Backend.grads_write).
int cuda_conv_silu_bwd_part(__nv_bfloat16 *dxi, int ldx, float *part, const __nv_bfloat16 *du,
                            const __nv_bfloat16 *xi, const float *w, const float *b, const int32_t *pos, int M, int T,
                            int C, int K, cudaStream_t st);
PmColsumJob cuda_conv_bwd_job(float *dw, float *db, const float *part, int G, int C, int K, int add);
