// cuda_carry.h — the CUDA backend's kernels for state carried into rows from the batch before (cuda_carry.cu):
// the carried rows' parts of Backend.conv_silu_fwd/bwd (first, hist) and Backend.carry_state_out (backend.h), with
// ACT = bf16 and F32 = float (the scan takes its carried state itself: cuda_scan.cu). Semantics are those of the CPU backend's "carried state"
// section (backend_cpu.c), the reference. Every result is bit-identical run to run (no atomics; every sum in a
// fixed order).
// first, last, pos: int32 in device memory. Everything is queued on `st`.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

// u (M, C): rewrites the first min(K-1, first[r]) tokens of rows with first[r] > 0, the history taps
// hist (rows, K-1, C) included. K <= 4 (as the conv kernels).
void cuda_carry_conv_fwd(__nv_bfloat16 *u, const __nv_bfloat16 *xi, int ldx, const float *w, const float *b,
                         const int32_t *pos, const int32_t *first, const __nv_bfloat16 *hist, int M, int T, int C,
                         int K, cudaStream_t st);
// After the conv backward's kernel on the same inputs (cuda_conv_silu_bwd_part): dxi (ldx) += the SiLU-slope
// corrections of those tokens; prow = one more partial row of the conv's (cuda_conv_bwd_job's layout: dw (C, K), then
// db (C)) holding the carried rows' parts of the weight and bias gradients (written, every value).
void cuda_carry_conv_bwd_part(__nv_bfloat16 *dxi, int ldx, float *prow, const __nv_bfloat16 *du,
                              const __nv_bfloat16 *xi, const float *w, const float *b, const int32_t *pos,
                              const int32_t *first, const __nv_bfloat16 *hist, int M, int T, int C, int K,
                              cudaStream_t st);
// The state out works on a device workspace of at least cuda_carry_ws_bytes(M, T, Cd, N) bytes (~17 MB at M 16384,
// T 2048, Cd 2048, N 16; its contents on entry do not matter, and other work must not use it until the op's kernels
// have run).
size_t cuda_carry_ws_bytes(int M, int T, int Cd, int N);
// For rows with last[r] >= 0: h_out[r] (Cd, N) = the scan state after the row's last token (walked from token
// last[r], from zero or from h0[r] where last[r] == 0 and first[r] > 0); hist_out[r] (K-1, Cd) = xi of the row's
// last K-1 tokens. Other rows untouched. states: NULL, or the forward's scan states (cuda_scan_fwd_ex's, from the
// same first states) for N == 16: then the walk starts at the last checkpoint.
void cuda_carry_state_out(float *h_out, __nv_bfloat16 *hist_out, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                          const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, int ldbc,
                          const __nv_bfloat16 *xi, int ldx, const int32_t *first, const int32_t *last,
                          const float *h0, int M, int T, int Cd, int N, int K, const float *states, void *ws,
                          cudaStream_t st);
