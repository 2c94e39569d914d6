// skinny.cuh — persistent, pipelined GEMMs for a small inner dimension (lab; dev/kernels/skinny_lab.cu times them
// against cuBLASLt). Self-contained (CUDA runtime + cuda_bf16 only) so it could move into src/ as is.
//
//   op 1 (dt_proj forward):      C (M, N)  = A (M, k; row stride lda) @ B^T,  B stored (N, k; ldb) row-major
//   op 2 (x_proj input gradient): C (M, N) += A (M, k; lda) @ B,            B stored (k, N; ldb) row-major
// bf16 in, fp32 accumulation, bf16 out; op 2 reads C, adds the fp32 product and rounds once (cuBLAS's beta = 1).
//
// Why a kernel of our own: with k <= 160 these GEMMs are a write (op 1) or read + write (op 2) of the bf16 C with a
// little arithmetic on the side; cuBLASLt's kernels, built around a long inner loop, load a tile, run a few mma
// steps, store, and leave the SM's memory pipe idle in between. docs/perf.md ("Our own GEMM for the small inner
// dimensions") tried one tile per block and lost; this is the persistent, pipelined design it asked for:
//
// - Persistent grid: SMs x (blocks an SM by the occupancy API), rounded down to a multiple of the number of 128-column
//   slices of C, so block b always owns slice b % NS: its B slice (128 columns x k) goes into shared memory once and
//   the block walks the M tiles b / NS, b / NS + G / NS, ... (tiles are handed out round robin; a grid that is not a
//   multiple of NS still works, the block reloads B when its slice changes).
// - 8 warps, 2 (m) x 4 (n); a warp computes (BM / 2) x 32 of the BM x 128 tile with mma.sync m16n8k16 (bf16 in, f32
//   accumulators) from ldmatrix (rows padded by 16 bytes: the 8 row addresses of an 8x8 matrix fall in 8 different
//   bank groups).
// - S-stage cp.async ring: the A tiles (and, for op 2, the C tiles) of the next S - 1 tiles are in flight while the
//   current tile computes and stores; one __syncthreads a tile (plus one more with a staged epilogue).
// - Epilogue, four kinds (EPI):
//   0: straight from the accumulators with 16-byte stores. The block's B columns are permuted when they are loaded
//      (once), so that the 4 n8-tiles of a warp give lane (g, t) the 8 *adjacent* output columns 8t .. 8t + 7 of its
//      rows g and g + 8: each store is a whole 16-byte piece and a warp's store covers 8 rows x 64 bytes (whole 32-byte
//      sectors). op 2's C pieces come by cp.async into a per-thread slot of shared memory (the same thread reads them
//      back after its own wait_group, so no barrier) with the stage's A tile.
//   1: through shared memory: the accumulators (op 2: added to the C tile that cp.async staged there) are rounded to
//      bf16 in a padded tile, then written out as whole 256-byte rows, 16 bytes a thread.
//   2: as 1, but each row goes out by one cp.async.bulk (TMA, shared -> global) issued by one thread: no thread
//      spends instructions on the stores; the buffer is reused once the bulk group has read it.
//   3: as 0 with the stores marked streaming (st.global.cs).
//
// Requirements (skinny_run checks them and returns -1 otherwise): k a multiple of 16, 16 <= k <= 160; N a multiple of
// 8; lda, ldb, ldc multiples of 8 (16-byte rows), lda >= k, ldc >= N, op 1 ldb >= k, op 2 ldb >= N; A, B, C 16-byte
// aligned. Any M (a partial last tile: A rows past M read as zeros, C rows past M neither read nor written), and a
// partial last column slice (N % 128 != 0: columns past N are zero in B and never stored).
// Deterministic: every output element is one thread's fixed sequence of mma steps and one rounding.
//
// Measured (H200, dev/kernels/skinny_results.txt): not better than cuBLASLt by the 15% that would matter. 130m
// dt_proj fwd: best 19.1 us (v12) against cuBLASLt's 21.0 back to back, 20.5 (v11) against 21.9 after a 64 MB write;
// 370m: 26.5-27.5 against 24.9-25.3 (slower). x_proj dinp: 130m 36-39 us against cuBLASLt's 24.7-28.8 back to back
// (whose time there depends on what the previous call left in the L2) and 45.4 after a 64 MB write; 370m 48-49
// against 55-58. With k = 128 / 160 (1.4b) B no longer fits in registers and the B-in-shared-memory kernels are bound
// by ldmatrix bandwidth (4 ldmatrix.x4 for 8 mma): 1.2-1.6 x cuBLASLt. Under ncu (clean L2) the 130m kernels tie:
// v9 17.9 / 31.8 us against cuBLASLt's 17.9 / 32.5.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace skinny {

constexpr int BN = 128;       // columns of C a block owns (its B slice)
constexpr int THREADS = 256;  // 8 warps: 2 (m) x 4 (n)

struct Args {
    __nv_bfloat16 *C;
    const __nv_bfloat16 *A, *B;
    int M, N, k, lda, ldb, ldc;
};

// What a launch would use (for the lab's table): dynamic shared memory, blocks an SM, grid.
struct Info {
    size_t smem;
    int occ, grid, BM, S, EPI;
};

// ---------------------------------------------------------------------------------------------------------------
// PTX wrappers
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16-byte cp.async, L2 only (.cg: the tiles are used once by this SM); in = false fills the 16 bytes with zeros.
__device__ __forceinline__ void cp16(void *s, const void *g, bool in) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(s)),
                 "l"((size_t)__cvta_generic_to_global(g)), "r"(in ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// TMA bulk copy of `bytes` (a multiple of 16) from shared to global memory, tracked by the issuing thread's bulk
// groups; the proxy fence makes this thread's ordinary shared-memory writes visible to the copy engine.
__device__ __forceinline__ void bulk_store(void *g, const void *s, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                     (size_t)__cvta_generic_to_global(g)),
                 "r"(smem_u32(s)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// 16-byte store with the streaming hint (.cs: evict first): C is not read again by this kernel, and in a training
// step its lines would otherwise sit dirty in the L2 and be written back while later kernels need the room.
__device__ __forceinline__ void st_cs(void *g, uint4 v) {
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"((size_t)__cvta_generic_to_global(g)), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}
__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x (lo) is the lower address
    return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ float2 unpack_bf2(uint32_t u) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&u));
}

// EPI 0's column order inside each 32-column warp slice: the mma's C fragment gives lane (g, t) of n8-tile j the
// columns 8j + 2t, 8j + 2t + 1; loading B so that logical column L = 8j + c holds the real column 8 (c >> 1) + 2j +
// (c & 1) makes lane t's columns of the 4 tiles the real columns 8t .. 8t + 7, in the order j = 0..3. (Even logical
// columns map to even real ones and L + 1 to real + 1: pairs stay pairs, which op 2's B load relies on.)
template <int EPI>
__device__ __forceinline__ int colmap(int p) {
    if (EPI != 0 && EPI != 3) return p;
    const int L = p & 31, j = L >> 3, c = L & 7;
    return (p & ~31) + 8 * (c >> 1) + 2 * j + (c & 1);
}

// Shared memory of one configuration (elements of bf16): Bs | S A stages | NCB C buffers.
template <bool OP2, int KT, int BM, int S, int EPI, bool BREG>
struct Layout {
    static constexpr int K = KT * 16;
    static constexpr int KP = K + 8;    // row stride of A tiles and of op 1's B (n rows of k): +16 bytes
    static constexpr int BST = BN + 8;  // row stride of op 2's B (k rows of 128 columns)
    static constexpr int CST = BN + 8;  // row stride of the staged C tile (EPI 1, 2): 272 bytes = 17 x 16
    static constexpr int MI = BM / 32;  // m16 tiles a warp
    static constexpr int B_ELEMS = BREG ? 0 : OP2 ? K * BST : BN * KP;  // BREG: B lives in registers
    static constexpr int A_ELEMS = BM * KP;
    // C buffers. EPI 0: op 2's per-thread C slots, one a stage. EPI 1: op 2 stages its C tiles (one a stage), op 1
    // needs one output tile (the top-of-tile barrier orders its reuse). EPI 2: a buffer is busy until its bulk
    // stores have read it, so one more than the ring needs: the buffer refilled at tile i is tile i - 2's.
    static constexpr bool DIRECT = EPI == 0 || EPI == 3;  // stores from the accumulators
    static constexpr int NCB = DIRECT ? (OP2 ? S : 0) : EPI == 1 ? (OP2 ? S : 1) : (OP2 ? S + 1 : 2);
    static constexpr int C_ELEMS = DIRECT ? BM * BN : BM * CST;
    static constexpr size_t SMEM = (size_t)(B_ELEMS + S * A_ELEMS + NCB * C_ELEMS) * 2;
    static_assert(BM == 32 || BM == 64 || BM == 128, "BM");
    static_assert(S >= 2, "S");
    static_assert(B_ELEMS % 8 == 0 && A_ELEMS % 8 == 0 && C_ELEMS % 8 == 0, "16-byte aligned regions");
};

// MINB: blocks an SM the registers must allow (__launch_bounds__): 2 gives up to 128 registers a thread.
// BREG: each warp keeps its B fragments (its 32 columns x k: 8 KT registers) in registers, loaded straight from
// global memory once; the inner loop then reads only A from shared memory (half the ldmatrix traffic of 2 x 4 warps
// with B in shared memory: there 4 ldmatrix.x4 feed 8 mma, so shared-memory bandwidth, not the tensor pipe, bounds
// the math). Only for k <= 96 (registers).
template <bool OP2, int KT, int BM, int S, int EPI, int MINB, bool BREG>
__global__ void __launch_bounds__(THREADS, MINB) skinny_kernel(const Args p) {
    using L = Layout<OP2, KT, BM, S, EPI, BREG>;
    constexpr int K = L::K, KP = L::KP, BST = L::BST, CST = L::CST, MI = L::MI, K8 = K / 8;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16 *Bs = reinterpret_cast<__nv_bfloat16 *>(smem_raw);
    __nv_bfloat16 *As = Bs + L::B_ELEMS;
    __nv_bfloat16 *Cs = As + S * L::A_ELEMS;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
    const int g = lane >> 2, tq = lane & 3;
    const int M = p.M, N = p.N;
    const int NS = (N + BN - 1) / BN, MT = (M + BM - 1) / BM, T = NS * MT, G = gridDim.x;
    const int b = blockIdx.x;
    const int nt = b < T ? (T - 1 - b) / G + 1 : 0;  // tiles of this block: b, b + G, ...

    // BREG: the warp's B fragments, breg[ks][j] = {b0, b1} of n8-tile j (logical columns wn * 32 + 8 j + g, real
    // n0 + colmap of that), k-step ks: b0 holds k = 16 ks + 2 tq, + 1 (low half first), b1 the same + 8.
    uint32_t breg[BREG ? KT : 1][4][2];
    // B slice of the columns n0 .. n0 + 127 (permuted by colmap for EPI 0; zeros past N). Plain loads: once a block.
    auto load_B = [&](int n0) {
        if constexpr (BREG) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = n0 + colmap<EPI>(wn * 32 + 8 * j + g);
#pragma unroll
                for (int ks = 0; ks < KT; ks++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int kk = ks * 16 + h * 8 + 2 * tq;
                        uint32_t v = 0;
                        if (n < N) {
                            if constexpr (!OP2) {
                                v = *reinterpret_cast<const uint32_t *>(p.B + (size_t)n * p.ldb + kk);
                            } else {
                                const unsigned short *B16 = reinterpret_cast<const unsigned short *>(p.B);
                                const unsigned short lo = B16[(size_t)kk * p.ldb + n];
                                const unsigned short hi = B16[(size_t)(kk + 1) * p.ldb + n];
                                v = (uint32_t)lo | ((uint32_t)hi << 16);
                            }
                        }
                        breg[BREG ? ks : 0][j][h] = v;
                    }
            }
        } else if constexpr (!OP2) {  // Bs row p (k elements) = B row n0 + colmap(p)
            for (int c = tid; c < BN * K8; c += THREADS) {
                const int pr = c / K8, q = c % K8, n = n0 + colmap<EPI>(pr);
                uint4 v = make_uint4(0, 0, 0, 0);
                if (n < N) v = *reinterpret_cast<const uint4 *>(p.B + (size_t)n * p.ldb + q * 8);
                *reinterpret_cast<uint4 *>(Bs + pr * KP + q * 8) = v;
            }
        } else {  // Bs row kk (128 columns) = B row kk, columns n0 + colmap(p), copied in pairs
            for (int c = tid; c < K * (BN / 2); c += THREADS) {
                const int kk = c / (BN / 2), pp = (c % (BN / 2)) * 2, n = n0 + colmap<EPI>(pp);
                uint32_t v = 0;
                if (n < N) v = *reinterpret_cast<const uint32_t *>(p.B + (size_t)kk * p.ldb + n);
                *reinterpret_cast<uint32_t *>(Bs + kk * BST + pp) = v;
            }
        }
    };

    // The loads of the block's tile i into A stage i % S (and C buffer i % NCB): cp.async, one group a tile.
    auto issue = [&](int i) {
        const int t = b + i * G, ns = t % NS, mt = t / NS;
        const int m0 = mt * BM, n0 = ns * BN;
        __nv_bfloat16 *as = As + (i % S) * L::A_ELEMS;
        for (int c = tid; c < BM * K8; c += THREADS) {
            const int r = c / K8, q = c % K8;
            const bool in = m0 + r < M;
            cp16(as + r * KP + q * 8, p.A + (size_t)(in ? m0 + r : 0) * p.lda + q * 8, in);
        }
        if constexpr (OP2) {
            __nv_bfloat16 *cs = Cs + (i % L::NCB) * L::C_ELEMS;
            if constexpr (L::DIRECT) {  // this thread's own 16-byte pieces: slot (mi * 2 + h) * THREADS + tid
                const int col = n0 + wn * 32 + 8 * tq;
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int row = m0 + wm * (BM / 2) + mi * 16 + h * 8 + g;
                        const bool in = row < M && col < N;
                        cp16(reinterpret_cast<uint4 *>(cs) + (mi * 2 + h) * THREADS + tid,
                             p.C + (in ? (size_t)row * p.ldc + col : 0), in);
                    }
            } else {  // the whole tile, rows of 16 pieces
                for (int c = tid; c < BM * (BN / 8); c += THREADS) {
                    const int r = c >> 4, q = c & 15;
                    const bool in = m0 + r < M && n0 + q * 8 < N;
                    cp16(cs + r * CST + q * 8, p.C + (in ? (size_t)(m0 + r) * p.ldc + n0 + q * 8 : 0), in);
                }
            }
        }
    };

#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nt) issue(s);
        cp_commit();  // empty groups too: the wait below counts groups
    }
    // B after the first tiles' loads are in flight (its plain loads then overlap them); in shared memory it is
    // visible after the first top-of-tile barrier
    int cur_ns = -1;
    if (nt > 0) {
        cur_ns = b % NS;
        load_B(cur_ns * BN);
    }

    for (int i = 0; i < nt; i++) {
        const int t = b + i * G, ns = t % NS, mt = t / NS;
        const int m0 = mt * BM, n0 = ns * BN;
        if (EPI == 2 && tid < BM) bulk_wait_read<1>();  // tile i - 2's bulk stores have left the buffer reused below
        cp_wait<S - 2>();                                 // this thread's pieces of tile i have landed
        __syncthreads();  // everyone's have; and everyone is done with tile i - 1's A stage and C buffer
        if (ns != cur_ns) {  // only when the grid is not a multiple of the slices
            cur_ns = ns;
            load_B(ns * BN);
            if constexpr (!BREG) __syncthreads();
        }
        if (i + S - 1 < nt) issue(i + S - 1);  // into the stage tile i - 1 used
        cp_commit();

        // the tile's product: warp (wm, wn) covers rows wm * BM/2 .. + BM/2, (logical) columns wn * 32 .. + 32
        const __nv_bfloat16 *as = As + (i % S) * L::A_ELEMS;
        float acc[MI][4][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[mi][j][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KT; ks++) {
            uint32_t a[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
                ldsm_x4(a[mi], as + (wm * (BM / 2) + mi * 16 + (lane & 15)) * KP + ks * 16 + (lane >> 4) * 8);
            if constexpr (BREG) {
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        mma16816(acc[mi][j], a[mi], breg[BREG ? ks : 0][j][0], breg[BREG ? ks : 0][j][1]);
            } else {
                uint32_t bb[2][4];
#pragma unroll
                for (int pp = 0; pp < 2; pp++) {  // n8-tiles 2pp, 2pp + 1: {b0, b1} of each
                    const int nb = wn * 32 + pp * 16;
                    if constexpr (OP2)
                        ldsm_x4_t(bb[pp], Bs + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * BST + nb +
                                              ((lane >> 4) & 1) * 8);
                    else
                        ldsm_x4(bb[pp], Bs + (nb + (lane & 7) + ((lane >> 4) & 1) * 8) * KP + ks * 16 +
                                            ((lane >> 3) & 1) * 8);
                }
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        mma16816(acc[mi][j], a[mi], bb[j >> 1][(j & 1) * 2], bb[j >> 1][(j & 1) * 2 + 1]);
            }
        }

        if constexpr (L::DIRECT) {
            // lane (g, tq): rows g, g + 8 of each m16 tile, the 8 real columns 8 tq .. 8 tq + 7 of its warp's slice
            const int col = n0 + wn * 32 + 8 * tq;
            const uint4 *cslot = reinterpret_cast<const uint4 *>(Cs + (i % (OP2 ? L::NCB : 1)) * L::C_ELEMS);
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int row = m0 + wm * (BM / 2) + mi * 16 + h * 8 + g;
                    float v[8];
#pragma unroll
                    for (int j = 0; j < 4; j++) v[2 * j] = acc[mi][j][2 * h], v[2 * j + 1] = acc[mi][j][2 * h + 1];
                    if constexpr (OP2) {
                        const uint4 c = cslot[(mi * 2 + h) * THREADS + tid];
                        const uint32_t cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const float2 f = unpack_bf2(cw[e]);
                            v[2 * e] += f.x, v[2 * e + 1] += f.y;
                        }
                    }
                    if (row < M && col < N) {
                        const uint4 o = make_uint4(pack_bf2(v[0], v[1]), pack_bf2(v[2], v[3]), pack_bf2(v[4], v[5]),
                                                   pack_bf2(v[6], v[7]));
                        __nv_bfloat16 *dst = p.C + (size_t)row * p.ldc + col;
                        if constexpr (EPI == 3)
                            st_cs(dst, o);
                        else
                            *reinterpret_cast<uint4 *>(dst) = o;
                    }
                }
        } else {
            // round into the staged tile (natural column order: a warp's bf16x2 writes hit 32 different banks with
            // the 272-byte rows), adding op 2's staged C in place
            __nv_bfloat16 *cs = Cs + (i % L::NCB) * L::C_ELEMS;
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = wm * (BM / 2) + mi * 16 + h * 8 + g, c = wn * 32 + j * 8 + 2 * tq;
                        uint32_t *dst = reinterpret_cast<uint32_t *>(cs + r * CST + c);
                        float x = acc[mi][j][2 * h], y = acc[mi][j][2 * h + 1];
                        if constexpr (OP2) {
                            const float2 f = unpack_bf2(*dst);
                            x += f.x, y += f.y;
                        }
                        *dst = pack_bf2(x, y);
                    }
            if constexpr (EPI == 2) fence_proxy_async();
            __syncthreads();
            if constexpr (EPI == 1) {
                for (int c = tid; c < BM * (BN / 8); c += THREADS) {
                    const int r = c >> 4, q = c & 15;
                    if (m0 + r < M && n0 + q * 8 < N)
                        *reinterpret_cast<uint4 *>(p.C + (size_t)(m0 + r) * p.ldc + n0 + q * 8) =
                            *reinterpret_cast<const uint4 *>(cs + r * CST + q * 8);
                }
            } else if (tid < BM) {  // EPI 2: one bulk copy a row, one bulk group a tile for each issuing thread
                if (m0 + tid < M) {
                    const int ncol = N - n0 < BN ? N - n0 : BN;
                    bulk_store(p.C + (size_t)(m0 + tid) * p.ldc + n0, cs + tid * CST, (uint32_t)ncol * 2);
                }
                bulk_commit();
            }
        }
    }
    if (EPI == 2 && tid < BM) bulk_wait_read<0>();  // the shared memory must outlive the copies' reads
}

// ---------------------------------------------------------------------------------------------------------------
// Host side. Versions: (BM, S, EPI, MINB, BREG).
struct Version {
    int BM, S, EPI, MINB;
    bool BREG;
    const char *desc;
};
constexpr int NVERSIONS = 13;
inline const Version &version(int v) {  // v = 1 .. NVERSIONS
    static const Version vs[NVERSIONS] = {
        {64, 3, 0, 2, false, "BM 64, 3 stages, stores from the accumulators (permuted B, 16 B a lane)"},
        {128, 3, 0, 2, false, "BM 128, 3 stages, stores from the accumulators"},
        {32, 4, 0, 2, false, "BM 32, 4 stages, stores from the accumulators"},
        {64, 4, 0, 2, false, "BM 64, 4 stages, stores from the accumulators"},
        {64, 3, 1, 2, false, "BM 64, 3 stages, tile staged in smem, 256-byte row stores"},
        {64, 3, 2, 2, false, "BM 64, 3 stages, tile staged in smem, TMA bulk row stores"},
        {64, 3, 0, 3, false, "v1 with registers for 3 blocks an SM"},
        {32, 4, 0, 4, false, "v3 with registers for 4 blocks an SM"},
        {64, 3, 0, 2, true, "v1 with B in registers (k <= 96)"},
        {64, 3, 0, 3, true, "v9 with registers for 3 blocks an SM (k <= 96)"},
        {128, 3, 0, 2, true, "v2 with B in registers (k <= 96)"},
        {128, 3, 3, 2, true, "v11 with streaming (.cs) stores"},
        {64, 3, 3, 2, true, "v9 with streaming (.cs) stores"},
    };
    return vs[v - 1];
}

template <bool OP2, int KT, int BM, int S, int EPI, int MINB, bool BREG>
int launch_impl(const Args &a, cudaStream_t st, int grid_override, Info *info) {
    using L = Layout<OP2, KT, BM, S, EPI, BREG>;
    auto kern = skinny_kernel<OP2, KT, BM, S, EPI, MINB, BREG>;
    static int occ = -1, sms = 0;  // per instance, found once
    if (occ < 0) {
        int dev = 0, optin = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            L::SMEM > (size_t)optin ||  // (asking would be an API error: keep compute-sanitizer's log clean)
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::SMEM) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, THREADS, L::SMEM) != cudaSuccess) {
            cudaGetLastError();
            occ = 0;
        }
    }
    if (occ <= 0) return -1;
    const int NS = (a.N + BN - 1) / BN, MT = (a.M + BM - 1) / BM, T = NS * MT;
    int G = sms * occ;
    if (G >= NS) G = G / NS * NS;  // each block keeps one slice (one B load)
    if (G > T) G = T;
    if (grid_override > 0) G = grid_override < T ? grid_override : T;
    if (info) {
        info->smem = L::SMEM, info->occ = occ, info->grid = G, info->BM = BM, info->S = S, info->EPI = EPI;
        return 0;
    }
    if (T == 0) return 0;
    kern<<<G, THREADS, L::SMEM, st>>>(a);
    return cudaPeekAtLastError() == cudaSuccess ? 0 : -1;
}
template <bool OP2, int KT, int BM, int S, int EPI, int MINB, bool BREG>
int launch_t(const Args &a, cudaStream_t st, int grid_override, Info *info) {
    if constexpr (BREG && KT > 6)
        return -1;  // 8 KT registers of B: too many past k = 96
    else
        return launch_impl<OP2, KT, BM, S, EPI, MINB, BREG>(a, st, grid_override, info);
}

template <bool OP2, int BM, int S, int EPI, int MINB, bool BREG>
int launch_k(const Args &a, cudaStream_t st, int go, Info *info) {
    switch (a.k / 16) {
        case 1: return launch_t<OP2, 1, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 2: return launch_t<OP2, 2, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 3: return launch_t<OP2, 3, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 4: return launch_t<OP2, 4, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 5: return launch_t<OP2, 5, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 6: return launch_t<OP2, 6, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 7: return launch_t<OP2, 7, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 8: return launch_t<OP2, 8, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 9: return launch_t<OP2, 9, BM, S, EPI, MINB, BREG>(a, st, go, info);
        case 10: return launch_t<OP2, 10, BM, S, EPI, MINB, BREG>(a, st, go, info);
    }
    return -1;
}
template <int BM, int S, int EPI, int MINB, bool BREG = false>
int launch_v(int op2, const Args &a, cudaStream_t st, int go, Info *info) {
    return op2 ? launch_k<true, BM, S, EPI, MINB, BREG>(a, st, go, info)
               : launch_k<false, BM, S, EPI, MINB, BREG>(a, st, go, info);
}

// Whether the kernels take this problem (see the requirements at the top).
inline bool supported(int op2, const Args &a) {
    auto al16 = [](const void *q) { return ((uintptr_t)q & 15) == 0; };
    return a.M >= 0 && a.k >= 16 && a.k <= 160 && a.k % 16 == 0 && a.N > 0 && a.N % 8 == 0 && a.lda % 8 == 0 &&
           a.ldb % 8 == 0 && a.ldc % 8 == 0 && a.lda >= a.k && a.ldc >= a.N && a.ldb >= (op2 ? a.N : a.k) &&
           al16(a.A) && al16(a.B) && al16(a.C);
}

// op2 = 0: C = A @ B^T (B: N x k); op2 = 1: C += A @ B (B: k x N). version 1 .. NVERSIONS. grid_override > 0 forces
// the grid (tests: a grid that is not a multiple of the slices). With info, fills it and launches nothing.
// Returns 0, or -1 when the problem or the version is not supported (or the launch failed).
inline int run(int version_, int op2, const Args &a, cudaStream_t st = 0, int grid_override = 0, Info *info = nullptr) {
    if (version_ < 1 || version_ > NVERSIONS || !supported(op2, a)) return -1;
    switch (version_) {
        case 1: return launch_v<64, 3, 0, 2>(op2, a, st, grid_override, info);
        case 2: return launch_v<128, 3, 0, 2>(op2, a, st, grid_override, info);
        case 3: return launch_v<32, 4, 0, 2>(op2, a, st, grid_override, info);
        case 4: return launch_v<64, 4, 0, 2>(op2, a, st, grid_override, info);
        case 5: return launch_v<64, 3, 1, 2>(op2, a, st, grid_override, info);
        case 6: return launch_v<64, 3, 2, 2>(op2, a, st, grid_override, info);
        case 7: return launch_v<64, 3, 0, 3>(op2, a, st, grid_override, info);
        case 8: return launch_v<32, 4, 0, 4>(op2, a, st, grid_override, info);
        case 9: return launch_v<64, 3, 0, 2, true>(op2, a, st, grid_override, info);
        case 10: return launch_v<64, 3, 0, 3, true>(op2, a, st, grid_override, info);
        case 11: return launch_v<128, 3, 0, 2, true>(op2, a, st, grid_override, info);
        case 12: return launch_v<128, 3, 3, 2, true>(op2, a, st, grid_override, info);
        case 13: return launch_v<64, 3, 3, 2, true>(op2, a, st, grid_override, info);
    }
    return -1;
}

}  // namespace skinny
