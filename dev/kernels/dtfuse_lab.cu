// dtfuse_lab.cu — lab for dt_proj's forward inside the scan's forward (scan_v41f.cuh, FUSE): is the fused kernel
// slower than the production forward by less than the dt_proj GEMM it replaces (19.6 µs at B8·D1536·L2048,
// docs/bench/gemm_lab_130m.txt)?
//
//   sh dev/kernels/mkver.sh v41f && git apply dev/experiments/scan_v41f_dtfuse.patch   # the fused version
//   nvcc -O3 -arch=sm_90 -Isrc -Idev/kernels dev/kernels/dtfuse_lab.cu src/cuda_scan.cu -o .gpu/scan/dtfuse_lab
//
// (scan_v41f.cuh is not kept in the tree: the fused forward measured slower, docs/perf.md, tenth session; the
// frozen copy of today's src plus the patch rebuild it.)
//
// Inputs: random bf16 u, z, x_proj output xdbl (M, 80) = dt_low | B | C, W_dt (Cd, 48), documents of random length.
// Truth: the production forward (src/cuda_scan.cu) given dpre = bf16(dt_low @ W_dt^T) from a plain fp32 kernel;
// the fused forward must match it (the same dpre bits but for the mma's summation order: a few outputs may differ
// by a bf16 step). Timing: CUDA events, median of 25 after warm-up, with and without the training checkpoints.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_common.h"
#include "cuda_scan.h"
#include "scan_v41f.cuh"

typedef __nv_bfloat16 bf16;
static const int R = 48, NX = 80, NS = 16;

__global__ void dpre_ref_kernel(bf16 *dpre, const bf16 *xl, int ldx, const bf16 *W, int M, int Cd) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * Cd) return;
    size_t m = i / Cd;
    int c = i % Cd;
    float s = 0.f;
    for (int r = 0; r < R; r++) s += __bfloat162float(xl[m * ldx + r]) * __bfloat162float(W[(size_t)c * R + r]);
    dpre[i] = __float2bfloat16(s);
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(float lo, float hi) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 11) * (1.0 / 9007199254740992.0));
}
template <class T>
static T *dev(const std::vector<T> &h) {
    T *d;
    cudaCheck(cudaMalloc(&d, h.size() * sizeof(T)));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
static std::vector<bf16> rnd_bf(size_t n, float lo, float hi) {
    std::vector<bf16> v(n);
    for (auto &x : v) x = __float2bfloat16(frand(lo, hi));
    return v;
}
template <class F>
static double time_ms(F f) {
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    std::vector<float> t;
    for (int i = 0; i < 30; i++) {
        cudaCheck(cudaEventRecord(a));
        f();
        cudaCheck(cudaEventRecord(b));
        cudaCheck(cudaEventSynchronize(b));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, a, b));
        if (i >= 5) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static int run(int rows, int T, int Cd) {
    const int M = rows * T;
    std::vector<bf16> u = rnd_bf((size_t)M * Cd, -1, 1), z = rnd_bf((size_t)M * Cd, -2, 2);
    std::vector<bf16> xdbl = rnd_bf((size_t)M * NX, -1, 1), W = rnd_bf((size_t)Cd * R, -0.15f, 0.15f);
    std::vector<float> dtb(Cd), Alog((size_t)Cd * NS), D(Cd);
    for (auto &x : dtb) x = frand(-4, -2);
    for (size_t i = 0; i < Alog.size(); i++) Alog[i] = logf((float)(i % NS + 1));
    for (auto &x : D) x = frand(0.5f, 1.5f);
    std::vector<int32_t> pos(M);
    for (int r = 0, p = 0; r < rows; r++)
        for (int t = 0; t < T; t++, p++) pos[(size_t)r * T + t] = (t == 0 || frand(0, 1) < 1.0f / 600) ? (p = 0) : p;
    bf16 *du = dev(u), *dz = dev(z), *dx = dev(xdbl), *dW = dev(W);
    float *ddtb = dev(dtb), *dA = dev(Alog), *dD = dev(D);
    int32_t *dpos = dev(pos);
    bf16 *dpre, *o_ref, *o_fu;
    cudaCheck(cudaMalloc(&dpre, (size_t)M * Cd * 2));
    cudaCheck(cudaMalloc(&o_ref, (size_t)M * Cd * 2));
    cudaCheck(cudaMalloc(&o_fu, (size_t)M * Cd * 2));
    float *st;
    const size_t sb = cuda_scan_states_bytes(M, T, Cd, NS);
    cudaCheck(cudaMalloc(&st, sb));
    float *st2;
    cudaCheck(cudaMalloc(&st2, sb));
    dpre_ref_kernel<<<(unsigned)(((size_t)M * Cd + 255) / 256), 256>>>(dpre, dx, NX, dW, M, Cd);
    cudaLaunchCheck();
    auto prod = [&](float *s) {
        cuda_scan_fwd_ex(o_ref, du, dpre, ddtb, dA, dx + R, dx + R + NS, NX, dD, dz, Cd, dpos, M, T, Cd, NS, s, 0);
    };
    auto fused = [&](float *s) {
        scan_v41f::cuda_scan_fwd_fused(o_fu, du, dx, NX, dW, ddtb, dA, dx + R, dx + R + NS, NX, dD, dz, Cd, dpos, M, T,
                                       Cd, s, 0);
    };
    prod(st);
    fused(st2);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<bf16> a((size_t)M * Cd), b((size_t)M * Cd);
    cudaCheck(cudaMemcpy(a.data(), o_ref, a.size() * 2, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(b.data(), o_fu, b.size() * 2, cudaMemcpyDeviceToHost));
    size_t ndiff = 0;
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
        ndiff += x != y, num += (x - y) * (x - y), den += x * x;
        worst = std::max(worst, fabs(x - y));
        if (!isfinite(y)) num = INFINITY;
    }
    std::vector<float> sa(sb / 4), sc(sb / 4);
    cudaCheck(cudaMemcpy(sa.data(), st, sb, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(sc.data(), st2, sb, cudaMemcpyDeviceToHost));
    double snum = 0, sden = 0;
    for (size_t i = 0; i < sa.size(); i++) snum += (sa[i] - sc[i]) * (double)(sa[i] - sc[i]), sden += (double)sa[i] * sa[i];
    const double rel = sqrt(num / den), srel = sqrt(snum / sden);
    const bool ok = rel < 1e-2 && srel < 1e-2;
    printf("B%d D%d L%d: fused vs production: out rel %.2e (%zu of %zu differ, worst %.3g), checkpoints rel %.2e  %s\n",
           rows, Cd, T, rel, ndiff, a.size(), worst, srel, ok ? "PASS" : "FAIL");
    const double tp = time_ms([&] { prod(nullptr); }), tf = time_ms([&] { fused(nullptr); });
    const double tps = time_ms([&] { prod(st); }), tfs = time_ms([&] { fused(st2); });
    printf("  timed B%d D%d L%d: production fwd %.4f ms, fused %.4f ms (%+.1f us); with checkpoints %.4f, fused %.4f "
           "(%+.1f us)\n",
           rows, Cd, T, tp, tf, (tf - tp) * 1e3, tps, tfs, (tfs - tps) * 1e3);
    cudaFree(du), cudaFree(dz), cudaFree(dx), cudaFree(dW), cudaFree(ddtb), cudaFree(dA), cudaFree(dD);
    cudaFree(dpos), cudaFree(dpre), cudaFree(o_ref), cudaFree(o_fu), cudaFree(st), cudaFree(st2);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    int bad = 0;
    if (argc > 1 && !strcmp(argv[1], "small")) return run(2, 200, 256);  // for compute-sanitizer
    bad |= run(2, 200, 256);
    bad |= run(8, 2048, 1536);
    bad |= run(8, 2048, 2048);
    printf("dtfuse_lab: %s\n", bad ? "FAIL" : "all PASS");
    return bad;
}
