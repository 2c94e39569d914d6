// cuda_scan.h — the selective-scan kernels of the CUDA backend (cuda_scan.cu), with document resets.
// Semantics are exactly those of Backend.scan_fwd / scan_bwd in backend.h, with ACT = bf16 and F32 = float.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_common.h"  // PmColsumJob

// The forward's scan states (below) are the state before every PM_SCAN_CKPT_TOKENS-th token of a row, (rows, nck,
// Cd, N) fp32 (cuda_carry.cu's state out reads them).
#define PM_SCAN_CKPT_TOKENS 16

// Workspace the backward needs for (M, T, Cd, N); the backend allocates it once at start.
size_t cuda_scan_workspace_bytes(int M, int T, int Cd, int N);

// The forward can leave the backward the scan states it needs (every 16th token's, fp32), so the backward skips
// recomputing them: bytes of that buffer for (M, T, Cd, N).
size_t cuda_scan_states_bytes(int M, int T, int Cd, int N);
// The forward; it also writes `states` (cuda_scan_states_bytes) for cuda_scan_bwd_ex unless that is NULL.
// carry_first, carry_h0: NULL, or Backend.scan_fwd's first, h0 (rows carried in from the batch before start from
// h0 instead of 0).
void cuda_scan_fwd_ex(__nv_bfloat16 *out, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                      const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *D,
                      const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                      float *states, cudaStream_t stream, const int32_t *carry_first = NULL,
                      const float *carry_h0 = NULL);

// The backward: overwrites du, ddpre, dB, dC, dz; accumulates ddt_bias, dA_log, dD (writes them when add_params
// is 0: Backend.grads_write; the default keeps the lab's calls as they were); always deterministic (no float
// atomics). `states`: what cuda_scan_fwd_ex left for the same inputs, or NULL to recompute them. `out`: NULL, or
// (M, Cd) where the forward's output is written again (for the out_proj weight gradient).
// par_out: NULL, or where the parameter gradients' partial rows go (cuda_scan_param_part_bytes) instead of the
// workspace, left unreduced for the caller's cuda_scan_param_job (the backend's reduction queue). Returns how many
// partial rows there are. carry_*: as the forward's (`states`, where given, are the forward's from the same).
int cuda_scan_bwd_ex(__nv_bfloat16 *du, __nv_bfloat16 *ddpre, __nv_bfloat16 *dB, __nv_bfloat16 *dC,
                      __nv_bfloat16 *dz, float *ddt_bias, float *dA_log, float *dD, const __nv_bfloat16 *dout,
                      const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log,
                      const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *D,
                      const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                      const float *states, __nv_bfloat16 *out, void *workspace, size_t workspace_bytes,
                      int deterministic, cudaStream_t stream, int add_params = 1, float *par_out = NULL,
                      const int32_t *carry_first = NULL, const float *carry_h0 = NULL);
// Bytes of par_out above for (M, T, Cd, N).
size_t cuda_scan_param_part_bytes(int M, int T, int Cd, int N);
// The reduction of rows partial rows in par_out into ddt_bias, dD (Cd) and dA_log (Cd, N) (+= where add, else =).
PmColsumJob cuda_scan_param_job(float *ddt_bias, float *dA_log, float *dD, const float *par_part, int rows, int Cd,
                                int N, int add);
