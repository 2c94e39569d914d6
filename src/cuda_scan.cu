// cuda_scan.cu — selective scan forward/backward with document resets for the CUDA backend (cuda_scan.h).
// bf16 activations in and out, fp32 state and accumulation. Semantics: Backend.scan_fwd / scan_bwd (backend.h).
// Version v91 of the kernel lab (dev/kernels/scan_lab.cu; history and measurements in docs/perf.md): v91, the
// warp-specialized forward's roles split on a warp-uniform warp index (fwd_producer_warp), so its walkers' shuffles
// carry no convergence check (fwd -2 to -3% where the butterfly stays), on v90: where
// the 2-thread forward's 64-wide blocks run one an SM, its producers add y's two halves that the walkers store, in
// place of the walkers' butterfly (scan_fwd_halves; B2·D4096·L8192 fwd -4.5%), on v85: every
// kernel's sigmoid as 0.5 tanh(v/2) + 0.5 (one special-function instruction; sigmoid_f), on v84: the
// warp-specialized forward's pass without selects for tokens past the row's end, on v83: the
// warp-specialized forward's producers keep z raw and form silu(z) with the output, not in their pass, on v82: the
// 96-wide warp-specialized forward's walkers form the output (silu(z) and (y + D u) silu(z); see ws_outw), on v81: the
// forward's 32-wide plans of one wave as 96-wide warp-specialized blocks with 4 walker threads a channel (the 130m
// width), on v80: the 4-thread backward warp-specialized in 96-wide blocks one an SM where they make one wave
// (scan_bwd4_ws_kernel; its staged twin scan_bwd4_kernel<96>), on v78: y's
// quads summed as one chain of multiply-adds (quad_dot; in pairs as before where the backward's plan is the
// 4-thread kernel), on v77: the segment summaries of 128-wide backward plans over quarter or half segments (more summary blocks), on v76: the
// warp-specialized backward also cut into time segments (after a summary pass) where 128-wide blocks alone would
// leave half the SMs idle (B2·D4096·L8192, B1 and B4 at the 370m width), on v73: the
// warp-specialized backward's tiles in three slots, so a chunk's copies go out right after the pass of the chunk
// before (lab v72c), on v72: the 2-thread backward's 128-wide plans without time segments warp-specialized on
// sm_90a (scan_bwd_ws_kernel: a producer warpgroup for the tiles, the cooperative pass and the flush; walker
// warpgroups at 232 registers by setmaxnreg), on v70: where the forward's plan takes 64-wide blocks (v69: at
// any channel count), or 32-wide ones that fit one wave three an SM (v70), without time segments, the forward
// split into producer warps (input copies, softplus, SiLU, the outputs) and walker warps meeting at mbarriers (v65,
// scan_fwd_ws_kernel; v66 the mbarriers instead of named barriers; v67 the producers' copies by 16 bytes, a
// token's 8 channels a thread; v68 the producers form the outputs from the walkers' fp32 y); the backward's plan
// weighing 64-wide blocks against 128-wide ones that need time segments (tie64); v63: the 4-thread backward's chunks
// with two barriers (v63: order 3, see PM_SCAN_BWD_ORDER4), its cooperative pass without a branch, its inputs
// loaded first (v61, as the 2-thread one's since v51);
// the backward walks' r = ds a_t s_{t-1} from the new carry and the previous token's state (v57: a multiply fewer
// a state and token); fewer barriers
// a chunk (v54: the forward two, the backward three, or two where two blocks share an SM); the backward
// walks' stores held to the end of each pair of tokens (v52) and the cooperative passes' loads issued before their
// stores (v51), so shared loads are not held behind earlier shared stores; 64-wide forward
// blocks two an SM where they tie with 128-wide ones (v50: the 370m and 1.4b widths), the 32-wide
// forward's token loop unrolled over the whole chunk (v45), the
// forward's checkpoint stores predicated instead of branched around (v43), the backward kernels' dB/dC butterfly
// one token later (v36), the forward's y reduction one group later (v35), branch-free cooperative passes (v34),
// swizzled forward arrays and spaced backward tiles (v31), on v26: v24 with the
// 4-thread backward reading delta log2 e as +inf at document starts from its pass array (no per-thread start test
// in its two token loops; v25 did this in every kernel and was slower in the others). v24: v22 with the
// backward able to write the forward's output again, bit for bit (every kernel of a plan sums y over the states in
// one order; see quad_dot), so the model keeps no per-layer copy of it for out_proj's weight gradient. v22: v21 with
// the forward's token loop over a whole chunk at a compile-time bound (one unrolled block). v21: v18 with the
// backward main pass keeping the chunk's recomputed states in registers instead of shared memory, and, where
// rows * Cd is small (B8 D1536), a backward with 4 threads per channel in 32-wide blocks (v20) instead of time
// segments. v18: v14 with the
// forward's block width chosen so the busiest SM holds the fewest channels (32-wide blocks at B8 D1536), and a
// lighter backward summary pass (v18c: no u tile, two pass values, P from the summed delta). v14: v13 with the
// backward main pass cut into time segments also where 64-wide blocks were chosen (rows * Cd too small for one
// 128-wide block per SM), when the cost model favours it. v13: v12 with no
// branch inside the backward's 4-token groups (both threads of a channel store its outputs), so the scheduler
// interleaves the group's tokens. v12: v11 with the
// forward able to leave the backward its checkpoints (cuda_scan_fwd_ex / cuda_scan_bwd_ex: the training step
// skips the checkpoint pass), and the per-chunk false wait on the prefetches removed (settle). v11: v10 with the
// exposed latencies and the integer work that ncu's per-instruction view showed taken out — B/C prefetches kept
// as raw bf16 until stored (converting them at once made each thread wait for its loads), pos for the next
// chunk's document starts loaded a chunk ahead, outputs staged in shared memory and written in 16-byte pieces,
// the backward's reverse walk run over a fixed 16 tokens in groups of 4 with compile-time offsets, and the
// per-(token, channel) pass values packed so one load fetches them. v10: time segments in the backward main pass
// too (the state adjoint carried backwards across segments), only where the rows leave most of the GPU idle; the
// kernel's segment mode is a template parameter, so the shapes that fill the GPU compile to v9's code. v9: v8's
// kernels with v8's time segments used only where the rows leave most of the GPU idle (long rows, small B); the
// shapes that already fill the GPU run v4's plan. v8: v4 (branch-free token loops: document starts force
// a_t = 0 instead of branching; tokens past the end of a chunk run on zeroed pass arrays and are not stored)
// with time segments in the forward and the checkpoint pass: each row is cut into up to 16 segments scanned by
// different blocks, after a summary pass gives each segment its incoming state, and the kernels are held to 64
// registers so two blocks fit per SM.
//
// Layout and parallelism (DESIGN §3): token-major (M, Cd) tensors; each channel of a row is walked in token
// order with its N = 16 fp32 states in registers (no block scan), so u/dpre/z/dout tiles are coalesced across
// channels and B_t/C_t (shared by every channel of the row) are broadcast. In the fast ("staged") path the
// states of a channel are split over several threads (4 in the forward, 2 in the backward) so that there are
// enough warps per scheduler even when rows*Cd is only ~16K; the generic path (v1: one thread per channel,
// plain loads) runs for odd strides or misaligned pointers.
//
// Backward: (1) a forward pass stores the state every SCAN_K tokens ("checkpoints") in the workspace;
// (2) a reverse pass over chunks of SCAN_K tokens: recompute the chunk's states from its checkpoint (into shared
// memory in the generic path, registers in the staged one), then walk the chunk backwards carrying the state
// adjoint. dB/dC (summed over channels) are reduced in
// a warp by a butterfly transpose, then over the block's warps in shared memory, and written as per-block
// partials; a second kernel sums partials in a fixed order. Per-channel parameter gradients are per-row partials
// summed over rows in a fixed order by a third kernel. No atomics anywhere: the result is bit-identical run to
// run whether or not `deterministic` is set.

#include "cuda_scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"  // bf2f, pm_cuda_device, pm_cuda_die

static constexpr int SCAN_N = 16;         // states per channel (Mamba-1 d_state); the kernels are built for it
static constexpr int SCAN_THREADS = 128;  // channels per block (one row's slice of channels)
static constexpr int SCAN_K = 16;         // tokens per backward chunk = checkpoint interval
static_assert(SCAN_K == PM_SCAN_CKPT_TOKENS, "cuda_scan.h's checkpoint interval");
static constexpr float LOG2E = 1.4426950408889634f;
// v52: the backward walks (2- and 4-thread kernels) hold each token's output and dB/dC stores into shared memory
// until the end of a group of this many tokens, so the next tokens' loads are not held behind them (the compiler
// cannot tell the tiles and R from the pass arrays and B/C, and keeps loads after earlier stores). 2, fwd+bwd:
// B8·D1536 (4-thread) -2.9% against v51's order in one call (call115); B8·D2048 (2-thread) -2.8% against v51's
// build (call111 and call115, v43 beside both at 1.171-1.172) and -0.9 to -1.4% against v51's order written
// through the same arrays (call114); 1 (each token's stores after its butterfly) +1.8-2.1% against 2; 4 spilled
// 60-200 bytes. Set with -DPM_SCAN_WALK_GROUP=N / -DPM_SCAN_WALK_GROUP4=N.
#ifndef PM_SCAN_WALK_GROUP
#define PM_SCAN_WALK_GROUP 2
#endif
#ifndef PM_SCAN_WALK_GROUP4
#define PM_SCAN_WALK_GROUP4 2
#endif
static constexpr int WALK_GROUP = PM_SCAN_WALK_GROUP, WALK_GROUP4 = PM_SCAN_WALK_GROUP4;
static_assert(WALK_GROUP > 0 && WALK_GROUP4 > 0 && 4 % WALK_GROUP == 0 && 4 % WALK_GROUP4 == 0,
              "groups divide the walk's 4-token steps");
// v54: the order of a backward chunk's phases. 0: v52's (issue the previous chunk's tiles, barrier, pass,
// barrier, walk, barrier, flush, barrier). 2: the tiles issued just after the opening barrier, which then also
// ends the previous chunk: three barriers a chunk (lab, call121: fwd+bwd -0.7% at B8 D2048, -0.6% at B8 D1536).
// 3: a chunk's flush after the next chunk's pass, and the tiles issued after that pass: two barriers a chunk
// (call121: -1.5% at B2 D4096 L8192, where 64-wide blocks share an SM; at B8 D2048, one block an SM, +0.1 to +0.5%
// against order 0, +0.7 to +1.3% against order 2). (1, the flush before the pass, measured +0.5 to +2% everywhere,
// call119: dropped.) Defaults: order 2 for
// 128-wide blocks, 3 for 64-wide blocks and the 4-thread kernel (v63: once v61's pass loaded first, order 3 measured
// -2.5% fwd+bwd at B8 D1536 against order 2, call143; on v52's pass it had been +0.2%, call121). -DPM_SCAN_BWD_ORDER=N (2-thread kernel),
// -DPM_SCAN_BWD_ORDER4=N (4-thread kernel) force an order (A/B runs).
#ifndef PM_SCAN_BWD_ORDER
#define PM_SCAN_BWD_ORDER -1
#endif
#ifndef PM_SCAN_BWD_ORDER4
#define PM_SCAN_BWD_ORDER4 3
#endif
static constexpr int BWD_ORDER = PM_SCAN_BWD_ORDER, BWD_ORDER4 = PM_SCAN_BWD_ORDER4;
static_assert(BWD_ORDER >= -1 && BWD_ORDER <= 3 && BWD_ORDER != 1 && BWD_ORDER4 >= 0 && BWD_ORDER4 <= 3 &&
                  BWD_ORDER4 != 1,
              "backward orders: 0, 2 or 3 (-1: by block width)");
// v54: the forward kernel, likewise: two barriers a chunk instead of three. The next chunk's tiles are issued
// just after the barrier that opens a chunk (it also ends the previous chunk, so their stage is free), and a
// chunk's staged output is stored in the next chunk's pass. -DPM_SCAN_FWD_TWO_BARRIERS=0: v52's order.
#ifndef PM_SCAN_FWD_TWO_BARRIERS
#define PM_SCAN_FWD_TWO_BARRIERS 1
#endif
static constexpr bool FWD_TWO_BARRIERS = PM_SCAN_FWD_TWO_BARRIERS;
// v57: in the backward walks, r = ds a_t s_{t-1} (the adjoint of a_t times a_t) is formed as the new carry
// (a_t ds) times the previous token's recomputed state, which the walk holds in registers anyway, instead of as
// ds (s_t - delta u B_t): one multiply a state and token instead of a fused multiply-add and a multiply. At a
// chunk's first token, whose previous state is the checkpoint (no longer held), the old form stays: holding the
// checkpoint for it measured +1.3 to +1.8% fwd+bwd (lab, call129). The 2-thread kernel at B8 D2048: -1.3% fwd+bwd
// (medians; -1.1 to -1.6% run to run); B2 D4096 L8192 (64-wide blocks) and the 4-thread kernel at B8 D1536: within
// the runs' spread.
// -DPM_SCAN_BWD_R_CARRY=0 (2-thread kernel), -DPM_SCAN_BWD_R_CARRY4=0 (4-thread kernel): the old form (A/B).
#ifndef PM_SCAN_BWD_R_CARRY
#define PM_SCAN_BWD_R_CARRY 1
#endif
#ifndef PM_SCAN_BWD_R_CARRY4
#define PM_SCAN_BWD_R_CARRY4 1
#endif
static constexpr bool BWD_R_CARRY = PM_SCAN_BWD_R_CARRY, BWD_R_CARRY4 = PM_SCAN_BWD_R_CARRY4;
#ifndef PM_SCAN_BWD4_PASS_BRANCH  // v61: 0 (see bwd_coop_pass)
#define PM_SCAN_BWD4_PASS_BRANCH 0
#endif
static constexpr bool BWD4_PASS_BRANCH = PM_SCAN_BWD4_PASS_BRANCH;

template <typename... Args>
static void scan_die(const char *fmt, Args... args) {  // one clear line and exit
    pm_cuda_die("cuda_scan", fmt, args...);
}

static void scan_check_launch(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) scan_die("%s: %s", what, cudaGetErrorString(e));
}

static void scan_check_shape(int M, int T, int Cd, int N) {
    if (N != SCAN_N) scan_die("d_state N=%d is not supported (the kernels are built for N=%d)", N, SCAN_N);
    if (T <= 0 || M <= 0 || Cd <= 0 || M % T != 0) scan_die("bad shape M=%d T=%d Cd=%d", M, T, Cd);
}

// ---- device helpers ----
// softplus(v) = ln(1 + e^v), and v itself above 20 (the reference's threshold)
__device__ __forceinline__ float softplus_f(float v) {
    return v > 20.f ? v : lg2_approx(1.f + ex2_approx(v * LOG2E)) * 0.69314718055994531f;
}
// sigmoid(v) = 1 / (1 + e^-v). v85: as 0.5 tanh(v / 2) + 0.5, one special-function instruction (tanh.approx,
// at ex2's rate) where 1 / (1 + 2^(-v log2 e)) takes two; the forward's SiLU is one of its ~20 special-function
// results a (token, channel). Accuracy against double over v in [-30, 30] (dev/kernels/mufu_lab.cu, call254): max
// abs error 3.9e-6 (ex2 + rcp: 1.1e-7), silu's 1.0e-5; below e^-8 the result is absolute-accurate only (tanh
// rounds to -1). Lab fwd -2 to -3% at the 2-thread shapes, +1% at B8·D1536 (call261). Every kernel alike, so
// the backward's copy of the output stays the forward's. PM_SCAN_SIGMOID_TANH=0 builds the ex2 + rcp form (e^-v
// overflowing to +inf gives rcp = 0).
#ifndef PM_SCAN_SIGMOID_TANH
#define PM_SCAN_SIGMOID_TANH 1
#endif
__device__ __forceinline__ float sigmoid_f(float v) {
    if constexpr (PM_SCAN_SIGMOID_TANH) {
        return pm_sigmoid_tanh(v);
    } else {
        return rcp_approx(1.f + ex2_approx(-v * LOG2E));
    }
}
// the warp-specialized forward's output before its bf16 rounding, (y + D u) silu(z), in the order the staged
// forward forms it (its silu(z) precomputed, the same product): the producers' store_out and, where they form the
// output (v82), the walkers
__device__ __forceinline__ float gated_out(float y, float D, float u, float z) {
    return fmaf(D, u, y) * (z * sigmoid_f(z));
}
// v91: whether this forward thread's warp is one of the first np / 32 (the producers), tested on the warp's index
// broadcast from lane 0, which the compiler then knows is the same across the warp: the branch is uniform, and the
// walkers' shuffles after it need no convergence check. (v90's SASS: the forward walker loop's first butterfly
// shuffle carried a BRA.DIV, which split the unrolled chunk into two basic blocks and was followed by a divergent
// copy of the rest; with this test the lab binary has no BRA.DIV left and is 217 KB smaller, call275. call274: fwd
// -2 to -3% at B8·D2048, B4·D4096 and B8·D1536; in the backward kernels the same split measured +1 to +4%
// fwd+bwd, so they keep tid < NP.) -DPM_SCAN_FWD_WU=0: the plain test (A/B). For the forward only.
#ifndef PM_SCAN_FWD_WU
#define PM_SCAN_FWD_WU 1
#endif
__device__ __forceinline__ bool fwd_producer_warp(int np) {
    if (PM_SCAN_FWD_WU) return __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 5), 0) < np / 32;
    return (int)threadIdx.x < np;
}
// two values rounded to bf16, a in the low half (the lower channel): one packed convert (F2FP), the same bits as
// two converts and a merge (thirty-fourth session, call269: fwd+bwd -0.2 to -0.8%, inside its control's spread)
__device__ __forceinline__ unsigned bf2_pack(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *(const unsigned *)&v;
}

// c ? a : b as one select instruction: the compiler turns a plain ?: whose sides cost a few instructions into a
// branch around the unused side, and a branch inside an unrolled token group splits it into basic blocks (v13).
__device__ __forceinline__ float select_f(int c, float a, float b) {
    float r;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.s32 p, %1, 0;\n\tselp.f32 %0, %2, %3, p;\n\t}" : "=f"(r) : "r"(c), "f"(a), "f"(b));
    return r;
}

// A value loaded before a kernel's chunk loop, passed through an identity shuffle there, so the wait for its load
// happens once, before the loop. Otherwise ptxas waits for it at its first use inside the loop on a scoreboard
// that the loop's own prefetches reuse, i.e. every chunk waits for its prefetch there (seen in v11's profile).
__device__ __forceinline__ float settle(float x) { return __shfl_sync(0xffffffffu, x, threadIdx.x & 31); }

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

// The state a row starts from (Backend.scan_fwd's first, h0): h0[row] (Cd, N) where first[row] > 0 (the row carries
// in a document from the batch before), else 0. Passed by value to the forward kernels (their checkpoint passes
// too); {NULL, NULL}: every row from 0.
struct ScanInit {
    const int32_t *first;
    const float *h0;
};
// this thread's states of channel c from state n0 on, or NULL for zeros
__device__ __forceinline__ const float *scan_init_states(ScanInit init, int row, int c, int Cd, int n0) {
    return init.h0 && init.first[row] > 0 ? init.h0 + ((size_t)row * Cd + c) * SCAN_N + n0 : nullptr;
}

// ---- generic path (v1): any strides and alignment ----
// grid (ceil(Cd/128), rows); thread = (row, channel c)
__global__ void __launch_bounds__(SCAN_THREADS)
    scan_fwd_generic_kernel(__nv_bfloat16 *out, float *states, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                    const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm,
                    int ldbc, const float *Dp, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd,
                    ScanInit init) {
    int c = blockIdx.x * SCAN_THREADS + threadIdx.x;
    int row = blockIdx.y;
    if (c >= Cd) return;
    float A2[SCAN_N];  // A * log2(e), so exp(delta*A) = 2^(delta*A2)
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) A2[n] = -__expf(A_log[(size_t)c * SCAN_N + n]) * LOG2E;
    float bias = dt_bias[c], Dc = Dp[c];
    float s[SCAN_N];
    const float *s_in = scan_init_states(init, row, c, Cd, 0);
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) s[n] = s_in ? s_in[n] : 0.f;
    const int nck = (T + SCAN_K - 1) / SCAN_K;
    for (int t = 0; t < T; t++) {
        size_t m = (size_t)row * T + t;
        if (states && t % SCAN_K == 0) {  // (rows, nck, Cd, N): the staged backward's checkpoint layout
            float *ck = states + (((size_t)row * nck + t / SCAN_K) * Cd + c) * SCAN_N;
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) ck[n] = s[n];
        }
        float uu = bf2f(u[m * Cd + c]);
        float dl = softplus_f(bf2f(dpre[m * Cd + c]) + bias);
        float zz = bf2f(z[m * ldz + c]);
        if (pos[m] == 0) {  // document start: the state restarts (warp-uniform branch)
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) s[n] = 0.f;
        }
        float du = dl * uu, y = Dc * uu;
        const __nv_bfloat16 *Bt = Bm + m * ldbc, *Ct = Cm + m * ldbc;
#pragma unroll
        for (int n = 0; n < SCAN_N; n++) {
            float a = ex2_approx(dl * A2[n]);
            s[n] = fmaf(a, s[n], du * bf2f(Bt[n]));
            y = fmaf(s[n], bf2f(Ct[n]), y);
        }
        out[m * Cd + c] = __float2bfloat16(y * zz * sigmoid_f(zz));
    }
}

// (generic backward)
// Pass 1: checkpoints. ckpt (rows, nchunk, N, Cd) = the state before each chunk's first token.
__global__ void __launch_bounds__(SCAN_THREADS)
    scan_ckpt_generic_kernel(float *ckpt, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                     const float *A_log, const __nv_bfloat16 *Bm, int ldbc, const int32_t *pos, int T, int Cd,
                     int nchunk, ScanInit init) {
    int c = blockIdx.x * SCAN_THREADS + threadIdx.x;
    int row = blockIdx.y;
    if (c >= Cd) return;
    float A2[SCAN_N];
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) A2[n] = -__expf(A_log[(size_t)c * SCAN_N + n]) * LOG2E;
    float bias = dt_bias[c];
    float s[SCAN_N];
    const float *s_in = scan_init_states(init, row, c, Cd, 0);
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) s[n] = s_in ? s_in[n] : 0.f;
    for (int t = 0; t < T; t++) {
        size_t m = (size_t)row * T + t;
        if (t % SCAN_K == 0) {
            float *ck = ckpt + ((size_t)(row * nchunk + t / SCAN_K) * SCAN_N) * Cd + c;
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) ck[(size_t)n * Cd] = s[n];
        }
        float uu = bf2f(u[m * Cd + c]);
        float dl = softplus_f(bf2f(dpre[m * Cd + c]) + bias);
        if (pos[m] == 0) {
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) s[n] = 0.f;
        }
        float du = dl * uu;
        const __nv_bfloat16 *Bt = Bm + m * ldbc;
#pragma unroll
        for (int n = 0; n < SCAN_N; n++) s[n] = fmaf(ex2_approx(dl * A2[n]), s[n], du * bf2f(Bt[n]));
    }
}

// Sum 32 values per lane over the warp: afterwards v[0] of lane l holds sum over lanes of v[l]. Each level
// halves the values a lane holds (31 shuffles for 32 sums instead of 32*5). Written as a template so every
// index into v is a compile-time constant (v stays in registers).
template <int HALF>
__device__ __forceinline__ void transpose_reduce_level(float (&v)[32], int lane) {
    bool upper = (lane & HALF) != 0;
#pragma unroll
    for (int i = 0; i < HALF; i++) {
        float keep = upper ? v[i + HALF] : v[i];
        float send = upper ? v[i] : v[i + HALF];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, HALF);
    }
}
__device__ __forceinline__ float warp_transpose_reduce32(float (&v)[32]) {
    int lane = threadIdx.x & 31;
    transpose_reduce_level<16>(v, lane);
    transpose_reduce_level<8>(v, lane);
    transpose_reduce_level<4>(v, lane);
    transpose_reduce_level<2>(v, lane);
    transpose_reduce_level<1>(v, lane);
    return v[0];
}

// Pass 2: reverse over chunks. grid (nblk, rows), block SCAN_THREADS; dynamic smem: states (K, N, threads) f32
// + warp sums (K, warps, 2N) f32. Threads past Cd run with zero inputs (they take part in shuffles/barriers).
__global__ void __launch_bounds__(SCAN_THREADS)
    scan_bwd_generic_kernel(__nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out, __nv_bfloat16 *dz_out,
                    __nv_bfloat16 *y_out, float *bc_part, float *par_part, const float *ckpt, const __nv_bfloat16 *dout, const __nv_bfloat16 *u,
                    const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log,
                    const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *Dp,
                    const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd, int nchunk) {
    extern __shared__ float smem[];
    float *S = smem;                                         // (K, N, SCAN_THREADS)
    float *R = smem + SCAN_K * SCAN_N * SCAN_THREADS;        // (K, warps, 2N)
    const int warps = SCAN_THREADS / 32;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int c = blockIdx.x * SCAN_THREADS + tid;
    int row = blockIdx.y, nblk = gridDim.x;
    bool active = c < Cd;
    float A[SCAN_N], A2[SCAN_N];
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) {
        A[n] = active ? -__expf(A_log[(size_t)c * SCAN_N + n]) : 0.f;
        A2[n] = A[n] * LOG2E;
    }
    float bias = active ? dt_bias[c] : 0.f, Dc = active ? Dp[c] : 0.f;
    float carry[SCAN_N], dA[SCAN_N];  // carry = a_{t+1} * ds_{t+1}, the adjoint flowing into s_t from t+1
#pragma unroll
    for (int n = 0; n < SCAN_N; n++) carry[n] = dA[n] = 0.f;
    float dbias = 0.f, dDacc = 0.f;

    for (int k = nchunk - 1; k >= 0; k--) {
        int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        float s0[SCAN_N];  // state before t0
        const float *ck = ckpt + ((size_t)(row * nchunk + k) * SCAN_N) * Cd + c;
#pragma unroll
        for (int n = 0; n < SCAN_N; n++) s0[n] = active ? ck[(size_t)n * Cd] : 0.f;
        // recompute the chunk's states into shared memory
        {
            float s[SCAN_N];
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) s[n] = s0[n];
            for (int j = 0; j < len; j++) {
                size_t m = (size_t)row * T + t0 + j;
                float uu = active ? bf2f(u[m * Cd + c]) : 0.f;
                float dl = softplus_f((active ? bf2f(dpre[m * Cd + c]) : 0.f) + bias);
                if (pos[m] == 0) {
#pragma unroll
                    for (int n = 0; n < SCAN_N; n++) s[n] = 0.f;
                }
                float dlu = dl * uu;
                const __nv_bfloat16 *Bt = Bm + m * ldbc;
#pragma unroll
                for (int n = 0; n < SCAN_N; n++) {
                    s[n] = fmaf(ex2_approx(dl * A2[n]), s[n], dlu * bf2f(Bt[n]));
                    S[(j * SCAN_N + n) * SCAN_THREADS + tid] = s[n];
                }
            }
        }
        // walk the chunk backwards
        for (int j = len - 1; j >= 0; j--) {
            int t = t0 + j;
            size_t m = (size_t)row * T + t;
            float uu = 0.f, v = bias, zz = 0.f, go = 0.f;
            if (active) {
                uu = bf2f(u[m * Cd + c]);
                v += bf2f(dpre[m * Cd + c]);
                zz = bf2f(z[m * ldz + c]);
                go = bf2f(dout[m * Cd + c]);
            }
            float dl = softplus_f(v);
            bool start = pos[m] == 0;
            const __nv_bfloat16 *Bt = Bm + m * ldbc, *Ct = Cm + m * ldbc;
            float sz = sigmoid_f(zz);
            float y = Dc * uu;
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) y = fmaf(S[(j * SCAN_N + n) * SCAN_THREADS + tid], bf2f(Ct[n]), y);
            float g = go * zz * sz;  // d y
            float dzv = go * y * sz * (1.f + zz * (1.f - sz));
            float duv = g * Dc, ddl = 0.f;
            float bc[2 * SCAN_N];
#pragma unroll
            for (int n = 0; n < SCAN_N; n++) {
                float st = S[(j * SCAN_N + n) * SCAN_THREADS + tid];
                float sp = start ? 0.f : (j > 0 ? S[((j - 1) * SCAN_N + n) * SCAN_THREADS + tid] : s0[n]);
                float a = ex2_approx(dl * A2[n]);
                float b = bf2f(Bt[n]), cc = bf2f(Ct[n]);
                float ds = fmaf(g, cc, carry[n]);
                float as = a * sp;
                ddl = fmaf(ds, fmaf(A[n], as, b * uu), ddl);
                dA[n] = fmaf(ds * dl, as, dA[n]);
                duv = fmaf(ds * dl, b, duv);
                bc[n] = ds * dl * uu;
                bc[SCAN_N + n] = g * st;
                carry[n] = start ? 0.f : a * ds;
            }
            float ddp = v > 20.f ? ddl : ddl * sigmoid_f(v);
            dbias += ddp;
            dDacc = fmaf(g, uu, dDacc);
            if (active) {
                du_out[m * Cd + c] = __float2bfloat16(duv);
                ddpre_out[m * Cd + c] = __float2bfloat16(ddp);
                dz_out[m * ldz + c] = __float2bfloat16(dzv);
                if (y_out) y_out[m * Cd + c] = __float2bfloat16(y * zz * sz);  // as scan_fwd_generic_kernel
            }
            float tot = warp_transpose_reduce32(bc);
            R[(j * warps + warp) * 2 * SCAN_N + lane] = tot;
        }
        __syncthreads();
        // sum the block's warps, one partial per (token, block)
        for (int idx = tid; idx < len * 2 * SCAN_N; idx += SCAN_THREADS) {
            int j = idx / (2 * SCAN_N), i = idx % (2 * SCAN_N);
            float acc = 0.f;
            for (int w = 0; w < warps; w++) acc += R[(j * warps + w) * 2 * SCAN_N + i];
            size_t m = (size_t)row * T + t0 + j;
            bc_part[(m * nblk + blockIdx.x) * 2 * SCAN_N + i] = acc;
        }
        __syncthreads();  // S and R are rewritten by the next chunk
    }
    if (active) {
        float *pp = par_part + (size_t)row * (2 + SCAN_N) * Cd + c;
        pp[0] = dbias;
        pp[(size_t)Cd] = dDacc;
#pragma unroll
        for (int n = 0; n < SCAN_N; n++) pp[(size_t)(2 + n) * Cd] = dA[n] * A[n];  // dA_log = dA * dA/dA_log
    }
}

// dB, dC (M, N) bf16 (ldbc) = sums of the per-block partials in block order. One thread per (token, 2N value).
__global__ void scan_bc_reduce_kernel(__nv_bfloat16 *dB, __nv_bfloat16 *dC, const float *bc_part, int ldbc, int M,
                                      int nblk) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)M * 2 * SCAN_N) return;
    size_t m = idx / (2 * SCAN_N);
    int i = idx % (2 * SCAN_N);
    const float *p = bc_part + m * nblk * 2 * SCAN_N + i;
    float acc = 0.f;
    for (int b = 0; b < nblk; b++) acc += p[(size_t)b * 2 * SCAN_N];
    if (i < SCAN_N)
        dB[m * ldbc + i] = __float2bfloat16(acc);
    else
        dC[m * ldbc + i - SCAN_N] = __float2bfloat16(acc);
}

// ---- staged path (the fast one) ----
// Tiles of u/dpre/z/dout (128 channels wide) arrive in shared memory by cp.async one chunk ahead; B_t/C_t
// (strided, any alignment) are prefetched into registers one chunk ahead and kept in shared memory as fp32.
// G threads share a channel, each holding N/G of its states, so there are enough warps per scheduler to hide
// latency even when rows*Cd is only ~16K (one thread per channel gave 4 warps per SM and ran latency bound).
// The per-(token, channel) work that does not depend on the state (softplus, SiLU, their derivatives) runs as
// a cooperative pass over the chunk, one item per (token, channel) so nothing is computed G times.
// Needs Cd % 8 == 0, ldz % 8 == 0 and 16-byte aligned u/dpre/z/dout (true for the backend's buffers);
// otherwise the generic kernels above run.
static constexpr int FT = 32;   // tokens per forward chunk (a multiple of SCAN_K: checkpoints fall on rows)
static constexpr int FG = 4;    // threads per channel in the forward / checkpoint kernel (4: the output step and the swizzle offsets assume it)
static constexpr int BG = 2;    // threads per channel in the backward kernel
// How the forward / checkpoint kernels are planned (v8): 0 = by the cost model in scan_fwd_plan (v4's plan,
// no segments, when the GPU is already full); 1 = always segments, two blocks per SM (64 registers);
// 2 = always segments, one block per SM (v4's register budget). The lab freezes each as its own version.
static constexpr int SEG_POLICY = 0;
static constexpr int SCAN_SEG_MAX = 16;  // most time segments per row (v8)
static constexpr int SCAN_SEG_MIN_CHUNKS = 4;  // fewest forward chunks (FT tokens) per segment
static constexpr int MODE_FWD = 0, MODE_CKPT = 1, MODE_SUMM = 2, MODE_FWD_CKPT = 3;

__device__ __forceinline__ void cp_async16(void *smem_dst, const void *gmem_src, bool pred) {
    unsigned d = (unsigned)__cvta_generic_to_shared(smem_dst);
    int n = pred ? 16 : 0;  // 0 source bytes: the 16 destination bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem_src), "r"(n));
}
__device__ __forceinline__ void cp_async4(void *smem_dst, const void *gmem_src, bool pred) {
    unsigned d = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(gmem_src), "r"(pred ? 4 : 0));
}
// *p = (a, b, c, d) when pred, as one predicated 16-byte store: unlike an if around a store, no branch (v43)
__device__ __forceinline__ void st_f4_if(float *p, float a, float b, float c, float d, bool pred) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.s32 p, %5, 0;\n\t@p st.global.v4.f32 [%0], {%1, %2, %3, %4};\n\t}" ::"l"(p),
                 "f"(a), "f"(b), "f"(c), "f"(d), "r"((int)pred));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::); }

// (TK tokens, CH channels) bf16 tile of X (row stride ld) from token row m0, channel c0, into dst (TK, CH);
// token rows >= len and channels >= Cd read as zeros. NT threads. SWZ: row j's 16-byte piece p lands at piece
// p ^ (j & 3) (the forward's layout, fwd_swz).
template <int TK, int NT, int CH, bool SWZ = false>
__device__ __forceinline__ void load_tile(__nv_bfloat16 *dst, const __nv_bfloat16 *X, int ld, size_t m0, int len,
                                          int c0, int Cd) {
    constexpr int PIECES = CH / 8, ALL = TK * PIECES;  // 16-byte pieces per token row, per tile
#pragma unroll
    for (int i = 0; i < (ALL + NT - 1) / NT; i++) {
        int piece = threadIdx.x + i * NT, j = piece / PIECES, p = piece % PIECES;
        if (ALL % NT != 0 && piece >= ALL) break;  // (narrow tiles: fewer pieces than threads)
        int c = c0 + 8 * p;
        bool ok = j < len && c < Cd;
        cp_async16(dst + j * CH + 8 * (SWZ ? p ^ (j & 3) : p), ok ? X + (m0 + j) * ld + c : X, ok);
    }
}

// B_t, C_t of TK tokens as fp32 into bcf (TK, 2N): each of NT threads fetches V consecutive values (all of B or
// all of C) into registers first, so the loads can be in flight while a chunk is computed. The raw bf16 bits
// are kept until store() (v11): converting right after the load made every thread wait for it there.
template <int TK, int NT>
struct BCFetch {
    static constexpr int V = TK * 2 * SCAN_N / NT;
    static_assert(V >= 1 && SCAN_N % V == 0, "B/C values must split evenly");
    unsigned short r[V];
    __device__ __forceinline__ void fetch(const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, size_t m0,
                                          int len) {
        int j = threadIdx.x / (2 * SCAN_N / V), v0 = (threadIdx.x % (2 * SCAN_N / V)) * V;
        const __nv_bfloat16 *src = (v0 < SCAN_N ? Bm + v0 : Cm + (v0 - SCAN_N)) + (m0 + j) * ldbc;
#pragma unroll
        for (int i = 0; i < V; i++) r[i] = j < len ? __bfloat16_as_ushort(src[i]) : (unsigned short)0;
    }
    __device__ __forceinline__ void store(float *bcf) const {
        int j = threadIdx.x / (2 * SCAN_N / V), v0 = (threadIdx.x % (2 * SCAN_N / V)) * V;
#pragma unroll
        for (int i = 0; i < V; i++) bcf[j * 2 * SCAN_N + v0 + i] = __uint_as_float((unsigned)r[i] << 16);
    }
};

// Document starts of a chunk, in two steps so the load of pos is in flight while the chunk before is computed
// (v11): pos_fetch loads lane j's pos (token t0 + j); start_mask then has bit j set when token t0 + j starts a
// document. Every warp computes it for itself. A row's first token is no start unless its pos is 0: the forward
// starts the row from its first state (0, or the state carried in: ScanInit), and the backward reads that from the
// checkpoint of chunk 0.
__device__ __forceinline__ int pos_fetch(const int32_t *pos, size_t m0, int len) {
    int lane = threadIdx.x & 31;
    return lane < len ? pos[m0 + lane] : 1;
}
__device__ __forceinline__ unsigned start_mask(int pv, int len) {
    int lane = threadIdx.x & 31;
    return __ballot_sync(0xffffffffu, lane < len && pv == 0);
}

// Store a (TK tokens, CH channels) bf16 tile src (TK, CH) of shared memory into X (row stride ld) at token row
// m0, channel c0, in 16-byte pieces; token rows >= len and channels >= Cd are left alone. NT threads. (v11: the
// kernels stage their outputs so that each warp writes whole 16-byte pieces instead of 2-byte scatters.) SWZ: src
// is swizzled as load_tile's.
template <int TK, int NT, int CH, bool SWZ = false>
__device__ __forceinline__ void store_tile(__nv_bfloat16 *X, int ld, size_t m0, int len, int c0, int Cd,
                                           const __nv_bfloat16 *src) {
    constexpr int PIECES = CH / 8, ALL = TK * PIECES;
#pragma unroll
    for (int i = 0; i < (ALL + NT - 1) / NT; i++) {
        int piece = threadIdx.x + i * NT, j = piece / PIECES, p = piece % PIECES;
        if (ALL % NT != 0 && piece >= ALL) break;
        int c = c0 + 8 * p;
        if (j < len && c < Cd)
            *(uint4 *)(X + (m0 + j) * ld + c) = *(const uint4 *)(src + j * CH + 8 * (SWZ ? p ^ (j & 3) : p));
    }
}

// One level of a transposed butterfly over the lanes that differ in LANEBIT: afterwards v[0..HALF) hold sums of
// the pair's values, the lower lane keeping indices [0, HALF), the upper [HALF, 2*HALF).
template <int HALF, int LANEBIT, int V>
__device__ __forceinline__ void tr_level(float (&v)[V]) {
    bool upper = (threadIdx.x & LANEBIT) != 0;
#pragma unroll
    for (int i = 0; i < HALF; i++) {
        float keep = upper ? v[i + HALF] : v[i];
        float send = upper ? v[i] : v[i + HALF];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, LANEBIT);
    }
}

// sum_{k<4} s_k c_k, in one of two orders: PAIRS (v24) (s0 c0 + s1 c1) + (s2 c2 + s3 c3); otherwise (v78) one
// chain of multiply-adds in state order, ((s0 c0 + s1 c1) + s2 c2) + s3 c3, an instruction fewer. Every kernel
// forms y from its quads in the order of the plan, then adds the quads as (q0 + q1) + (q2 + q3), so the forward
// and the backward that writes its output again get the same bits from the same states. A kernel holding two
// quads swapped (the 2-thread backward's slots) still does, as fp32 addition commutes; the 4-thread backward holds
// a quad's two pairs swapped, which only the pairs' order leaves alone, so where the backward's plan is the
// 4-thread kernel the forward sums in pairs (scan_quad_pairs, below; a chain there cost the 4-thread kernel two
// chains and a select, +1.4-1.6% fwd+bwd at B8·D1536, B6·D2048, B3·D4096, call225-226).
template <bool PAIRS>
__device__ __forceinline__ float quad_dot(float s0, float s1, float s2, float s3, const float *c) {
    if (PAIRS) return fmaf(s1, c[1], s0 * c[0]) + fmaf(s3, c[3], s2 * c[2]);
    return fmaf(s3, c[3], fmaf(s2, c[2], fmaf(s1, c[1], s0 * c[0])));
}

// One kernel, four jobs (MODE): FWD writes out; FWD_CKPT writes out and the checkpoints as CKPT does, so the
// backward can skip its checkpoint pass (v12); CKPT (the backward's checkpoint pass) writes the state before
// every SCAN_K-th token into ckpt (rows, nck, Cd, N), no z, no out; SUMM writes a time segment's summary (see
// below), no z, no out. grid (nblk, rows, segments), CH*FG threads; thread (channel cl = tid / FG, quarter
// q = tid % FG) holds states q*NS .. q*NS+NS-1.
//
// Time segments (v8): a row is cut into nseg segments of SL tokens (SL a multiple of FT) so that there are
// enough blocks for one or two (MINB) blocks per SM even when rows * Cd is small. The recurrence s_t = a_t s_{t-1} + b_t is
// linear, so over a segment s_end = P * s_in + H, where H is the end state of the segment scanned from a zero
// state and P the product of its a_t (per channel and state; 0 when a document starts inside the segment).
// SUMM computes (H, P) of every segment but the last from a zero state, P as 2^(A * sum of delta*log2 e);
// FWD and CKPT then rescan every segment from its true incoming state, which each block folds together from
// the summaries of the segments before it (at most SCAN_SEG_MAX - 1 steps of N/FG FMAs). The segment state
// crossing a segment boundary is the only thing carried, and nothing is summed across blocks: deterministic.
// summ (rows, nseg - 1, 2 = {H, P}, Cd, N) f32.
// Dynamic smem: tiles (2 stages, 3 arrays, FT, CH) bf16 | bcf (2, FT, 2N) f32 | {delta*log2e, delta*u} (FT, CH)
// float2 | silu(z) (FT, CH) f32 | FWD only: the chunk's outputs (FT, CH) bf16, stored in 16-byte pieces after the
// chunk.
// v31: the input tiles, silu(z) and the outputs are stored swizzled (fwd_swz): in row j, the group of 8 channels
// g sits at group g ^ (j & 3). The output step has lane q of a channel finish token j0 + jt(q), so a warp reads
// u and silu(z) and writes the output at 4 token rows of the same 8 channels at once; unswizzled, rows a multiple
// of 128 bytes long put those in the same banks (4-way conflicts at 64- and 128-wide blocks, 2-way on the bf16
// arrays at 32-wide). Swizzled by 16-byte (bf16) or 32-byte (f32) groups, the 4 rows use different banks, and
// 16-byte pieces stay whole for the cp.async loads and the output stores.
static constexpr size_t fwd_smem(int CH, int MODE) {
    return (size_t)2 * 3 * FT * CH * 2 + (size_t)2 * FT * 2 * SCAN_N * 4 + (size_t)3 * FT * CH * 4 +
           (MODE == MODE_FWD || MODE == MODE_FWD_CKPT ? (size_t)FT * CH * 2 : 0);
}
// where (token row j, channel c) of a (FT, CH) forward array lies (CH a multiple of 32: at least 4 groups a row)
template <int CH>
__device__ __forceinline__ int fwd_swz(int j, int c) {
    return j * CH + ((((c >> 3) ^ j) & 3) | ((c >> 3) & ~3)) * 8 + (c & 7);
}
template <int CH, int MODE, int MINB, bool QP = false>  // QP: quad_dot's order (PAIRS)
__global__ void __launch_bounds__(CH *FG, MINB)
    scan_fwd_staged_kernel(__nv_bfloat16 *out, float *ckpt, float *summ, const __nv_bfloat16 *u,
                           const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log,
                           const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *Dp,
                           const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd, int nck, int SL,
                           int nseg, ScanInit init) {
    constexpr bool CKPT = MODE == MODE_CKPT || MODE == MODE_SUMM;  // no z, no y, no out
    constexpr bool STORE_CK = MODE == MODE_CKPT || MODE == MODE_FWD_CKPT;
    constexpr int NT = CH * FG, NS = SCAN_N / FG;
    static_assert(CH % 32 == 0, "fwd_swz needs 4 groups of 8 channels a row");
    static_assert(NS == 4, "each thread's states are one float4 of B, C and the checkpoint");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *tiles = (__nv_bfloat16 *)smem_raw;  // swizzled (fwd_swz)
    float *bcf = (float *)(smem_raw + (size_t)2 * 3 * FT * CH * 2);
    // (delta*log2e, delta*u) of a (token, channel) side by side: one 8-byte load per token (v11)
    float2 *pdd = (float2 *)(bcf + 2 * FT * 2 * SCAN_N);
    float *pg = (float *)(pdd + FT * CH);                    // swizzled (fwd_swz)
    __nv_bfloat16 *otile = (__nv_bfloat16 *)(pg + FT * CH);  // (FT, CH), FWD only, swizzled (fwd_swz)
    const int tid = threadIdx.x, q = tid % FG, cl = tid / FG, row = blockIdx.y;
    const int c0 = blockIdx.x * CH, c = c0 + cl;
    const bool active = c < Cd;
    const size_t mrow = (size_t)row * T;
    const int seg = blockIdx.z, tb = seg * SL, te = min(T, tb + SL);  // this block's tokens [tb, te)
    const int kb = tb / FT, nch = (te + FT - 1) / FT;                   // its chunks [kb, nch)
    float A[NS];  // exp(delta*A) = 2^((delta*log2 e) * A)
#pragma unroll
    for (int i = 0; i < NS; i++) A[i] = active ? -__expf(A_log[(size_t)c * SCAN_N + q * NS + i]) : 0.f;
    const float Dc = settle((!CKPT && active) ? Dp[c] : 0.f);
    const int clA = tid % CH;  // the channel this thread serves in the cooperative pass
    const float biasA = settle(c0 + clA < Cd ? dt_bias[c0 + clA] : 0.f);
    // fwd_swz as offsets fixed per thread: the cooperative pass's items i = it NT + tid all have row j = 4 it +
    // tid / CH (NT = 4 CH), so j & 3 and the channel do not change with it; the output step's rows j0 + jt have
    // j0 a multiple of 4
    static_assert(NT == 4 * CH, "the swizzle offsets assume 4 threads per channel");
    const int coop_swz = fwd_swz<CH>(tid / CH, clA) - tid;
    const int out_swz = fwd_swz<CH>((q & 1) << 1 | q >> 1, cl);
    float s[NS];  // the row's first state (0, or the carried state), then folded on to this segment's start
    const float *s_in = MODE != MODE_SUMM && active ? scan_init_states(init, row, c, Cd, q * NS) : nullptr;
#pragma unroll
    for (int i = 0; i < NS; i++) s[i] = s_in ? s_in[i] : 0.f;
    if (MODE != MODE_SUMM && active) {  // the true state entering this segment, from the earlier summaries
        for (int h = 0; h < seg; h++) {
            const float *H = summ + (((size_t)row * (nseg - 1) + h) * 2 * Cd + c) * SCAN_N + q * NS;
            const float *P = H + (size_t)Cd * SCAN_N;
#pragma unroll
            for (int i = 0; i < NS; i++) s[i] = fmaf(P[i], s[i], H[i]);
        }
    }
    float cum = 0.f;        // SUMM: sum of delta*log2 e over the segment (this channel)
    unsigned anyst = 0u;    // SUMM: nonzero when a document starts inside the segment

    auto issue = [&](int k) {  // cp.async the tiles of chunk k into stage k & 1
        int t0 = k * FT, len = min(FT, te - t0);
        __nv_bfloat16 *st = tiles + (size_t)(k & 1) * 3 * FT * CH;
        load_tile<FT, NT, CH, true>(st, u, Cd, mrow + t0, len, c0, Cd);
        load_tile<FT, NT, CH, true>(st + FT * CH, dpre, Cd, mrow + t0, len, c0, Cd);
        if (!CKPT) load_tile<FT, NT, CH, true>(st + 2 * FT * CH, z, ldz, mrow + t0, len, c0, Cd);
    };
    BCFetch<FT, NT> bc;
    issue(kb);
    cp_async_commit();
    bc.fetch(Bm, Cm, ldbc, mrow + tb, min(FT, te - tb));
    bc.store(bcf + (kb & 1) * FT * 2 * SCAN_N);
    unsigned mask_next = start_mask(pos_fetch(pos, mrow + tb, min(FT, te - tb)), min(FT, te - tb));
    int pv_next = 1;

    for (int k = kb; k < nch; k++) {
        const int t0 = k * FT, len = min(FT, te - t0), t1 = t0 + FT, len1 = min(FT, te - t1);
        const unsigned mask = mask_next;
        if (FWD_TWO_BARRIERS) {
            cp_async_wait0();  // chunk k's tiles have landed (this thread's copies) ...
        } else {
            if (k + 1 < nch) issue(k + 1);
            cp_async_commit();
            cp_async_wait1();
        }
        __syncthreads();  // ... and everyone's; bcf[k & 1] is visible (two barriers: chunk k - 1 is over)
        if (FWD_TWO_BARRIERS) {  // stage (k + 1) & 1 was last read before the barrier above
            if (k + 1 < nch) issue(k + 1);
            cp_async_commit();
            if (!CKPT && k > kb) store_tile<FT, NT, CH, true>(out, Cd, mrow + t0 - FT, FT, c0, Cd, otile);
        }
        if (k + 1 < nch) {  // in flight during the chunk
            bc.fetch(Bm, Cm, ldbc, mrow + t1, len1);
            pv_next = pos_fetch(pos, mrow + t1, len1);
        }
        const __nv_bfloat16 *tu = tiles + (size_t)(k & 1) * 3 * FT * CH;
        const __nv_bfloat16 *tdp = tu + FT * CH, *tz = tu + 2 * FT * CH;
        // cooperative pass: one (token, channel) item per thread and step, independent across tokens. v34: no
        // branch on the row's end (-0.5 to -1% on the forward). Past the row's end the tiles are zero
        // (load_tile), so silu(z) = 0 and u = 0; delta is forced to 0 by a select: a = 1 and no input, so the
        // state is left as it is. v51: every item's inputs are loaded before the first item's stores. Without the
        // branch the compiler still kept each item's loads after the previous item's stores (it cannot tell the
        // pass arrays from the tiles), so the items ran one after another (ncu, call108: this pass took 32% of
        // the checkpoint pass's time for 20% of its instructions)
        constexpr int IT = FT * CH / NT;
        float xdp[IT], xu[IT], xz[IT];
#pragma unroll
        for (int it = 0; it < IT; it++) {
            const int si = it * NT + tid + coop_swz;
            xdp[it] = bf2f(tdp[si]), xu[it] = bf2f(tu[si]);
            if (!CKPT) xz[it] = bf2f(tz[si]);
        }
#pragma unroll
        for (int it = 0; it < IT; it++) {
            const int i = it * NT + tid, j = i / CH, si = i + coop_swz;
            const float sp = softplus_f(xdp[it] + biasA), dl = j < len ? sp : 0.f;
            pdd[i] = make_float2(dl * LOG2E, dl * xu[it]);
            if (!CKPT) pg[si] = xz[it] * sigmoid_f(xz[it]);
        }
        __syncthreads();
        if (MODE == MODE_SUMM) {
            anyst |= mask;
#pragma unroll 8
            for (int j = 0; j < FT; j++) cum += pdd[j * CH + cl].x;  // 0 past the segment's end
        }
        // the recurrence, 4 tokens at a time so y can be summed over the FG threads of a channel with one
        // transposed butterfly (each thread then finishes one of the 4 tokens)
        const float *bck = bcf + (k & 1) * FT * 2 * SCAN_N;
        // (v22: all FT tokens with a compile-time bound, so the groups are unrolled into one block the scheduler
        // can interleave; tokens past the row's end have zero pass arrays and leave the state alone. Not in the
        // kernels held to 64 registers for two blocks per SM (MINB 2), where the unrolled code spills. v45: also in
        // the 32-wide kernels held to 128 registers for four (MINB 4), which it now fits without spills since v43's
        // branch-free checkpoint stores: B8·D1536 forward -3%.)
        // (the bound: registers for 128 a thread, i.e. at most 512 threads an SM; all but the 128-wide MINB 2 kernels)
        const int jend = CH * FG * MINB <= 512 ? FT : len;
        // v35: a group's y sums are reduced over the channel's threads and stored one group later, after the next
        // group's state updates, so the shuffles' and the output loads' latency overlaps that work instead of
        // stalling the warp (ncu's per-instruction view of v31: the butterfly's adds and the loads' first users
        // held most of the forward's short-scoreboard stalls; 35% of its samples were short-scoreboard waits).
        // The same operations in the same order: the same bits. ypend: the sums of group jp, not yet reduced.
        float ypend[4] = {0.f, 0.f, 0.f, 0.f};
        int jp = -1;
        auto finish_group = [&](float (&yq)[4], int jg) {
            // sum y over the FG threads of the channel as (q0 + q1) + (q2 + q3) (the backward kernels' order);
            // thread q then owns token jg + jt, jt = (q & 1) << 1 | q >> 1 (FG is 4: see out_swz)
            tr_level<2, 1, 4>(yq);
            tr_level<1, 2, 4>(yq);
            const int si = jg * CH + out_swz;  // = fwd_swz(jg + jt, cl); rows past len are not stored
            otile[si] = __float2bfloat16(fmaf(Dc, bf2f(tu[si]), yq[0]) * pg[si]);
        };
#pragma unroll
        for (int j0 = 0; j0 < jend; j0 += 4) {  // j0 <= 28: every j below is < FT = 32
            // the state before token j0 (the forward too when asked to leave the backward its checkpoints)
            // (v43: a predicated store, no branch, so the token groups around it stay one block for the scheduler)
            if (STORE_CK && j0 % SCAN_K == 0)
                st_f4_if(ckpt + (((size_t)row * nck + (t0 + j0) / SCAN_K) * Cd + c) * SCAN_N + q * NS, s[0], s[1],
                         s[2], s[3], active && j0 < len);
            float yp[4];
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                const int j = j0 + jj;
                // a document start forces a_t = 2^-huge = 0: the state restarts without a branch
                const float off = ((mask >> j) & 1u) ? -1e30f : 0.f;
                const float2 dd = pdd[j * CH + cl];
                const float dlL = dd.x, dlu = dd.y;
                const float4 b = *(const float4 *)(bck + j * 2 * SCAN_N + q * NS);
                const float bb[4] = {b.x, b.y, b.z, b.w};
                float cc[4] = {0.f, 0.f, 0.f, 0.f};
                if (!CKPT) {
                    const float4 cv = *(const float4 *)(bck + j * 2 * SCAN_N + SCAN_N + q * NS);
                    cc[0] = cv.x, cc[1] = cv.y, cc[2] = cv.z, cc[3] = cv.w;
                }
#pragma unroll
                for (int i = 0; i < NS; i++) s[i] = fmaf(ex2_approx(fmaf(dlL, A[i], off)), s[i], dlu * bb[i]);
                // y over the 4 states as two pairs (v24: the order the backward kernels can follow whatever slots
                // they hold the states in, so the output they write again is this one)
                yp[jj] = quad_dot<QP>(s[0], s[1], s[2], s[3], cc);
            }
            if (!CKPT) {
                if (jp >= 0) finish_group(ypend, jp);
#pragma unroll
                for (int e = 0; e < 4; e++) ypend[e] = yp[e];
                jp = j0;
            }
        }
        if (!CKPT && jp >= 0) finish_group(ypend, jp);
        if (k + 1 < nch) {
            bc.store(bcf + ((k + 1) & 1) * FT * 2 * SCAN_N);
            mask_next = start_mask(pv_next, len1);
        }
        if (!FWD_TWO_BARRIERS) {
            __syncthreads();  // stage k & 1 and the pass arrays are rewritten next chunk; bcf[(k+1) & 1] published
            // otile is rewritten only after the next chunk's two barriers
            if (!CKPT) store_tile<FT, NT, CH, true>(out, Cd, mrow + t0, len, c0, Cd, otile);
        }
    }
    if (FWD_TWO_BARRIERS && !CKPT) {  // the last chunk's output (the others' are stored in the next chunk's pass)
        __syncthreads();
        const int t0 = (nch - 1) * FT;
        store_tile<FT, NT, CH, true>(out, Cd, mrow + t0, min(FT, te - t0), c0, Cd, otile);
    }
    if (MODE == MODE_SUMM && active) {
        float *H = summ + (((size_t)row * (nseg - 1) + seg) * 2 * Cd + c) * SCAN_N + q * NS;
        float *P = H + (size_t)Cd * SCAN_N;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            H[i] = s[i];
            P[i] = anyst ? 0.f : ex2_approx(cum * A[i]);
        }
    }
}

// v65: the forward with its cooperative pass in producer warps (warp-specialized). The staged forward runs the
// pass (softplus, SiLU: a fifth of its exps) and the walk in the same warps, with block-wide barriers between
// them: at B8 D2048 the pass took 28% of its time (call126) while neither the special-function unit nor the issue
// slots were full (~60% each: ~266 cycles a token step against 160 of MUFU work, call141's ablations). Here PW
// producer warps (the block's first) copy a chunk's u/dpre/z, B/C and pos into shared memory WS_PD chunks ahead,
// compute the pass values, B/C as fp32 and the document-start mask into a ring of WS_S stages, and store the
// outputs the walkers staged there; the CH * WG walker threads only walk, WG = 2 threads a channel (8 states
// each: fewer instructions a state than 4, and the registers for it: the walkers are fewer warps). The two sides
// meet at mbarriers (full: a stage is filled; empty: its walk is over; v66, named barriers in v65), so no warp
// waits for the whole block. Every value is formed as the staged kernel forms it: the same bits (the lab checks
// the backward's copy of the output against it; the op tests compare the two kernels). Only the forward
// (MODE_FWD, MODE_FWD_CKPT) without time segments.
// Measured at B8 D2048 (lab, fwd ms; HEAD's staged kernel 0.275-0.278): 4 walker threads a channel and 2 or 4
// producer warps a block, loaded into registers 0.408-0.426, by cp.async 0.374-0.387 (call168-171; alone the
// walkers took 0.229 and the producers 0.141: the two sides took turns; as the block's first warps, the same);
// without the chunk loop unrolled over the stages (ncu, call172: instruction-fetch stalls were the first stall
// reason, at 5.7K instructions) 0.280; with 2 walker threads 0.268; with 4 producer warps a 64-wide block
// instead of 2, 0.254-0.257 (call173, call174). 5 stages, or the walk unrolled by 2 groups only: no better.
// v66 (mbarriers) 0.247 (call180). ncu on v66 (call180): the walkers are the critical path (the producers wait
// on the empty barriers: a tenth of all stall samples), 70% of issue slots busy, 22% of the walkers' samples
// "not selected": the producers' issue competes. v67: the producers copy u/dpre/z by 16 bytes (3 cp.async a
// chunk instead of 12) and write whole groups, 0.233-0.238 (call181; the walkers as the first warps, or
// try_wait with a 1 ms suspend hint: no change). v68: the walkers stage y in fp32 and the producers form
// (y + D u) silu(z): B8 D2048 0.234 either way, B8 D3072 0.356-0.359 -> 0.352, B16 D1536 L1024 0.184-0.185 ->
// 0.181 (call182; 2 producer warps instead of 4: 0.257; 4 walker threads a channel: 0.254). v69, v70: see
// scan_fwd_dispatch.
static constexpr int WS_FT = 16;  // tokens a chunk (= SCAN_K: the checkpoint falls on each chunk's first token)
#ifndef PM_SCAN_WS_S
#define PM_SCAN_WS_S 4
#endif
static constexpr int WS_S = PM_SCAN_WS_S;  // stages in the ring
static_assert(WS_FT == SCAN_K, "one checkpoint a chunk, before its first token");
#ifndef PM_SCAN_FWD_WS
#define PM_SCAN_FWD_WS 1
#endif
#ifndef PM_SCAN_WS_PW128
#define PM_SCAN_WS_PW128 8
#endif
#ifndef PM_SCAN_WS_PW64
#define PM_SCAN_WS_PW64 4
#endif
#ifndef PM_SCAN_WS_32
#define PM_SCAN_WS_32 1  // the warp-specialized forward for 32-wide plans whose blocks fit one wave, three an SM
#endif
#ifndef PM_SCAN_WS_PW32
#define PM_SCAN_WS_PW32 2
#endif
#ifndef PM_SCAN_WS_96
#define PM_SCAN_WS_96 1  // v81: 32-wide plans of one wave as 96-wide blocks, 4 walker threads a channel (see
                         // scan_fwd_dispatch)
#endif
#ifndef PM_SCAN_WS_128
#define PM_SCAN_WS_128 0  // (lab) v65 for 128-wide plans too; see scan_fwd_dispatch
#endif
static constexpr bool FWD_WS = PM_SCAN_FWD_WS;
#ifndef PM_SCAN_WS_OUTW
#define PM_SCAN_WS_OUTW 1  // v82: which warp-specialized forwards have their walkers form the output (see ws_outw)
#endif
// v82: the walkers form the output, (y + D u) silu(z), each walker thread the (token, channel) it holds after its
// group's butterfly, and the producers only convert and store it (z is in the stage raw, v83): silu(z)'s two
// special-function results a (token, channel) and the output's multiply-adds move from the producers to the
// walkers. It paid where the producers are (we read) the heavier side: v81's 96-wide blocks (4 walker threads a channel,
// a walker thread forms one output every 4 tokens; 6 producer warps, so two schedulers hold two of them): lab fwd
// -3.5% at B8·D1536. With 2 walker threads a channel (one output every 2 tokens, two walker warps a scheduler or
// one) it measured slower: fwd +1.5% at B8·D2048, +2% at B4·D4096, +6% at B2·D4096·L8192 (call250). Lab switch:
// 0 none, 1 the 4-thread instances (default), 2 all.
template <int WG>
__host__ __device__ static constexpr bool ws_outw() {
    return PM_SCAN_WS_OUTW == 2 || (PM_SCAN_WS_OUTW == 1 && WG == 4);
}
#ifndef PM_SCAN_WS_UNROLL
#define PM_SCAN_WS_UNROLL 16
#endif
static constexpr int WS_UNROLL = PM_SCAN_WS_UNROLL;  // the walk's token groups unrolled (16: the whole chunk)
#ifndef PM_SCAN_WS_WG
#define PM_SCAN_WS_WG 2  // walker threads a channel (lab: 4, or 1: all 16 states a thread, y summed in the
                         // thread with no butterfly; dev/calls/call247.sh, prepared in the thirtieth session)
#endif
// The producers' inputs come by cp.async (u/dpre/z 16 bytes, v67; B/C and pos 4 bytes) into a ring of raw slots
// WS_PD chunks ahead. (Loaded into registers one chunk ahead, each chunk's pass waited a full load latency when
// the producers had no slack: wsa 0.408-0.426 ms, cp.async 0.374-0.387, call168/169, with 4 walker threads a
// channel and the code below unrolled.)
static constexpr int WS_PD = 2;
// producers that copy B/C: all of them up to 128 (at least 4 values each, whole float4s)
__host__ __device__ static constexpr int ws_bc_threads(int NP) { return NP < 128 ? NP : 128; }
// words of a raw slot: u, dpre, z (bf16, two channels a word), B/C (a word two values), pos
__host__ __device__ static constexpr int ws_raw_words(int CH, int NP) {
    return 3 * WS_FT * CH / 2 + WS_FT * SCAN_N / ws_bc_threads(NP) * NP + 32;
}
// The ring's handshakes, on shared-memory mbarriers: an arrive is a release and the parity wait an acquire (cta
// scope). full[s] counts the NP producers, empty[s] the NW walkers; phase p of a barrier completes when all have
// arrived, and a wait for parity p & 1 returns once it has. (v65 used named barriers, bar.arrive on one side and
// bar.sync on the other: ordered by the PTX ISA, but compute-sanitizer's racecheck reported hazards across each
// pair, 4 on CUDA 13, call179, so it could not check the kernel; the mbarriers are clean and as fast: v66.)
__device__ __forceinline__ void mbar_init(unsigned long long *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(b)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((unsigned)__cvta_generic_to_shared(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long *b, unsigned parity) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tWAIT_%=:\n\t"
#if __CUDA_ARCH__ >= 900  // try_wait suspends the thread a while in hardware; sm_80 has only the polling test
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
#else
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
#endif
        "@!p bra WAIT_%=;\n\t}" ::"r"((unsigned)__cvta_generic_to_shared(b)),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ float2 bf2x2f(unsigned v) {
    return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
// A stage: {delta log2 e, delta u} (WS_FT, CH) float2 (positions: ws_pdd_pos) | z (WS_FT, CH) bf16 as it came,
// swizzled (ws_swz) | u (WS_FT, CH) bf16, swizzled (ws_swz) | the walk's y, or the output where the walkers form it
// (WS_FT, CH) f32, swizzled (ws_swz of ws_pg_rot) | B/C (WS_FT, 2N) f32 | the start mask (16 bytes). Byte offsets of
// the parts (v83: z raw, 2 bytes, where silu(z) took 4):
// v90 (YH, kernels with 2 walker threads a channel): the walkers store y's two halves as they are, one float a
// thread and token, and the producers add them in store_out, instead of the walkers' transposed butterfly (two
// selects, a shuffle and an add a thread and 2 tokens); the y part then takes 8 bytes an item (ws_yh_pos). Same
// bits: the butterfly added the same two halves, and fp32 addition commutes.
static constexpr size_t WS_ZB = 8, WS_UB = 10, WS_Y = 12;  // (times WS_FT * CH)
__host__ __device__ static constexpr size_t ws_bc_off(bool yh) {  // where B/C starts (times WS_FT * CH)
    return WS_Y + (yh ? 8 : 4);
}
__host__ __device__ static constexpr size_t ws_stage_bytes(int CH, bool yh) {
    return (size_t)WS_FT * CH * ws_bc_off(yh) + (size_t)WS_FT * 2 * SCAN_N * 4 + 16;
}
__host__ __device__ static constexpr size_t ws_smem(int CH, int NP, bool yh = false) {
    return WS_S * ws_stage_bytes(CH, yh) + (size_t)(WS_PD + 1) * ws_raw_words(CH, NP) * 4 + 2 * WS_S * 8;
}
// where (token row j, channel c) of a stage's swizzled arrays lies: fwd_swz's layout for 4 walker threads a
// channel (a group's 4 rows in 4 places); with 2, whose groups are 2 rows, the group of 8 channels moves by
// (j & 1) << 1, so that rows j and j + 1 of a warp's 16 channels fall in different banks
template <int CH, int WG>
__device__ __forceinline__ int ws_swz(int j, int c) {
    const int x = WG == 4 ? (j & 3) : WG == 2 ? (j & 1) << 1 : 0;
    return j * CH + ((c >> 3) ^ x) * 8 + (c & 7);
}
// A producer writes one token's 8 channels (a group) at a time (v67); the positions within each group of the
// pass arrays are rotated so that a quarter warp's 8 stores (8 groups of one token row) meet 8 distinct sets of
// banks: {delta log2 e, delta u} by channel pair, rotated by (group / 2) pairs; y by halves, the second half first
// in groups 4-7 of every 8.
__device__ __forceinline__ int ws_pdd_pos(int c) { return (c & ~7) | ((((c >> 1) + (c >> 4)) & 3) << 1) | (c & 1); }
__device__ __forceinline__ int ws_pg_rot(int c) { return (c & ~7) | ((c + ((c >> 5) & 1) * 4) & 7); }
// v90: where walker thread q's half of y at (token row j, channel c) lies (YH): group g of 8 channels at 16-float
// block g ^ x (ws_swz's x for 2 walker threads), a channel's two halves side by side, rotated within the block by 4
// floats times g's bits 1-2, so that a walker warp's 32 stores (2 groups of a row) and a quarter warp of producers'
// float4 loads (8 groups of a row) each meet distinct banks
template <int CH>
__device__ __forceinline__ int ws_yh_pos(int j, int c, int q) {
    const int g = c >> 3;
    return j * CH * 2 + ((g ^ ((j & 1) << 1)) << 4) + ((((c & 7) << 1) + q + (((g >> 1) & 3) << 2)) & 15);
}
// QP: quad_dot's order (PAIRS); YH: y's halves added by the producers (v90, 2 walker threads a channel)
template <int CH, int MODE, int PW, int MINB, int WG, bool QP = false, bool YH = false>
__global__ void __launch_bounds__(CH *WG + 32 * PW, MINB)
    scan_fwd_ws_kernel(__nv_bfloat16 *out, float *ckpt, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                       const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm,
                       int ldbc, const float *Dp, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd,
                       int nck, ScanInit init) {
    static_assert(MODE == MODE_FWD || MODE == MODE_FWD_CKPT, "the forward only");
    constexpr bool STORE_CK = MODE == MODE_FWD_CKPT;
    constexpr int NW = CH * WG, NP = 32 * PW, NS = SCAN_N / WG;
    static_assert(WG == 4 || WG == 2 || WG == 1, "4, 2 or 1 walker threads a channel");
    constexpr bool OUTW = ws_outw<WG>();  // v82: the walkers form the output
    static_assert(CH % 32 == 0, "4 groups of 8 channels a row at least (ws_swz)");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int tid = threadIdx.x, row = blockIdx.y, c0 = blockIdx.x * CH;
    const size_t mrow = (size_t)row * T;
    const int nch = (T + WS_FT - 1) / WS_FT;
    static_assert(!YH || WG == 2, "y's halves: 2 walker threads a channel");
    constexpr size_t SB = ws_stage_bytes(CH, YH), WS_BC = ws_bc_off(YH);
    // full[s], empty[s]: after the stages and the raw slots (8-byte aligned: both are multiples of 16 bytes)
    unsigned long long *mb_full = (unsigned long long *)(smem_raw + ws_smem(CH, NP, YH) - 2 * WS_S * 8),
                       *mb_empty = mb_full + WS_S;
    if (tid == 0)
        for (int i = 0; i < WS_S; i++) mbar_init(mb_full + i, NP), mbar_init(mb_empty + i, NW);
    __syncthreads();  // the barriers initialized before any arrive or wait
    // The producers are the block's first warps. (Tried when the two sides took turns, producers alone 0.141 ms,
    // walkers alone 0.229, together 0.387 at B8 D2048, call169/170, in case the schedulers' preference for older
    // warps starved the producers: the same time as the last warps, call171. The cause was instruction fetch.)
    // (The walkers as the first warps instead: no faster on v67, call181, and +0.6 to +1.2% on v84, call254;
    // dev/experiments/scan_fwd_walkers_first.patch.)
    static_assert(NP % 32 == 0, "whole producer warps");
    if (fwd_producer_warp(NP)) {  // ---- producers
        // thread pt keeps channel group g8 (8 channels from c8) of rows jb8 + i RSTEP8, i < PPT8 (Cd % 8 == 0: a
        // group is all in or all out)
        constexpr int G8 = CH / 8, RSTEP8 = NP / G8, PPT8 = WS_FT / RSTEP8;
        static_assert(NP % G8 == 0 && WS_FT % RSTEP8 == 0, "each producer keeps one group");
        // B/C by the first BCT producers: BV values each, BPT threads a token
        constexpr int BCT = ws_bc_threads(NP), BV = WS_FT * 2 * SCAN_N / BCT, BPT = 2 * SCAN_N / BV;
        static_assert(BV % 4 == 0 && SCAN_N % BV == 0, "B/C values in whole float4s, all of B or all of C");
        const int pt = tid, g8 = pt % G8, jb8 = pt / G8, c8 = c0 + 8 * g8;
        const bool bcthr = NP == BCT || pt < BCT;
        const bool cin8 = c8 < Cd;
        float bias8[8];
#pragma unroll
        for (int e = 0; e < 8; e++) bias8[e] = settle(cin8 ? dt_bias[c8 + e] : 0.f);
        const int jbc = pt / BPT, vbc = (pt % BPT) * BV;
        const __nv_bfloat16 *bcsrc = vbc < SCAN_N ? Bm + vbc : Cm + (vbc - SCAN_N);
        // a slot: 16-byte word (a, i) of thread pt at uint4 (a PPT8 + i) NP + pt (a = u, dpre, z), then B/C words
        // w at word UW + w NP + pt, then pos: each thread reads back only what it copied (no barrier among
        // producers)
        constexpr int RW = ws_raw_words(CH, NP), BW = BV / 2, UW = 3 * PPT8 * 4 * NP;
        static_assert(RW == UW + BW * NP + 32, "raw slot size");
        unsigned *raw = (unsigned *)(smem_raw + WS_S * SB);
        auto fetch = [&](int k) {  // chunk k's inputs into raw slot k % (WS_PD + 1); a group even when empty
            if (k < nch) {
                unsigned *r = raw + (k % (WS_PD + 1)) * RW;
                const int t0 = k * WS_FT, len = min(WS_FT, T - t0);
                uint4 *r4 = (uint4 *)r;
#pragma unroll
                for (int i = 0; i < PPT8; i++) {
                    const int j = jb8 + i * RSTEP8;
                    const bool ok = cin8 && j < len;
                    const size_t m = ok ? mrow + t0 + j : 0;
                    cp_async16(r4 + i * NP + pt, u + m * Cd + (ok ? c8 : 0), ok);
                    cp_async16(r4 + (PPT8 + i) * NP + pt, dpre + m * Cd + (ok ? c8 : 0), ok);
                    cp_async16(r4 + (2 * PPT8 + i) * NP + pt, z + m * ldz + (ok ? c8 : 0), ok);
                }
                const bool okbc = bcthr && jbc < len;
                const __nv_bfloat16 *src = bcsrc + (okbc ? mrow + t0 + jbc : 0) * ldbc;
#pragma unroll
                for (int w = 0; w < BW; w++)
                    if (bcthr) cp_async4(r + UW + w * NP + pt, src + 2 * w, okbc);
                if (pt < 32) cp_async4(r + UW + BW * NP + pt, pos + mrow + t0 + (pt < len ? pt : 0), pt < len);
            }
            cp_async_commit();
        };
        unsigned ru[4 * PPT8], rd[4 * PPT8], rz[4 * PPT8];
        unsigned short rbc[BV];
        int pv = 1;
        auto take = [&](int k) {  // chunk k's slot, landed, into registers
            const unsigned *r = raw + (k % (WS_PD + 1)) * RW;
            const uint4 *r4 = (const uint4 *)r;
#pragma unroll
            for (int i = 0; i < PPT8; i++) {
                const uint4 a = r4[i * NP + pt], b = r4[(PPT8 + i) * NP + pt], d = r4[(2 * PPT8 + i) * NP + pt];
                ru[4 * i] = a.x, ru[4 * i + 1] = a.y, ru[4 * i + 2] = a.z, ru[4 * i + 3] = a.w;
                rd[4 * i] = b.x, rd[4 * i + 1] = b.y, rd[4 * i + 2] = b.z, rd[4 * i + 3] = b.w;
                rz[4 * i] = d.x, rz[4 * i + 1] = d.y, rz[4 * i + 2] = d.z, rz[4 * i + 3] = d.w;
            }
#pragma unroll
            for (int w = 0; w < BW; w++) {
                const unsigned v = r[UW + w * NP + pt];
                rbc[2 * w] = (unsigned short)(v & 0xffffu), rbc[2 * w + 1] = (unsigned short)(v >> 16);
            }
            const int t0 = k * WS_FT, len = min(WS_FT, T - t0);
            if (pt < 32) pv = pt < len ? (int)r[UW + BW * NP + pt] : 1;
        };
        for (int k = 0; k < WS_PD; k++) fetch(k);
        float D8[8];
#pragma unroll
        for (int e = 0; e < 8; e++) D8[e] = settle(cin8 ? Dp[c8 + e] : 0.f);
        // chunk kk's outputs from the walkers' y (fp32), formed as the staged forward forms them, (y + D u) silu(z)
        // (v68), with silu(z) formed here from z as it came (v83: the pass kept z raw, and the special-function
        // work of a chunk falls in two bursts, softplus's in the pass and the sigmoid's here); or, where the walkers
        // form the output (v82), only converted
        auto store_out = [&](int kk) {
            const unsigned char *st = smem_raw + (kk % WS_S) * SB;
            const __nv_bfloat16 *zb = (const __nv_bfloat16 *)(st + WS_FT * CH * WS_ZB);
            const __nv_bfloat16 *ub = (const __nv_bfloat16 *)(st + WS_FT * CH * WS_UB);
            const float *yt = (const float *)(st + WS_FT * CH * WS_Y);
            const int t0 = kk * WS_FT, len = min(WS_FT, T - t0);
#pragma unroll
            for (int i = 0; i < PPT8; i++) {
                const int j = jb8 + i * RSTEP8;
                if (j < len && cin8) {
                    float y[8];
                    if constexpr (YH) {  // v90: y = half 0 + half 1 (the walkers' butterfly's sum, bit for bit)
#pragma unroll
                        for (int h = 0; h < 4; h++) {
                            const float4 a = *(const float4 *)(yt + ws_yh_pos<CH>(j, 8 * g8 + 2 * h, 0));
                            y[2 * h] = a.x + a.y, y[2 * h + 1] = a.z + a.w;
                        }
                    } else {
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            const float4 a = *(const float4 *)(yt + ws_swz<CH, WG>(j, ws_pg_rot(8 * g8 + 4 * h)));
                            y[4 * h] = a.x, y[4 * h + 1] = a.y, y[4 * h + 2] = a.z, y[4 * h + 3] = a.w;
                        }
                    }
                    unsigned o[4];
                    if constexpr (OUTW) {  // the walkers' values are the output already
#pragma unroll
                        for (int e = 0; e < 4; e++) o[e] = bf2_pack(y[2 * e], y[2 * e + 1]);
                    } else {
                        const uint4 uw = *(const uint4 *)(ub + ws_swz<CH, WG>(j, 8 * g8)),
                                    zw = *(const uint4 *)(zb + ws_swz<CH, WG>(j, 8 * g8));
                        const unsigned w[4] = {uw.x, uw.y, uw.z, uw.w}, zv[4] = {zw.x, zw.y, zw.z, zw.w};
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const float2 uu = bf2x2f(w[e]), zz = bf2x2f(zv[e]);
                            o[e] = bf2_pack(gated_out(y[2 * e], D8[2 * e], uu.x, zz.x),
                                            gated_out(y[2 * e + 1], D8[2 * e + 1], uu.y, zz.y));
                        }
                    }
                    *(uint4 *)(out + (mrow + t0 + j) * Cd + c8) = make_uint4(o[0], o[1], o[2], o[3]);
                }
            }
        };
        // (the chunk loop is not unrolled over the stages, though constant barrier ids would then need fewer
        // barriers reserved: the unrolled kernel's 5.7K instructions stalled on instruction fetch more than on
        // anything else, call172)
#pragma unroll 1
        for (int k = 0; k < nch; k++) {
            const int ks = k % WS_S;
            unsigned char *st = smem_raw + ks * SB;
            float2 *pdd = (float2 *)st;
            __nv_bfloat16 *zb = (__nv_bfloat16 *)(st + WS_FT * CH * WS_ZB);
            __nv_bfloat16 *ub = (__nv_bfloat16 *)(st + WS_FT * CH * WS_UB);
            float *bcf = (float *)(st + WS_FT * CH * WS_BC);
            unsigned *msk = (unsigned *)(bcf + WS_FT * 2 * SCAN_N);
            const int t0 = k * WS_FT, len = min(WS_FT, T - t0);
            fetch(k + WS_PD);  // into the slot chunk k - 1 was read from
            if (k >= WS_S) {  // the stage's last walk (chunk k - WS_S) is over: store its outputs, then refill
                mbar_wait(mb_empty + ks, (unsigned)((k / WS_S - 1) & 1));
                store_out(k - WS_S);
            }
            asm volatile("cp.async.wait_group %0;\n" ::"n"(WS_PD));  // chunk k's group (this thread's copies)
            take(k);
#pragma unroll
            for (int i = 0; i < PPT8; i++) {  // the staged forward's cooperative pass, a token's channel group each
                const int j = jb8 + i * RSTEP8;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 uu = bf2x2f(ru[4 * i + e]), dd = bf2x2f(rd[4 * i + e]);
                    // v84: no select for tokens past the row's end (the staged forward's pass zeroes delta there):
                    // their dpre, u and B/C copies are zero-filled, so the walk stays finite through them, and
                    // nothing after them is stored (no output; a chunk's checkpoint is the state before its first
                    // token). Lab fwd -0.4% at B8·D2048, -1.1% at B2·D4096·L8192, -2.7% at B8·D1536 (call253).
                    const float dl0 = softplus_f(dd.x + bias8[2 * e]), dl1 = softplus_f(dd.y + bias8[2 * e + 1]);
                    *(float4 *)(pdd + j * CH + ws_pdd_pos(8 * g8 + 2 * e)) =
                        make_float4(dl0 * LOG2E, dl0 * uu.x, dl1 * LOG2E, dl1 * uu.y);
                }
                // z and u as they came (v83: silu(z) is formed where the output is, in store_out or the walk)
                *(uint4 *)(zb + ws_swz<CH, WG>(j, 8 * g8)) =
                    make_uint4(rz[4 * i], rz[4 * i + 1], rz[4 * i + 2], rz[4 * i + 3]);
                *(uint4 *)(ub + ws_swz<CH, WG>(j, 8 * g8)) =
                    make_uint4(ru[4 * i], ru[4 * i + 1], ru[4 * i + 2], ru[4 * i + 3]);
            }
#pragma unroll
            for (int i = 0; i < (bcthr ? BV : 0); i += 4)
                *(float4 *)(bcf + jbc * 2 * SCAN_N + vbc + i) = make_float4(
                    __uint_as_float((unsigned)rbc[i] << 16), __uint_as_float((unsigned)rbc[i + 1] << 16),
                    __uint_as_float((unsigned)rbc[i + 2] << 16), __uint_as_float((unsigned)rbc[i + 3] << 16));
            if (pt < 32) {
                const unsigned m = start_mask(pv, len);
                if (pt == 0) *msk = m;
            }
            mbar_arrive(mb_full + ks);  // the stage is filled
        }
#pragma unroll 1
        for (int ks = 0; ks < WS_S; ks++) {  // the last walks' outputs (chunk k in stage ks)
            const int k = nch - 1 - ((nch - 1 - ks) % WS_S + WS_S) % WS_S;
            if (k < 0) continue;
            mbar_wait(mb_empty + ks, (unsigned)((k / WS_S) & 1));
            store_out(k);
        }
        return;
    }
    // ---- walkers: thread (channel cl = tid / WG, part q = tid % WG) holds states q*NS .. q*NS+NS-1
    const int wt = tid - NP, q = wt % WG, cl = wt / WG, c = c0 + cl;
    const bool active = c < Cd;
    float A[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) A[i] = active ? -__expf(A_log[(size_t)c * SCAN_N + q * NS + i]) : 0.f;
    // after the group's transposed butterfly, thread q holds y of token jg + jt of it (ws_swz's rows jt), staged at
    // ws_pg_rot's position
    const int y_jt = WG == 4 ? ((q & 1) << 1 | q >> 1) : WG == 2 ? q : 0;
    const int y_swz = ws_swz<CH, WG>(y_jt, ws_pg_rot(cl)), pdd_c = ws_pdd_pos(cl);
    // OUTW: the thread's (token, channel) in the u and z arrays (bf16, ws_swz without the rotation)
    const int uz_swz = ws_swz<CH, WG>(y_jt, cl);
    const float Dw = OUTW && active ? Dp[c] : 0.f;
    float s[NS];
    const float *s_in = active ? scan_init_states(init, row, c, Cd, q * NS) : nullptr;
#pragma unroll
    for (int i = 0; i < NS; i++) s[i] = s_in ? s_in[i] : 0.f;
#pragma unroll 1
    for (int k = 0; k < nch; k++) {
        const int ks = k % WS_S;
        unsigned char *st = smem_raw + ks * SB;
        const float2 *pdd = (const float2 *)st;
        float *yt = (float *)(st + WS_FT * CH * WS_Y);
        const float *bck = (const float *)(st + WS_FT * CH * WS_BC);
        const __nv_bfloat16 *ubw = (const __nv_bfloat16 *)(st + WS_FT * CH * WS_UB),
                            *zbw = (const __nv_bfloat16 *)(st + WS_FT * CH * WS_ZB);
        const int t0 = k * WS_FT;
        mbar_wait(mb_full + ks, (unsigned)((k / WS_S) & 1));
        const unsigned mask = *(const unsigned *)(bck + WS_FT * 2 * SCAN_N);
        if (STORE_CK) {  // the state before the chunk's first token
            float *ck = ckpt + (((size_t)row * nck + t0 / SCAN_K) * Cd + c) * SCAN_N + q * NS;
#pragma unroll
            for (int i = 0; i < NS; i += 4) st_f4_if(ck + i, s[i], s[i + 1], s[i + 2], s[i + 3], active);
        }
        // as the staged forward's walk (v35: each group's y reduced and stored one group later); a group is WG
        // tokens, so y is summed over the WG threads of a channel by one transposed butterfly
        float ypend[WG];
#pragma unroll
        for (int e = 0; e < WG; e++) ypend[e] = 0.f;
        int jp = -1;
        auto finish_group = [&](float(&yq)[WG], int jg) {
            if constexpr (YH) {  // v90: each thread's halves as they are, for the producers to add; one group late
                                 // like the butterfly's sums (call271: stored at once, each store waited for its
                                 // value ahead of the next token's shared loads, which the compiler keeps behind
                                 // it: fwd +6 to +14%)
#pragma unroll
                for (int jj = 0; jj < WG; jj++) yt[ws_yh_pos<CH>(jg + jj, cl, q)] = yq[jj];
                return;
            }
            // the quads' sums as (q0 + q1) + (q2 + q3), as every kernel forms them (quad_dot)
            if constexpr (WG == 4) {
                tr_level<WG / 2, 1, WG>(yq);
                tr_level<WG / 4 ? WG / 4 : 1, 2, WG>(yq);
            } else if constexpr (WG == 2) {
                tr_level<1, 1, WG>(yq);
            }
            if constexpr (OUTW) {  // the output as store_out forms it: (y + D u) silu(z), fp32
                const float uu = bf2f(ubw[jg * CH + uz_swz]), zz = bf2f(zbw[jg * CH + uz_swz]);
                yt[jg * CH + y_swz] = gated_out(yq[0], Dw, uu, zz);
            } else {
                yt[jg * CH + y_swz] = yq[0];
            }
        };
#pragma unroll WS_UNROLL
        for (int j0 = 0; j0 < WS_FT; j0 += WG) {
            float yp[WG];
#pragma unroll
            for (int jj = 0; jj < WG; jj++) {
                const int j = j0 + jj;
                const float off = ((mask >> j) & 1u) ? -1e30f : 0.f;
                const float2 dd = pdd[j * CH + pdd_c];
                const float dlL = dd.x, dlu = dd.y;
                float bb[NS], cc[NS];
#pragma unroll
                for (int i = 0; i < NS; i += 4) {
                    const float4 b = *(const float4 *)(bck + j * 2 * SCAN_N + q * NS + i);
                    const float4 cv = *(const float4 *)(bck + j * 2 * SCAN_N + SCAN_N + q * NS + i);
                    bb[i] = b.x, bb[i + 1] = b.y, bb[i + 2] = b.z, bb[i + 3] = b.w;
                    cc[i] = cv.x, cc[i + 1] = cv.y, cc[i + 2] = cv.z, cc[i + 3] = cv.w;
                }
#pragma unroll
                for (int i = 0; i < NS; i++) s[i] = fmaf(ex2_approx(fmaf(dlL, A[i], off)), s[i], dlu * bb[i]);
                yp[jj] = quad_dot<QP>(s[0], s[1], s[2], s[3], cc);
                if constexpr (NS == 8) yp[jj] += quad_dot<QP>(s[4], s[5], s[6], s[7], cc + 4);
                if constexpr (NS == 16)  // all four quads in one thread: (q0 + q1) + (q2 + q3), as every kernel
                    yp[jj] = (yp[jj] + quad_dot<QP>(s[4], s[5], s[6], s[7], cc + 4)) +
                             (quad_dot<QP>(s[8], s[9], s[10], s[11], cc + 8) +
                              quad_dot<QP>(s[12], s[13], s[14], s[15], cc + 12));
            }
            if (jp >= 0) finish_group(ypend, jp);
#pragma unroll
            for (int e = 0; e < WG; e++) ypend[e] = yp[e];
            jp = j0;
        }
        if (jp >= 0) finish_group(ypend, jp);
        mbar_arrive(mb_empty + ks);
    }
}

// The backward's state-independent values of one (token, channel), from its dpre, z and dout: delta, dy = dout
// silu(z), the dz factor (times y + D u gives dz), softplus'(v) = sigmoid(v) = 1 - e^-delta, and silu(z) (v24: the
// forward's gate, as the forward computes it, for the forward's output written again).
struct PassVals {
    float dl, dy, dzf, sig, psz;
};
// The backward's cooperative pass over the chunk's (token, channel) items i, NT threads: put(i, values) from the
// dpre, z and dout tiles (SCAN_K, CH); zeros for tokens past the row's end (last chunk): inert tokens for the
// fixed-length recompute and walk. Each kernel lays the values out as its walk reads them (put); what put does
// not store is not computed. v34 (BRANCHLESS): no branch on the row's end (the loads go first since v51, below):
// past it the tiles are zero (load_tile), so with delta forced to 0 every value
// is +0 (dy, the dz factor and silu(z) from z = dout = 0; softplus' = 1 - 2^-0 = 0). (The 4-thread kernel kept
// the branch from v34 to v57: without it ptxas spilled 24-28 bytes there and it ran 0.5% slower at v34, and
// loading first +0.7% at v51; v61 measured it -1.5% on v57, see bwd_coop_pass.)
__device__ __forceinline__ PassVals pass_vals(float dpre, float zz, float go, float biasA, bool in) {
    const float sp = softplus_f(dpre + biasA), dl = in ? sp : 0.f, sz = sigmoid_f(zz);
    return {dl, go * zz * sz, go * sz * fmaf(zz, 1.f - sz, 1.f), 1.f - ex2_approx(-dl * LOG2E), zz * sz};
}
template <int NT, int CH, bool BRANCHLESS, class Put>
__device__ __forceinline__ void bwd_coop_pass(const __nv_bfloat16 *tdp, const __nv_bfloat16 *tz,
                                              const __nv_bfloat16 *tdo, const __nv_bfloat16 *tu, int len,
                                              float biasA, Put put) {
    constexpr int IT = SCAN_K * CH / NT;
    // v51 (BRANCHLESS): every item's inputs are loaded before the first item is put. put stores into shared
    // memory, which the compiler cannot tell apart from the tiles, so with each item's loads after the previous
    // item's stores it ran the items one after another, each waiting on its loads and then on its chain of three
    // MUFU results (ncu, call108: the 2-thread backward's pass 12.6% of its time for 8% of its instructions;
    // v51 measured -3.4% on that backward). v61: the 4-thread backward too (it had kept v34's branch on the row's
    // end, the items separate basic blocks, loading as it went, since loading first measured +0.7% there in
    // call109 and call110): on v57, fwd+bwd at B8 D1536 0.934 -> 0.920-0.921 ms (call138; loading in groups of 1
    // or 2 items: 0.926-0.930). ptxas reports the RE kernel's 4-byte spill of v57 unchanged (in v57's SASS one
    // store before the chunk loop and one load after it).
    // -DPM_SCAN_BWD4_PASS_BRANCH=1: the branch (A/B).
    float dp[IT], zz[IT], go[IT], uu[IT];
    if (BRANCHLESS) {
#pragma unroll
        for (int it = 0; it < IT; it++) {
            const int i = it * NT + threadIdx.x;
            dp[it] = bf2f(tdp[i]), zz[it] = bf2f(tz[i]), go[it] = bf2f(tdo[i]), uu[it] = bf2f(tu[i]);
        }
    }
#pragma unroll
    for (int it = 0; it < IT; it++) {
        const int i = it * NT + threadIdx.x;
        if (BRANCHLESS)
            put(i, pass_vals(dp[it], zz[it], go[it], biasA, i / CH < len), uu[it]);
        else if (i / CH < len)
            put(i, pass_vals(bf2f(tdp[i]), bf2f(tz[i]), bf2f(tdo[i]), biasA, true), bf2f(tu[i]));
        else
            put(i, PassVals{0.f, 0.f, 0.f, 0.f, 0.f}, bf2f(tu[i]));
    }
}

// The backward kernels' input tiles u/dpre/z/dout of a stage, each (SCAN_K, CH) bf16, lie bwd_tstr(CH) elements
// apart: 32 bytes more than a tile (v30). The walk writes its outputs into the dpre, z and dout tiles, and the
// lanes of a channel each write a different one at the same (token, channel): with tiles a multiple of 128 bytes
// apart those stores fell in the same banks (2-way in the 2-thread kernel, 4-way with the forward's output in the
// 4-thread one); 32 bytes apart, and the staged forward's output at 0 mod 128 bytes, they do not.
__host__ __device__ static constexpr int bwd_tstr(int CH) { return SCAN_K * CH + 16; }

// The end of backward chunk kk (after the barrier that ends its walk), by threads 0 .. NT-1: the dB/dC sums R
// (SCAN_K, BWARPS, 2N) of the walk's BWARPS warps summed over the warps in a fixed order into this block's
// partials bc_part (M, nblk, 2N), and the du / ddpre / dz tiles (SCAN_K, CH) that the walk staged in the dpre, z
// and dout tiles of the chunk's stage (fu: its u, dpre, z, dout tiles, each bwd_tstr(CH) apart) stored, and, if
// y_out is not NULL, the forward's output staged in oy. Every backward kernel flushes through this (the
// warp-specialized one by its producers: NT = 128 beside 8 walker warps).
template <int NT, int CH, int BWARPS = NT / 32>
__device__ __forceinline__ void bwd_flush_chunk(int kk, int T, size_t mrow, const float *R, float *bc_part,
                                                __nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out,
                                                __nv_bfloat16 *dz_out, __nv_bfloat16 *y_out, int ldz, int c0, int Cd,
                                                const __nv_bfloat16 *fu, const __nv_bfloat16 *oy) {
    constexpr int TSTR = bwd_tstr(CH);
    const int tt = kk * SCAN_K;
    const size_t m0 = mrow + tt;
    const int len = min(SCAN_K, T - tt);
    for (int idx = threadIdx.x; idx < len * 2 * SCAN_N; idx += NT) {
        const int j = idx / (2 * SCAN_N), e = idx % (2 * SCAN_N);
        float acc = 0.f;
#pragma unroll
        for (int w = 0; w < BWARPS; w++) acc += R[(j * BWARPS + w) * 2 * SCAN_N + e];
        bc_part[((m0 + j) * gridDim.x + blockIdx.x) * 2 * SCAN_N + e] = acc;
    }
    store_tile<SCAN_K, NT, CH>(du_out, Cd, m0, len, c0, Cd, fu + TSTR);
    store_tile<SCAN_K, NT, CH>(ddpre_out, Cd, m0, len, c0, Cd, fu + 2 * TSTR);
    store_tile<SCAN_K, NT, CH>(dz_out, ldz, m0, len, c0, Cd, fu + 3 * TSTR);
    if (y_out) store_tile<SCAN_K, NT, CH>(y_out, Cd, m0, len, c0, Cd, oy);
}

// Backward main pass, staged. grid (nblk, rows), CH*BG threads; thread (channel cl = tid / BG, half q = tid % BG)
// holds states q*NS .. q*NS+NS-1; the chunk's recomputed states are in registers (v21). Dynamic smem:
// tiles (2 stages, u/dpre/z/dout, each bwd_tstr apart) bf16 |
// bcf (2, SCAN_K, 2N) f32 | pass arrays (SCAN_K, CH) float4 | R (SCAN_K, warps, 2N) f32 | with RE (v24): {dz
// factor, silu(z)} (SCAN_K, CH) float2 and the forward's output (SCAN_K, CH) bf16, staged
static constexpr size_t bwd_smem(int CH) {
    return (size_t)2 * 4 * bwd_tstr(CH) * 2                        // tiles
           + (size_t)2 * SCAN_K * 2 * SCAN_N * 4                   // bcf
           + (size_t)4 * SCAN_K * CH * 4                           // pass arrays
           + (size_t)SCAN_K * (CH * BG / 32) * 2 * SCAN_N * 4      // R
           + (size_t)SCAN_K * CH * (8 + 2);                        // output factors, output tile
}

// v54: where a backward chunk's barriers, tile copies and flush fall, in order ORD (PM_SCAN_BWD_ORDER above), for
// both backward kernels, at chunk k (the chunks run backwards from kmax to kmin; chunk k's tiles are in stage
// k & 1). issue(k - 1) copies the previous chunk's tiles into the other stage (where k > kmin; the commit always
// counts a group); flush(kk) stores chunk kk's staged outputs (bwd_flush_chunk).
template <int ORD>
struct BwdChunkSync {
    static_assert(ORD == 0 || ORD == 2 || ORD == 3, "backward orders: 0, 2 or 3");
    // the chunk's opening: its tiles landed, and with them its B/C (bcf) published
    template <class Issue>
    __device__ __forceinline__ static void open(int k, int kmin, Issue &issue) {
        if (ORD != 0) {
            cp_async_wait0();  // chunk k's tiles, issued during chunk k + 1
        } else {
            if (k > kmin) issue(k - 1);
            cp_async_commit();
            cp_async_wait1();
        }
        __syncthreads();  // orders 2 and 3: also ends chunk k + 1 (its staged outputs and R published, pass arrays free)
        if (ORD == 2) {  // the stage refilled here was flushed before the barrier above
            if (k > kmin) issue(k - 1);
            cp_async_commit();
        }
    }
    // after the cooperative pass (order 3 stores chunk k + 1's outputs beside it, where k < kmax)
    template <class Issue, class Flush>
    __device__ __forceinline__ static void pass_done(int k, int kmin, int kmax, Issue &issue, Flush &flush) {
        if (ORD == 3 && k < kmax) flush(k + 1);
        __syncthreads();
        if (ORD == 3) {  // stage (k - 1) & 1 was flushed before the barrier above
            if (k > kmin) issue(k - 1);
            cp_async_commit();
        }
    }
    // after the walk's last store
    template <class Flush>
    __device__ __forceinline__ static void walk_done(int k, Flush &flush) {
        if (ORD != 3) {
            __syncthreads();
            flush(k);  // (stage k & 1 is refilled only after the barrier that ends this chunk)
        }
    }
    // the chunk's end: R, the pass arrays and stage k & 1 are rewritten next chunk; bcf[(k-1) & 1] published
    // (orders 2 and 3: by the barrier that opens the next chunk)
    __device__ __forceinline__ static void close() {
        if (ORD == 0) __syncthreads();
    }
    // after the last chunk (order 3: its outputs)
    template <class Flush>
    __device__ __forceinline__ static void finish(int klast, Flush &flush) {
        if (ORD == 3) {
            __syncthreads();
            flush(klast);
        }
    }
};

// A 2-thread backward thread's half of chunk k's checkpoint (rows, nck, Cd, N): its states at lo.. and hi..;
// zeros where off (a channel past Cd, or no checkpoints: the segment summary pass)
__device__ __forceinline__ void bwd2_load_ck(const float *ckpt, int row, int nck, int k, int Cd, int c, int lo,
                                             int hi, bool on, float4 (&r)[2]) {
    if (on) {
        const float *p = ckpt + (((size_t)row * nck + k) * Cd + c) * SCAN_N;
        r[0] = *(const float4 *)(p + lo), r[1] = *(const float4 *)(p + hi);
    } else {
        r[0] = r[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}
// A 2-thread backward thread's carry entering the last token before summary segment hmin, folded from the summaries
// (G_h, P_h) of summary segments h = nsum - 1 .. hmin in bsum (rows, nsum - 1, 2, Cd, N): c = P_h c + G_h (see
// below). v77: a main segment of SLK chunks is `sub` summary segments of SLK / sub chunks (more blocks for the
// summary pass), so segment seg folds from hmin = (seg + 1) * sub.
__host__ __device__ static inline int bsumm_count(int nck, int SLK, int sub) {  // summary segments of a row
    const int sl = SLK / sub;
    return (nck + sl - 1) / sl;
}
// Where G (which = 0) or P (1) of summary segment h >= 1, channel c, lies in bsum (rows, nsum - 1, 2, Cd, N)
__device__ __forceinline__ size_t bsumm_off(int row, int nsum, int h, int which, int Cd, int c) {
    return ((((size_t)row * (nsum - 1) + (h - 1)) * 2 + which) * Cd + c) * SCAN_N;
}
__device__ __forceinline__ void bwd2_fold_carry(const float *bsum, int row, int nsum, int hmin, int Cd, int c, int lo,
                                                int hi, float (&carry)[8]) {
    for (int h = nsum - 1; h >= hmin; h--) {
        const float *Gp = bsum + bsumm_off(row, nsum, h, 0, Cd, c), *Pp = bsum + bsumm_off(row, nsum, h, 1, Cd, c);
        const float4 g0 = *(const float4 *)(Gp + lo), g1 = *(const float4 *)(Gp + hi);
        const float4 p0 = *(const float4 *)(Pp + lo), p1 = *(const float4 *)(Pp + hi);
        const float gg[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
        const float pp[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) carry[i] = fmaf(pp[i], carry[i], gg[i]);
    }
}
// A 2-thread backward thread's parameter partials into pp (its row's (2 + N, Cd) block, at its channel): thread
// q = 0 ddt_bias and dD, each thread dA_log = dA * dA/dA_log = dA * A of its states
__device__ __forceinline__ void bwd2_put_params(float *pp, int Cd, int q, float dbias, float dDacc,
                                                const float (&dA)[8], const float (&A)[8], int lo, int hi) {
    if (q == 0) {
        pp[0] = dbias;
        pp[(size_t)Cd] = dDacc;
    }
#pragma unroll
    for (int n = 0; n < 8; n++) pp[(size_t)(2 + (n < 4 ? lo + n : hi + n - 4)) * Cd] = dA[n] * A[n];
}

// A 2-thread backward chunk after its cooperative pass (scan_bwd_staged_kernel's main pass, scan_bwd_ws_kernel's
// walkers): recompute the chunk's states from the checkpoint in s into registers, then walk them backwards,
// carrying the state adjoint, staging the outputs (oA, oB; without RE odu, oddp, odz) and each token's dB/dC sums
// (R), accumulating the per-channel partials. Inputs: the pass arrays pa4 and (RE) K2q, the u tile, B/C (bck) and
// the chunk's start mask; thread (channel cl, half q), its states at lo.. and hi.. (see the kernel).
// One state's step of both backward walks (bwd2_walk_chunk, bwd4_walk_chunk), at token t with decay a = a_t: ds,
// the total adjoint of s_t (dy C_t plus the carry from t + 1); the carry to t - 1, a ds; r = ds a_t s_{t-1}, as the
// new carry times s_{t-1} (v57: rcarry, sprev) or with a_t s_{t-1} = s_t - delta u B_t (0 up to rounding at a
// start); and the state's terms of P = sum ds B, Q = sum A r, dA += r delta, dB (ds delta u) and dC (dy s_t).
__device__ __forceinline__ void walk_state(float a, float gy, float c, float b, float st, bool rcarry, float sprev,
                                           float dl, float dlu, float An, float &carry, float &P, float &Q,
                                           float &dA, float &vdB, float &vdC) {
    const float ds = fmaf(gy, c, carry);
    carry = a * ds;
    const float r = rcarry ? carry * sprev : ds * fmaf(-dlu, b, st);
    P = fmaf(ds, b, P);
    Q = fmaf(An, r, Q);
    dA = fmaf(r, dl, dA);
    vdB = ds * dlu;
    vdC = gy * st;
}

template <int CH, int BWARPS, bool RE>
__device__ __forceinline__ void bwd2_walk_chunk(const float4 *pa4, const float *K2q, const __nv_bfloat16 *tu,
                                                const float *bck, unsigned mask, float *R, __nv_bfloat16 *oA,
                                                __nv_bfloat16 *oB, __nv_bfloat16 *odu, __nv_bfloat16 *oddp,
                                                __nv_bfloat16 *odz, float (&s)[8], float (&carry)[8], float (&dA)[8],
                                                const float (&A)[8], float Dc, float &dbias, float &dDacc, int cl,
                                                int lane, int warp, int q, int lo, int hi) {
    constexpr int NS = 8;
    // recompute the chunk's states from its checkpoint
    // (all SCAN_K tokens: those past the row's end have delta = 0, so a = 1 and the input is 0)
    // into registers (v21): both token loops are unrolled, so Sr[j] is a compile-time register index
    float Sr[SCAN_K][NS];
#pragma unroll
    for (int j = 0; j < SCAN_K; j++) {
        const int i = j * CH + cl;
        const float dl = pa4[i].x, dlL = dl * LOG2E, dlu = dl * bf2f(tu[i]);
        const float off = ((mask >> j) & 1u) ? -1e30f : 0.f;  // document start: a_t = 0
        const float4 b0 = *(const float4 *)(bck + j * 2 * SCAN_N + lo);
        const float4 b1 = *(const float4 *)(bck + j * 2 * SCAN_N + hi);
        float bb[NS] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int n = 0; n < NS; n++) Sr[j][n] = s[n] = fmaf(ex2_approx(fmaf(dlL, A[n], off)), s[n], dlu * bb[n]);
    }
    // walk the chunk backwards: all SCAN_K tokens, 4 at a time with compile-time offsets (v11); tokens
    // past the row's end have zero pass arrays, tiles and B/C, so they add nothing and leave the carry
    // alone (their outputs are not stored)
    const int ridx = ((lane >> 3) & 1) * SCAN_N + lo + ((lane >> 1) & 3);  // R slot of this lane's sum
    float vpend[NS];  // v36: the last token's dB/dC values after the butterfly's first level
    auto bc_sum = [&](float (&vv)[NS]) {
        tr_level<4, 8, NS>(vv);
        tr_level<2, 4, NS>(vv);
        tr_level<1, 2, NS>(vv);
        return vv[0];  // lane holds (bit 3 ? dC : dB) of state lo + 2*bit2 + bit1
    };
#pragma unroll
    for (int j0 = SCAN_K - 4; j0 >= 0; j0 -= 4) {
        const unsigned mk = mask >> j0;
        float ov[4][3], rv[4];  // v52: the outputs and dB/dC sums of tokens whose stores wait (WALK_GROUP)
#pragma unroll
        for (int jj = 3; jj >= 0; jj--) {
            const int j = j0 + jj, i = j * CH + cl;
            const float4 pa = pa4[i];
            const float uu = bf2f(tu[i]), dl = pa.x, gy = pa.y, dlL = dl * LOG2E, dlu = dl * uu;
            // at a document start a_t is taken as 0 (2^-huge) so nothing flows to the previous token
            const float off = ((mk >> jj) & 1u) ? -1e30f : 0.f;
            const float *bcj = bck + j * 2 * SCAN_N;
            const float4 b0 = *(const float4 *)(bcj + lo), b1 = *(const float4 *)(bcj + hi);
            const float4 cv0 = *(const float4 *)(bcj + SCAN_N + lo),
                         cv1 = *(const float4 *)(bcj + SCAN_N + hi);
            float bb[NS] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            float cc[NS] = {cv0.x, cv0.y, cv0.z, cv0.w, cv1.x, cv1.y, cv1.z, cv1.w};
            const float *st = Sr[j];
            // y = sum s C, P = sum ds B, Q = sum A ds a s_{t-1}; then du = dy D + delta P,
            // ddelta = Q + u P
            // y as the forward sums it (v24, v78): per 4 states in a chain (the 2-thread backward's plans are
            // never scan_quad_pairs'), then (q0 + q1) + (q2 + q3), so the forward's output below is the forward's,
            // bit for bit
            float y = quad_dot<false>(st[0], st[1], st[2], st[3], cc) + quad_dot<false>(st[4], st[5], st[6], st[7], cc + 4);
            float P = 0.f, Q = 0.f;
            // this thread's dB (delta u ds) and dC (dy s) terms, summed over channels below;
            // v = [dB slots 0-3, dC slots 0-3, dB slots 4-7, dC slots 4-7]
            float v[2 * NS];
#pragma unroll
            for (int n = 0; n < NS; n++)
                walk_state(ex2_approx(fmaf(dlL, A[n], off)), gy, cc[n], bb[n], st[n], BWD_R_CARRY && j > 0,
                           Sr[j > 0 ? j - 1 : 0][n], dl, dlu, A[n], carry[n], P, Q, dA[n], v[(n & 4) * 2 + (n & 3)],
                           v[(n & 4) * 2 + 4 + (n & 3)]);
            y += __shfl_xor_sync(0xffffffffu, y, 1);
            P += __shfl_xor_sync(0xffffffffu, P, 1);
            Q += __shfl_xor_sync(0xffffffffu, Q, 1);
            const float ddp = fmaf(uu, P, Q) * (RE ? pa.z : pa.w), gin = fmaf(Dc, uu, y);  // gin: the gate's input
            // zero past the row's end (psig, gy, uu are 0 there). Both threads of the channel hold the
            // same sums. Without RE both store the same three outputs; with RE each stores two of the
            // four, chosen by selects rather than a branch on q, so the 4 tokens of the group stay one
            // basic block the scheduler can interleave (v13): thread 0 du and dz, thread 1 ddelta and the
            // forward's output (as the forward forms it: gin silu(z))
            dbias += ddp;
            dDacc = fmaf(gy, uu, dDacc);
            if (RE) {
                ov[jj][0] = select_f(q, ddp, fmaf(gy, Dc, dl * P));
                ov[jj][1] = K2q[2 * i] * gin;
            } else {
                ov[jj][0] = fmaf(gy, Dc, dl * P);
                ov[jj][1] = ddp;
                ov[jj][2] = pa.z * gin;
            }
            // sum v over the warp's 16 channels (lane bits 1-4). Level 1 (lane bit 4) needs no selects
            // (see lo/hi); then dB|dC (bit 3), slots 0-1|2-3 (bit 2), slot 0|1 (bit 1).
#pragma unroll
            for (int e = 0; e < NS; e++) v[e] += __shfl_xor_sync(0xffffffffu, v[e + NS], 16);
            // v36: the other three levels one token later, after the next token's state work, so their
            // shuffles' latency overlaps it (measured -2.4% fwd+bwd at B8 D2048, -3.7% at B2 D4096 L8192)
            if (j + 1 < SCAN_K) rv[jj] = bc_sum(vpend);
#pragma unroll
            for (int e = 0; e < NS; e++) vpend[e] = v[e];
            if (jj % WALK_GROUP == 0) {  // the group's stores (v52)
#pragma unroll
                for (int jd = jj + WALK_GROUP - 1; jd >= jj; jd--) {
                    const int jt = j0 + jd, it = jt * CH + cl;
                    if (RE) {
                        oA[it] = __float2bfloat16(ov[jd][0]);
                        oB[it] = __float2bfloat16(ov[jd][1]);
                    } else {
                        odu[it] = __float2bfloat16(ov[jd][0]);
                        oddp[it] = __float2bfloat16(ov[jd][1]);
                        odz[it] = __float2bfloat16(ov[jd][2]);
                    }
                    if (jt + 1 < SCAN_K) R[((jt + 1) * BWARPS + warp) * 2 * SCAN_N + ridx] = rv[jd];
                }
            }
        }
    }
    R[warp * 2 * SCAN_N + ridx] = bc_sum(vpend);  // token 0's
}

// Time segments (v10): grid z cuts a row into nseg segments of SLK chunks, walked by different blocks. The
// adjoint recurrence is linear: with carry_t = a_{t+1} ds_{t+1} (the adjoint reaching s_t from later tokens),
// carry_{t-1} = a_t (gy_t C_t + carry_t), so over a segment h the carry leaving its first token is
// P_h * (carry entering its last token) + G_h, where G_h is the carry walked from zero and P_h the product of
// its a_t (0 when a document starts in it). BSUMM = true walks every segment but the first from a zero carry
// and stores (G_h, P_h) in bsum (rows, nseg - 1, 2 = {G, P}, Cd, N) f32 (nothing else: no states, no outputs);
// the main pass (BSUMM = false) then starts segment g from the carry folded from the summaries of the segments
// after it (c = P_h c + G_h, h = nseg-1 .. g+1) and writes its parameter partials as row * nseg + g. Each token
// belongs to one segment, so dB/dC partials and outputs are written once; nothing is summed across blocks.
// SMODE: 0 = no segments (v9's code: compile-time bounds, no fold), 1 = a segment of the main pass, 2 = BSUMM.
// RE: the main pass also writes the forward's output again, into y_out (v24; false: y_out is not touched).
template <int CH, int SMODE, bool RE>
__global__ void __launch_bounds__(CH *BG, 1)
    scan_bwd_staged_kernel(__nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out, __nv_bfloat16 *dz_out,
                           __nv_bfloat16 *y_out, float *bc_part, float *par_part, const float *ckpt, const __nv_bfloat16 *dout, const __nv_bfloat16 *u,
                           const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log,
                           const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *Dp,
                           const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd, int nck, int SLK,
                           int nseg, float *bsum, int sub) {
    constexpr bool BSUMM = SMODE == 2;
    // v54: the summary pass keeps order 0 (it flushes nothing)
    using Sync = BwdChunkSync<BSUMM ? 0 : BWD_ORDER >= 0 ? BWD_ORDER : CH == 128 ? 2 : 3>;
    constexpr int NT = CH * BG, BWARPS = NT / 32, NS = SCAN_N / BG, TILE = SCAN_K * CH, TSTR = bwd_tstr(CH);
    constexpr size_t BWD_TILES = (size_t)2 * 4 * TSTR * 2,
                     BWD_BC = (size_t)2 * SCAN_K * 2 * SCAN_N * 4, BWD_PA = (size_t)4 * TILE * 4;
    static_assert(BG == 2 && NS == 8, "the layout below assumes 2 threads per channel");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *tiles = (__nv_bfloat16 *)smem_raw;
    float *bcf = (float *)(smem_raw + BWD_TILES);
    // per (token, channel): {delta, dy, softplus'(v), 0} (RE) or {delta, dy, dz factor, softplus'(v)} in one
    // 16-byte slot: one load per token (v11)
    float4 *pa4 = (float4 *)(smem_raw + BWD_TILES + BWD_BC);
    float *R = (float *)(smem_raw + BWD_TILES + BWD_BC + BWD_PA);
    // per (token, channel), RE only: the factor of each thread's second output (v24): {dz factor, silu(z)};
    // thread q reads element q
    float2 *K2 = (float2 *)(R + SCAN_K * BWARPS * 2 * SCAN_N);
    const float *K2q = (const float *)K2 + (threadIdx.x & 1);  // this thread's element of K2
    __nv_bfloat16 *oy = (__nv_bfloat16 *)(K2 + TILE);         // the forward's output (SCAN_K, CH), staged
    static_assert((BWD_TILES + BWD_BC + BWD_PA + (size_t)SCAN_K * BWARPS * 2 * SCAN_N * 4 + (size_t)TILE * 8) % 128 == 0,
                  "the staged output's stores must not share banks with the tiles' (v30)");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, q = tid % BG, cl = tid / BG;
    const int c0 = blockIdx.x * CH, c = c0 + cl, row = blockIdx.y;
    const bool active = c < Cd;
    const size_t mrow = (size_t)row * T;
    // Slot i < 4 of this thread holds state lo + i, slot i >= 4 state hi + i - 4. Lanes with lane bit 4 set
    // hold their two groups of 4 swapped, so the first level of the dB/dC butterfly below needs no selects:
    // every lane keeps slots 0-3 and sends slots 4-7, which are the same states in its partner lane ^ 16.
    const int g = (lane >> 4) & 1, lo = q * NS + 4 * g, hi = q * NS + 4 * (1 - g);
    float A[NS];
#pragma unroll
    for (int i = 0; i < NS; i++)
        A[i] = active ? -__expf(A_log[(size_t)c * SCAN_N + (i < 4 ? lo + i : hi + i - 4)]) : 0.f;
    const float Dc = settle(active ? Dp[c] : 0.f);
    const int clA = tid % CH;  // channel served in the cooperative pass
    const float biasA = settle(c0 + clA < Cd ? dt_bias[c0 + clA] : 0.f);
    float carry[NS], dA[NS];  // carry = a_{t+1} ds_{t+1}: the adjoint reaching s_t from token t+1
#pragma unroll
    for (int i = 0; i < NS; i++) carry[i] = dA[i] = 0.f;
    float dbias = 0.f, dDacc = 0.f;
    float cum = 0.f;        // BSUMM: sum of delta*log2 e over the segment (this channel): P = 2^(A cum) (v18c)
    unsigned anyst = 0u;    // BSUMM: nonzero when a document starts inside the segment
    // (BSUMM: this launch's segments are summary segments, the first `sub` of them unused: v77)
    const int seg = BSUMM ? blockIdx.z + sub : SMODE == 1 ? blockIdx.z : 0;
    const int kbeg = SMODE ? seg * SLK : 0, kend = SMODE ? min(nck, kbeg + SLK) : nck;
    if (SMODE == 1 && active) bwd2_fold_carry(bsum, row, bsumm_count(nck, SLK, sub), (seg + 1) * sub, Cd, c, lo, hi, carry);

    auto issue = [&](int k) {  // tiles of chunk k into stage k & 1
        int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        __nv_bfloat16 *st = tiles + (size_t)(k & 1) * 4 * TSTR;
        if (!BSUMM) load_tile<SCAN_K, NT, CH>(st, u, Cd, mrow + t0, len, c0, Cd);  // the summary needs no u
        load_tile<SCAN_K, NT, CH>(st + TSTR, dpre, Cd, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NT, CH>(st + 2 * TSTR, z, ldz, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NT, CH>(st + 3 * TSTR, dout, Cd, mrow + t0, len, c0, Cd);
    };
    auto load_ck = [&](int k, float4 (&r)[2]) { bwd2_load_ck(ckpt, row, nck, k, Cd, c, lo, hi, active && !BSUMM, r); };
    BCFetch<SCAN_K, NT> bc;
    float4 ck_next[2];
    {
        const int k = kend - 1, t0 = k * SCAN_K, len = SMODE ? min(SCAN_K, T - t0) : T - t0;
        issue(k);
        cp_async_commit();
        bc.fetch(Bm, Cm, ldbc, mrow + t0, len);
        bc.store(bcf + (k & 1) * SCAN_K * 2 * SCAN_N);
        load_ck(k, ck_next);
    }
    const int lenl = min(SCAN_K, T - (kend - 1) * SCAN_K);
    unsigned mask_next = start_mask(pos_fetch(pos, mrow + (kend - 1) * SCAN_K, lenl), lenl);
    int pv_next = 1;

    // chunk kk's staged outputs (in its stage's dpre, z and dout tiles, R, and oy) to global memory
    auto flush = [&](int kk) {
        bwd_flush_chunk<NT, CH>(kk, T, mrow, R, bc_part, du_out, ddpre_out, dz_out, RE ? y_out : nullptr, ldz, c0,
                                Cd, tiles + (size_t)(kk & 1) * 4 * TSTR, oy);
    };
    for (int k = kend - 1; k >= kbeg; k--) {
        const int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        const unsigned mask = mask_next;
        float s[NS] = {ck_next[0].x, ck_next[0].y, ck_next[0].z, ck_next[0].w,
                       ck_next[1].x, ck_next[1].y, ck_next[1].z, ck_next[1].w};
        Sync::open(k, kbeg, issue);
        if (k > kbeg) {  // in flight during the chunk
            bc.fetch(Bm, Cm, ldbc, mrow + t0 - SCAN_K, SCAN_K);
            pv_next = pos_fetch(pos, mrow + t0 - SCAN_K, SCAN_K);
            load_ck(k - 1, ck_next);
        }
        __nv_bfloat16 *tu = tiles + (size_t)(k & 1) * 4 * TSTR, *tdp = tu + TSTR, *tz = tu + 2 * TSTR,
                      *tdo = tu + 3 * TSTR;
        // once the cooperative pass has read them, the dpre, z and dout tiles of this stage hold the chunk's
        // du, ddpre and dz (v11), stored in 16-byte pieces after the walk; with RE thread q = 0 writes du and dz,
        // q = 1 ddpre and the forward's output
        __nv_bfloat16 *odu = tdp, *oddp = tz, *odz = tdo;
        __nv_bfloat16 *oA = q ? oddp : odu, *oB = q && RE ? oy : odz;
        const float *bck = bcf + (k & 1) * SCAN_K * 2 * SCAN_N;
        // cooperative pass: pa4 = {delta, dy, softplus'(v), 0} and K2 with RE, {delta, dy, dz factor, softplus'(v)}
        // without (the summary pass: delta and dy). (v30 measured u in pa4's free slot here: 1.3% slower at
        // B8 D2048, unlike the 4-thread kernel)
        // (u is unused here: the summary pass, which loads no u tile, reads nothing from it once the load is dropped)
        bwd_coop_pass<NT, CH, true>(tdp, tz, tdo, tu, len, biasA, [&](int i, const PassVals &v, float) {
            if (RE) {
                pa4[i] = make_float4(v.dl, v.dy, v.sig, 0.f);
                K2[i] = make_float2(v.dzf, v.psz);
            } else {
                pa4[i] = make_float4(v.dl, v.dy, BSUMM ? 0.f : v.dzf, BSUMM ? 0.f : v.sig);
            }
        });
        Sync::pass_done(k, kbeg, kend - 1, issue, flush);
        if (BSUMM) {  // the carry alone, from zero at the segment's end (see above)
            anyst |= mask;
#pragma unroll 2
            for (int j = len - 1; j >= 0; j--) {
                const int i = j * CH + cl;
                const float4 pv = pa4[i];
                const float dlL = pv.x * LOG2E, gy = pv.y;
                cum += dlL;
                const float off = ((mask >> j) & 1u) ? -1e30f : 0.f;
                const float *bcj = bck + j * 2 * SCAN_N;
                const float4 cv0 = *(const float4 *)(bcj + SCAN_N + lo), cv1 = *(const float4 *)(bcj + SCAN_N + hi);
                const float cc[NS] = {cv0.x, cv0.y, cv0.z, cv0.w, cv1.x, cv1.y, cv1.z, cv1.w};
#pragma unroll
                for (int n = 0; n < NS; n++) {
                    const float a = ex2_approx(fmaf(dlL, A[n], off));
                    carry[n] = a * fmaf(gy, cc[n], carry[n]);
                }
            }
        } else {  // the main pass
            bwd2_walk_chunk<CH, BWARPS, RE>(pa4, K2q, tu, bck, mask, R, oA, oB, odu, oddp, odz, s, carry, dA, A, Dc,
                                            dbias, dDacc, cl, lane, warp, q, lo, hi);
            Sync::walk_done(k, flush);
        }
        if (k > kbeg) {
            bc.store(bcf + ((k - 1) & 1) * SCAN_K * 2 * SCAN_N);
            mask_next = start_mask(pv_next, SCAN_K);
        }
        Sync::close();
    }
    Sync::finish(kbeg, flush);
    if (BSUMM) {
        if (active) {
            // (this launch's segments are the summary segments: nseg of them)
            float *Gp = bsum + bsumm_off(row, nseg, seg, 0, Cd, c), *Pp = bsum + bsumm_off(row, nseg, seg, 1, Cd, c);
            *(float4 *)(Gp + lo) = make_float4(carry[0], carry[1], carry[2], carry[3]);
            *(float4 *)(Gp + hi) = make_float4(carry[4], carry[5], carry[6], carry[7]);
            float pa[NS];
#pragma unroll
            for (int n = 0; n < NS; n++) pa[n] = anyst ? 0.f : ex2_approx(cum * A[n]);
            *(float4 *)(Pp + lo) = make_float4(pa[0], pa[1], pa[2], pa[3]);
            *(float4 *)(Pp + hi) = make_float4(pa[4], pa[5], pa[6], pa[7]);
        }
        return;
    }
    if (active)
        bwd2_put_params(par_part + ((size_t)row * (SMODE ? nseg : 1) + seg) * (2 + SCAN_N) * Cd + c, Cd, q, dbias,
                        dDacc, dA, A, lo, hi);
}

// ---- v72: the 2-thread backward warp-specialized, as the forward since v65 ----
// One 128-wide block an SM: a producer warpgroup (128 threads) copies each chunk's u/dpre/z/dout tiles, B/C and
// pos, computes the cooperative pass into the chunk's stage, and flushes each walked chunk's staged outputs and
// dB/dC sums; two walker warpgroups (256 threads, the 2-thread kernel's layout) recompute and walk. Three tile
// slots (v73) and two stages of the pass's arrays, meeting at mbarriers (full: the producers' pass, empty: the
// walk). Hopper's setmaxnreg gives the walkers 232 registers and the producers 40 (sm_90a builds only). Every
// value is formed as scan_bwd_staged_kernel<128, SMODE, RE> forms it, in the same order: the same bits. Used for
// every 128-wide plan (the 370m and 1.4b widths at their batch sizes without time segments; since v76 with them,
// scan_bwd_ws_seg_plan) where the device runs sm_90a code (scan_bwd_ws_ok); PM_SCAN_BWD_WS=0 in the environment
// (read at each call) runs the staged kernel at the same plan.
template <int N>
__device__ __forceinline__ void reg_alloc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void reg_dealloc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
// Three tile slots: u/dpre/z/dout (4 bwd_tstr apart) bf16, the walk's outputs staged in the last three once the
// pass has read them; chunk i (counted from the segment's end) in slot i % 3, so a chunk's copies go out while the
// chunk two before it still waits for its flush (v73, lab v72c). Then two stages of the rest: oy (SCAN_K, CH) bf16
// (0 mod 128 bytes, as v30's) | pa4 (SCAN_K, CH) float4 | K2 (SCAN_K, CH) float2 | R (SCAN_K, CH/16 warps, 2N) f32 |
// bcf (SCAN_K, 2N) f32 | mask. (v76 measured 64-wide blocks one an SM, without the register split, which
// setmaxnreg cannot make for 64 producers: +29% at B2·D4096·L8192, call211.)
static constexpr int BWS_CH = 128;
struct BwsLayout {
    static constexpr int CH = BWS_CH;
    static constexpr size_t TILES = (size_t)4 * bwd_tstr(CH) * 2;
    static constexpr size_t OY = 0, PA = OY + (size_t)SCAN_K * CH * 2, K2 = PA + (size_t)SCAN_K * CH * 16,
                            R = K2 + (size_t)SCAN_K * CH * 8, BC = R + (size_t)SCAN_K * (CH * BG / 32) * 2 * SCAN_N * 4,
                            MASK = BC + (size_t)SCAN_K * 2 * SCAN_N * 4, STAGE = (MASK + 16 + 127) / 128 * 128;
    static_assert(TILES % 128 == 0 && PA % 16 == 0, "stage layout");
    static constexpr size_t smem() { return 3 * TILES + 2 * STAGE + 4 * 8; }
};
static constexpr size_t bws_smem() { return BwsLayout::smem(); }
template <int NP>
__device__ __forceinline__ void bws_bar_producers() { asm volatile("bar.sync 1, %0;\n" ::"n"(NP) : "memory"); }

// The warp-specialized backwards' shared memory, layout L (BwsLayout, B4wsLayout): three tile slots, two stages, then
// each stage's full (np producer arrivals) and empty (nw walker arrivals) mbarrier; init() by every thread (thread 0
// initializes the barriers, and a block barrier orders that before any arrive or wait).
template <class L>
struct BwsRing {
    unsigned char *base;
    unsigned long long *full, *empty;
    __device__ __forceinline__ explicit BwsRing(unsigned char *b)
        : base(b), full((unsigned long long *)(b + 3 * L::TILES + 2 * L::STAGE)), empty(full + 2) {}
    __device__ __forceinline__ void init(int np, int nw) const {
        if (threadIdx.x == 0) {
            mbar_init(full, np), mbar_init(full + 1, np);
            mbar_init(empty, nw), mbar_init(empty + 1, nw);
        }
        __syncthreads();
    }
    __device__ __forceinline__ unsigned char *tiles(int i) const { return base + (size_t)(i % 3) * L::TILES; }
    __device__ __forceinline__ unsigned char *stage(int s) const { return base + 3 * L::TILES + (size_t)s * L::STAGE; }
};

// The warp-specialized backwards' producers (scan_bwd_ws_kernel, v72; scan_bwd4_ws_kernel, v80), threads 0 .. NP-1:
// chunks kend - 1 .. kbeg, the i-th of them (k = kend - 1 - i) in tile slot ring.tiles(i) and stage ring.stage(i & 1).
// For each: its copies landed and its B/C stored (store_bc(stage), from bc), a barrier among the producers (every
// producer's copies of chunk k landed and every producer's flush of chunk k + 2 done, so chunk k - 1's copies may go
// into that tile slot; issued after the pass, as before it they held registers the pass needs), the cooperative pass
// (pass(stage, tile slot, t0, len, start mask)), the stage published (full), chunk k - 1's copies issued, chunk
// k + 1's outputs flushed once its walk is over (empty; flush(chunk, tile slot, stage)), then chunk k - 1's B/C and
// pos fetched (after the flush: held across it, they made the producers spill).
template <int NP, int CH, class L, class StoreBC, class Pass, class Flush>
__device__ __forceinline__ void bws_produce(int kbeg, int kend, int T, size_t mrow, int c0, int Cd,
                                            const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                                            const __nv_bfloat16 *z, int ldz, const __nv_bfloat16 *dout,
                                            const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                                            const int32_t *pos, const BwsRing<L> &ring, BCFetch<SCAN_K, NP> &bc,
                                            StoreBC store_bc, Pass pass, Flush flush) {
    unsigned long long *mb_full = ring.full, *mb_empty = ring.empty;
    auto tiles_at = [&](int i) { return ring.tiles(i); };
    auto stage_at = [&](int s) { return ring.stage(s); };
    constexpr int TSTR = bwd_tstr(CH);
    const int nk = kend - kbeg;
    int pv = 1;
    auto issue = [&](int k, unsigned char *tl) {  // chunk k's inputs into tile slot tl
        const int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        __nv_bfloat16 *st = (__nv_bfloat16 *)tl;
        load_tile<SCAN_K, NP, CH>(st, u, Cd, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NP, CH>(st + TSTR, dpre, Cd, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NP, CH>(st + 2 * TSTR, z, ldz, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NP, CH>(st + 3 * TSTR, dout, Cd, mrow + t0, len, c0, Cd);
        cp_async_commit();
    };
    auto fetch_bc = [&](int k) {  // chunk k's B/C and pos into registers (stored when its pass begins)
        const int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        bc.fetch(Bm, Cm, ldbc, mrow + t0, len);
        pv = pos_fetch(pos, mrow + t0, len);
    };
    issue(kend - 1, tiles_at(0));
    fetch_bc(kend - 1);
    for (int i = 0; i < nk; i++) {
        const int k = kend - 1 - i, s = i & 1, t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        unsigned char *sb = stage_at(s);
        cp_async_wait0();
        store_bc(sb);
        const unsigned mask = start_mask(pv, len);
        bws_bar_producers<NP>();
        pass(sb, (const __nv_bfloat16 *)tiles_at(i), t0, len, mask);
        mbar_arrive(mb_full + s);  // the stage is filled
        if (k > kbeg) issue(k - 1, tiles_at(i + 1));  // in flight during the flush below
        if (i > 0) {  // chunk k + 1's walk over: its outputs out
            mbar_wait(mb_empty + (s ^ 1), (unsigned)(((i - 1) >> 1) & 1));
            flush(k + 1, tiles_at(i - 1), stage_at(s ^ 1));
        }
        if (k > kbeg) fetch_bc(k - 1);
    }
    mbar_wait(mb_empty + ((nk - 1) & 1), (unsigned)(((nk - 1) >> 1) & 1));
    flush(kbeg, tiles_at(nk - 1), stage_at((nk - 1) & 1));
}

// SMODE as scan_bwd_staged_kernel's: 0 = no segments, 1 = segment blockIdx.z of nseg (SLK chunks each; the
// summaries of the later ones in bsum, from scan_bwd_staged_kernel<64, 2, false>: v76).
template <int SMODE, bool RE>
__global__ void __launch_bounds__(BWS_CH *BG + BWS_CH, 1)
    scan_bwd_ws_kernel(__nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out, __nv_bfloat16 *dz_out,
                       __nv_bfloat16 *y_out, float *bc_part, float *par_part, const float *ckpt,
                       const __nv_bfloat16 *dout, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                       const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm,
                       int ldbc, const float *Dp, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd,
                       int nck, int SLK, int nseg, const float *bsum, int sub) {
    constexpr int CH = BWS_CH;
    using L = BwsLayout;
    constexpr int NP = CH, NW = CH * BG, BWARPS = NW / 32, NS = SCAN_N / BG, TSTR = bwd_tstr(CH);
    static_assert(SMODE == 0 || SMODE == 1, "the main pass only: the summaries come from the staged kernel");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const BwsRing<L> ring(smem_raw);  // chunk i's tile slot ring.tiles(i), its stage ring.stage(i & 1)
    const int tid = threadIdx.x, row = blockIdx.y, c0 = blockIdx.x * CH;
    const size_t mrow = (size_t)row * T;
    const int seg = SMODE ? blockIdx.z : 0;
    const int kbeg = SMODE ? seg * SLK : 0, kend = SMODE ? min(nck, kbeg + SLK) : nck, nk = kend - kbeg;
    ring.init(NP, NW);
    if (tid < NP) {  // ---- producers: item it * CH + tid of a chunk is (token it, channel tid)
        reg_dealloc<40>();
        const float bias = settle(c0 + tid < Cd ? dt_bias[c0 + tid] : 0.f);
        BCFetch<SCAN_K, NP> bc;
        auto store_bc = [&](unsigned char *sb) { bc.store((float *)(sb + L::BC)); };
        // the cooperative pass (pass_vals, as bwd_coop_pass forms it), four items at a time: bwd_coop_pass loads
        // all of a thread's 16 items first (v51), 64 registers the producers' 40 do not hold
        auto pass = [&](unsigned char *sb, const __nv_bfloat16 *tu, int, int len, unsigned mask) {
            const __nv_bfloat16 *tdp = tu + TSTR, *tz = tdp + TSTR, *tdo = tdp + 2 * TSTR;
            float4 *pa4 = (float4 *)(sb + L::PA);
            float2 *K2 = (float2 *)(sb + L::K2);
            if (tid == 0) *(unsigned *)(sb + L::MASK) = mask;
#pragma unroll 4
            for (int it = 0; it < SCAN_K; it++) {
                const int ii = it * CH + tid;
                const PassVals v = pass_vals(bf2f(tdp[ii]), bf2f(tz[ii]), bf2f(tdo[ii]), bias, it < len);
                if (RE) {
                    pa4[ii] = make_float4(v.dl, v.dy, v.sig, 0.f);
                    K2[ii] = make_float2(v.dzf, v.psz);
                } else {
                    pa4[ii] = make_float4(v.dl, v.dy, v.dzf, v.sig);
                }
            }
        };
        auto flush = [&](int kk, const unsigned char *tl, const unsigned char *sb) {  // chunk kk's outputs and sums
            bwd_flush_chunk<NP, CH, BWARPS>(kk, T, mrow, (const float *)(sb + L::R), bc_part, du_out, ddpre_out,
                                            dz_out, RE ? y_out : nullptr, ldz, c0, Cd, (const __nv_bfloat16 *)tl,
                                            (const __nv_bfloat16 *)(sb + L::OY));
        };
        bws_produce<NP, CH>(kbeg, kend, T, mrow, c0, Cd, u, dpre, z, ldz, dout, Bm, Cm, ldbc, pos, ring, bc, store_bc,
                            pass, flush);
        return;
    }
    // ---- walkers: thread (channel cl = wt / BG, half q = wt % BG), as scan_bwd_staged_kernel's
    reg_alloc<232>();
    const int wt = tid - NP, lane = tid & 31, warp = wt >> 5, q = wt % BG, cl = wt / BG;
    const int c = c0 + cl;
    const bool active = c < Cd;
    const int g = (lane >> 4) & 1, lo = q * NS + 4 * g, hi = q * NS + 4 * (1 - g);
    float A[NS];
#pragma unroll
    for (int i = 0; i < NS; i++)
        A[i] = active ? -__expf(A_log[(size_t)c * SCAN_N + (i < 4 ? lo + i : hi + i - 4)]) : 0.f;
    const float Dc = settle(active ? Dp[c] : 0.f);
    float carry[NS], dA[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) carry[i] = dA[i] = 0.f;
    if (SMODE == 1 && active) bwd2_fold_carry(bsum, row, bsumm_count(nck, SLK, sub), (seg + 1) * sub, Cd, c, lo, hi, carry);
    float dbias = 0.f, dDacc = 0.f;
    float4 ck_next[2];
    bwd2_load_ck(ckpt, row, nck, kend - 1, Cd, c, lo, hi, active, ck_next);
#pragma unroll 1
    for (int ic = 0; ic < nk; ic++) {
        const int k = kend - 1 - ic, sidx = ic & 1;
        unsigned char *sb = ring.stage(sidx);
        float s[NS] = {ck_next[0].x, ck_next[0].y, ck_next[0].z, ck_next[0].w,
                       ck_next[1].x, ck_next[1].y, ck_next[1].z, ck_next[1].w};
        if (k > kbeg) bwd2_load_ck(ckpt, row, nck, k - 1, Cd, c, lo, hi, active, ck_next);
        mbar_wait(ring.full + sidx, (unsigned)((ic >> 1) & 1));
        __nv_bfloat16 *tu = (__nv_bfloat16 *)ring.tiles(ic), *tdp = tu + TSTR, *tz = tu + 2 * TSTR,
                      *tdo = tu + 3 * TSTR;
        __nv_bfloat16 *odu = tdp, *oddp = tz, *odz = tdo, *oy = (__nv_bfloat16 *)(sb + L::OY);
        __nv_bfloat16 *oA = q ? oddp : odu, *oB = q && RE ? oy : odz;
        const float4 *pa4 = (const float4 *)(sb + L::PA);
        const float *K2q = (const float *)(sb + L::K2) + (tid & 1);
        float *R = (float *)(sb + L::R);
        const float *bck = (const float *)(sb + L::BC);
        const unsigned mask = *(const unsigned *)(sb + L::MASK);
        bwd2_walk_chunk<CH, BWARPS, RE>(pa4, K2q, tu, bck, mask, R, oA, oB, odu, oddp, odz, s, carry, dA, A, Dc, dbias,
                                        dDacc, cl, lane, warp, q, lo, hi);
        mbar_arrive(ring.empty + sidx);
    }
    if (active)
        bwd2_put_params(par_part + ((size_t)row * (SMODE ? nseg : 1) + seg) * (2 + SCAN_N) * Cd + c, Cd, q, dbias,
                        dDacc, dA, A, lo, hi);
}

// Whether the device runs this file's sm_90a code, which scan_bwd_ws_kernel needs for setmaxnreg (built for another
// target its walkers would be held to 168 registers and spill): this kernel's static shared memory is 2 KB in sm_90a
// code and 4 bytes in any other, and cudaFuncGetAttributes reports it without a launch. (The driver rounds the
// static shared memory of code it compiles from PTX up: a first probe of 16 bytes against 4 read 16 from a build of
// compute_90 PTX alone on the H200, twenty-sixth session's call203, so the sizes now differ by far more.)
static constexpr int SM90A_PROBE_BYTES = 2048;
__global__ void scan_sm90a_probe_kernel(int *out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ int v[SM90A_PROBE_BYTES / 4];
#else
    __shared__ int v[1];
#endif
    v[threadIdx.x % (sizeof v / sizeof v[0])] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = v[0];
}
static bool scan_bwd_ws_avail() {  // (the plan's question: the env switch below changes the kernel, not the plan)
    static int feat = -1;
    if (feat < 0) {
        cudaFuncAttributes a;
        const bool got = cudaFuncGetAttributes(&a, scan_sm90a_probe_kernel) == cudaSuccess;
        feat = got && a.sharedSizeBytes >= (size_t)SM90A_PROBE_BYTES &&
               bws_smem() <= (size_t)pm_cuda_device()->smem_block;
        cudaGetLastError();  // (clear a failure: the next launch check would report it)
        if (getenv("PM_CUDA_VERBOSE"))
            fprintf(stderr,
                    "packmamba: scan: sm_90a probe: static shared memory %zu bytes: warp-specialized backward %s\n",
                    got ? a.sharedSizeBytes : (size_t)0, feat ? "available" : "not available");
    }
    return feat;
}
static bool scan_bwd_ws_ok() {
    const char *e = getenv("PM_SCAN_BWD_WS");  // read each call (the op tests compare both kernels)
    return scan_bwd_ws_avail() && !(e && e[0] == '0');
}

// ---- v20/v21: the backward main pass with 4 threads per channel, in narrow blocks three to an SM ----
// Why: at B8 x D1536 (the 130m model) there are only 12K channels, so v18's 2 threads per channel in 64-wide
// blocks left 60 SMs with two blocks and 72 with one unless the rows were cut into time segments, and the
// segments cost a summary pass (0.20 ms of a 0.90 ms backward). Four threads per channel in 32-wide blocks make
// 384 blocks, one wave of three per SM, no segments. The per-state work is the same; the dB/dC butterfly is over
// 8 channels (3 levels on 8 values, against 4 on 16); y, P and Z = uP + Q are summed over the channel's 4 lanes
// by a transposed butterfly that leaves each lane one sum, so each lane computes and stores one output (du,
// ddelta, dz) instead of all three. It still executes ~1.2x the instructions of v18's main pass (524M against
// 425M at B8 D1536, ncu: the per-token scalar work is done by 4 lanes instead of 2), so it is used only where it
// saves the segments (scan_use_bwd4). Three blocks per SM is the registers' limit: held to 128 registers for
// four, it spilled and ran 16% slower (v23a). v21: the chunk's recomputed states stay in registers (16 tokens x 4 states; both token loops
// unrolled) instead of going through shared memory, which ncu showed 67-73% busy (L1/TEX throughput).
// Everything else is v18's: checkpoints every SCAN_K tokens, the reverse walk in groups of 4 tokens, per-block
// dB/dC partials and per-row parameter partials summed in a fixed order (no atomics: deterministic).
static constexpr int BG4 = 4;
// Dynamic smem: tiles (2 stages, u/dpre/z/dout, each bwd_tstr apart) bf16 | bcf (2 stages, 2 copies, SCAN_K, 2N)
// f32 | K (SCAN_K, CH) float4 | pa4 (SCAN_K, CH) float4 | R (SCAN_K, warps, 2N) f32 | the forward's output
// (SCAN_K, CH) bf16, staged (v24): 41 KB at CH = 32
static constexpr size_t bwd4_smem(int CH) {
    return (size_t)2 * 4 * bwd_tstr(CH) * 2 + (size_t)2 * 2 * SCAN_K * 2 * SCAN_N * 4 +
           (size_t)(16 + 16) * SCAN_K * CH + (size_t)SCAN_K * (CH * BG4 / 32) * 2 * SCAN_N * 4 +
           (size_t)SCAN_K * CH * 2;
}
// ---- what both 4-thread backward kernels (scan_bwd4_kernel, v80's scan_bwd4_ws_kernel) do alike per lane ----
// Lane (channel c, part q) holds states 4q + ((i + 2 up) & 3) in slot i (up: lane bit 4; see scan_bwd4_kernel).
// Its A in slot order: A < 0 in every lane, so the +inf of a document start never meets a 0 (pa4): inactive lanes
// take -1, and an A that rounds to -0 (A_log < -69) takes -1e-30, for which 2^(delta log2 e A) is 1 all the same.
__device__ __forceinline__ void bwd4_lane_A(float (&A)[4], const float *A_log, int c, bool active, int q, int up) {
#pragma unroll
    for (int i = 0; i < 4; i++)
        A[i] = active ? fminf(-__expf(A_log[(size_t)c * SCAN_N + 4 * q + ((i + 2 * up) & 3)]), -1e-30f) : -1.f;
}
// The lane's 4 states of chunk k's checkpoint (rows, nck, Cd, N), zeros where inactive; bwd4_slots puts them in
// slot order
__device__ __forceinline__ float4 bwd4_load_ck(const float *ckpt, int row, int nck, int k, int Cd, int c, int q,
                                               bool active) {
    return active ? *(const float4 *)(ckpt + (((size_t)row * nck + k) * Cd + c) * SCAN_N + 4 * q)
                  : make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ void bwd4_slots(float4 ck, int up, float (&s)[4]) {
    s[0] = up ? ck.z : ck.x, s[1] = up ? ck.w : ck.y, s[2] = up ? ck.x : ck.z, s[3] = up ? ck.y : ck.w;
}
// Item i's pass values (v24b): pa4 = {delta, dy, delta log2 e, u (v30)}, which every lane of a channel reads, and
// K = the factor of each lane's one output, {dz factor, softplus'(v), delta, silu(z) (RE) or delta}, of which lane
// q reads element q alone (one 4-byte load, no selects). v26: delta log2 e is +inf at a document start, so a_t =
// 2^(+inf A) = 0 there (A < 0 in every lane) with no per-thread start test in the walk; elsewhere the product is
// the one the forward forms (fmaf(delta log2 e, A, 0)): same bits. uu() gives u (a value, or a load from the tile,
// which the warp-specialized kernel's pass has the compiler place after the start test, as before the helper)
template <bool RE, class U>
__device__ __forceinline__ void bwd4_put_pass(float4 *pa4, float4 *K, int i, const PassVals &v, U uu, bool start) {
    pa4[i] = make_float4(v.dl, v.dy, start ? __int_as_float(0x7f800000) : v.dl * LOG2E, uu());
    K[i] = make_float4(v.dzf, v.sig, v.dl, RE ? v.psz : v.dl);
}
// The lane's parameter partials into pp (its row's (2 + N, Cd) block, at its channel): lane q = 1 ddt_bias (acc,
// the running sum of its outputs), q = 0 dD, each lane dA_log = dA A of its states
__device__ __forceinline__ void bwd4_put_params(float *pp, int Cd, int q, int up, float acc, float dDacc,
                                                const float (&dA)[4], const float (&A)[4]) {
    if (q == 1) pp[0] = acc;
    if (q == 0) pp[(size_t)Cd] = dDacc;
#pragma unroll
    for (int n = 0; n < 4; n++) pp[(size_t)(2 + 4 * q + ((n + 2 * up) & 3)) * Cd] = dA[n] * A[n];
}

// A 4-thread backward thread's chunk (v20/v21's walk; v80: shared by the staged and the warp-specialized kernel,
// so both form every value alike): the chunk's states recomputed from s (the checkpoint, slot order: see up) into
// registers, then the walk backwards over them; this lane's one output a token into oq (CH apart), the warp's
// dB/dC sums into R (SCAN_K, BWARPS, 2N). pa4 and Kq (this lane's element of K) as the cooperative pass put them;
// bck: this lane's B of the chunk's bcf copy (C at + N).
template <int CH, int BWARPS, bool RE>
__device__ __forceinline__ void bwd4_walk_chunk(const float4 *pa4, const float *Kq, const float *bck, float *R,
                                                __nv_bfloat16 *oq, float (&s)[4], float (&carry)[4], float (&dA)[4],
                                                const float (&A)[4], float Dc, float kD, bool k2_du, float &acc,
                                                float &dDacc, int cl, int lane, int warp, int q, int up) {
    constexpr int NS = 4;
    // recompute the chunk's states from its checkpoint (tokens past the row's end: delta = 0, input 0)
    // (into registers, v21: both token loops are unrolled, so Sr[j] is a compile-time register index)
    float Sr[SCAN_K][NS];
#pragma unroll
    for (int j = 0; j < SCAN_K; j++) {
        const int i = j * CH + cl;
        const float4 pv = pa4[i];
        const float dlL = pv.z, dlu = pv.x * pv.w;
        const float4 b = *(const float4 *)(bck + j * 2 * SCAN_N);
        const float bb[NS] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int n = 0; n < NS; n++) Sr[j][n] = s[n] = fmaf(ex2_approx(dlL * A[n]), s[n], dlu * bb[n]);
    }
    // R slot of this lane's dB/dC sum after the butterfly: type bit 3, state 4q + 2 (bit 4) + (bit 2)
    const int ridx = ((lane >> 3) & 1) * SCAN_N + 4 * q + 2 * up + ((lane >> 2) & 1);
    float vpend[2 * NS];  // v of the token walked last, not yet summed (v36)
    auto bc_sum = [&](float (&vv)[2 * NS]) {
#pragma unroll
        for (int e = 0; e < NS; e++) vv[e] += __shfl_xor_sync(0xffffffffu, vv[e + NS], 16);
        tr_level<2, 8, 2 * NS>(vv);
        tr_level<1, 4, 2 * NS>(vv);
        return vv[0];
    };
#pragma unroll
    for (int j0 = SCAN_K - 4; j0 >= 0; j0 -= 4) {
        float ov[4], rv[4];  // v52: outputs and dB/dC sums whose stores wait (WALK_GROUP4)
#pragma unroll
        for (int jj = 3; jj >= 0; jj--) {
            const int j = j0 + jj, i = j * CH + cl;
            const float4 pa = pa4[i];
            const float uu = pa.w, dl = pa.x, gy = pa.y, dlL = pa.z, dlu = dl * uu;
            const float *bcj = bck + j * 2 * SCAN_N;
            const float4 b = *(const float4 *)bcj, cv = *(const float4 *)(bcj + SCAN_N);
            const float bb[NS] = {b.x, b.y, b.z, b.w}, cc[NS] = {cv.x, cv.y, cv.z, cv.w};
            const float *st = Sr[j];
            // y as the forward sums it (v24; in pairs, so slot order does not matter: see quad_dot)
            const float y = quad_dot<true>(st[0], st[1], st[2], st[3], cc);
            float P = 0.f, Q = 0.f;
            // v = [dB slots 0-1, dC slots 0-1, dB slots 2-3, dC slots 2-3]
            float v[2 * NS];
#pragma unroll
            for (int n = 0; n < NS; n++)
                walk_state(ex2_approx(dlL * A[n]), gy, cc[n], bb[n], st[n], BWD_R_CARRY4 && j > 0,
                           Sr[j > 0 ? j - 1 : 0][n], dl, dlu, A[n], carry[n], P, Q, dA[n], v[(n & 2) * 2 + (n & 1)],
                           v[(n & 2) * 2 + 2 + (n & 1)]);
            // y, P and Z = uP + Q over the channel's 4 lanes, transposed: lane q = 0 gets y, 1 Z, 2 P, 3 y
            // (P without RE) (y as (q0 + q1) + (q2 + q3), the forward's order)
            float w[4] = {y, P, fmaf(uu, P, Q), RE ? y : P};
            tr_level<2, 1, 4>(w);
            tr_level<1, 2, 4>(w);
            // one output per lane, as k1 (w + kD u) + k2: dz = dzf (y + D u), ddelta = Z softplus'(v),
            // du = delta P + dy D, the forward's output silu(z) (y + D u). No branch, so the group's 4 tokens
            // stay one basic block the scheduler can interleave (v13)
            // (k1 from K: dz factor, softplus'(v), delta, silu(z); k2 = -0 rather than 0 on the other lanes, so
            // that k1 x + k2 is exactly the product k1 x, sign of a zero included)
            const float k1 = Kq[4 * i], k2 = k2_du ? gy * Dc : -0.f;
            const float val = fmaf(k1, fmaf(kD, uu, w[0]), k2);
            acc += val;
            dDacc = fmaf(gy, uu, dDacc);
            ov[jj] = val;
            // dB/dC summed over the warp's 8 channels (lane bits 2-4), one token later (v36): the
            // butterfly of the token before in the walk runs after this token's state work (measured: no change
            // at B8 D1536, where this kernel runs; kept for the same code shape and no spills, v35 spilled 4 bytes)
            if (j + 1 < SCAN_K) rv[jj] = bc_sum(vpend);
#pragma unroll
            for (int e = 0; e < 2 * NS; e++) vpend[e] = v[e];
            if (jj % WALK_GROUP4 == 0) {  // the group's stores (v52)
#pragma unroll
                for (int jd = jj + WALK_GROUP4 - 1; jd >= jj; jd--) {
                    const int jt = j0 + jd;
                    oq[jt * CH + cl] = __float2bfloat16(ov[jd]);
                    if (jt + 1 < SCAN_K) R[((jt + 1) * BWARPS + warp) * 2 * SCAN_N + ridx] = rv[jd];
                }
            }
        }
    }
    R[warp * 2 * SCAN_N + ridx] = bc_sum(vpend);  // token 0's
}

template <int CH, bool RE>  // RE: as in scan_bwd_staged_kernel
__global__ void __launch_bounds__(CH *BG4, CH == 32 ? 3 : 1)  // (96: v80's staged twin, one an SM)
    scan_bwd4_kernel(__nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out, __nv_bfloat16 *dz_out, __nv_bfloat16 *y_out,
                     float *bc_part, float *par_part, const float *ckpt, const __nv_bfloat16 *dout, const __nv_bfloat16 *u,
                     const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm,
                     const __nv_bfloat16 *Cm, int ldbc, const float *Dp, const __nv_bfloat16 *z, int ldz,
                     const int32_t *pos, int T, int Cd, int nck) {
    constexpr int NT = CH * BG4, BWARPS = NT / 32, NS = SCAN_N / BG4, TILE = SCAN_K * CH, BCS = SCAN_K * 2 * SCAN_N,
                  TSTR = bwd_tstr(CH);
    constexpr size_t B_TILES = (size_t)2 * 4 * TSTR * 2, B_BC = (size_t)2 * 2 * BCS * 4,
                     B_PA = (size_t)TILE * (16 + 16);
    static_assert(NS == 4 && CH % 8 == 0, "the layout below assumes 4 threads per channel");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __nv_bfloat16 *tiles = (__nv_bfloat16 *)smem_raw;
    float *bcf = (float *)(smem_raw + B_TILES);  // (stage, copy, SCAN_K, 2N)
    float4 *K = (float4 *)(smem_raw + B_TILES + B_BC);  // (K first: 16-byte aligned)
    float4 *pa4 = (float4 *)(K + TILE);
    float *R = (float *)(smem_raw + B_TILES + B_BC + B_PA);
    __nv_bfloat16 *oy = (__nv_bfloat16 *)(R + SCAN_K * BWARPS * 2 * SCAN_N);  // the forward's output, staged
    static_assert((B_TILES + B_BC + B_PA + (size_t)SCAN_K * BWARPS * 2 * SCAN_N * 4) % 128 == 0,
                  "the staged output's stores must not share banks with the tiles' (v30)");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, q = tid & 3, cl = tid >> 2;
    const float *Kq = (const float *)K + q;  // this lane's element of K
    const int c0 = blockIdx.x * CH, c = c0 + cl, row = blockIdx.y;
    const bool active = c < Cd;
    const size_t mrow = (size_t)row * T;
    // Slot i of this thread holds state 4q + ((i + 2 up) & 3): lanes with lane bit 4 set ("up") hold their two
    // pairs of states swapped, so the first butterfly level below needs no selects (each lane keeps slots 0-3
    // of v and sends 4-7, the same states in its partner lane ^ 16); they read B and C from copy 1 of bcf, whose
    // float4s have their halves swapped likewise.
    const int up = (lane >> 4) & 1;
    float A[NS];
    bwd4_lane_A(A, A_log, c, active, q, up);
    const float Dc = settle(active ? Dp[c] : 0.f);
    // each lane's one output is k1 (w + kD u) + k2 (see the walk); kD and whether k2 is gy D are the lane's own
    const float kD = q == 0 || (RE && q == 3) ? Dc : 0.f;
    const bool k2_du = q == 2 || (!RE && q == 3);
    const int clA = tid % CH;  // channel served in the cooperative pass
    const float biasA = settle(c0 + clA < Cd ? dt_bias[c0 + clA] : 0.f);
    float carry[NS], dA[NS];  // carry = a_{t+1} ds_{t+1}: the adjoint reaching s_t from token t+1
#pragma unroll
    for (int i = 0; i < NS; i++) carry[i] = dA[i] = 0.f;
    float acc = 0.f, dDacc = 0.f;  // acc: the running sum of this lane's output (lane q = 1: ddelta = dbias)

    auto issue = [&](int k) {  // tiles of chunk k into stage k & 1
        int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        __nv_bfloat16 *st = tiles + (size_t)(k & 1) * 4 * TSTR;
        load_tile<SCAN_K, NT, CH>(st, u, Cd, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NT, CH>(st + TSTR, dpre, Cd, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NT, CH>(st + 2 * TSTR, z, ldz, mrow + t0, len, c0, Cd);
        load_tile<SCAN_K, NT, CH>(st + 3 * TSTR, dout, Cd, mrow + t0, len, c0, Cd);
    };
    auto load_ck = [&](int k) { return bwd4_load_ck(ckpt, row, nck, k, Cd, c, q, active); };
    // B/C by the first 128 threads, a float4 each (all of them at CH = 32; v80's 96-wide twin has 384)
    BCFetch<SCAN_K, 128> bc;
    static_assert(BCFetch<SCAN_K, 128>::V == 4 && NT % 128 == 0, "each fetching thread takes one float4 of B or C");
    const bool bcthr = NT == 128 || tid < 128;
    auto bc_store = [&](int stage) {  // both copies (see up)
        if (!bcthr) return;
        const int j = tid / 8, v0 = (tid % 8) * 4;
        float x[4];
#pragma unroll
        for (int i = 0; i < 4; i++) x[i] = __uint_as_float((unsigned)bc.r[i] << 16);
        float *d = bcf + (size_t)stage * 2 * BCS + j * 2 * SCAN_N + v0;
        *(float4 *)d = make_float4(x[0], x[1], x[2], x[3]);
        *(float4 *)(d + BCS) = make_float4(x[2], x[3], x[0], x[1]);
    };
    float4 ck_next;
    {
        const int k = nck - 1, t0 = k * SCAN_K, len = T - t0;
        issue(k);
        cp_async_commit();
        if (bcthr) bc.fetch(Bm, Cm, ldbc, mrow + t0, len);
        bc_store(k & 1);
        ck_next = load_ck(k);
    }
    const int lenl = T - (nck - 1) * SCAN_K;
    unsigned mask_next = start_mask(pos_fetch(pos, mrow + (nck - 1) * SCAN_K, lenl), lenl);
    int pv_next = 1;

    auto flush = [&](int kk) {  // as in scan_bwd_staged_kernel
        bwd_flush_chunk<NT, CH>(kk, T, mrow, R, bc_part, du_out, ddpre_out, dz_out, RE ? y_out : nullptr, ldz, c0,
                                Cd, tiles + (size_t)(kk & 1) * 4 * TSTR, oy);
    };
    using Sync = BwdChunkSync<BWD_ORDER4>;
    for (int k = nck - 1; k >= 0; k--) {
        const int t0 = k * SCAN_K, len = min(SCAN_K, T - t0);
        const unsigned mask = mask_next;
        float s[NS];
        bwd4_slots(ck_next, up, s);
        Sync::open(k, 0, issue);
        if (k > 0) {  // in flight during the chunk
            if (bcthr) bc.fetch(Bm, Cm, ldbc, mrow + t0 - SCAN_K, SCAN_K);
            pv_next = pos_fetch(pos, mrow + t0 - SCAN_K, SCAN_K);
            ck_next = load_ck(k - 1);
        }
        __nv_bfloat16 *tu = tiles + (size_t)(k & 1) * 4 * TSTR, *tdp = tu + TSTR, *tz = tu + 2 * TSTR,
                      *tdo = tu + 3 * TSTR;
        // once the cooperative pass has read them, the dpre, z and dout tiles hold the chunk's du, ddpre and dz;
        // lane q writes one of them or the forward's output: q = 0 dz, 1 ddpre, 2 du, 3 the output (oy; without
        // RE lane 3 writes du as lane 2 does)
        __nv_bfloat16 *odu = tdp, *oddp = tz, *odz = tdo;
        __nv_bfloat16 *oq = q == 0 ? odz : q == 1 ? oddp : q == 2 || !RE ? odu : oy;
        const float *bck = bcf + (size_t)(k & 1) * 2 * BCS + up * BCS + 4 * q;  // this lane's B (C at + N)
        // the cooperative pass (bwd4_put_pass)
        bwd_coop_pass<NT, CH, !BWD4_PASS_BRANCH>(tdp, tz, tdo, tu, len, biasA, [&](int i, const PassVals &v, float uu) {
            bwd4_put_pass<RE>(pa4, K, i, v, [&] { return uu; }, (mask >> (i / CH)) & 1u);
        });
        Sync::pass_done(k, 0, nck - 1, issue, flush);
        bwd4_walk_chunk<CH, BWARPS, RE>(pa4, Kq, bck, R, oq, s, carry, dA, A, Dc, kD, k2_du, acc, dDacc, cl, lane, warp,
                                        q, up);
        Sync::walk_done(k, flush);
        if (k > 0) {
            bc_store((k - 1) & 1);
            mask_next = start_mask(pv_next, SCAN_K);
        }
        Sync::close();
    }
    Sync::finish(0, flush);
    if (active) bwd4_put_params(par_part + (size_t)row * (2 + SCAN_N) * Cd + c, Cd, q, up, acc, dDacc, dA, A);
}

// ---- v80: the 4-thread backward warp-specialized (sm_90a), 96-wide blocks one an SM ----
// Why: at the 130m width (B8·D1536) the 4-thread kernel runs three 32-wide blocks an SM, each doing its own
// cooperative pass and flush between block-wide barriers (the pass 22% of its samples for 14% of its instructions,
// call126). v72 moved that work of the 2-thread backward into producer warps (-4.5% there). Here a block takes 96
// channels (12 walker warps, three a scheduler as before; 128 of them make one wave on 128 SMs at B8·D1536) and a
// warpgroup of producers: the tiles, B/C and pos copied as scan_bwd_ws_kernel's producers do, the cooperative pass
// (12 items a producer, pass_vals), the flush (bwd_flush_chunk over the 12 walker warps). Walkers run
// bwd4_walk_chunk, the staged kernel's walk. Registers: launched at 128 (512 threads), the producers' warpgroup
// drops to 56 and the three walker warpgroups rise to 152 (128 x 56 + 384 x 152 = 65,536). Shared memory: three
// tile slots and two stages (pass arrays, K, R, B/C in both copies, the forward's output), 199 KB.
// Every value is formed as in scan_bwd4_kernel<96> (its staged twin, which PM_SCAN_BWD_WS=0 runs): the same bits.
static constexpr int B4WS_CH = 96;
struct B4wsLayout {
    static constexpr int CH = B4WS_CH, BWARPS = CH * BG4 / 32;
    static constexpr size_t TILES = (size_t)4 * bwd_tstr(CH) * 2;
    static constexpr size_t OY = 0, PA = OY + (size_t)SCAN_K * CH * 2, K = PA + (size_t)SCAN_K * CH * 16,
                            R = K + (size_t)SCAN_K * CH * 16, BC = R + (size_t)SCAN_K * BWARPS * 2 * SCAN_N * 4,
                            STAGE = (BC + (size_t)2 * SCAN_K * 2 * SCAN_N * 4 + 127) / 128 * 128;
    // (the forward's output at 0 mod 128 bytes beside the tiles' 32-byte steps: the four lanes of a channel store
    // into four different bank groups, as in the staged kernel, v30)
    static_assert(TILES % 128 == 0 && PA % 16 == 0 && BC % 16 == 0, "stage layout");
    static constexpr size_t smem() { return 3 * TILES + 2 * STAGE + 4 * 8; }
};
template <bool RE>
__global__ void __launch_bounds__(B4WS_CH *BG4 + 128, 1)
    scan_bwd4_ws_kernel(__nv_bfloat16 *du_out, __nv_bfloat16 *ddpre_out, __nv_bfloat16 *dz_out,
                        __nv_bfloat16 *y_out, float *bc_part, float *par_part, const float *ckpt,
                        const __nv_bfloat16 *dout, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                        const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm,
                        int ldbc, const float *Dp, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int T, int Cd,
                        int nck) {
    constexpr int CH = B4WS_CH;
    using L = B4wsLayout;
    constexpr int NP = 128, NW = CH * BG4, BWARPS = NW / 32, NS = SCAN_N / BG4, TSTR = bwd_tstr(CH),
                  BCS = SCAN_K * 2 * SCAN_N, IT = SCAN_K * CH / NP;
    static_assert(SCAN_K * CH % NP == 0 && NS == 4, "the producers' items; 4 states a walker");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const BwsRing<L> ring(smem_raw);  // chunk i's tile slot ring.tiles(i), its stage ring.stage(i & 1)
    const int tid = threadIdx.x, row = blockIdx.y, c0 = blockIdx.x * CH;
    const size_t mrow = (size_t)row * T;
    ring.init(NP, NW);
    if (tid < NP) {  // ---- producers: item it * NP + tid of a chunk is (token i / CH, channel i % CH)
        reg_dealloc<56>();
        float bias[3];  // item it's channel is (tid + 32 it) % 96: three of them, by it % 3
#pragma unroll
        for (int e = 0; e < 3; e++) {
            const int ce = c0 + (tid + NP * e) % CH;
            bias[e] = settle(ce < Cd ? dt_bias[ce] : 0.f);
        }
        BCFetch<SCAN_K, NP> bc;
        static_assert(BCFetch<SCAN_K, NP>::V == 4, "each producer fetches one float4 of B or C");
        // both copies, as scan_bwd4_kernel stores them (see its up). (Not one helper with its bc_store: the
        // address arithmetic that either kernel's compiled code keeps changed with every helper tried.)
        auto store_bc = [&](unsigned char *sb) {
            const int j = tid / 8, v0 = (tid % 8) * 4;
            float x[4];
#pragma unroll
            for (int i = 0; i < 4; i++) x[i] = __uint_as_float((unsigned)bc.r[i] << 16);
            float *d = (float *)(sb + L::BC) + j * 2 * SCAN_N + v0;
            *(float4 *)d = make_float4(x[0], x[1], x[2], x[3]);
            *(float4 *)(d + BCS) = make_float4(x[2], x[3], x[0], x[1]);
        };
        // the cooperative pass as bwd_coop_pass forms it for scan_bwd4_kernel (pass_vals, bwd4_put_pass), in groups
        // of six items (so that it % 3, the bias's index, is a constant)
        auto pass = [&](unsigned char *sb, const __nv_bfloat16 *tu, int, int len, unsigned mask) {
            const __nv_bfloat16 *tdp = tu + TSTR, *tz = tu + 2 * TSTR, *tdo = tu + 3 * TSTR;
            float4 *pa4 = (float4 *)(sb + L::PA), *K = (float4 *)(sb + L::K);
#pragma unroll 6
            for (int it = 0; it < IT; it++) {
                const int ii = it * NP + tid, j = ii / CH;
                const PassVals v = pass_vals(bf2f(tdp[ii]), bf2f(tz[ii]), bf2f(tdo[ii]), bias[it % 3], j < len);
                bwd4_put_pass<RE>(pa4, K, ii, v, [&] { return bf2f(tu[ii]); }, (mask >> j) & 1u);
            }
        };
        auto flush = [&](int kk, const unsigned char *tl, const unsigned char *sb) {  // chunk kk's outputs and sums
            bwd_flush_chunk<NP, CH, BWARPS>(kk, T, mrow, (const float *)(sb + L::R), bc_part, du_out, ddpre_out,
                                            dz_out, RE ? y_out : nullptr, ldz, c0, Cd, (const __nv_bfloat16 *)tl,
                                            (const __nv_bfloat16 *)(sb + L::OY));
        };
        bws_produce<NP, CH>(0, nck, T, mrow, c0, Cd, u, dpre, z, ldz, dout, Bm, Cm, ldbc, pos, ring, bc, store_bc, pass,
                            flush);
        return;
    }
    // ---- walkers: thread (channel cl = wt / 4, part q = wt % 4), as scan_bwd4_kernel's
    reg_alloc<152>();
    const int wt = tid - NP, lane = tid & 31, warp = wt >> 5, q = wt & 3, cl = wt >> 2, c = c0 + cl;
    const bool active = c < Cd;
    const int up = (lane >> 4) & 1;  // (scan_bwd4_kernel's slot order)
    float A[NS];
    bwd4_lane_A(A, A_log, c, active, q, up);
    const float Dc = settle(active ? Dp[c] : 0.f);
    const float kD = q == 0 || (RE && q == 3) ? Dc : 0.f;
    const bool k2_du = q == 2 || (!RE && q == 3);
    float carry[NS], dA[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) carry[i] = dA[i] = 0.f;
    float acc = 0.f, dDacc = 0.f;
    auto load_ck = [&](int k) { return bwd4_load_ck(ckpt, row, nck, k, Cd, c, q, active); };
    float4 ck_next = load_ck(nck - 1);
#pragma unroll 1
    for (int ic = 0; ic < nck; ic++) {
        const int k = nck - 1 - ic, sidx = ic & 1;
        unsigned char *sb = ring.stage(sidx);
        float s[NS];
        bwd4_slots(ck_next, up, s);
        if (k > 0) ck_next = load_ck(k - 1);
        mbar_wait(ring.full + sidx, (unsigned)((ic >> 1) & 1));
        __nv_bfloat16 *tu = (__nv_bfloat16 *)ring.tiles(ic), *tdp = tu + TSTR, *tz = tu + 2 * TSTR,
                      *tdo = tu + 3 * TSTR;
        __nv_bfloat16 *oq = q == 0 ? tdo : q == 1 ? tz : q == 2 || !RE ? tdp : (__nv_bfloat16 *)(sb + L::OY);
        const float *bck = (const float *)(sb + L::BC) + up * BCS + 4 * q;
        bwd4_walk_chunk<CH, BWARPS, RE>((const float4 *)(sb + L::PA), (const float *)(sb + L::K) + q, bck,
                                        (float *)(sb + L::R), oq, s, carry, dA, A, Dc, kD, k2_du, acc, dDacc, cl, lane,
                                        warp, q, up);
        mbar_arrive(ring.empty + sidx);
    }
    if (active) bwd4_put_params(par_part + (size_t)row * (2 + SCAN_N) * Cd + c, Cd, q, up, acc, dDacc, dA, A);
}
static constexpr size_t b4ws_smem() { return B4wsLayout::smem(); }

// The staged kernels copy 16-byte pieces of 8 channels in and (v11) out.
static bool scan_staged_ok(const void *u, const void *dpre, const void *z, int ldz, const void *dout, int Cd,
                           const void *out0, const void *out1, const void *out2) {
    return Cd % 8 == 0 && ldz % 8 == 0 && pm_is_aligned(u, 16) && pm_is_aligned(dpre, 16) &&
           pm_is_aligned(z, 16) && (dout == NULL || pm_is_aligned(dout, 16)) && pm_is_aligned(out0, 16) &&
           (out1 == NULL || pm_is_aligned(out1, 16)) && (out2 == NULL || pm_is_aligned(out2, 16));
}
// Raise a kernel's dynamic shared memory limit (once per kernel and process).
static void scan_smem_optin(const void *fn, size_t bytes, int *done, const char *name) {
    if (*done) return;
    if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess)
        scan_die("cannot give %s %zu bytes of shared memory", name, bytes);
    *done = 1;
}
// Blocks of kernel fn (threads each, smem bytes of dynamic shared memory) an SM holds at once: the occupancy
// API's answer after the shared-memory opt-in, or, if either fails, shared memory's alone (~1 KB a block is
// reserved by the system); at least 1. A failure here only means the estimate, so its error is cleared (the next
// launch check would report it).
static int scan_blocks_per_sm(const void *fn, int threads, size_t smem) {
    int n = 0;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        cudaGetLastError();
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem) != cudaSuccess) {
        cudaGetLastError();
        n = pm_cuda_device()->smem_sm / (int)(smem + 1024);
    }
    return n > 1 ? n : 1;
}

// ---- host entry points ----
// Staged blocks are CH = 128 channels wide, or 64 when 128 would leave most SMs without a block.
// v50: where 64-wide forward blocks put as many channels on the busiest SM as 128-wide ones (B8 D2048 and B4 D4096:
// 128 either way), the forward takes them, two an SM (held to 128 registers, as one 128-wide block is): while one
// block waits at a chunk's barriers the other computes (lab: forward -3.3% at B8 D2048, -3.6% at B4 D4096). The
// backward keeps its 128-wide blocks (two 64-wide ones an SM measured +5% there). PM_SCAN_NARROW=0: 128-wide
// forward blocks as before (A/B runs); read once.
static bool scan_fwd_narrow() {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("PM_SCAN_NARROW");
        v = !(e && e[0] == '0');
    }
    return v;
}
static int scan_pick_ch(int rows, int Cd) { return rows * ((Cd + 127) / 128) >= 120 ? 128 : 64; }

// Time segments per row for the staged forward / checkpoint kernels: enough blocks for ~4 waves of minb
// blocks per SM (several waves so the last one is not mostly idle), but segments of at least
// SCAN_SEG_MIN_CHUNKS chunks (each block's start-up is not free) and at most SCAN_SEG_MAX. *SL = tokens per
// segment (a multiple of FT); returns the number of segments.
static int scan_pick_seg(int rows, int nblk, int T, int minb, int *SL) {
    int nch = (T + FT - 1) / FT, blocks = rows * nblk;
    int want = (4 * minb * pm_cuda_sm_count() + blocks - 1) / blocks;
    int nseg = want < nch / SCAN_SEG_MIN_CHUNKS ? want : nch / SCAN_SEG_MIN_CHUNKS;
    if (nseg > SCAN_SEG_MAX) nseg = SCAN_SEG_MAX;
    if (nseg < 1) nseg = 1;
    *SL = (nch + nseg - 1) / nseg * FT;
    return (T + *SL - 1) / *SL;  // rounding SL up can leave fewer segments
}

// Plan of the forward / checkpoint kernels: block width (channels), blocks per SM the registers are held to,
// tokens per segment, segments.
struct FwdPlan {
    int ch, minb, SL, nseg;
};
// Cost model (SEG_POLICY 0), in token-steps of the busiest SM: v4's plan (one 128-wide block per SM, or two
// 64-wide ones) takes ceil(blocks / slots) * T; segments take the summary pass over (nseg-1)/nseg of the
// tokens at SEG_R of the forward's cost, waves of two blocks per SM, and each block SEG_K2 times slower than
// alone on its SM. SEG_R = 0.75 is v4's checkpoint pass over its forward (0.30 / 0.41 ms); SEG_K2 = 1.5 is a
// guess (two blocks give 1.33x the throughput of one), to be replaced by the lab's v8s-vs-v4 measurement.
static constexpr float SEG_R = 0.75f, SEG_K2 = 1.5f;
static FwdPlan scan_fwd_plan(int rows, int Cd, int T) {
    const int sms = pm_cuda_sm_count(), nch = (T + FT - 1) / FT, b128 = rows * ((Cd + 127) / 128);
    FwdPlan p;
#ifdef PM_SCAN_LAB_PLANS  // (lab builds only) PM_SCAN_FWD_PLAN=ch,minb,segments forces a plan: A/B of plans
    if (const char *e = getenv("PM_SCAN_FWD_PLAN")) {
        int ch, minb, ns;
        if (sscanf(e, "%d,%d,%d", &ch, &minb, &ns) == 3 && ns >= 1 && ns <= SCAN_SEG_MAX) {
            const int sl = (nch + ns - 1) / ns;
            return {ch, minb, sl * FT, (nch + sl - 1) / sl};
        }
    }
#endif
    if (SEG_POLICY == 0) {
        const int v4ch = b128 >= 120 ? 128 : 64;
        // Segments only pay where fewer than a quarter of the SMs would get a block (measured, docs/perf.md v8:
        // at B8 D1536 the summary pass cost more than the 36 idle SMs were worth; at B1 D1536 L16K 3.9x faster).
        // Without segments (v18): the block width that puts the fewest channels on the busiest SM, counting
        // ceil(blocks / SMs) blocks there; ties go to the wider block (more warps each), except that 64-wide ones
        // two an SM replace 128-wide ones (v50: scan_fwd_narrow). At B8 D1536 v4's 192
        // blocks of 64 gave 60 SMs two blocks (128 channels) and 72 SMs one; 384 blocks of 32 give each SM
        // three or two (96 channels at most).
        if (4 * b128 > sms) {
            FwdPlan best = {128, 1, nch * FT, 1};
            long best_load = (long)((b128 + sms - 1) / sms) * 128;
            for (int ch = 64; ch >= 32; ch /= 2) {
                const int nb = rows * ((Cd + ch - 1) / ch);
                const long load = (long)((nb + sms - 1) / sms) * ch;
                // (64-wide blocks held to two an SM, 128 registers, wherever 64 is chosen: they measured faster
                // than the one-an-SM kernel at every shape tried, by 12-14% where 64-wide blocks make more than a
                // wave, B16·D1536·L1024, B8·D3072, B8·D5120: call164)
                if (load < best_load)
                    best_load = load, best = {ch, ch == 64 && scan_fwd_narrow() ? 2 : 1, nch * FT, 1};
                else if (ch == 64 && load == best_load && best.ch == 128 && scan_fwd_narrow())  // v50
                    best = {64, 2, nch * FT, 1};
            }
            return best;
        }
        const int v4blk = v4ch == 128 ? b128 : rows * ((Cd + 63) / 64), v4slots = v4ch == 128 ? sms : 2 * sms;
        float best = (float)((v4blk + v4slots - 1) / v4slots) * nch;
        p = {v4ch, 1, nch * FT, 1};
        for (int S = 2; S <= SCAN_SEG_MAX && S <= nch / SCAN_SEG_MIN_CHUNKS; S++) {
            const int sl = (nch + S - 1) / S, ns = (nch + sl - 1) / sl;
            const float cost = (1.f + SEG_R * (ns - 1) / ns) * (float)((b128 * ns + 2 * sms - 1) / (2 * sms)) * sl * SEG_K2;
            if (cost < best) best = cost, p = {128, 2, sl * FT, ns};
        }
        return p;
    }
    p.minb = SEG_POLICY == 1 ? 2 : 1;
    p.ch = 128;
    p.nseg = scan_pick_seg(rows, (Cd + 127) / 128, T, p.minb, &p.SL);
    if (b128 * p.nseg < 120) {  // too few blocks even so: 64-wide blocks (two per SM at v4's registers)
        p.ch = 64, p.minb = 1;
        p.nseg = scan_pick_seg(rows, (Cd + 63) / 64, T, 2, &p.SL);
    }
    return p;
}

// Plan of the backward main pass (v10, v14): block width, chunks (SCAN_K tokens) per time segment, segments.
// v9's plan (no segments) where 128-wide blocks are chosen (every SM or nearly gets one); else 64-wide blocks
// (two per SM) and the segment count with the least cost in chunk-steps of the busiest SM:
// waves of blocks times chunks per segment, times 1 + BSEG_R (nseg-1)/nseg for the summary pass. BSEG_R =
// the summary walk's cost per chunk over the main pass's (a guess: ~1/8 of the instructions, but the same
// tile loads and cooperative pass). (v10 considered segments only where fewer than a quarter of the SMs got a
// 128-wide block; v14 wherever 64-wide blocks are chosen.)
static constexpr float BSEG_R = 0.35f;
static constexpr int BSUMM_SUB_MAX = 4;  // most summary segments a backward segment (v77: scan_bsumm_sub)
static constexpr int BSEG_MIN_CHUNKS = 8;  // fewest chunks per backward segment
struct BwdPlan {
    int ch, SLK, nseg, bg;  // bg: threads per channel (4: v20's kernel, 32-wide blocks, no segments)
};
// v20's kernel where v18 would take 64-wide blocks (too few 128-wide ones for the SMs) and v20's 32-wide blocks
// make one wave of two or three per SM. Measured (docs/perf.md, v20/v21): at B8 D1536 (384 blocks on 132 SMs)
// its backward is 0.73 ms against 0.82 for v21's 2-thread kernel with 4 time segments (and 0.90 for v18). Where
// v18's kernel needs no segments (B8 D2048: 128-wide blocks) or v20 would need a second, mostly idle wave (B8
// D2048: 512 blocks on 396 slots: 1.58 ms fwd+bwd against 1.30 at v20) the 2-thread kernel stays.
// PM_SCAN_BWD4=0 turns it off, =2 forces it wherever one wave holds the blocks (A/B runs, the op tests); read
// each call (the op tests switch it to check both kernels against the CPU on any GPU).
static int scan_bwd4_env() {
    const char *e = getenv("PM_SCAN_BWD4");
    return e && e[0] == '0' ? 0 : e && e[0] == '2' ? 2 : 1;
}
static bool scan_use_bwd4(int rows, int Cd) {
    static int per_sm = -1;
    if (per_sm < 0) {
        const size_t smem = bwd4_smem(32);  // 41 KB (< 48 KB: no opt-in); registers hold it to 3 per SM
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan_bwd4_kernel<32, true>, 32 * BG4, smem) !=
            cudaSuccess) {
            cudaGetLastError();  // (clear it: the next launch check would report it)
            per_sm = 0;
        }
    }
    const int env = scan_bwd4_env();
    const int sms = pm_cuda_sm_count(), blocks = rows * ((Cd + 31) / 32);
    if (env == 2) return per_sm >= 1 && blocks <= per_sm * sms;  // (lab: wherever one wave holds the blocks)
    // At least 15/8 blocks an SM: the busiest SMs hold two. At 256 blocks on 132 SMs, B2·D4096·L8192 and
    // B4·D2048·L4096, it measured -2.4% and -2.9% fwd+bwd against the 2-thread kernel's two time segments, which the
    // rule's earlier bound of 2 blocks an SM left there; at 128 blocks, one an SM, +37% (call159). But not where the
    // 2-thread kernel's 64-wide blocks make one wave with at most 11/8 of them an SM: only a few SMs then hold two,
    // and it measured faster, by 8.4% at 144 of them (B6·D1536), 2.8-3.1% at 160 (B2·D5120, B5·D2048), 1.6% at 168
    // (B7·D1536), slower by 7.5% at 192 (B8·D1536, B3·D4096, B6·D2048) (call162).
    const int nb64 = rows * ((Cd + 63) / 64);
    const bool two_thread_one_wave = nb64 >= sms && 8 * nb64 <= 11 * sms;
    return env && !two_thread_one_wave && per_sm >= 2 && scan_pick_ch(rows, Cd) == 64 && 8 * blocks >= 15 * sms &&
           blocks <= per_sm * sms;
}
// v80: the 4-thread plan's 96-wide warp-specialized blocks where they make one wave (B8·D1536: 128 of them), in
// builds with sm_90a code (the plan, like v76's, asks whether the kernel exists; PM_SCAN_BWD_WS=0 then runs its
// staged twin, scan_bwd4_kernel<96>, which gives the same bits). PM_SCAN_BWD4_WS=0 (read each call; A/B runs)
// keeps the 32-wide staged blocks three an SM.
static bool scan_bwd4_ws_plan(int rows, int Cd) {
    const char *e = getenv("PM_SCAN_BWD4_WS");
    return !(e && e[0] == '0') && scan_bwd_ws_avail() && b4ws_smem() <= (size_t)pm_cuda_device()->smem_block &&
           (long)rows * ((Cd + B4WS_CH - 1) / B4WS_CH) <= pm_cuda_sm_count();
}
// The 2-thread kernel's plan at block width ch, nb blocks of it, `slots` of them at once on the GPU: no segments,
// or the segment count with the least cost (see scan_bwd_plan).
static BwdPlan bwd_pick_segments(int ch, int nb, int slots, int nch, float *cost_out) {  // (*cost_out: its cost)
    float best = (float)((nb + slots - 1) / slots) * nch;
    BwdPlan p = {ch, nch, 1, 2};
    for (int S = 2; S <= SCAN_SEG_MAX && S <= nch / BSEG_MIN_CHUNKS; S++) {
        const int slk = (nch + S - 1) / S, ns = (nch + slk - 1) / slk;
        const float cost = (1.f + BSEG_R * (ns - 1) / ns) * (float)((nb * ns + slots - 1) / slots) * slk;
        if (cost < best) best = cost, p = {ch, slk, ns, 2};
    }
    *cost_out = best;
    return p;
}
// v76: where 128-wide blocks would fill at most half the SMs, the warp-specialized backward (sm_90a) cuts each
// row into as many time segments as one wave of them holds (at least BSEG_MIN_CHUNKS chunks each), after a summary
// pass in 64-wide blocks, if the segments' blocks then fill at least 7/8 of the SMs. Lab fwd+bwd against the plans
// before it (call212): B2·D4096·L8192 -5.8% (two segments, 128 blocks), B4·D2048 -4.5%, B1·D2048 -5.3%,
// B2·D2048·L4096 -6.7%, B1·D1536·L16384 -3.2% (132 blocks); at B4·D1536 (96 blocks) +13%, hence the fill rule.
// v77 (scan_bsumm_sub): the summaries over half segments, twice the blocks; against v76 (call213) B2·D4096·L8192
// 2.387 -> 2.239 ms fwd+bwd (-6.2%; 2.535 before v76), B4·D2048 -7.4%, B2·D2048·L4096 -6.9%, B1·D2048 -2.7%;
// over quarters where they fit, -0.6 to -1.5% more (call214).
// PM_SCAN_BWD_WS_SEG=0 (read each call) keeps the plans before it.
static bool scan_bwd_ws_seg_plan(int rows, int Cd, int nch, BwdPlan *p) {
    const char *e = getenv("PM_SCAN_BWD_WS_SEG");
    if ((e && e[0] == '0') || !scan_bwd_ws_avail()) return false;
    const int b128 = rows * ((Cd + 127) / 128);
    int S = pm_cuda_sm_count() / b128;
    if (S > SCAN_SEG_MAX) S = SCAN_SEG_MAX;
    if (S > nch / BSEG_MIN_CHUNKS) S = nch / BSEG_MIN_CHUNKS;
    if (S < 2 || 8 * b128 * S < 7 * pm_cuda_sm_count()) return false;
    // (a multiple of the most summary segments a segment that fit the workspace: what scan_bsumm_sub takes)
    int r = BSUMM_SUB_MAX;
    while (r > 1 && r * S > SCAN_SEG_MAX) r /= 2;
    const int slk = ((nch + S - 1) / S + r - 1) / r * r;
    *p = {128, slk, (nch + slk - 1) / slk, 2};
    return true;
}
static BwdPlan scan_bwd_plan(int rows, int Cd, int T) {
    const int sms = pm_cuda_sm_count(), nch = (T + SCAN_K - 1) / SCAN_K;
    const int smem_block = pm_cuda_device()->smem_block;
#ifdef PM_SCAN_LAB_PLANS  // (lab builds only) PM_SCAN_BWD_PLAN=ch,segments: the 2-thread kernel at that plan
    if (const char *e = getenv("PM_SCAN_BWD_PLAN")) {
        int ch, ns;
        if (sscanf(e, "%d,%d", &ch, &ns) == 2 && (ch == 64 || ch == 128) && ns >= 1 && ns <= SCAN_SEG_MAX) {
            const int slk = (nch + ns - 1) / ns;
            return {ch, slk, (nch + slk - 1) / slk, 2};
        }
    }
#endif
    BwdPlan ws;  // (PM_SCAN_BWD4=2, the op tests' forced 4-thread kernel, keeps the plans before v76)
    if (scan_bwd4_env() != 2 && scan_bwd_ws_seg_plan(rows, Cd, nch, &ws)) return ws;
    if (scan_use_bwd4(rows, Cd)) return {scan_bwd4_ws_plan(rows, Cd) ? B4WS_CH : 32, nch, 1, 4};
    // 128-wide blocks need bwd_smem(128) of shared memory (104 KB; 212 KB when this check was written, before the
    // chunk's states moved to registers): a GPU with less per block takes 64-wide ones. One a SM (registers); where
    // they are more than the SMs, the last wave runs part full, and time segments may pay (the 790m and 2.8b widths:
    // B4·D5120 makes 160 blocks on 132 SMs). With segments, 64-wide blocks two an SM at no higher cost measured
    // faster: B8·D3072 -3.4%, B4·D5120 -1.5% (call167, forced plans); against the build before, fwd+bwd B8·D3072
    // 1.842 -> 1.773 ms, B4·D5120 1.621 -> 1.589, B8·D5120 3.003 -> 2.911, the other shapes unchanged (call168)
    BwdPlan p128 = {0, 0, 0, 0};
    float c128 = 0.f, c64;
    if (scan_pick_ch(rows, Cd) == 128 && bwd_smem(128) <= (size_t)smem_block) {
        p128 = bwd_pick_segments(128, rows * ((Cd + 127) / 128), sms, nch, &c128);
        if (p128.nseg == 1) return p128;
    }
    // 64-wide blocks per SM: two on the H200 (held there by registers since v21: 255 per thread, 128 threads)
    static int per_sm = 0;
    if (!per_sm) per_sm = scan_blocks_per_sm((const void *)scan_bwd_staged_kernel<64, 1, true>, 64 * BG, bwd_smem(64));
    const BwdPlan p64 = bwd_pick_segments(64, rows * ((Cd + 63) / 64), per_sm * sms, nch, &c64);
    return p128.ch && c128 < c64 ? p128 : p64;
}

// Workspace layout, sized for the narrowest blocks and the most segments so any path fits: checkpoints
// (rows, nchunk, N, Cd) f32 | dB/dC partials (M, ceil(Cd/64), 2N) f32 | parameter partials (rows * bwd
// segments, 2 + N, Cd) f32 | segment summaries (rows, SCAN_SEG_MAX - 1, 2, Cd, N) f32 (the checkpoint pass's,
// then the backward main pass's: the main pass's summary kernel runs after the checkpoint pass is done).
static void scan_ws_layout(int M, int T, int Cd, int N, size_t *bc_off, size_t *par_off, size_t *seg_off,
                           size_t *total) {
    const BwdPlan bp = scan_bwd_plan(M / T, Cd, T);
    // (4-thread plans: room for the 32-wide blocks' partials whichever width runs, as PM_SCAN_BWD4_WS may change)
    const int narrowest = bp.bg == 4 ? 32 : bp.ch;
    int rows = M / T, nchunk = (T + SCAN_K - 1) / SCAN_K, nblk_max = (Cd + narrowest - 1) / narrowest;
    *bc_off = align256((size_t)rows * nchunk * N * Cd * 4);
    *par_off = *bc_off + align256((size_t)M * nblk_max * 2 * N * 4);
    *seg_off = *par_off + align256(cuda_scan_param_part_bytes(M, T, Cd, N));
    *total = *seg_off + align256((size_t)rows * (SCAN_SEG_MAX - 1) * 2 * Cd * N * 4);
}
size_t cuda_scan_workspace_bytes(int M, int T, int Cd, int N) {
    size_t bc_off, par_off, seg_off, total;
    scan_ws_layout(M, T, Cd, N, &bc_off, &par_off, &seg_off, &total);
    return total;
}

// The forward has no workspace in the interface; its segment summaries go to a buffer of this file, grown when
// a bigger one is needed (cudaFree/cudaMalloc synchronize the device, so no queued kernel still uses the old
// one). All of the backend's work is on one stream, so one buffer is enough.
static float *scan_fwd_summ(size_t bytes) {
    static float *buf = NULL;
    static size_t have = 0;
    if (bytes > have) {
        if (buf) cudaFree(buf);
        if (cudaMalloc((void **)&buf, bytes) != cudaSuccess) scan_die("cannot allocate %zu bytes of segment summaries", bytes);
        have = bytes;
    }
    return buf;
}

// Segment summaries (when there is more than one segment), then the forward (ckpt_pass = false) or the
// checkpoint pass over all segments.
template <int CH, int MINB>
static void scan_fwd_staged_launch(bool ckpt_pass, __nv_bfloat16 *out, float *ckpt, float *summ,
                                   const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                                   const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                                   const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int rows,
                                   int T, int Cd, int nck, int SL, int nseg, bool qp, cudaStream_t stream,
                                   ScanInit init) {
    static int optin_f[2] = {0, 0}, optin_fc[2] = {0, 0}, optin_c = 0, optin_s = 0;
    const int nblk = (Cd + CH - 1) / CH;
    const size_t smem = fwd_smem(CH, MODE_CKPT), smem_f = fwd_smem(CH, MODE_FWD);
    if (nseg > 1) {
        scan_smem_optin((const void *)scan_fwd_staged_kernel<CH, MODE_SUMM, MINB>, smem, &optin_s, "scan_summ_staged_kernel");
        scan_fwd_staged_kernel<CH, MODE_SUMM, MINB><<<dim3(nblk, rows, nseg - 1), CH * FG, smem, stream>>>(
            NULL, NULL, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T, Cd, nck, SL, nseg, ScanInit{});
        scan_check_launch("scan_summ_staged_kernel");
    }
    dim3 grid(nblk, rows, nseg);
    if (ckpt_pass) {
        scan_smem_optin((const void *)scan_fwd_staged_kernel<CH, MODE_CKPT, MINB>, smem, &optin_c, "scan_ckpt_staged_kernel");
        scan_fwd_staged_kernel<CH, MODE_CKPT, MINB><<<grid, CH * FG, smem, stream>>>(
            NULL, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T, Cd, nck, SL, nseg, init);
        scan_check_launch("scan_ckpt_staged_kernel");
    } else if (ckpt) {  // the forward, leaving the backward its checkpoints
        auto kern = qp ? scan_fwd_staged_kernel<CH, MODE_FWD_CKPT, MINB, true> : scan_fwd_staged_kernel<CH, MODE_FWD_CKPT, MINB>;
        scan_smem_optin((const void *)kern, smem_f, &optin_fc[qp], "scan_fwd_ckpt_staged_kernel");
        kern<<<grid, CH * FG, smem_f, stream>>>(out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos,
                                                T, Cd, nck, SL, nseg, init);
        scan_check_launch("scan_fwd_ckpt_staged_kernel");
    } else {
        auto kern = qp ? scan_fwd_staged_kernel<CH, MODE_FWD, MINB, true> : scan_fwd_staged_kernel<CH, MODE_FWD, MINB>;
        scan_smem_optin((const void *)kern, smem_f, &optin_f[qp], "scan_fwd_staged_kernel");
        kern<<<grid, CH * FG, smem_f, stream>>>(out, NULL, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos,
                                                T, Cd, 0, SL, nseg, init);
        scan_check_launch("scan_fwd_staged_kernel");
    }
}

// Launches of the warp-specialized kernels so far, for the op tests (backend.h): the staged kernels form the same
// bits, so a comparison of the two would pass unnoticed if the warp-specialized ones never ran.
static int g_fwd_ws_launches, g_bwd_ws_launches, g_fwd_yh_launches;
extern "C" int backend_cuda_scan_ws_launches(int which) {
    return which == 2 ? g_fwd_yh_launches : which ? g_bwd_ws_launches : g_fwd_ws_launches;
}

// v90: y's halves added by the producers (YH) where the 2-thread forward's 64-wide blocks are one an SM, so that
// each scheduler holds one walker warp: there the walker's butterfly is exposed (lab, call272: B2·D4096·L8192 fwd
// 0.511-0.516 -> 0.488-0.497 ms). Where two blocks share an SM (B8·D2048, B4·D4096) it measured +1% and equal, so
// not there; other widths were not measured, so their launches never ask. PM_SCAN_FWD_YH=0 (read each call) keeps
// the butterfly everywhere (A/B runs).
static bool scan_fwd_halves(int rows, int Cd) {
    const char *e = getenv("PM_SCAN_FWD_YH");
    return !(e && e[0] == '0') && (long)rows * ((Cd + 63) / 64) <= pm_cuda_sm_count();
}
// The warp-specialized forward's instance for a launch: checkpoints or not, quad_dot's order, y's halves
template <int CH, int PW, int MINB, int WG, bool YH>
static auto scan_fwd_ws_instance(bool ckpt, bool qp) {
    return ckpt ? (qp ? scan_fwd_ws_kernel<CH, MODE_FWD_CKPT, PW, MINB, WG, true, YH>
                      : scan_fwd_ws_kernel<CH, MODE_FWD_CKPT, PW, MINB, WG, false, YH>)
                : (qp ? scan_fwd_ws_kernel<CH, MODE_FWD, PW, MINB, WG, true, YH>
                      : scan_fwd_ws_kernel<CH, MODE_FWD, PW, MINB, WG, false, YH>);
}
// v65's forward (FWD_WS): MODE_FWD_CKPT where the backward is left its checkpoints; the 64-wide 2-thread blocks
// with y's halves where scan_fwd_halves says (v90)
template <int CH, int PW, int MINB, int WG>
static void scan_fwd_ws_launch(__nv_bfloat16 *out, float *ckpt, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                               const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm,
                               const __nv_bfloat16 *Cm, int ldbc, const float *D, const __nv_bfloat16 *z, int ldz,
                               const int32_t *pos, int rows, int T, int Cd, int nck, bool qp, cudaStream_t stream,
                               ScanInit init) {
    constexpr bool CAN_YH = CH == 64 && WG == 2;
    const bool yh = CAN_YH && scan_fwd_halves(rows, Cd);
    static int optin[2][2][2];  // [yh][qp][ckpt]
    const size_t smem = ws_smem(CH, 32 * PW, yh);
    auto kern = yh ? scan_fwd_ws_instance<CH, PW, MINB, WG, CAN_YH>(ckpt != NULL, qp)
                   : scan_fwd_ws_instance<CH, PW, MINB, WG, false>(ckpt != NULL, qp);
    scan_smem_optin((const void *)kern, smem, &optin[yh][qp][ckpt != NULL], "scan_fwd_ws_kernel");
    kern<<<dim3((Cd + CH - 1) / CH, rows), CH * WG + 32 * PW, smem, stream>>>(out, ckpt, u, dpre, dt_bias, A_log, Bm,
                                                                              Cm, ldbc, D, z, ldz, pos, T, Cd, nck,
                                                                              init);
    scan_check_launch("scan_fwd_ws_kernel");
    g_fwd_ws_launches++;
    g_fwd_yh_launches += yh;
}

#if PM_SCAN_WS_32
// Whether rows x Cd makes one wave of 32-wide warp-specialized blocks (three an SM on the H200, held by their
// 57 KB of shared memory each; counted by the occupancy API, so other GPUs get their own count)
static bool scan_ws32_one_wave(int rows, int Cd) {
    static int per_sm = 0;
    if (!per_sm)
        per_sm = scan_blocks_per_sm(
            (const void *)scan_fwd_ws_kernel<32, MODE_FWD_CKPT, PM_SCAN_WS_PW32, 3, PM_SCAN_WS_WG>,
            32 * PM_SCAN_WS_WG + 32 * PM_SCAN_WS_PW32, ws_smem(32, 32 * PM_SCAN_WS_PW32));
    return (long)rows * ((Cd + 31) / 32) <= (long)per_sm * pm_cuda_sm_count();
}
#else
static bool scan_ws32_one_wave(int, int) { return false; }
#endif

// v81: where 96-wide blocks (12 walker warps, 4 threads a channel, and 6 producer warps; 152 KB of shared memory,
// one an SM) make one wave, they take the 32-wide plans (B8·D1536, the 130m width: 128 blocks against 384 of 32
// three an SM, the same 96 channels on the busiest SM). Lab fwd at B8·D1536 0.219-0.220 -> 0.206-0.207 ms, B6·D2048
// 0.219-0.221 -> 0.205-0.207 (call240). Their walkers sum y in quad_dot's order and (q0 + q1) + (q2 + q3), as every
// kernel does: the same bits as the staged forward. PM_SCAN_FWD_WS96=0 (read each call) keeps the 32-wide blocks.
static bool scan_ws96_one_wave(int rows, int Cd) {
    const char *e = getenv("PM_SCAN_FWD_WS96");
    return !(e && e[0] == '0') && ws_smem(96, 32 * 6) <= (size_t)pm_cuda_device()->smem_block &&
           (long)rows * ((Cd + 95) / 96) <= pm_cuda_sm_count();
}
// quad_dot's order for a shape (v78): the 4-thread backward's pairs where that is the backward's plan, a chain
// elsewhere; the forward asks, the backward kernels hold their plan's order
static bool scan_quad_pairs(int rows, int Cd, int T) { return scan_bwd_plan(rows, Cd, T).bg == 4; }
static void scan_fwd_dispatch(const FwdPlan &pl, bool ckpt_pass, __nv_bfloat16 *out, float *ckpt, float *summ,
                              const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                              const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                              const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int rows, int T,
                              int Cd, int nck, cudaStream_t stream, ScanInit init) {
    // The warp-specialized forward (v65-v68, scan_fwd_ws_kernel) for every 64-wide plan without time segments (its
    // producers' 4-byte copies of B/C need them 4-byte aligned). Measured against the staged forward (lab, call174,
    // call175): v65 fwd -7.6 to -9.8% at B8 D2048, B4 D4096, B8 D3072, B8 D5120, B16 D1536 L1024; end to end (call175,
    // call176) 370m +0.15/+0.39%, 1.4b +0.47%, 790m -0.06/+0.45%, 130m keeping activations -0.08%. v65 was 9% slower
    // where one 64-wide block is all an SM gets (B2 D4096 L8192, call173), so it ran only from 96 channels an SM; v68
    // is faster there too: B2 D4096 L8192 0.608 -> 0.524 ms, B4 D2048 0.159 -> 0.137, B4 D1536 0.158 -> 0.137
    // (call183), so the threshold is gone. With 128-wide blocks (B4 D5120, the 2.8b width) v65 was no faster in the lab
    // (0.373-0.376 ms against 0.375-0.378) and 2.8b -0.15/-0.76% end to end (with the tie64 backward plan): the staged
    // kernel stays there (PM_SCAN_WS_128=1 takes the warp-specialized one, lab). 32-wide (v70): three blocks an SM (57
    // KB of shared memory each), where they fit one wave: B8 D1536 (the 130m width, 384 blocks) 0.225-0.227 ->
    // 0.217-0.219 ms; at B4 D5120 (640 blocks, two waves at three an SM against 1.2 at the staged kernel's four)
    // 0.374-0.379 -> 0.383-0.385 (call184), so not there. PM_SCAN_FWD_WS=0 in the environment (read each call) runs the
    // staged forward instead.
    const bool qp = scan_quad_pairs(rows, Cd, T);
    const char *ws_env = getenv("PM_SCAN_FWD_WS");
    const bool ws_on = FWD_WS && !(ws_env && ws_env[0] == '0');
    if (ws_on && !ckpt_pass && pl.nseg == 1 &&
        (pl.ch == 64 || (PM_SCAN_WS_128 && pl.ch == 128) ||
         (PM_SCAN_WS_32 && pl.ch == 32 && scan_ws32_one_wave(rows, Cd))) &&
        ldbc % 2 == 0 && !((uintptr_t)Bm & 3) && !((uintptr_t)Cm & 3)) {
#if PM_SCAN_WS_128  // (only built when asked: two more instances of a large kernel)
        if (pl.ch == 128)
            scan_fwd_ws_launch<128, PM_SCAN_WS_PW128, 1, PM_SCAN_WS_WG>(out, ckpt, u, dpre, dt_bias, A_log, Bm, Cm,
                                                                        ldbc, D, z, ldz, pos, rows, T, Cd, nck, qp, stream, init);
        else
#endif
#if PM_SCAN_WS_96
        if (pl.ch == 32 && scan_ws96_one_wave(rows, Cd))
            scan_fwd_ws_launch<96, 6, 1, 4>(out, ckpt, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, rows, T, Cd,
                                            nck, qp, stream, init);
        else
#endif
#if PM_SCAN_WS_32
        if (pl.ch == 32)
            scan_fwd_ws_launch<32, PM_SCAN_WS_PW32, 3, PM_SCAN_WS_WG>(out, ckpt, u, dpre, dt_bias, A_log, Bm, Cm, ldbc,
                                                                      D, z, ldz, pos, rows, T, Cd, nck, qp, stream, init);
        else
#endif
        if (pl.minb == 2)
            scan_fwd_ws_launch<64, PM_SCAN_WS_PW64, 2, PM_SCAN_WS_WG>(out, ckpt, u, dpre, dt_bias, A_log, Bm, Cm, ldbc,
                                                                      D, z, ldz, pos, rows, T, Cd, nck, qp, stream, init);
        else
            scan_fwd_ws_launch<64, PM_SCAN_WS_PW64, 1, PM_SCAN_WS_WG>(out, ckpt, u, dpre, dt_bias, A_log, Bm, Cm, ldbc,
                                                                      D, z, ldz, pos, rows, T, Cd, nck, qp, stream, init);
        return;
    }
    if (pl.ch == 32)  // four blocks of 4 warps per SM (<= 128 registers)
        scan_fwd_staged_launch<32, 4>(ckpt_pass, out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                      pos, rows, T, Cd, nck, pl.SL, pl.nseg, qp, stream, init);
    else if (pl.ch == 64 && pl.minb == 2)  // (v50: two an SM, <= 128 registers)
        scan_fwd_staged_launch<64, 2>(ckpt_pass, out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                      pos, rows, T, Cd, nck, pl.SL, pl.nseg, qp, stream, init);
    else if (pl.ch == 64)
        scan_fwd_staged_launch<64, 1>(ckpt_pass, out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                      pos, rows, T, Cd, nck, pl.SL, pl.nseg, qp, stream, init);
    else if (pl.minb == 2)
        scan_fwd_staged_launch<128, 2>(ckpt_pass, out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                       pos, rows, T, Cd, nck, pl.SL, pl.nseg, qp, stream, init);
    else
        scan_fwd_staged_launch<128, 1>(ckpt_pass, out, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                       pos, rows, T, Cd, nck, pl.SL, pl.nseg, qp, stream, init);
}

// The backward's segment summaries into bsum (rows, nsum - 1, 2, Cd, N): scan_bwd_staged_kernel<CH, 2, false> over
// the summary segments of SLK / sub chunks (nsum of them; the first sub are no later segment's). Each channel's are
// its own thread's work, so any block width gives the same bits.
template <int CH>
static void scan_bsumm_launch(const __nv_bfloat16 *dout, const __nv_bfloat16 *dpre, const float *dt_bias,
                              const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                              const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int rows, int T,
                              int Cd, int nck, int SLK, int sub, float *bsum, cudaStream_t stream) {
    static int optin = 0;
    const int sl = SLK / sub, nsum = bsumm_count(nck, SLK, sub);
    scan_smem_optin((const void *)scan_bwd_staged_kernel<CH, 2, false>, bwd_smem(CH), &optin, "scan_bsumm_staged_kernel");
    scan_bwd_staged_kernel<CH, 2, false><<<dim3((Cd + CH - 1) / CH, rows, nsum - sub), CH * BG, bwd_smem(CH), stream>>>(
        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, dout, nullptr, dpre, dt_bias, A_log, Bm, Cm,
        ldbc, D, z, ldz, pos, T, Cd, nck, sl, nsum, bsum, sub);
    scan_check_launch("scan_bsumm_staged_kernel");
}
// v77: summary segments per main segment where the plan is 128-wide with segments (both kernels, so the staged one
// gives the warp-specialized one's bits): the most of 4 and 2 that divides SLK and whose summaries fit the
// workspace's SCAN_SEG_MAX - 1, else 1 (PM_SCAN_BSUMM_SUB=r tries r alone: lab). Quarters against halves (call214):
// B2·D4096·L8192 -1.5%, B4·D2048 -0.9%, B2·D2048·L4096 -0.6%; eighths no better where they fit.
static int scan_bsumm_sub(int nck, int SLK) {
    const char *e = getenv("PM_SCAN_BSUMM_SUB");
    for (int r = e ? atoi(e) : BSUMM_SUB_MAX; r >= 2; r /= 2) {
        if (SLK % r == 0 && bsumm_count(nck, SLK, r) <= SCAN_SEG_MAX) return r;
        if (e) break;
    }
    return 1;
}
// The backward's segment summaries (when there is more than one segment), then the main pass.
template <int CH, bool RE>
static void scan_bwd_staged_launch(__nv_bfloat16 *du, __nv_bfloat16 *ddpre, __nv_bfloat16 *dz, __nv_bfloat16 *y_out,
                                   float *bc_part, float *par_part, const float *ckpt, const __nv_bfloat16 *dout,
                                   const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                                   const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                                   const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int rows,
                                   int T, int Cd, int nck, int SLK, int nseg, float *bsum, cudaStream_t stream) {
    static int optin[2][2];  // [warp-specialized][segments]: scan_smem_optin's flags, one a kernel
    const int nblk = (Cd + CH - 1) / CH;
    const bool ws = CH == BWS_CH && scan_bwd_ws_ok();  // v72, v73; v76: also with time segments
    const int sub = CH == 128 && nseg > 1 ? scan_bsumm_sub(nck, SLK) : 1;
    // (the warp-specialized backward's summaries in 64-wide blocks: twice the blocks of 128-wide ones, which measured
    // 6% slower in all, call211)
    if (nseg > 1)
        (ws ? scan_bsumm_launch<64> : scan_bsumm_launch<CH>)(dout, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos,
                                                            rows, T, Cd, nck, SLK, sub, bsum, stream);
    // (without segments, SMODE 0, the kernels read nothing of SLK, nseg, bsum and sub)
    if (ws) {
        auto kern = nseg > 1 ? scan_bwd_ws_kernel<1, RE> : scan_bwd_ws_kernel<0, RE>;
        scan_smem_optin((const void *)kern, bws_smem(), &optin[1][nseg > 1], "scan_bwd_ws_kernel");
        kern<<<dim3(nblk, rows, nseg), CH * BG + CH, bws_smem(), stream>>>(
            du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T,
            Cd, nck, SLK, nseg, bsum, sub);
        g_bwd_ws_launches++;
    } else {  // v9's kernel, v10's segments
        auto kern = nseg > 1 ? scan_bwd_staged_kernel<CH, 1, RE> : scan_bwd_staged_kernel<CH, 0, RE>;
        scan_smem_optin((const void *)kern, bwd_smem(CH), &optin[0][nseg > 1], "scan_bwd_staged_kernel");
        kern<<<dim3(nblk, rows, nseg), CH * BG, bwd_smem(CH), stream>>>(
            du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T,
            Cd, nck, SLK, nseg, bsum, sub);
    }
    scan_check_launch(ws ? "scan_bwd_ws_kernel" : "scan_bwd_staged_kernel");
}

size_t cuda_scan_states_bytes(int M, int T, int Cd, int N) {
    return (size_t)(M / T) * ((T + SCAN_K - 1) / SCAN_K) * Cd * N * 4;
}

// (the entry points call these; static so the lab's frozen copies, each in its own namespace, do not collide)
static void scan_fwd_impl(__nv_bfloat16 *out, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,
                          const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm,
                          int ldbc, const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T,
                          int Cd, int N, float *states, cudaStream_t stream, ScanInit init) {
    scan_check_shape(M, T, Cd, N);
    int rows = M / T;
    if (scan_staged_ok(u, dpre, z, ldz, NULL, Cd, out, NULL, NULL)) {
        const FwdPlan pl = scan_fwd_plan(rows, Cd, T);
        float *summ = pl.nseg > 1 ? scan_fwd_summ((size_t)rows * (pl.nseg - 1) * 2 * Cd * SCAN_N * 4) : NULL;
        scan_fwd_dispatch(pl, false, out, states, summ, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, rows,
                          T, Cd, (T + SCAN_K - 1) / SCAN_K, stream, init);
    } else {
        dim3 grid((Cd + SCAN_THREADS - 1) / SCAN_THREADS, rows);
        scan_fwd_generic_kernel<<<grid, SCAN_THREADS, 0, stream>>>(out, states, u, dpre, dt_bias, A_log, Bm, Cm, ldbc,
                                                                   D, z, ldz, pos, T, Cd, init);
        scan_check_launch("scan_fwd_generic_kernel");
    }
}

void cuda_scan_fwd_ex(__nv_bfloat16 *out, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                      const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *D,
                      const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                      float *states, cudaStream_t stream, const int32_t *carry_first, const float *carry_h0) {
    scan_fwd_impl(out, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, M, T, Cd, N, states, stream,
                  ScanInit{carry_first, carry_h0});
}

static int scan_bwd_impl(__nv_bfloat16 *du, __nv_bfloat16 *ddpre, __nv_bfloat16 *dB, __nv_bfloat16 *dC,
                          __nv_bfloat16 *dz, float *ddt_bias, float *dA_log, float *dD, const __nv_bfloat16 *dout,
                          const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias,
                          const float *A_log, const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc,
                          const float *D, const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T, int Cd,
                          int N, const float *states, __nv_bfloat16 *y_out, void *workspace, size_t workspace_bytes,
                          int deterministic, cudaStream_t stream, int add_params, float *par_out,
                          const int32_t *carry_first, const float *carry_h0) {
    (void)deterministic;  // always deterministic: no atomics are used
    scan_check_shape(M, T, Cd, N);
    size_t bc_off, par_off, seg_off, need;
    scan_ws_layout(M, T, Cd, N, &bc_off, &par_off, &seg_off, &need);
    if (workspace_bytes < need) scan_die("workspace of %zu bytes, %zu needed", workspace_bytes, need);
    int rows = M / T, nchunk = (T + SCAN_K - 1) / SCAN_K, nblk, par_rows = rows;
    float *ckpt = (float *)workspace;
    float *bc_part = (float *)((char *)workspace + bc_off);
    float *par_part = par_out ? par_out : (float *)((char *)workspace + par_off);
    float *summ = (float *)((char *)workspace + seg_off);

    if (scan_staged_ok(u, dpre, z, ldz, dout, Cd, du, ddpre, dz) && (y_out == NULL || pm_is_aligned(y_out, 16))) {
        // the staged checkpoints are (rows, nchunk, Cd, N): each thread's states are contiguous. When the forward
        // left them (states), the checkpoint pass is skipped (v12).
        if (states)
            ckpt = (float *)states;  // (the forward's, from the same first states)
        else
            scan_fwd_dispatch(scan_fwd_plan(rows, Cd, T), true, NULL, ckpt, summ, u, dpre, dt_bias, A_log, Bm, Cm,
                              ldbc, D, z, ldz, pos, rows, T, Cd, nchunk, stream, ScanInit{carry_first, carry_h0});
        // the main pass: its own block width and time segments (v10)
        const BwdPlan bp = scan_bwd_plan(rows, Cd, T);
        par_rows = rows * bp.nseg;
        // (kernels with RE = true write the forward's output into y_out; the others leave it alone)
        const bool re = y_out != NULL;
        if (bp.bg == 4 && bp.ch == B4WS_CH && scan_bwd_ws_ok()) {  // v80
            nblk = (Cd + B4WS_CH - 1) / B4WS_CH;
            static int optin4w[2] = {0, 0};
            auto kern = re ? scan_bwd4_ws_kernel<true> : scan_bwd4_ws_kernel<false>;
            scan_smem_optin((const void *)kern, b4ws_smem(), &optin4w[re], "scan_bwd4_ws_kernel");
            kern<<<dim3(nblk, rows), B4WS_CH * BG4 + 128, b4ws_smem(), stream>>>(
                du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos,
                T, Cd, nchunk);
            scan_check_launch("scan_bwd4_ws_kernel");
            g_bwd_ws_launches++;
        } else if (bp.bg == 4 && bp.ch == B4WS_CH) {  // v80's staged twin (PM_SCAN_BWD_WS=0): the same bits
            nblk = (Cd + B4WS_CH - 1) / B4WS_CH;
            static int optin4t[2] = {0, 0};
            const size_t smem = bwd4_smem(B4WS_CH);
            auto kern = re ? scan_bwd4_kernel<B4WS_CH, true> : scan_bwd4_kernel<B4WS_CH, false>;
            scan_smem_optin((const void *)kern, smem, &optin4t[re], "scan_bwd4_kernel");
            kern<<<dim3(nblk, rows), B4WS_CH * BG4, smem, stream>>>(du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout,
                                                                    u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                                                    pos, T, Cd, nchunk);
            scan_check_launch("scan_bwd4_kernel");
        } else if (bp.bg == 4) {
            nblk = (Cd + 31) / 32;
            static int optin4[2] = {0, 0};
            const size_t smem = bwd4_smem(32);
            auto kern = re ? scan_bwd4_kernel<32, true> : scan_bwd4_kernel<32, false>;
            scan_smem_optin((const void *)kern, smem, &optin4[re], "scan_bwd4_kernel");
            kern<<<dim3(nblk, rows), 32 * BG4, smem, stream>>>(du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u,
                                                              dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, T,
                                                              Cd, nchunk);
            scan_check_launch("scan_bwd4_kernel");
        } else {
            nblk = (Cd + bp.ch - 1) / bp.ch;
            auto launch = bp.ch == 128 ? (re ? scan_bwd_staged_launch<128, true> : scan_bwd_staged_launch<128, false>)
                                       : (re ? scan_bwd_staged_launch<64, true> : scan_bwd_staged_launch<64, false>);
            launch(du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                   pos, rows, T, Cd, nchunk, bp.SLK, bp.nseg, summ, stream);
        }
    } else {
        nblk = (Cd + SCAN_THREADS - 1) / SCAN_THREADS;
        dim3 grid(nblk, rows);
        scan_ckpt_generic_kernel<<<grid, SCAN_THREADS, 0, stream>>>(ckpt, u, dpre, dt_bias, A_log, Bm, ldbc, pos, T,
                                                                    Cd, nchunk, ScanInit{carry_first, carry_h0});
        scan_check_launch("scan_ckpt_generic_kernel");
        size_t smem = (size_t)(SCAN_K * SCAN_N * SCAN_THREADS + SCAN_K * (SCAN_THREADS / 32) * 2 * SCAN_N) * 4;
        static int optin = 0;
        scan_smem_optin((const void *)scan_bwd_generic_kernel, smem, &optin, "scan_bwd_generic_kernel");
        scan_bwd_generic_kernel<<<grid, SCAN_THREADS, smem, stream>>>(du, ddpre, dz, y_out, bc_part, par_part, ckpt, dout, u,
                                                                      dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz,
                                                                      pos, T, Cd, nchunk);
        scan_check_launch("scan_bwd_generic_kernel");
    }

    size_t nbc = (size_t)M * 2 * N;
    scan_bc_reduce_kernel<<<(unsigned)((nbc + 255) / 256), 256, 0, stream>>>(dB, dC, bc_part, ldbc, M, nblk);
    scan_check_launch("scan_bc_reduce_kernel");
    if (par_out) return par_rows;  // the caller reduces them (cuda_scan_param_job)
    pm_colsum_job(cuda_scan_param_job(ddt_bias, dA_log, dD, par_part, par_rows, Cd, N, add_params), stream);
    return par_rows;
}

// ddt_bias, dD (Cd) and dA_log (Cd, N) += the parameter partials' rows summed (= when add is 0): par_part is
// (rows, 2 + N, Cd) f32, row r's entry (j, c) the partial of ddt_bias (j = 0), dD (1) or dA_log[c, j - 2].
PmColsumJob cuda_scan_param_job(float *ddt_bias, float *dA_log, float *dD, const float *par_part, int rows, int Cd,
                                int N, int add) {
    return PmColsumJob{ddt_bias, dD, dA_log, par_part, rows, (2 + N) * Cd, Cd, N, add, PM_COLSUM_SCAN};
}
size_t cuda_scan_param_part_bytes(int M, int T, int Cd, int N) {
    return (size_t)(M / T) * scan_bwd_plan(M / T, Cd, T).nseg * (2 + N) * Cd * sizeof(float);
}

int cuda_scan_bwd_ex(__nv_bfloat16 *du, __nv_bfloat16 *ddpre, __nv_bfloat16 *dB, __nv_bfloat16 *dC,
                      __nv_bfloat16 *dz, float *ddt_bias, float *dA_log, float *dD, const __nv_bfloat16 *dout,
                      const __nv_bfloat16 *u, const __nv_bfloat16 *dpre, const float *dt_bias, const float *A_log,
                      const __nv_bfloat16 *Bm, const __nv_bfloat16 *Cm, int ldbc, const float *D,
                      const __nv_bfloat16 *z, int ldz, const int32_t *pos, int M, int T, int Cd, int N,
                      const float *states, __nv_bfloat16 *out, void *workspace, size_t workspace_bytes,
                      int deterministic, cudaStream_t stream, int add_params, float *par_out,
                      const int32_t *carry_first, const float *carry_h0) {
    return scan_bwd_impl(du, ddpre, dB, dC, dz, ddt_bias, dA_log, dD, dout, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D,
                         z, ldz, pos, M, T, Cd, N, states, out, workspace, workspace_bytes, deterministic, stream,
                         add_params, par_out, carry_first, carry_h0);
}
