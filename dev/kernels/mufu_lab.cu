// mufu_lab.cu — the special-function unit's throughput per instruction kind on this GPU, and the accuracy of the
// cheaper forms of the scan's sigmoid and softplus (one MUFU instruction where the kernels spend two).
//
// Why (thirty-second session): the scan forward kept the special-function unit ~70% busy (20 MUFU results a
// (token, channel) at B8·D2048 then). Whether a packed f16x2/bf16x2 ex2 or tanh gives two results for one MUFU
// issue, and whether sigmoid(z) = 0.5 tanh(z/2) + 0.5 is accurate enough, decided whether the forward's SiLU and
// softplus could cost fewer MUFU cycles (scan v85 took the tanh form). The accuracy table measures the
// cuda_common.h helpers the kernels use. Nothing here is used by packmamba itself.
//
// Build: nvcc -O3 -gencode arch=compute_90a,code=sm_90a -Isrc dev/kernels/mufu_lab.cu -o .gpu/mufu_lab
// Output: per op, results per SM per clock (from clock64 inside each block, so independent of the clock rate),
// each op's latency in a dependent chain, then the accuracy table (max abs / rel error against double precision over z in [-30, 30]).
#include <cuda_fp16.h>
#include <math.h>

#include "cuda_common.h"  // cudaCheck, ex2_approx, rcp_approx, lg2_approx, tanh_approx

enum { OP_EX2, OP_EX2_F16X2, OP_EX2_BF16X2, OP_TANH, OP_TANH_F16X2, OP_TANH_BF16X2, OP_RCP, OP_LG2, OP_FFMA, NOPS };
static const char *op_name[NOPS] = {"ex2.f32",  "ex2.f16x2", "ex2.bf16x2", "tanh.f32", "tanh.f16x2",
                                    "tanh.bf16x2", "rcp.f32",  "lg2.f32",   "ffma (ref)"};
static const int op_results[NOPS] = {1, 2, 2, 1, 2, 2, 1, 1, 1};  // results per lane and instruction

constexpr int CHAINS = 8, ITERS = 2048;

// one instruction of kind OP on a 32-bit register (a float, or two halves), then a cheap op that keeps the value
// in range (so each chain is one MUFU + one FMA-pipe instruction a step; the FMA pipe is 8x faster)
template <int OP> __device__ __forceinline__ unsigned step(unsigned x) {
    unsigned r;
    if (OP == OP_EX2) {  // x = 2^x - 1 stays in [-0.5, 0]
        float f = __uint_as_float(x), g;
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(g) : "f"(f));
        r = __float_as_uint(g - 1.f);
    } else if (OP == OP_EX2_F16X2) {
        asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(r) : "r"(x));
        __half2 h = *(__half2 *)&r;
        h = __hsub2(h, __float2half2_rn(1.f));
        r = *(unsigned *)&h;
    } else if (OP == OP_EX2_BF16X2) {
        asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(r) : "r"(x));
        __nv_bfloat162 h = *(__nv_bfloat162 *)&r;
        h = __hsub2(h, __float2bfloat162_rn(1.f));
        r = *(unsigned *)&h;
    } else if (OP == OP_TANH) {  // x = tanh(x) + 0.25 - 0.25 tanh: fixed point near 0.33
        float f = __uint_as_float(x), g;
        asm volatile("tanh.approx.f32 %0, %1;" : "=f"(g) : "f"(f));
        r = __float_as_uint(fmaf(-0.5f, g, 0.5f));
    } else if (OP == OP_TANH_F16X2) {
        asm volatile("tanh.approx.f16x2 %0, %1;" : "=r"(r) : "r"(x));
        __half2 h = *(__half2 *)&r;
        h = __hfma2(h, __float2half2_rn(-0.5f), __float2half2_rn(0.5f));
        r = *(unsigned *)&h;
    } else if (OP == OP_TANH_BF16X2) {
        asm volatile("tanh.approx.bf16x2 %0, %1;" : "=r"(r) : "r"(x));
        __nv_bfloat162 h = *(__nv_bfloat162 *)&r;
        h = __hfma2(h, __float2bfloat162_rn(-0.5f), __float2bfloat162_rn(0.5f));
        r = *(unsigned *)&h;
    } else if (OP == OP_RCP) {  // x = 1/x + 0.5: fixed point ~1.28
        float f = __uint_as_float(x), g;
        asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(g) : "f"(f));
        r = __float_as_uint(g + 0.5f);
    } else if (OP == OP_LG2) {  // x = lg2(x) + 2: fixed point 4
        float f = __uint_as_float(x), g;
        asm volatile("lg2.approx.ftz.f32 %0, %1;" : "=f"(g) : "f"(f));
        r = __float_as_uint(g + 2.f);
    } else {  // two FMA-pipe instructions, the same shape as the others' FMA step
        float f = __uint_as_float(x);
        r = __float_as_uint(fmaf(fmaf(f, 0.5f, 0.25f), 0.5f, 0.125f));
    }
    return r;
}

template <int OP> __global__ void rate_kernel(unsigned *sink, long long *cycles) {
    unsigned x[CHAINS];
    for (int i = 0; i < CHAINS; i++) {
        const float v = -0.3f - 0.01f * (threadIdx.x % 7) - 0.02f * i;
        if (OP == OP_EX2_F16X2 || OP == OP_TANH_F16X2) {
            __half2 h = __floats2half2_rn(v, v * 0.5f);
            x[i] = *(unsigned *)&h;
        } else if (OP == OP_EX2_BF16X2 || OP == OP_TANH_BF16X2) {
            __nv_bfloat162 h = __floats2bfloat162_rn(v, v * 0.5f);
            x[i] = *(unsigned *)&h;
        } else {
            x[i] = __float_as_uint(OP == OP_RCP || OP == OP_LG2 ? 2.f - v : v);
        }
    }
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < ITERS; it++) {
#pragma unroll
        for (int i = 0; i < CHAINS; i++) x[i] = step<OP>(x[i]);
    }
    __syncthreads();
    const long long t1 = clock64();
    unsigned acc = 0;
    for (int i = 0; i < CHAINS; i++) acc ^= x[i];
    if (acc == 0x12345678u) sink[0] = acc;  // keeps the chains alive
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// latency: one warp an SM, one dependent chain (each step: the instruction, then its range-keeping FMA-pipe op,
// whose own latency, ~4 cycles, is in the figure; the ffma row is two dependent FMA-pipe instructions)
template <int OP> __global__ void lat_kernel(unsigned *sink, long long *cycles) {
    // the start value from the thread index: from a constant, ptxas evaluated the whole ex2, rcp and lg2 chains
    // at compile time (call258's SASS: no MUFU left)
    const float v0 = -0.3f - 1e-3f * threadIdx.x;
    unsigned x = __float_as_uint(OP == OP_RCP || OP == OP_LG2 ? 2.f - v0 : v0);
    if (OP == OP_EX2_F16X2 || OP == OP_TANH_F16X2) {
        __half2 h = __floats2half2_rn(v0, 0.5f * v0);
        x = *(unsigned *)&h;
    } else if (OP == OP_EX2_BF16X2 || OP == OP_TANH_BF16X2) {
        __nv_bfloat162 h = __floats2bfloat162_rn(v0, 0.5f * v0);
        x = *(unsigned *)&h;
    }
    const long long t0 = clock64();
    for (int it = 0; it < ITERS; it++) x = step<OP>(x);
    const long long t1 = clock64();
    if (x == 0x12345678u) sink[0] = x;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}
template <int OP> static void run_lat(unsigned *sink, long long *dcyc, long long *hcyc) {
    lat_kernel<OP><<<1, 32>>>(sink, dcyc);
    lat_kernel<OP><<<1, 32>>>(sink, dcyc);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(hcyc, dcyc, sizeof(long long), cudaMemcpyDeviceToHost));
    printf("%-12s %6.1f cycles a step (instruction + its FMA-pipe op)\n", op_name[OP], (double)hcyc[0] / ITERS);
}

template <int OP> static void run_rate(int sms, unsigned *sink, long long *dcyc, long long *hcyc) {
    const int threads = 1024, blocks = sms * 2;  // 2048 threads an SM: 16 warps a scheduler
    rate_kernel<OP><<<blocks, threads>>>(sink, dcyc);  // warm-up
    cudaCheck(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    rate_kernel<OP><<<blocks, threads>>>(sink, dcyc);
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaDeviceSynchronize());
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaMemcpy(hcyc, dcyc, blocks * sizeof(long long), cudaMemcpyDeviceToHost));
    double cmax = 0, csum = 0;
    for (int i = 0; i < blocks; i++) cmax = fmax(cmax, (double)hcyc[i]), csum += hcyc[i];
    // two blocks share an SM for the whole run; per SM: 2048 threads x CHAINS x ITERS instructions in ~cmax cycles
    const double instr_per_sm = 2048.0 * CHAINS * ITERS;
    printf("%-12s %8.3f ms  %6.2f lane-instr/clk/SM  %6.2f results/clk/SM  (cycles max %.0f mean %.0f)\n",
           op_name[OP], ms, instr_per_sm / cmax, instr_per_sm * op_results[OP] / cmax, cmax, csum / blocks);
}

// accuracy: sigmoid and silu over z, three ways; softplus via a packed half ex2
__global__ void acc_kernel(const float *z, float *out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = z[i];
    float e, r, t, sp_e, sp_l;
    // (1) ex2 + rcp (the kernels' form before v85; PM_SCAN_SIGMOID_TANH=0)
    e = ex2_approx(-v * 1.4426950408889634f);
    r = rcp_approx(1.f + e);
    // (2) 0.5 tanh(z/2) + 0.5 (v85's sigmoid_f)
    t = tanh_approx(0.5f * v);
    const float s2 = fmaf(0.5f, t, 0.5f);
    // (3) e^-z by ex2.approx.f16x2 (two channels an instruction), then rcp
    __half2 hx = __floats2half2_rn(-v * 1.4426950408889634f, 0.f);
    unsigned hr, hxi = *(unsigned *)&hx;
    asm("ex2.approx.f16x2 %0, %1;" : "=r"(hr) : "r"(hxi));
    const float eh = __low2float(*(__half2 *)&hr);
    const float r3 = rcp_approx(1.f + eh);
    // softplus = ln(1 + e^v): f32 ex2 (the kernels' softplus_f) against the f16x2 ex2
    float ev, lv;
    ev = ex2_approx(v * 1.4426950408889634f);
    lv = lg2_approx(1.f + ev);
    sp_e = v > 20.f ? v : lv * 0.69314718055994531f;
    __half2 hv = __floats2half2_rn(v * 1.4426950408889634f, 0.f);
    unsigned hvi = *(unsigned *)&hv, hvr;
    asm("ex2.approx.f16x2 %0, %1;" : "=r"(hvr) : "r"(hvi));
    const float evh = __low2float(*(__half2 *)&hvr);
    lv = lg2_approx(1.f + evh);
    sp_l = v > 20.f ? v : lv * 0.69314718055994531f;
    out[6 * i] = r, out[6 * i + 1] = s2, out[6 * i + 2] = r3, out[6 * i + 3] = sp_e, out[6 * i + 4] = sp_l;
    out[6 * i + 5] = t;
}

int main() {
    int dev = 0, sms;
    cudaCheck(cudaSetDevice(dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    unsigned *sink;
    long long *dcyc, *hcyc = (long long *)malloc(sizeof(long long) * 2 * sms);
    cudaCheck(cudaMalloc(&sink, 4));
    cudaCheck(cudaMalloc(&dcyc, sizeof(long long) * 2 * sms));
    printf("== MUFU rates (%d SMs, 2048 threads an SM, %d independent chains a thread)\n", sms, CHAINS);
    run_rate<OP_FFMA>(sms, sink, dcyc, hcyc);
    run_rate<OP_EX2>(sms, sink, dcyc, hcyc);
    run_rate<OP_EX2_F16X2>(sms, sink, dcyc, hcyc);
    run_rate<OP_EX2_BF16X2>(sms, sink, dcyc, hcyc);
    run_rate<OP_TANH>(sms, sink, dcyc, hcyc);
    run_rate<OP_TANH_F16X2>(sms, sink, dcyc, hcyc);
    run_rate<OP_TANH_BF16X2>(sms, sink, dcyc, hcyc);
    run_rate<OP_RCP>(sms, sink, dcyc, hcyc);
    run_rate<OP_LG2>(sms, sink, dcyc, hcyc);

    printf("== latency (one warp, one dependent chain)\n");
    run_lat<OP_FFMA>(sink, dcyc, hcyc);
    run_lat<OP_EX2>(sink, dcyc, hcyc);
    run_lat<OP_TANH>(sink, dcyc, hcyc);
    run_lat<OP_RCP>(sink, dcyc, hcyc);
    run_lat<OP_LG2>(sink, dcyc, hcyc);
    run_lat<OP_EX2_F16X2>(sink, dcyc, hcyc);

    const int n = 600001;  // z from -30 to 30 in steps of 1e-4
    float *hz = (float *)malloc(n * 4), *ho = (float *)malloc(6 * (size_t)n * 4), *dz, *dout;
    for (int i = 0; i < n; i++) hz[i] = -30.f + 1e-4f * i;
    cudaCheck(cudaMalloc(&dz, n * 4));
    cudaCheck(cudaMalloc(&dout, 6 * (size_t)n * 4));
    cudaCheck(cudaMemcpy(dz, hz, n * 4, cudaMemcpyHostToDevice));
    acc_kernel<<<(n + 255) / 256, 256>>>(dz, dout, n);
    cudaCheck(cudaMemcpy(ho, dout, 6 * (size_t)n * 4, cudaMemcpyDeviceToHost));
    // errors: sigmoid (abs, rel), silu (abs), softplus (abs, rel); also over |z| <= 8 (where bf16 z mostly is)
    const char *nm[3] = {"sigmoid ex2+rcp (pre-v85)", "sigmoid 0.5tanh(z/2)+0.5", "sigmoid ex2.f16x2+rcp"};
    printf("== accuracy against double, z in [-30, 30] step 1e-4 (and |z| <= 8)\n");
    for (int k = 0; k < 3; k++) {
        double ma = 0, mr = 0, msilu = 0, ma8 = 0, mr8 = 0, msilu8 = 0;
        for (int i = 0; i < n; i++) {
            const double z = hz[i], s = 1.0 / (1.0 + exp(-z)), g = ho[6 * i + k];
            const double ea = fabs(g - s), er = ea / s, es = fabs(z * g - z * s);
            ma = fmax(ma, ea), mr = fmax(mr, er), msilu = fmax(msilu, es);
            if (fabs(z) <= 8) ma8 = fmax(ma8, ea), mr8 = fmax(mr8, er), msilu8 = fmax(msilu8, es);
        }
        printf("%-28s abs %.2e rel %.2e silu-abs %.2e | |z|<=8: abs %.2e rel %.2e silu-abs %.2e\n", nm[k], ma, mr,
               msilu, ma8, mr8, msilu8);
    }
    const char *sn[2] = {"softplus ex2+lg2 (kernels)", "softplus ex2.f16x2+lg2"};
    for (int k = 0; k < 2; k++) {
        double ma = 0, mr = 0;
        for (int i = 0; i < n; i++) {
            const double z = hz[i], s = z > 20 ? z : log1p(exp(z)), g = ho[6 * i + 3 + k];
            ma = fmax(ma, fabs(g - s)), mr = fmax(mr, fabs(g - s) / s);
        }
        printf("%-28s abs %.2e rel %.2e\n", sn[k], ma, mr);
    }
    double mt = 0;
    for (int i = 0; i < n; i++) mt = fmax(mt, fabs(ho[6 * i + 5] - tanh(0.5 * (double)hz[i])));
    printf("tanh.approx.f32 max abs error %.2e\n", mt);
    return 0;
}
