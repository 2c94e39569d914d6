// backend.h — the op interface. The model's forward and backward (model.c) are written once on top of it;
// backend_cpu.c (fp32 reference, OpenBLAS + OpenMP) and backend_cuda.cu (bf16 mixed precision) implement it.
//
// Conventions
// - M = B*T tokens, row-major (M, features). "ld" arguments are row strides in elements, so ops can read and
//   write column slices of a wider buffer (e.g. xi = xz[:, :d_inner] with ld 2*d_inner).
// - Two element types appear:
//     ACT  the backend's activation/compute type: `real` (float, or double in the float64 test build) on the
//          CPU, bf16 on CUDA. Activations, compute copies of weight matrices, and activation gradients.
//     F32  always `real` on the CPU, fp32 on CUDA: master weights, parameter gradients, Adam moments, the
//          residual stream and its gradient, rstd, per-token losses.
//   Small per-channel parameters (norm weights, conv weight/bias, dt bias, A_log, D) are always passed as F32
//   master pointers; weight matrices (embedding, in/x/dt/out projections) as ACT compute copies.
// - Parameter-gradient outputs (dW, dbias, dw_norm, ...) ACCUMULATE (+=), so gradient accumulation over
//   micro-batches is free; at the start of an optimizer step the model either zeroes the gradient buffer or,
//   where the backend has grads_write, runs the step's first backward with the outputs written (=) instead.
//   Activation-gradient outputs overwrite unless an `accumulate` flag says otherwise.
// - Document resets (DESIGN §2): int32 `pos` (M) is each token's position within its document. The conv and
//   the scan treat token t as the start of a new document when pos[t] == 0 OR t % T == 0 (row start): a conv
//   tap j steps back is read only if j <= pos[t] and j <= t % T; the scan state restarts at such tokens. The
//   same holds in the backward, so no gradient crosses a document start.
// - Integer inputs (tokens, pos, targets) live in device memory (upload them first).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "util.h"  // pm_die

#ifndef PM_REAL
#define PM_REAL float
#endif
typedef PM_REAL real;  // the CPU backend's arithmetic type

// One parameter tensor's range in the flat parameter buffer, for the optimizer.
typedef struct {
    size_t offset, size;  // in elements
    int decay;            // 1: weight decay applies (matrices and embedding); 0: A_log, D, biases, norms
} ParamSegment;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_scale;  // multiply gradients by this first (global-norm clipping); 1 for none
    int step;          // 1-based step, for bias correction
    // the segments to update: [part_first, part_first + part_count) of the table; part_count 0: all of them. A
    // step's parts together must cover the table once, the one with segment 0 first (backends count steps by it).
    int part_first, part_count;
} AdamWArgs;
// The segments [*s0, *s1) an AdamW call with these arguments updates, of nsegs (both backends' reading of part_*);
// a part outside the table is a caller's bug, and stops the program (pm_die) on either backend.
static inline void adamw_segment_range(const AdamWArgs *a, int nsegs, int *s0, int *s1) {
    *s0 = a->part_count ? a->part_first : 0;
    *s1 = a->part_count ? a->part_first + a->part_count : nsegs;
    if (*s0 < 0 || *s1 > nsegs || *s0 > *s1) pm_die("adamw: segments %d .. %d of %d", *s0, *s1, nsegs);
}

typedef struct Backend {
    const char *name;  // "cpu" or "cuda"
    size_t act_bytes;  // sizeof an ACT element
    size_t f32_bytes;  // sizeof an F32 element (sizeof(real) on the CPU, 4 on CUDA)
    int deterministic; // 1: bit-identical results run to run (no floating-point atomics)

    // ---- memory (device memory for CUDA) ----
    void *(*alloc)(size_t bytes);  // zero-filled
    void (*free)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);    // host -> backend
    void (*download)(void *dst, const void *src, size_t bytes);  // backend -> host
    void (*memzero)(void *p, size_t bytes);
    void (*synchronize)(void);
    // Convert n F32 values to ACT (compute copies of weights; the CPU backend copies).
    void (*f32_to_act)(void *dst_act, const void *src_f32, size_t n);
    // Convert n ACT values to F32 (diagnostics, tests).
    void (*act_to_f32)(void *dst_f32, const void *src_act, size_t n);

    // ---- ops ----
    // out (M, C) F32 = wte[tokens]; wte (V, C) ACT
    void (*embedding_fwd)(void *out, const int32_t *tokens, const void *wte, int M, int C);
    // dwte (V, C) F32 += scatter of dout (M, C) F32 by token
    void (*embedding_bwd)(void *dwte, const void *dout, const int32_t *tokens, int M, int C, int V);

    // Fused residual add + RMSNorm: res_out = res_in + h (h may be NULL: res_out = res_in; res_out may alias
    // res_in); xn = res_out * rstd * w; rstd = 1/sqrt(mean(res_out^2) + eps).
    // res_* F32 (M, C); h ACT (M, C); w F32 (C); xn ACT (M, C); rstd F32 (M)
    void (*add_rmsnorm_fwd)(void *res_out, void *xn, void *rstd, const void *res_in, const void *h,
                            const void *w, int M, int C, float eps);
    // dres (M, C) F32 += d(xn)/d(res) applied to dxn; dw (C) F32 += sum over tokens; then, if dres_act is not
    // NULL, dres_act (M, C) ACT = dres (the gradient flowing into the previous layer's mixer output).
    void (*rmsnorm_bwd)(void *dres, void *dres_act, void *dw, const void *dxn, const void *res, const void *w,
                        const void *rstd, int M, int C);

    // out[m, n] (ldo) = sum_k inp[m, k] (ldi) * W[n, k] + bias[n];  W (N, K) ACT contiguous; bias F32 or NULL.
    void (*matmul_fwd)(void *out, int ldo, const void *inp, int ldi, const void *W, const void *bias, int M,
                       int N, int K);
    // dinp (M, K) (ldd) = dout @ W, added to dinp if accumulate_dinp; dW (N, K) F32 += dout^T @ inp;
    // dbias (N) F32 += column sums of dout. Any of dinp, dW, dbias may be NULL. dout (M, N) ACT (lddo).
    void (*matmul_bwd)(void *dinp, int ldd, int accumulate_dinp, void *dW, void *dbias, const void *dout,
                       int lddo, const void *inp, int ldi, const void *W, int M, int N, int K);
    // The weight gradients of `count` such calls at once (the same shapes in several layers): for i < count,
    // dW_i (N, K) F32 += dout_i^T @ inp_i, operand i lying i * sW (F32), i * sdout, i * sinp (ACT) elements past
    // operand 0 (each a distinct buffer). The same as count matmul_bwd calls with only dW set, up to summation
    // order (a GPU may run one batched GEMM with its own kernel). The model uses it for groups of layers
    // (Model.dw_group, model.c: backward_body); a backend may leave it NULL.
    void (*matmul_dw_batch)(void *dW, size_t sW, const void *dout, int lddo, size_t sdout, const void *inp, int ldi,
                            size_t sinp, int count, int M, int N, int K);

    // Depthwise causal conv1d with document resets, then SiLU:
    // u[t, c] = silu(b[c] + sum_{k<K} w[c, k] * xi[t-K+1+k, c])   (taps before the document start read 0)
    // xi ACT (ldx); w (C, K) F32; b (C) F32; u (M, C) ACT contiguous
    // first, hist: NULL, or rows carried in from the batch before (the carried-state section below): the first
    // min(K-1, first[r]) tokens of a row with first[r] > 0 also read hist[r] (rows, K-1, C) ACT, the previous
    // piece's last K-1 xi rows (oldest first): tap j steps back from token t reads hist[K-1+t-j] where t < j <= pos[t].
    void (*conv_silu_fwd)(void *u, const void *xi, int ldx, const void *w, const void *b, const int32_t *pos,
                          int M, int T, int C, int K, const int32_t *first, const void *hist);
    // Given du (M, C) ACT, recompute the pre-activation and write dxi (ldx, overwrite), dw += , db += .
    // xi and dxi share the row stride ldx (both are column slices of the in_proj output and its gradient).
    // first, hist as the forward's: the carried taps' parts of dw are included (hist itself is held constant).
    void (*conv_silu_bwd)(void *dxi, int ldx, void *dw, void *db, const void *du, const void *xi,
                          const void *w, const void *b, const int32_t *pos, int M, int T, int C, int K,
                          const int32_t *first, const void *hist);

    // Selective scan with document resets, softplus of delta, D skip and z gating (DESIGN §1):
    // delta = softplus(dpre + dt_bias); A = -exp(A_log);
    // s_t = exp(delta*A) * s_{t-1} + delta * B_t * u_t  (s = 0 before a document start);
    // out[t, c] = (sum_n s_t[c, n] C_t[n] + D[c] u[t, c]) * silu(z[t, c])
    // u, dpre (M, Cd) ACT contiguous; Bm, Cm (M, N) ACT with row stride ldbc; z ACT (ldz);
    // dt_bias, D (Cd) F32; A_log (Cd, N) F32; out (M, Cd) ACT.
    // states: NULL, or a buffer of scan_states_bytes(M, T, Cd, N) bytes where the forward leaves what the
    // backward would otherwise recompute (backends without scan_states_bytes ignore it).
    // first, h0: NULL (every row starts from s = 0), or the state carried into rows from the batch before
    // (DESIGN §2; model.c): a row r with first[r] > 0 continues a document, and its state before its first token
    // is h0[r] (Cd, N) F32 instead of 0 (up to its next document start, where the state restarts as anywhere).
    // first int32 (M / T rows) and h0 (rows, Cd, N) F32 are in backend memory.
    void (*scan_fwd)(void *out, const void *u, const void *dpre, const void *dt_bias, const void *A_log,
                     const void *Bm, const void *Cm, int ldbc, const void *D, const void *z, int ldz,
                     const int32_t *pos, int M, int T, int Cd, int N, void *states, const int32_t *first,
                     const void *h0);
    // Backward of scan_fwd given dout (M, Cd) ACT. Overwrites du, ddpre (M, Cd) ACT, dB, dC (ldbc) ACT,
    // dz (ldz) ACT; accumulates ddt_bias, dD (Cd) and dA_log (Cd, N) F32. states: NULL (recompute what it needs)
    // or what scan_fwd left there for these same inputs; the results are the same either way. out: NULL, or
    // (M, Cd) ACT where the backward writes scan_fwd's output again, from the states it recomputes anyway (the
    // out_proj weight gradient needs it, so the model keeps no copy of it per layer). Both backends write the
    // forward's bits: the same states, summed over n in the forward's order.
    // first, h0: as scan_fwd's (and the same as the forward's that left states). h0 is a constant here: no
    // gradient flows into the batch before (truncated backpropagation at the row start).
    void (*scan_bwd)(void *du, void *ddpre, void *dB, void *dC, void *dz, void *ddt_bias, void *dA_log,
                     void *dD, const void *dout, const void *u, const void *dpre, const void *dt_bias,
                     const void *A_log, const void *Bm, const void *Cm, int ldbc, const void *D,
                     const void *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N, const void *states,
                     void *out, const int32_t *first, const void *h0);
    // Optional (NULL: the backend cannot keep scan states): bytes of the states buffer above.
    size_t (*scan_states_bytes)(int M, int T, int Cd, int N);

    // ---- optional: state carried into rows from the batch before (DESIGN §2; Batch.carry_in / carry_out, model.c).
    // NULL: the backend cannot carry state, and the model refuses batches that carry it.
    // Rows are the M / T rows of T tokens. A row r with first[r] > 0 continues a document from the previous batch:
    // its first first[r] tokens (up to the row's next document start, else T) start from the carried scan state
    // h0 (rows, Cd, N) F32 and see the carried conv inputs hist (rows, K-1, Cd) ACT in place of zeros; first[r] == 0:
    // the row starts afresh. The ops take what is carried in themselves (scan_fwd/bwd's first, h0; conv_silu_fwd/
    // bwd's first, hist), so that they compute the values of the unbroken document. first and last are int32 (rows)
    // in backend memory.
    // carry_state_out: for each row with last[r] >= 0 (the start of its last document's segment, which goes on in
    //   the next batch): h_out[r] (Cd, N) F32 = the scan state after the row's last token, walked from token
    //   last[r] from zero, or from h0[r] where last[r] == 0 and first[r] > 0 (one document throughout the row);
    //   hist_out[r] (K-1, Cd) ACT = xi of the row's last K-1 tokens. Rows with last[r] < 0 are left as they are.
    //   h_out, hist_out must not alias h0, hist. states: NULL, or what scan_fwd left for this batch (the same
    //   first, h0), which a backend may walk on from (the CUDA backend: from the last state checkpoint).
    void (*carry_state_out)(void *h_out, void *hist_out, const void *u, const void *dpre, const void *dt_bias,
                            const void *A_log, const void *Bm, int ldbc, const void *xi, int ldx,
                            const int32_t *first, const int32_t *last, const void *h0, int M, int T, int Cd, int N,
                            int K, const void *states);

    // Tied LM head + cross-entropy over all Vp logits, in chunks of tokens (no (M, Vp) buffer needed):
    // logits = x @ wte^T; loss[m] = logsumexp(logits[m]) - logits[m, targets[m]] (0 where ignored).
    // If dx is not NULL, also the backward with dloss[m] = loss_scale (0 where ignored):
    //   dx (M, C) ACT = dlogits @ wte (overwrite), dwte (Vp, C) F32 += dlogits^T @ x.
    // If logits_out is not NULL, write the fp32 logits (M, Vp) there (eval/generate/tests).
    // bf16_logits: the logits may be rounded to bf16 before the softmax, as PyTorch's autocast LM head gives them
    // (the CUDA backend's training default: half the bytes through its largest buffer; ignored where logits_out is
    // set, and on the CPU, whose ACT is fp32).
    // x (M, C) ACT; wte (Vp, C) ACT; targets int32 (M); loss (M) F32.
    void (*classifier)(void *loss, void *dx, void *dwte, float *logits_out, const void *x, const void *wte,
                       const int32_t *targets, float loss_scale, int M, int C, int Vp, int bf16_logits);

    // Sum of squares of n F32 values, returned to the host (deterministic order).
    double (*sumsq)(const void *x, size_t n);
    // AdamW (PyTorch semantics: p -= lr*wd*p on decayed segments, then the Adam update with bias
    // correction) over every segment (or a->part_*'s); g is multiplied by a->grad_scale first. params, grads, m, v F32;
    // if params_act is not NULL it receives the updated parameters as ACT (the compute copy).
    void (*adamw)(void *params, void *params_act, const void *grads, void *m, void *v,
                  const ParamSegment *segs, int nsegs, const AdamWArgs *a);

    // ---- optional: a second queue for work off the critical path (NULL where a backend runs everything in order)
    // side_begin(): the ops called until side_end() are queued on a second queue, after everything queued so far
    // on the main one. side_end(): back to the main queue; returns a ticket for the side work queued so far.
    // side_wait(ticket): the main queue's later ops wait until that side work (and the side work before it) is
    // done. The caller orders every hazard itself: a side op's inputs must not be overwritten, nor its outputs
    // read, by main-queue ops until a side_wait on its ticket. synchronize() waits for both queues. The model
    // puts the backward's weight-gradient GEMMs there (model.c, backward_body).
    void (*side_begin)(void);
    int (*side_end)(void);
    void (*side_wait)(int ticket);

    // ---- optional: grads_write(1): until grads_write(0), the parameter-gradient outputs of rmsnorm_bwd,
    // matmul_bwd, conv_silu_bwd and scan_bwd are written (=), not added, and classifier writes dwte from its first
    // chunk of tokens and adds the others'; embedding_bwd still adds (the model runs it after the classifier, into
    // the same tied dwte). The model uses it for the first backward of an optimizer step, when every parameter's
    // gradient is written once (and wte's first by the classifier), so the buffer needs no clearing. NULL: always add.
    void (*grads_write)(int on);

    // ---- optional: defer_reductions(1): until defer_reductions(0), the backend may hold back the small column
    // reductions that end rmsnorm_bwd, conv_silu_bwd, scan_bwd and matmul_bwd's dbias (their parameter gradients)
    // and run several as one launch; defer_reductions(0) runs what is held back, after which every gradient is
    // complete. The model brackets a backward with it (unless a hook needs each region's work done when it ends).
    // Same results either way. NULL: every op completes its outputs.
    void (*defer_reductions)(int on);

    // ---- optional: fence_stream(stream): the given stream of the backend's device API (a cudaStream_t for CUDA)
    // waits, on the device, for everything queued so far on both queues; the host does not wait. Data parallelism
    // orders its gradient reductions after a layer's backward with it (dist.c). NULL: the caller synchronizes.
    // PM_FENCE_HOLD=1 (tests) then holds that stream back ~1 ms, so that work on it that something forgot to wait
    // for shows up as different bits.
    void (*fence_stream)(void *stream);

    // ---- optional, for `packmamba bench` (NULL where a backend does not provide them) ----
    // GPU-side timing without a synchronize per op: event_record enqueues a timestamp on the compute stream and
    // returns a handle from a pool the backend owns; event_elapsed_ms gives milliseconds from a to b (waits for
    // b); event_release returns a handle to the pool. Bench falls back to synchronize + host clock when NULL.
    void *(*event_record)(void);
    float (*event_elapsed_ms)(void *a, void *b);
    void (*event_release)(void *e);
    // Device-to-device copy of `bytes` (bench's bandwidth ceiling); NULL: bench times f32_to_act instead.
    void (*copy)(void *dst, const void *src, size_t bytes);
    // Throughput kernels for bench's vector and special-function ceilings: spin(kind, n) runs about n operations,
    // in chains independent enough to keep every unit busy, over the whole device (asynchronous, like every op):
    // PM_SPIN_FMA fp32 multiply-adds, n counted as FLOPs (2 each), or PM_SPIN_EXP exps, the scan's own (ex2 on
    // the GPU's special-function unit; the CPU backend's vectorized exp). Returns how many FLOPs or exps it ran.
    double (*spin)(int kind, double n);
    // Free and total device memory in bytes (bench's peak and fit checks); 0 or -1. NULL on the CPU, where bench
    // reads /proc instead.
    int (*mem_info)(size_t *free_bytes, size_t *total_bytes);
    // Bytes of the backend's own buffers (workspaces, partials, library workspaces) at their largest during a
    // training step of M tokens in rows of T, model width C, d_inner Cd, d_state N, conv width K, padded vocabulary
    // Vp: an estimate, for model_train_bytes (--memory-budget). NULL: none worth counting.
    size_t (*workspace_bytes)(int M, int T, int C, int Cd, int N, int K, int Vp);
    // The same for the carry ops' own buffers (carry_state_out's without scan states). NULL: none.
    size_t (*carry_workspace_bytes)(int M, int T, int Cd, int N);
} Backend;

enum { PM_SPIN_FMA = 0, PM_SPIN_EXP = 1 };  // Backend.spin's kinds

const Backend *backend_cpu(void);
// NULL with pm_error set when there is no usable GPU (or the binary was built without CUDA).
const Backend *backend_cuda(int deterministic);
// How many GEMM shapes the CUDA backend has timed its cuBLASLt candidates for so far (its tuning; 0 without CUDA).
// For tests: a tuning path that never runs would otherwise go unnoticed.
int backend_cuda_gemm_tunings(void);
// The optimizer steps (adamw calls) after which the CUDA backend tunes a GEMM shape it has planned (the bench warms
// up that long, so its timed steps run tuned GEMMs); 0 without CUDA or with tuning off (PM_GEMM_TUNE=0).
int backend_cuda_gemm_tune_after(void);
// For the labs (dev/kernels/energy_lab.c): pick >= 0 makes every cuBLASLt GEMM run the heuristic's candidate #pick
// (its first where it has fewer) in place of the tuned or first choice; -1 restores the normal choice. After a GEMM
// run under a pick, backend_cuda_gemm_picked returns how many candidates its shape had (0: none, or no CUDA) with
// the index that ran and its cuBLASLt tile and split-K number in *ran, *tile, *split.
void backend_cuda_gemm_pick(int pick);
int backend_cuda_gemm_picked(int *ran, int *tile, int *split);
// Tickets the CUDA backend's side queue has handed out (side_end) so far: 0 when it was never used. For tests.
int backend_cuda_side_tickets(void);
// Launches of held-back reductions (Backend.defer_reductions) the CUDA backend has made so far. For tests.
int backend_cuda_reduction_launches(void);
// Launches of the warp-specialized scan kernels so far (which: 0 the forward's, 1 the backward's, 2 the forward's
// with y's halves added by its producers, scan v90). For tests.
int backend_cuda_scan_ws_launches(int which);
// The CUDA device's compute capability as major * 10 + minor, and its SM count in *sms, as the kernels' plans see
// them (0 and 0 in a build without CUDA). For tests.
int backend_cuda_device_info(int *sms);
// The UUID of the CUDA device this process computes on (the current device), in NVML's text form
// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"), so NVML opens the same card whatever CUDA_VISIBLE_DEVICES says or
// whichever GPU a rank was given. 0, or -1 without CUDA or a device.
int backend_cuda_device_uuid(char *buf, size_t n);
// By name: "cpu" or "cuda"; dies with a clear message when unavailable.
const Backend *backend_get(const char *name, int deterministic);
