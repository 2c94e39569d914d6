// gemm_lab.cu — does cuBLASLt have faster algorithms for our GEMM shapes than the 8 its heuristic offers?
//
//   nvcc -O3 -arch=sm_90 -Isrc -Idev/kernels dev/kernels/gemm_lab.cu -lcublasLt -o .gpu/gemm/gemm_lab
//   .gpu/gemm/gemm_lab [130m|370m|1.4b|all]
//   .gpu/gemm/gemm_lab dw    # the weight-gradient shapes alone and as strided batches of 2 and 4 layers
//   .gpu/gemm/gemm_lab dwk   # the weight-gradient shapes with K cut in 2-4 by hand (one batched GEMM + a reduce)
//   .gpu/gemm/gemm_lab variants370m|variants1.4b  # the big GEMMs' 3 fastest with other cluster shapes and swizzles
//   .gpu/gemm/gemm_lab layout  # the input-gradient shapes as the backend runs them (the weight, stored (N, K) row
//                              # major, read along N) beside the same product from a transposed copy of the weight
//                              # (read along K, as the forward reads it), at 130m, 370m and 1.4b
//
// The backend (backend_cuda.cu, gemm / gemm_tune) asks cuBLASLt's heuristic (BEST_FIT) for up to 8 candidates
// per shape and keeps the fastest. Here, per shape of a training step (the model's GEMMs in the backend's
// column-major formulation: the same transposes, leading dimensions, output types and beta), the lab times
//   (a) the heuristic's first choice, (b) the best of its first 8 (what the backend runs after tuning),
//   (c) the best of everything else it can be made to offer: BEST_FIT asked for 64, and for every algorithm ID
//       cublasLtMatmulAlgoGetIds lists, the heuristic limited to that ID (CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID,
//       64 configurations each).
// Each candidate: one warm-up, then the mean of 10 runs between CUDA events (no L2 flush: the operands of these
// shapes are mostly larger than the L2, and the step runs them back to back). Inputs are random bf16 in [-1, 1];
// the output is checked against the heuristic's first choice (max |diff| / max |ref|), so a configuration that
// computes something else is not counted. The table gives ms, TFLOP/s and (c)'s configuration.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_common.h"  // cudaCheck, cublasCheck
#include "lt_describe.cuh"

struct Shape {
    const char *name;
    int ta, tb, m, n, k, lda, ldb, ldd;
    bool f32_out, beta1;
    int batch;  // 0 or 1: one GEMM; more: that many at once (strided batch: each operand its own copy)
};

static cublasLtHandle_t g_lt;
static void *g_ws;
static const size_t WS = 32u << 20;  // the backend's LT_WS_BYTES

struct Cand {
    cublasLtMatmulAlgo_t algo;
    const char *src;
};

__global__ void fill_kernel(__nv_bfloat16 *p, size_t n, unsigned seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = (unsigned)(i * 2654435761u) ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16((h & 0xFFFF) / 32768.0f - 1.0f);
}

static int heuristic(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                     cublasLtMatrixLayout_t ld, cudaDataType_t dt, int want, int algo_id,
                     cublasLtMatmulHeuristicResult_t *res) {
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WS;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    if (algo_id >= 0) {
        uint32_t mode = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof mode));
        if (cublasLtMatmulAlgoInit(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, dt, dt, algo_id,
                                   &res[0].algo) !=
            CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulPreferenceDestroy(pref);
            return 0;
        }
    }
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(g_lt, desc, la, lb, ld, ld, pref, want, res, &found) != CUBLAS_STATUS_SUCCESS)
        found = 0;
    cublasLtMatmulPreferenceDestroy(pref);
    int n = 0;
    for (int i = 0; i < found; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= WS) res[n++] = res[i];
    return n;
}

// mean ms of REPS calls of step() between CUDA events; -1 if anything failed
template <class F>
static float event_ms(int REPS, F step) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaCheck(cudaEventRecord(e0));
    for (int r = 0; r < REPS; r++) step();
    cudaCheck(cudaEventRecord(e1));
    cudaCheck(cudaEventSynchronize(e1));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    if (cudaGetLastError() != cudaSuccess) return -1.0f;
    return ms / REPS;
}

static float time_algo(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                       cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B,
                       void *D, float beta, int REPS) {
    float alpha = 1.0f;
    auto mm = [&] { return cublasLtMatmul(g_lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, algo, g_ws, WS, 0); };
    if (mm() != CUBLAS_STATUS_SUCCESS) {
        cudaGetLastError();
        return -1.0f;
    }
    return event_ms(REPS, mm);
}

// max |a - b| and max |b| over n outputs (bf16 or f32), on the device (the outputs are up to 400 MB)
__global__ void diff_kernel(const void *a, const void *b, size_t n, bool f32, unsigned *out) {
    float dm = 0.f, bm = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = f32 ? ((const float *)a)[i] : __bfloat162float(((const __nv_bfloat16 *)a)[i]);
        float y = f32 ? ((const float *)b)[i] : __bfloat162float(((const __nv_bfloat16 *)b)[i]);
        dm = fmaxf(dm, fabsf(x - y)), bm = fmaxf(bm, fabsf(y));
    }
    atomicMax(out, __float_as_uint(dm));  // non-negative floats order as their bits
    atomicMax(out + 1, __float_as_uint(bm));
}
static double compare(const void *a, const void *b, size_t n, bool f32) {
    static unsigned *d = NULL;
    if (!d) cudaCheck(cudaMalloc(&d, 8));
    cudaCheck(cudaMemset(d, 0, 8));
    diff_kernel<<<1024, 256>>>(a, b, n, f32, d);
    unsigned h[2];
    cudaCheck(cudaMemcpy(h, d, 8, cudaMemcpyDeviceToHost));
    float dm, bm;
    memcpy(&dm, &h[0], 4), memcpy(&bm, &h[1], 4);
    return bm > 0 ? dm / bm : dm;
}

// make la, lb, ld strided batches of `count`, operand i at offset i * (sa, sb, sd) elements
static void set_batch(cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int count,
                      int64_t sa, int64_t sb, int64_t sd) {
    const int32_t bc = count;
    const cublasLtMatrixLayout_t l[3] = {la, lb, ld};
    const int64_t st[3] = {sa, sb, sd};
    for (int i = 0; i < 3; i++) {
        cublasCheck(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i], sizeof st[i]));
    }
}

static bool g_variants;  // `variants`: also vary the cluster shape and CTA swizzle of the 3 fastest candidates

static void run_shape(const Shape &s) {
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    const cudaDataType_t dt = s.f32_out ? CUDA_R_32F : CUDA_R_16BF;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.ta ? s.k : s.m, s.ta ? s.m : s.k, s.lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.tb ? s.n : s.k, s.tb ? s.k : s.n, s.ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, dt, s.m, s.n, s.ldd));
    const int nbat = s.batch > 1 ? s.batch : 1;
    size_t na1 = (size_t)s.lda * (s.ta ? s.m : s.k), nb1 = (size_t)s.ldb * (s.tb ? s.k : s.n), nd1 = (size_t)s.ldd * s.n;
    if (nbat > 1) set_batch(la, lb, ld, nbat, (int64_t)na1, (int64_t)nb1, (int64_t)nd1);
    size_t na = na1 * nbat, nb = nb1 * nbat;
    size_t nd = nd1 * nbat, esz = s.f32_out ? 4 : 2;
    __nv_bfloat16 *A, *B;
    void *D, *Dref, *D0;
    cudaCheck(cudaMalloc(&A, na * 2));
    cudaCheck(cudaMalloc(&B, nb * 2));
    cudaCheck(cudaMalloc(&D, nd * esz));
    cudaCheck(cudaMalloc(&Dref, nd * esz));
    cudaCheck(cudaMalloc(&D0, nd * esz));
    fill_kernel<<<(unsigned)((na + 255) / 256), 256>>>(A, na, 1);
    fill_kernel<<<(unsigned)((nb + 255) / 256), 256>>>(B, nb, 2);
    cudaCheck(cudaMemset(D0, 0, nd * esz));
    const float beta = s.beta1 ? 1.0f : 0.0f;

    std::vector<Cand> cands;
    std::vector<cublasLtMatmulHeuristicResult_t> res(64);
    int nbest = heuristic(desc, la, lb, ld, dt, 64, -1, res.data());
    for (int i = 0; i < nbest; i++) cands.push_back({res[i].algo, i < 8 ? "heur8" : "heur64"});
    int ids[256], nids = 0;  // the algorithm IDs for this output type
    cublasCheck(cublasLtMatmulAlgoGetIds(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, dt, dt, 256, ids,
                                &nids));
    for (int j = 0; j < nids; j++) {
        int n = heuristic(desc, la, lb, ld, dt, 16, ids[j], res.data());
        for (int i = 0; i < n; i++) cands.push_back({res[i].algo, "by-id"});
    }
    if (cands.empty()) {
        printf("%-22s no algorithm\n", s.name);
        return;
    }
    // reference: the heuristic's first choice, from the same starting output (beta = 1 adds to zeros here)
    float alpha = 1.0f;
    cudaCheck(cudaMemcpy(Dref, D0, nd * esz, cudaMemcpyDeviceToDevice));
    cublasCheck(cublasLtMatmul(g_lt, desc, &alpha, A, la, B, lb, &beta, Dref, ld, Dref, ld, &cands[0].algo, g_ws, WS, 0));
    double flop = 2.0 * s.m * s.n * (double)s.k * nbat;
    // every candidate: correct (from zeros) and then 5 timed runs; the 3 fastest and the first 8 again with 20
    // (and, apart, the fastest without split-K: one configuration a single GEMM and a batch could share)
    std::vector<std::pair<float, int>> t5;
    int nbad = 0;
    for (size_t i = 0; i < cands.size() && i < 600; i++) {
        cudaCheck(cudaMemcpy(D, D0, nd * esz, cudaMemcpyDeviceToDevice));
        if (cublasLtMatmul(g_lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &cands[i].algo, g_ws, WS, 0) !=
            CUBLAS_STATUS_SUCCESS) {
            cudaGetLastError();
            continue;
        }
        if (cudaDeviceSynchronize() != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        if (compare(D, Dref, nd, s.f32_out) > 2e-2) {
            nbad++;
            continue;
        }
        float ms = time_algo(desc, la, lb, ld, &cands[i].algo, A, B, D, beta, 5);
        if (ms > 0) t5.push_back({ms, (int)i});
    }
    std::sort(t5.begin(), t5.end());
    float first = -1, best8 = 1e30f, best = 1e30f, best_nosk = 1e30f;
    int ibest = -1, inosk = -1;
    for (size_t r = 0; r < t5.size(); r++) {
        int sk = -1;
        size_t w;
        cublasLtMatmulAlgoConfigGetAttribute(&cands[t5[r].second].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk, &w);
        if (sk <= 1) {
            inosk = t5[r].second;
            best_nosk = time_algo(desc, la, lb, ld, &cands[inosk].algo, A, B, D, beta, 20);
            break;
        }
    }
    for (size_t r = 0; r < t5.size(); r++) {
        const int i = t5[r].second;
        const bool in8 = !strcmp(cands[i].src, "heur8");
        if (r >= 3 && !in8) continue;
        float ms = time_algo(desc, la, lb, ld, &cands[i].algo, A, B, D, beta, 20);
        if (ms <= 0) continue;
        if (i == 0) first = ms;
        if (in8) best8 = std::min(best8, ms);
        if (ms < best) best = ms, ibest = i;
    }
    char vline[400] = "";
    if (g_variants) {
        // the 3 fastest candidates with each cluster shape (auto, 1x1, 2x1, 1x2, 2x2, 4x1, 1x4) and CTA swizzle
        // (0, 1) cuBLASLt accepts for this problem; each checked against the reference before it is timed
        const uint16_t clusters[7] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x4x1};
        float vbest = 1e30f;
        cublasLtMatmulAlgo_t vb;
        int nv = 0, nvbad = 0;
        for (size_t r = 0; r < t5.size() && r < 3; r++)
            for (int c = 0; c < 7; c++)
                for (uint32_t sw = 0; sw < 2; sw++) {
                    cublasLtMatmulAlgo_t a = cands[t5[r].second].algo;
                    if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &clusters[c],
                                                             sizeof clusters[c]) != CUBLAS_STATUS_SUCCESS ||
                        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw) !=
                            CUBLAS_STATUS_SUCCESS)
                        continue;
                    cublasLtMatmulHeuristicResult_t chk;
                    if (cublasLtMatmulAlgoCheck(g_lt, desc, la, lb, ld, ld, &a, &chk) != CUBLAS_STATUS_SUCCESS ||
                        chk.workspaceSize > WS)
                        continue;
                    cudaCheck(cudaMemcpy(D, D0, nd * esz, cudaMemcpyDeviceToDevice));
                    if (cublasLtMatmul(g_lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &a, g_ws, WS, 0) !=
                            CUBLAS_STATUS_SUCCESS ||
                        cudaDeviceSynchronize() != cudaSuccess) {
                        cudaGetLastError();
                        continue;
                    }
                    if (compare(D, Dref, nd, s.f32_out) > 2e-2) {
                        nvbad++;
                        continue;
                    }
                    float ms = time_algo(desc, la, lb, ld, &a, A, B, D, beta, 20);
                    nv++;
                    if (ms > 0 && ms < vbest) vbest = ms, vb = a;
                }
        char vc[200] = "-";
        if (vbest < 1e29f) {
            describe(vb, vc, sizeof vc);
            uint16_t cl = 0;
            uint32_t sw = 0;
            size_t w;
            cublasLtMatmulAlgoConfigGetAttribute(&vb, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl, &w);
            cublasLtMatmulAlgoConfigGetAttribute(&vb, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw, &w);
            snprintf(vline, sizeof vline, "    variants: best %.4f ms (%.0f TF/s; %.1f%% under best) cluster id %u swizzle %u  [%d timed, %d wrong]"
                   "\n      %s\n", vbest, flop / vbest / 1e9, 100.0 * (1.0 - vbest / best), cl, sw, nv, nvbad, vc);
        }
    }
    const int ntimed = (int)t5.size();
    char cfg[200] = "", cfg8[200] = "";
    if (ibest >= 0) describe(cands[ibest].algo, cfg, sizeof cfg);
    describe(cands[0].algo, cfg8, sizeof cfg8);
    printf("%-22s m %5d n %5d k %5d  first %.4f  best-of-8 %.4f  best %.4f ms (%s, %.0f TF/s; %.1f%% under best-of-8)"
           "  [%d timed, %d wrong]\n    first: %s\n    best:  %s\n",
           s.name, s.m, s.n, s.k, first, best8, best, ibest >= 0 ? cands[ibest].src : "-", flop / best / 1e9,
           100.0 * (1.0 - best / best8), ntimed, nbad, cfg8, cfg);
    fputs(vline, stdout);
    if (inosk >= 0) {
        describe(cands[inosk].algo, cfg, sizeof cfg);
        printf("    batch %d: per GEMM best-of-8 %.4f best %.4f ms; best without split-K %.4f ms (%s)\n", nbat, best8 / nbat,
               best / nbat, best_nosk / nbat, cfg);
    }
    fflush(stdout);
    cudaFree(A), cudaFree(B), cudaFree(D), cudaFree(Dref), cudaFree(D0);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}

// out[i] = sum of S partials (each n values, `stride` apart), fp32: the reduce of a split-K done by hand
__global__ void ksum_kernel(float *out, const float *part, size_t n, size_t stride, int S) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = part[i];
        for (int s = 1; s < S; s++) a += part[s * stride + i];
        out[i] = a;
    }
}

// A weight-gradient shape (f32 out, ldd = m) with K cut into S pieces by hand: one strided-batched GEMM of S
// (each piece's partial (m x n) f32 to its own slot) and a reduce kernel summing the S partials. Prints the best
// over every configuration cuBLASLt offers for the batch (GEMM + reduce, timed together), against the shape's
// single GEMM (run_shape).
static void run_ksplit(const Shape &s, int S) {
    const int kp = s.k / S;
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.ta ? kp : s.m, s.ta ? s.m : kp, s.lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.tb ? s.n : kp, s.tb ? kp : s.n, s.ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, s.m, s.n, s.ldd));
    // the k index runs along A's columns (not transposed) or rows (transposed), B's rows or columns
    set_batch(la, lb, ld, S, s.ta ? kp : (int64_t)kp * s.lda, s.tb ? (int64_t)kp * s.ldb : kp, (int64_t)s.ldd * s.n);
    size_t na = (size_t)s.lda * (s.ta ? s.m : s.k), nb = (size_t)s.ldb * (s.tb ? s.k : s.n), nd = (size_t)s.ldd * s.n;
    __nv_bfloat16 *A, *B;
    float *P, *D, *Dref;
    cudaCheck(cudaMalloc(&A, na * 2));
    cudaCheck(cudaMalloc(&B, nb * 2));
    cudaCheck(cudaMalloc(&P, nd * 4 * S));
    cudaCheck(cudaMalloc(&D, nd * 4));
    cudaCheck(cudaMalloc(&Dref, nd * 4));
    fill_kernel<<<(unsigned)((na + 255) / 256), 256>>>(A, na, 1);
    fill_kernel<<<(unsigned)((nb + 255) / 256), 256>>>(B, nb, 2);
    // reference: the whole GEMM, the heuristic's first choice
    {
        cublasLtMatmulDesc_t d1;
        cublasCheck(cublasLtMatmulDescCreate(&d1, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasCheck(cublasLtMatmulDescSetAttribute(d1, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
        cublasCheck(cublasLtMatmulDescSetAttribute(d1, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
        cublasLtMatrixLayout_t a1, b1, o1;
        cublasCheck(cublasLtMatrixLayoutCreate(&a1, CUDA_R_16BF, s.ta ? s.k : s.m, s.ta ? s.m : s.k, s.lda));
        cublasCheck(cublasLtMatrixLayoutCreate(&b1, CUDA_R_16BF, s.tb ? s.n : s.k, s.tb ? s.k : s.n, s.ldb));
        cublasCheck(cublasLtMatrixLayoutCreate(&o1, CUDA_R_32F, s.m, s.n, s.ldd));
        cublasLtMatmulHeuristicResult_t r[1];
        if (heuristic(d1, a1, b1, o1, CUDA_R_32F, 1, -1, r) < 1) exit(1);
        float alpha = 1.f, beta = 0.f;
        cublasCheck(cublasLtMatmul(g_lt, d1, &alpha, A, a1, B, b1, &beta, Dref, o1, Dref, o1, &r[0].algo, g_ws, WS, 0));
        cublasLtMatrixLayoutDestroy(a1), cublasLtMatrixLayoutDestroy(b1), cublasLtMatrixLayoutDestroy(o1);
        cublasLtMatmulDescDestroy(d1);
    }
    std::vector<cublasLtMatmulHeuristicResult_t> res(64);
    std::vector<cublasLtMatmulAlgo_t> cands;
    int n0 = heuristic(desc, la, lb, ld, CUDA_R_32F, 64, -1, res.data());
    for (int i = 0; i < n0; i++) cands.push_back(res[i].algo);
    int ids[256], nids = 0;
    cublasCheck(cublasLtMatmulAlgoGetIds(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F,
                                256, ids, &nids));
    for (int j = 0; j < nids; j++) {
        int n = heuristic(desc, la, lb, ld, CUDA_R_32F, 16, ids[j], res.data());
        for (int i = 0; i < n; i++) cands.push_back(res[i].algo);
    }
    float alpha = 1.f, beta = 0.f;
    auto run = [&](const cublasLtMatmulAlgo_t *al) {
        if (cublasLtMatmul(g_lt, desc, &alpha, A, la, B, lb, &beta, P, ld, P, ld, al, g_ws, WS, 0) !=
            CUBLAS_STATUS_SUCCESS)
            return false;
        ksum_kernel<<<1024, 256>>>(D, P, nd, nd, S);
        return true;
    };
    auto timed = [&](const cublasLtMatmulAlgo_t *al, int reps) {
        if (!run(al)) {
            cudaGetLastError();
            return -1.f;
        }
        return event_ms(reps, [&] { run(al); });
    };
    std::vector<std::pair<float, int>> t5;
    int nbad = 0;
    for (size_t i = 0; i < cands.size() && i < 600; i++) {
        if (!run(&cands[i]) || cudaDeviceSynchronize() != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        if (compare(D, Dref, nd, true) > 2e-2) {
            nbad++;
            continue;
        }
        float ms = timed(&cands[i], 5);
        if (ms > 0) t5.push_back({ms, (int)i});
    }
    std::sort(t5.begin(), t5.end());
    float best = 1e30f;
    int ib = -1;
    for (size_t r = 0; r < t5.size() && r < 4; r++) {
        float ms = timed(&cands[t5[r].second], 20);
        if (ms > 0 && ms < best) best = ms, ib = t5[r].second;
    }
    char cfg[200] = "-";
    if (ib >= 0) describe(cands[ib], cfg, sizeof cfg);
    printf("%-22s K cut in %d by hand: GEMM + reduce best %.4f ms (%.0f TF/s)  [%d timed, %d wrong]\n    best: %s\n",
           s.name, S, best, 2.0 * s.m * s.n * (double)s.k / best / 1e9, (int)t5.size(), nbad, cfg);
    fflush(stdout);
    cudaFree(A), cudaFree(B), cudaFree(P), cudaFree(D), cudaFree(Dref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}

// The model's GEMMs as the backend issues them (backend_cuda.cu: matmul_fwd, matmul_bwd, classifier) for
// M tokens, width d, d_inner di, x_proj width nx = R + 2N, dt_rank R; the classifier per 4096-token chunk.
static std::vector<Shape> model_shapes(const char *tag, int M, int d, int di, int R) {
    static std::vector<char *> names;  // (kept for the process)
    const int nx = R + 32, Vp = 50280, ch = 4096;
    auto nm = [&](const char *op) {
        char *p = (char *)malloc(64);
        snprintf(p, 64, "%s %s", tag, op);
        names.push_back(p);
        return (const char *)p;
    };
    return {
        // forward: out' (N x M, ld ldo) = W' (K x N stored, transposed) @ inp' (K x M)
        {nm("in_proj fwd"), 1, 0, 2 * di, M, d, d, d, 2 * di, false, false},
        {nm("x_proj fwd"), 1, 0, nx, M, di, di, di, nx, false, false},
        {nm("dt_proj fwd"), 1, 0, di, M, R, R, nx, di, false, false},
        {nm("out_proj fwd"), 1, 0, d, M, di, di, di, d, false, false},
        // input gradients: dinp' (K x M) = W (K x N) @ dout' (N x M)
        {nm("out_proj dinp"), 0, 0, di, M, d, di, d, di, false, false},
        {nm("dt_proj dinp"), 0, 0, R, M, di, R, di, nx, false, false},
        {nm("x_proj dinp (+=)"), 0, 0, di, M, nx, di, nx, di, false, true},
        {nm("in_proj dinp"), 0, 0, d, M, 2 * di, d, 2 * di, d, false, false},
        // weight gradients: dW' (K x N) += inp' (K x M) @ dout (M x N)
        {nm("out_proj dW"), 0, 1, di, d, M, di, d, di, true, true},
        {nm("dt_proj dW"), 0, 1, R, di, M, nx, di, R, true, true},
        {nm("x_proj dW"), 0, 1, di, nx, M, di, nx, di, true, true},
        {nm("in_proj dW"), 0, 1, d, 2 * di, M, d, 2 * di, d, true, true},
        // classifier, bf16 logits (the training default)
        {nm("logits"), 1, 0, Vp, ch, d, d, d, Vp, false, false},
        {nm("dwte"), 0, 1, d, Vp, ch, d, Vp, d, true, true},
        {nm("dx"), 0, 0, d, ch, Vp, d, Vp, d, false, false},
    };
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "all";
    cublasCheck(cublasLtCreate(&g_lt));
    cudaCheck(cudaMalloc(&g_ws, WS));
    for (int f = 0; f < 2; f++) {
        int ids[256], nids = 0;
        const cudaDataType_t dt = f ? CUDA_R_32F : CUDA_R_16BF;
        cublasCheck(cublasLtMatmulAlgoGetIds(g_lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, dt, dt, 256, ids,
                                    &nids));
        printf("cuBLASLt %zu: %d algorithm IDs for bf16 x bf16 -> %s, fp32 compute:", cublasLtGetVersion(), nids,
               f ? "fp32" : "bf16");
        for (int i = 0; i < nids; i++) printf(" %d", ids[i]);
        printf("\n");
    }
    std::vector<Shape> shapes;
    if (!strcmp(which, "130m") || !strcmp(which, "all")) {
        auto v = model_shapes("130m", 16384, 768, 1536, 48);
        shapes.insert(shapes.end(), v.begin(), v.end());
    }
    if (!strcmp(which, "370m") || !strcmp(which, "all")) {
        auto v = model_shapes("370m", 16384, 1024, 2048, 64);
        shapes.insert(shapes.end(), v.begin(), v.end());
    }
    if (!strncmp(which, "variants", 8)) {  // variants370m, variants1.4b: the big GEMMs' cluster shapes and swizzles
        g_variants = true;
        const bool big = !strcmp(which + 8, "1.4b");
        for (const Shape &x : big ? model_shapes("1.4b", 8192, 2048, 4096, 128) : model_shapes("370m", 16384, 1024, 2048, 64))
            if ((long long)x.m * x.n * x.k >= (1ll << 34)) shapes.push_back(x);
    }
    if (!strcmp(which, "1.4b")) {
        auto v = model_shapes("1.4b", 8192, 2048, 4096, 128);
        shapes.insert(shapes.end(), v.begin(), v.end());
    }
    if (!strcmp(which, "dw")) {  // the weight gradients, alone and batched over 2 and 4 layers
        for (int w = 0; w < 2; w++) {
            auto v = w ? model_shapes("370m", 16384, 1024, 2048, 64) : model_shapes("130m", 16384, 768, 1536, 48);
            for (const Shape &x : v)
                if (strstr(x.name, " dW"))
                    for (int b = 1; b <= 4; b *= 2) {
                        Shape y = x;
                        y.batch = b;
                        shapes.push_back(y);
                    }
        }
    }
    if (!strcmp(which, "layout")) {
        // input gradients dinp' (K x M) = W (K x N) @ dout' (N x M): A is W column-major (K x N, ld K), read along
        // the output's rows; the copy Wt (N x K column-major, ld N) is the same matrix read along the sum's index
        const struct { const char *tag; int M, d, di, R; } cfg[3] = {
            {"130m", 16384, 768, 1536, 48}, {"370m", 16384, 1024, 2048, 64}, {"1.4b", 8192, 2048, 4096, 128}};
        for (int w = 0; w < 3; w++)
            for (const Shape &x : model_shapes(cfg[w].tag, cfg[w].M, cfg[w].d, cfg[w].di, cfg[w].R))
                if (strstr(x.name, " dinp")) {
                    run_shape(x);
                    Shape t = x;
                    t.ta = 1, t.lda = x.k;
                    char *nm = (char *)malloc(64);
                    snprintf(nm, 64, "%s Wt", x.name);
                    t.name = nm;
                    run_shape(t);
                }
        return 0;
    }
    if (!strcmp(which, "dwk")) {  // the weight gradients, with K cut in 2, 3, 4 by hand (batch + reduce)
        for (int w = 0; w < 2; w++) {
            auto v = w ? model_shapes("370m", 16384, 1024, 2048, 64) : model_shapes("130m", 16384, 768, 1536, 48);
            for (const Shape &x : v)
                if (strstr(x.name, " dW")) {
                    run_shape(x);
                    for (int S = 2; S <= 4; S++) run_ksplit(x, S);
                }
        }
        return 0;
    }
    for (const Shape &s : shapes) run_shape(s);
    return 0;
}
