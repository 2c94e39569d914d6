// scan_lab.cu — kernel lab for the selective scan (src/cuda_scan.cu and frozen versions dev/kernels/scan_*.cuh).
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -Isrc -Idev/kernels dev/kernels/scan_lab.cu src/cuda_scan.cu \
//        -o .gpu/scan_lab      (sm_90a: the production backward's warp-specialized kernel, v72, needs it)
//   .gpu/scan_lab cpu     # CPU only: finite-difference check of the float64 reference's backward
//   .gpu/scan_lab         # + every version against the reference on the GPU, determinism, timing, table
//   .gpu/scan_lab profile v2   # one version's fwd+bwd twice at B8 D2048 L2048, to run under ncu
//                              # (LAB_PROFILE_CD=Cd or LAB_PROFILE_SHAPE=BxTxCd: another size)
//   .gpu/scan_lab small v3     # only the reference checks (of one version), to run under compute-sanitizer
//   .gpu/scan_lab beside       # prod's backward at B8 D2048 L2048 alone, a byte-bound kernel alone (the 370m
//                              # recompute's bytes), and both at once on two streams: does the byte-bound work
//                              # run on the SMs the backward's one-block-an-SM grid leaves free (128 of 132)?
//
// Environment: SCAN_LAB_VERSIONS=prod+st,v43+st (which versions), LAB_BIGS=BxTxCd,... (the timed sizes), and
// src's plan switches, read by the production kernels: PM_SCAN_BWD4=0|2 (the 4-thread backward never, or wherever
// one wave holds its blocks), PM_SCAN_NARROW=0 (no 64-wide forward blocks two an SM), PM_SCAN_BWD4_WS=0 and
// PM_SCAN_FWD_WS96=0 (v80's and v81's 96-wide blocks off: the 4-thread backward and the forward in 32-wide blocks
// three an SM), PM_SCAN_BWD_WS=0 / PM_SCAN_FWD_WS=0 (the staged twins of the warp-specialized kernels). Built with
// -DPM_SCAN_LAB_PLANS (called PM_SCAN_LAB_FWD_PLAN in call164-call167), src also reads PM_SCAN_FWD_PLAN=ch,minb,segments and PM_SCAN_BWD_PLAN=ch,segments (the
// 2-thread backward) and runs that plan at every size: A/B of plans (docs/perf.md, twenty-second session).
// v65's compile-time switches (docs/perf.md, twenty-third session): -DPM_SCAN_FWD_WS=0 (the staged forward
// everywhere), -DPM_SCAN_WS_128=1 (v65 for 128-wide plans too), -DPM_SCAN_WS_WG=4 or 1 (4 or 1 walker threads a channel),
// -DPM_SCAN_WS_PW64=N / -DPM_SCAN_WS_PW128=N (producer warps a block), -DPM_SCAN_WS_S=N (stages),
// -DPM_SCAN_WS_UNROLL=N (the walk's token groups unrolled); v70's -DPM_SCAN_WS_32=0 (the staged forward for
// 32-wide plans), -DPM_SCAN_WS_PW32=N. (v66's and v67's producers and walkers, and 4 walker threads a channel at
// one block an SM, were lab switches in the twenty-fourth session; docs/perf.md has their numbers.)
//
// Truth: a float64 CPU reference written straight from the math (DESIGN §1, backend.h), its backward checked
// by central finite differences of its forward. GPU versions get fresh random bf16 inputs (never zeros),
// poisoned outputs (NaN, so an unwritten element fails), sentinels around the strided outputs (a stray write
// fails), accumulators pre-filled with random values (+= is checked), and are compared with the reference
// computed on the same bf16-rounded inputs by ||x - ref|| / ||ref|| per tensor. Then two runs must be
// bit-identical, and the big sizes are timed with CUDA events (median of 25 after warm-up).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_common.h"  // cudaCheck, and what the frozen versions since v14 take from src (bf2f, pm_cuda_sm_count)
#include "cuda_scan.h"
#include "scan_v1.cuh"
#include "scan_v43.cuh"

static const int NS = 16;  // d_state

// ---------------------------------------------------------------- versions under test
typedef size_t (*WsFn)(int, int, int, int);
typedef void (*FwdFn)(__nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, const float *,
                      const float *, const __nv_bfloat16 *, const __nv_bfloat16 *, int, const float *,
                      const __nv_bfloat16 *, int, const int32_t *, int, int, int, int, cudaStream_t);
typedef void (*BwdFn)(__nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *,
                      float *, float *, float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                      const __nv_bfloat16 *, const float *, const float *, const __nv_bfloat16 *,
                      const __nv_bfloat16 *, int, const float *, const __nv_bfloat16 *, int, const int32_t *, int,
                      int, int, int, void *, size_t, int, cudaStream_t);
struct Version {
    const char *name;
    WsFn ws;
    FwdFn fwd;
    BwdFn bwd;
    bool reout;  // the backward also writes the forward's output again (v24), into g_yout
};
static __nv_bfloat16 *g_yout = NULL;  // (M, Cd): where versions with reout write it
// "prod+st": src/cuda_scan.cu with the forward leaving its states for the backward (cuda_scan_fwd_ex /
// cuda_scan_bwd_ex), in the lab's fixed signature. The states buffer is poisoned (NaN) before each checked
// forward, so a state the forward failed to write fails the check; not during timings.
static bool g_poison_states = true;
static float *lab_states(int M, int T, int Cd) {
    static float *buf = NULL;
    static size_t have = 0;
    size_t bytes = cuda_scan_states_bytes(M, T, Cd, NS);
    if (bytes > have) {
        if (buf) cudaCheck(cudaFree(buf));
        cudaCheck(cudaMalloc((void **)&buf, bytes));
        have = bytes;
    }
    if (g_poison_states) cudaCheck(cudaMemset(buf, 0xFF, bytes));
    return buf;
}
static float *g_states = NULL;
// fwd/bwd of one version's _ex entry points (namespace NS; "::" for src/cuda_scan.cu, which has only those) as
// NAME_fwd / NAME_bwd, the forward keeping its states for the backward (KEEP 1, the "+st" versions) or not (0);
// the variable arguments: "g_yout," where the backward takes the output pointer of v24, else nothing
#define SCAN_WRAPPERS(NAME, NS, KEEP, ...)                                                                              \
    static void NAME##_fwd(__nv_bfloat16 *out, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,               \
                           const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm,                    \
                           const __nv_bfloat16 *Cm, int ldbc, const float *D, const __nv_bfloat16 *z, int ldz,   \
                           const int32_t *pos, int M, int T, int Cd, int N, cudaStream_t stream) {              \
        g_states = KEEP ? lab_states(M, T, Cd) : NULL;                                                           \
        NS cuda_scan_fwd_ex(out, u, dpre, dt_bias, A_log, Bm, Cm, ldbc, D, z, ldz, pos, M, T, Cd, N, g_states,  \
                            stream);                                                                             \
    }                                                                                                            \
    static void NAME##_bwd(__nv_bfloat16 *du, __nv_bfloat16 *ddpre, __nv_bfloat16 *dB, __nv_bfloat16 *dC,       \
                           __nv_bfloat16 *dz, float *ddt_bias, float *dA_log, float *dD,                         \
                           const __nv_bfloat16 *dout, const __nv_bfloat16 *u, const __nv_bfloat16 *dpre,         \
                           const float *dt_bias, const float *A_log, const __nv_bfloat16 *Bm,                    \
                           const __nv_bfloat16 *Cm, int ldbc, const float *D, const __nv_bfloat16 *z, int ldz,   \
                           const int32_t *pos, int M, int T, int Cd, int N, void *ws, size_t wsb, int det,       \
                           cudaStream_t stream) {                                                                \
        NS cuda_scan_bwd_ex(du, ddpre, dB, dC, dz, ddt_bias, dA_log, dD, dout, u, dpre, dt_bias, A_log, Bm, Cm,  \
                            ldbc, D, z, ldz, pos, M, T, Cd, N, KEEP ? g_states : NULL, __VA_ARGS__ ws, wsb, det, \
                            stream);                                                                             \
    }
SCAN_WRAPPERS(prod, ::, 0, g_yout, )
SCAN_WRAPPERS(prod_st, ::, 1, g_yout, )
SCAN_WRAPPERS(prod_st0, ::, 1, nullptr, )  // without v24's output (what --keep-activations runs)
SCAN_WRAPPERS(v43_st, scan_v43::, 1, g_yout, )
SCAN_WRAPPERS(v43_st0, scan_v43::, 1, nullptr, )

static const Version versions[] = {
    {"v1", scan_v1::cuda_scan_workspace_bytes, scan_v1::cuda_scan_fwd, scan_v1::cuda_scan_bwd, false},
    {"v43+st", scan_v43::cuda_scan_workspace_bytes, v43_st_fwd, v43_st_bwd, true},  // the version before v45
    {"v43+st0", scan_v43::cuda_scan_workspace_bytes, v43_st0_fwd, v43_st0_bwd, false},
    {"prod", cuda_scan_workspace_bytes, prod_fwd, prod_bwd, true},  // src/cuda_scan.cu
    {"prod+st", cuda_scan_workspace_bytes, prod_st_fwd, prod_st_bwd, true},
    {"prod+st0", cuda_scan_workspace_bytes, prod_st0_fwd, prod_st0_bwd, false},
};
static const int nversions = sizeof(versions) / sizeof(versions[0]);
static_assert(sizeof(versions) / sizeof(versions[0]) <= 16, "the timing table holds 16 versions");
// SCAN_LAB_VERSIONS=v1,prod,v8 limits the checks and timings to the versions named (all when unset); the first
// one named is the one the others are cross-checked against at the big sizes.
static bool selected(const char *name) {
    const char *env = getenv("SCAN_LAB_VERSIONS");
    if (!env || !*env) return true;
    size_t n = strlen(name);
    for (const char *p = env; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

// ---------------------------------------------------------------- float64 reference
// Inputs of one problem, as doubles (bf16-exact values for GPU checks). Strided like the backend's buffers:
// B and C are column slices (offsets ob, oc) of an (M, ldbc) matrix, z a slice (offset oz) of an (M, ldz) one.
struct Prob {
    int rows, T, Cd, M, ldbc, ob, oc, ldz, oz;
    std::vector<double> u, dpre, xp, zb, dout, dt_bias, A_log, D;  // u, dpre, dout (M, Cd); xp (M, ldbc); zb (M, ldz)
    std::vector<int32_t> pos;
};
struct Grads {
    std::vector<double> out, du, ddpre, dB, dC, dz, ddt_bias, dA_log, dD;  // dB, dC (M, N); dz (M, Cd)
};

static double softplus_d(double v) { return v > 20.0 ? v : log1p(exp(v)); }
static double sigmoid_d(double v) { return 1.0 / (1.0 + exp(-v)); }

// Forward, and when g != NULL the backward too (g->d* overwritten; dout from p).
static void ref_run(const Prob &p, Grads &g, bool backward) {
    int M = p.M, Cd = p.Cd, T = p.T;
    g.out.assign((size_t)M * Cd, 0);
    if (backward) {
        g.du.assign((size_t)M * Cd, 0);
        g.ddpre.assign((size_t)M * Cd, 0);
        g.dz.assign((size_t)M * Cd, 0);
        g.dB.assign((size_t)M * NS, 0);
        g.dC.assign((size_t)M * NS, 0);
        g.ddt_bias.assign(Cd, 0);
        g.dD.assign(Cd, 0);
        g.dA_log.assign((size_t)Cd * NS, 0);
    }
    std::vector<double> S((size_t)T * NS), dl(T);
    for (int r = 0; r < p.rows; r++)
        for (int c = 0; c < Cd; c++) {
            double A[NS];
            for (int n = 0; n < NS; n++) A[n] = -exp(p.A_log[(size_t)c * NS + n]);
            // forward, keeping every state
            for (int t = 0; t < T; t++) {
                size_t m = (size_t)r * T + t;
                bool start = t == 0 || p.pos[m] == 0;
                double u = p.u[m * Cd + c], z = p.zb[m * p.ldz + p.oz + c];
                dl[t] = softplus_d(p.dpre[m * Cd + c] + p.dt_bias[c]);
                double y = p.D[c] * u;
                for (int n = 0; n < NS; n++) {
                    double prev = (start ? 0.0 : S[(size_t)(t - 1) * NS + n]);
                    double s = exp(dl[t] * A[n]) * prev + dl[t] * p.xp[m * p.ldbc + p.ob + n] * u;
                    S[(size_t)t * NS + n] = s;
                    y += s * p.xp[m * p.ldbc + p.oc + n];
                }
                g.out[m * Cd + c] = y * z * sigmoid_d(z);
            }
            if (!backward) continue;
            double carry[NS] = {0};  // adjoint reaching s_t from s_{t+1}
            for (int t = T - 1; t >= 0; t--) {
                size_t m = (size_t)r * T + t;
                bool start = t == 0 || p.pos[m] == 0;
                double u = p.u[m * Cd + c], z = p.zb[m * p.ldz + p.oz + c], go = p.dout[m * Cd + c];
                double v = p.dpre[m * Cd + c] + p.dt_bias[c];
                double sz = sigmoid_d(z), y = p.D[c] * u;
                for (int n = 0; n < NS; n++) y += S[(size_t)t * NS + n] * p.xp[m * p.ldbc + p.oc + n];
                double gy = go * z * sz;
                g.dz[m * Cd + c] = go * y * (sz + z * sz * (1 - sz));
                double du = gy * p.D[c], ddl = 0;
                g.dD[c] += gy * u;
                for (int n = 0; n < NS; n++) {
                    double Bn = p.xp[m * p.ldbc + p.ob + n], Cn = p.xp[m * p.ldbc + p.oc + n];
                    double a = exp(dl[t] * A[n]);
                    double prev = start ? 0.0 : S[(size_t)(t - 1) * NS + n];
                    double ds = gy * Cn + carry[n];  // total adjoint of s_t
                    g.dC[m * NS + n] += gy * S[(size_t)t * NS + n];
                    g.dB[m * NS + n] += ds * dl[t] * u;
                    du += ds * dl[t] * Bn;
                    ddl += ds * (A[n] * a * prev + Bn * u);
                    g.dA_log[(size_t)c * NS + n] += ds * dl[t] * a * prev * A[n];  // dA * dA/dA_log
                    carry[n] = start ? 0.0 : ds * a;
                }
                g.du[m * Cd + c] = du;
                double ddp = ddl * (v > 20.0 ? 1.0 : sigmoid_d(v));
                g.ddpre[m * Cd + c] = ddp;
                g.ddt_bias[c] += ddp;
            }
        }
}

// ---------------------------------------------------------------- random inputs
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand() {  // [0, 1)
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand() { return sqrt(-2.0 * log(1.0 - urand())) * cos(6.283185307179586 * urand()); }
static double bf16_round(double x) { return (double)__bfloat162float(__float2bfloat16((float)x)); }

// Documents of random lengths laid end to end over all M tokens, so some cross row boundaries (where t % T == 0
// must reset anyway) and some are 1-2 tokens long.
static void make_pos(std::vector<int32_t> &pos, int M, int mean_len) {
    pos.resize(M);
    int left = 0, p = 0;
    for (int m = 0; m < M; m++) {
        if (left == 0) {
            left = urand() < 0.1 ? 1 + (int)(urand() * 2) : 1 + (int)(urand() * 2 * mean_len);
            p = 0;
        }
        pos[m] = p++;
        left--;
    }
}

static void make_prob(Prob &p, int rows, int T, int Cd, int ldbc, int ob, int oc, int ldz, int oz, int mean_len,
                      bool bf) {
    p.rows = rows, p.T = T, p.Cd = Cd, p.M = rows * T, p.ldbc = ldbc, p.ob = ob, p.oc = oc, p.ldz = ldz, p.oz = oz;
    int M = p.M;
    auto R = [bf](double x) { return bf ? bf16_round(x) : x; };
    p.u.resize((size_t)M * Cd), p.dpre.resize((size_t)M * Cd), p.dout.resize((size_t)M * Cd);
    p.xp.resize((size_t)M * ldbc), p.zb.resize((size_t)M * ldz);
    for (auto &x : p.u) x = R(nrand());
    for (auto &x : p.dout) x = R(nrand());
    // delta = softplus(dpre + dt_bias) mostly 0.01-0.1; one in 500 above the softplus threshold of 20
    for (auto &x : p.dpre) x = R(urand() < 0.002 ? 20.5 + 4 * urand() : 0.5 * nrand() - 4.0);
    for (auto &x : p.xp) x = R(nrand());
    for (auto &x : p.zb) x = R(nrand());
    p.dt_bias.resize(Cd), p.D.resize(Cd), p.A_log.resize((size_t)Cd * NS);
    for (auto &x : p.dt_bias) x = (float)(0.2 * nrand());
    for (auto &x : p.D) x = (float)(1.0 + 0.3 * nrand());
    // A_log starts at ln(n+1) and is trained: perturb it so no kernel may rely on that structure
    for (int c = 0; c < Cd; c++)
        for (int n = 0; n < NS; n++) p.A_log[(size_t)c * NS + n] = (float)(log(n + 1.0) + 0.1 * nrand());
    make_pos(p.pos, M, mean_len);
}

// ---------------------------------------------------------------- finite-difference check of the reference
static double fd_loss(const Prob &p) {  // sum(out * dout)
    Grads g;
    ref_run(p, g, false);
    double L = 0;
    for (size_t i = 0; i < g.out.size(); i++) L += g.out[i] * p.dout[i];
    return L;
}
static int fd_check() {
    Prob p;
    make_prob(p, 2, 9, 3, 40, 1, 20, 7, 2, 4, false);  // tiny, unrounded doubles
    p.pos = {0, 1, 2, 0, 1, 2, 3, 4, 5, /* row 2 continues the document: the row start must reset */ 6, 7, 0,
             0, 1, 2, 3, 4, 5};
    for (int i = 0; i < 20; i++) p.dpre[i] = 0.5 * nrand() - 1.0;  // larger deltas: stronger coupling
    p.dpre[4] = 21.3;                                            // above the softplus threshold
    Grads g;
    ref_run(p, g, true);
    double worst = 0;
    int nchecked = 0;
    auto check = [&](const char *name, std::vector<double> &x, size_t i, double ana) {
        double h = 1e-6 * std::max(1.0, fabs(x[i])), x0 = x[i];
        x[i] = x0 + h;
        double lp = fd_loss(p);
        x[i] = x0 - h;
        double lm = fd_loss(p);
        x[i] = x0;
        double num = (lp - lm) / (2 * h), err = fabs(num - ana) / std::max(1e-3, fabs(num));
        worst = std::max(worst, err);
        nchecked++;
        if (err > 1e-5) printf("  FD %s[%zu]: numeric %.9g analytic %.9g\n", name, i, num, ana);
    };
    int M = p.M, Cd = p.Cd;
    for (size_t i = 0; i < (size_t)M * Cd; i++) {
        check("u", p.u, i, g.du[i]);
        check("dpre", p.dpre, i, g.ddpre[i]);
    }
    for (int m = 0; m < M; m++)
        for (int c = 0; c < Cd; c++) check("z", p.zb, (size_t)m * p.ldz + p.oz + c, g.dz[(size_t)m * Cd + c]);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < NS; n++) {
            check("B", p.xp, (size_t)m * p.ldbc + p.ob + n, g.dB[(size_t)m * NS + n]);
            check("C", p.xp, (size_t)m * p.ldbc + p.oc + n, g.dC[(size_t)m * NS + n]);
        }
    for (int c = 0; c < Cd; c++) {
        check("dt_bias", p.dt_bias, c, g.ddt_bias[c]);
        check("D", p.D, c, g.dD[c]);
        for (int n = 0; n < NS; n++) check("A_log", p.A_log, (size_t)c * NS + n, g.dA_log[(size_t)c * NS + n]);
    }
    // no leakage: the output of the first document of row 0 (tokens 0-2) must not depend on tokens 3+
    bool leak = false;
    {
        Grads g0, g1;
        ref_run(p, g0, false);
        for (size_t i = 3 * Cd; i < p.u.size(); i++) p.u[i] += 1.0;
        ref_run(p, g1, false);
        for (int i = 0; i < 3 * Cd; i++) leak |= g0.out[i] != g1.out[i];
    }
    printf("reference FD check: %d partial derivatives, worst relative error %.2e (%s); causality %s\n", nchecked,
           worst, worst < 1e-5 ? "ok" : "FAIL", leak ? "FAIL" : "ok");
    return worst < 1e-5 && !leak ? 0 : 1;
}

// ---------------------------------------------------------------- device buffers of one problem
struct Dev {
    __nv_bfloat16 *u, *dpre, *xp, *zb, *dout, *out, *du, *ddpre, *dxp, *dzb, *yre;
    float *dt_bias, *A_log, *D, *ddt_bias, *dA_log, *dD;
    int32_t *pos;
    void *ws;
    size_t ws_bytes;
};
static __nv_bfloat16 *up_bf(const std::vector<double> &x) {
    std::vector<__nv_bfloat16> h(x.size());
    for (size_t i = 0; i < x.size(); i++) h[i] = __float2bfloat16((float)x[i]);
    __nv_bfloat16 *d;
    cudaCheck(cudaMalloc(&d, h.size() * 2));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
}
static float *up_f(const std::vector<double> &x) {
    std::vector<float> h(x.begin(), x.end());
    float *d;
    cudaCheck(cudaMalloc(&d, h.size() * 4));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static void dev_alloc(Dev &d, const Prob &p, size_t ws_bytes) {
    d.u = up_bf(p.u), d.dpre = up_bf(p.dpre), d.xp = up_bf(p.xp), d.zb = up_bf(p.zb), d.dout = up_bf(p.dout);
    d.dt_bias = up_f(p.dt_bias), d.A_log = up_f(p.A_log), d.D = up_f(p.D);
    size_t MC = (size_t)p.M * p.Cd;
    cudaCheck(cudaMalloc(&d.out, MC * 2));
    cudaCheck(cudaMalloc(&d.du, MC * 2));
    cudaCheck(cudaMalloc(&d.ddpre, MC * 2));
    cudaCheck(cudaMalloc(&d.yre, MC * 2));
    cudaCheck(cudaMalloc(&d.dxp, (size_t)p.M * p.ldbc * 2));
    cudaCheck(cudaMalloc(&d.dzb, (size_t)p.M * p.ldz * 2));
    cudaCheck(cudaMalloc(&d.ddt_bias, p.Cd * 4));
    cudaCheck(cudaMalloc(&d.dD, p.Cd * 4));
    cudaCheck(cudaMalloc(&d.dA_log, (size_t)p.Cd * NS * 4));
    cudaCheck(cudaMalloc(&d.pos, p.M * 4));
    cudaCheck(cudaMemcpy(d.pos, p.pos.data(), p.M * 4, cudaMemcpyHostToDevice));
    d.ws_bytes = ws_bytes;
    cudaCheck(cudaMalloc(&d.ws, ws_bytes));
}
static void dev_free(Dev &d) {
    void *ps[] = {d.u, d.dpre, d.xp, d.zb, d.dout, d.out, d.du, d.ddpre, d.yre, d.dxp, d.dzb, d.dt_bias,
                  d.A_log, d.D, d.ddt_bias, d.dD, d.dA_log, d.pos, d.ws};
    for (void *q : ps) cudaCheck(cudaFree(q));
}
static void run_fwd(const Version &v, Dev &d, const Prob &p) {
    v.fwd(d.out, d.u, d.dpre, d.dt_bias, d.A_log, d.xp + p.ob, d.xp + p.oc, p.ldbc, d.D, d.zb + p.oz, p.ldz, d.pos,
          p.M, p.T, p.Cd, NS, 0);
}
static void run_bwd(const Version &v, Dev &d, const Prob &p) {
    g_yout = d.yre;
    v.bwd(d.du, d.ddpre, d.dxp + p.ob, d.dxp + p.oc, d.dzb + p.oz, d.ddt_bias, d.dA_log, d.dD, d.dout, d.u, d.dpre,
          d.dt_bias, d.A_log, d.xp + p.ob, d.xp + p.oc, p.ldbc, d.D, d.zb + p.oz, p.ldz, d.pos, p.M, p.T, p.Cd, NS,
          d.ws, d.ws_bytes, 1, 0);
}

// ---------------------------------------------------------------- downloads and comparisons
static std::vector<uint16_t> down16(const __nv_bfloat16 *d, size_t n) {
    std::vector<uint16_t> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    return h;
}
static std::vector<float> down32(const float *d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}
static double bfv(uint16_t b) {
    uint32_t w = (uint32_t)b << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
}
// Extract an (M, cols) strided slice of a bf16 download as doubles.
static std::vector<double> slice(const std::vector<uint16_t> &h, int M, int cols, int ld, int off) {
    std::vector<double> r((size_t)M * cols);
    for (int m = 0; m < M; m++)
        for (int j = 0; j < cols; j++) r[(size_t)m * cols + j] = bfv(h[(size_t)m * ld + off + j]);
    return r;
}
// Everything outside the slice must still hold the poison pattern 0xFFFF.
static bool untouched_outside(const std::vector<uint16_t> &h, int M, int ld, int off, int cols, int off2, int cols2) {
    for (int m = 0; m < M; m++)
        for (int j = 0; j < ld; j++) {
            bool in = (j >= off && j < off + cols) || (j >= off2 && j < off2 + cols2);
            if (!in && h[(size_t)m * ld + j] != 0xFFFF) return false;
        }
    return true;
}
static double relerr(const std::vector<double> &x, const std::vector<double> &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); i++) {
        if (!std::isfinite(x[i])) return INFINITY;
        num += (x[i] - ref[i]) * (x[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / std::max(den, 1e-300));
}

struct Outs {  // one run's outputs, raw
    std::vector<uint16_t> out, du, ddpre, dxp, dzb, yre;
    std::vector<float> ddt_bias, dA_log, dD;
};
// Poison, run fwd + bwd once (accumulators preset to acc0), download everything.
static Outs run_once(const Version &v, Dev &d, const Prob &p, const std::vector<float> &acc0) {
    size_t MC = (size_t)p.M * p.Cd;
    cudaCheck(cudaMemset(d.out, 0xFF, MC * 2));
    cudaCheck(cudaMemset(d.du, 0xFF, MC * 2));
    cudaCheck(cudaMemset(d.ddpre, 0xFF, MC * 2));
    cudaCheck(cudaMemset(d.yre, 0xFF, MC * 2));
    cudaCheck(cudaMemset(d.dxp, 0xFF, (size_t)p.M * p.ldbc * 2));
    cudaCheck(cudaMemset(d.dzb, 0xFF, (size_t)p.M * p.ldz * 2));
    cudaCheck(cudaMemset(d.ws, 0xFF, d.ws_bytes));  // the workspace holds garbage between calls in the backend too
    cudaCheck(cudaMemcpy(d.ddt_bias, acc0.data(), p.Cd * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d.dD, acc0.data() + p.Cd, p.Cd * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d.dA_log, acc0.data() + 2 * p.Cd, (size_t)p.Cd * NS * 4, cudaMemcpyHostToDevice));
    run_fwd(v, d, p);
    cudaCheck(cudaGetLastError());
    run_bwd(v, d, p);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaDeviceSynchronize());
    Outs o;
    o.out = down16(d.out, MC), o.du = down16(d.du, MC), o.ddpre = down16(d.ddpre, MC), o.yre = down16(d.yre, MC);
    o.dxp = down16(d.dxp, (size_t)p.M * p.ldbc), o.dzb = down16(d.dzb, (size_t)p.M * p.ldz);
    o.ddt_bias = down32(d.ddt_bias, p.Cd), o.dD = down32(d.dD, p.Cd), o.dA_log = down32(d.dA_log, (size_t)p.Cd * NS);
    return o;
}
static bool same_bits(const Outs &a, const Outs &b) {
    return a.out == b.out && a.du == b.du && a.ddpre == b.ddpre && a.yre == b.yre && a.dxp == b.dxp && a.dzb == b.dzb &&
           !memcmp(a.ddt_bias.data(), b.ddt_bias.data(), a.ddt_bias.size() * 4) &&
           !memcmp(a.dD.data(), b.dD.data(), a.dD.size() * 4) &&
           !memcmp(a.dA_log.data(), b.dA_log.data(), a.dA_log.size() * 4);
}
// Gradient tensors of a run as doubles, accumulators minus their preset values.
static Grads as_grads(const Outs &o, const Prob &p, const std::vector<float> &acc0) {
    Grads g;
    int M = p.M, Cd = p.Cd;
    g.out = slice(o.out, M, Cd, Cd, 0), g.du = slice(o.du, M, Cd, Cd, 0), g.ddpre = slice(o.ddpre, M, Cd, Cd, 0);
    g.dB = slice(o.dxp, M, NS, p.ldbc, p.ob), g.dC = slice(o.dxp, M, NS, p.ldbc, p.oc);
    g.dz = slice(o.dzb, M, Cd, p.ldz, p.oz);
    g.ddt_bias.resize(Cd), g.dD.resize(Cd), g.dA_log.resize((size_t)Cd * NS);
    for (int c = 0; c < Cd; c++) {
        g.ddt_bias[c] = (double)o.ddt_bias[c] - acc0[c];
        g.dD[c] = (double)o.dD[c] - acc0[Cd + c];
    }
    for (size_t i = 0; i < (size_t)Cd * NS; i++) g.dA_log[i] = (double)o.dA_log[i] - acc0[2 * Cd + i];
    return g;
}
// Compare two gradient sets; prints one line; returns the worst error.
static double compare(const char *label, const Grads &x, const Grads &r) {
    const char *names[] = {"out", "du", "ddpre", "dB", "dC", "dz", "ddt_bias", "dA_log", "dD"};
    const std::vector<double> *xs[] = {&x.out, &x.du, &x.ddpre, &x.dB, &x.dC, &x.dz, &x.ddt_bias, &x.dA_log, &x.dD};
    const std::vector<double> *rs[] = {&r.out, &r.du, &r.ddpre, &r.dB, &r.dC, &r.dz, &r.ddt_bias, &r.dA_log, &r.dD};
    double worst = 0;
    printf("  %-28s", label);
    for (int i = 0; i < 9; i++) {
        double e = relerr(*xs[i], *rs[i]);
        worst = std::max(worst, std::isnan(e) ? INFINITY : e);
        printf(" %s %.1e", names[i], e);
    }
    printf("\n");
    return worst;
}

// ---------------------------------------------------------------- checks
struct Shape {
    const char *name;
    int rows, T, Cd, ldbc, ob, oc, ldz, oz, mean_len;
};
static int check_version(const Version &v, const Shape &s, double tol) {
    Prob p;
    make_prob(p, s.rows, s.T, s.Cd, s.ldbc, s.ob, s.oc, s.ldz, s.oz, s.mean_len, true);
    Grads ref;
    ref_run(p, ref, true);
    Dev d;
    dev_alloc(d, p, v.ws(p.M, p.T, p.Cd, NS));
    std::vector<float> acc0((size_t)(2 + NS) * p.Cd);
    for (auto &a : acc0) a = (float)nrand();
    Outs o1 = run_once(v, d, p, acc0), o2 = run_once(v, d, p, acc0);
    char label[128];
    snprintf(label, sizeof label, "%s %s", v.name, s.name);
    double worst = compare(label, as_grads(o1, p, acc0), ref);
    bool det = same_bits(o1, o2);
    bool fence = untouched_outside(o1.dxp, p.M, p.ldbc, p.ob, NS, p.oc, NS) &&
                 untouched_outside(o1.dzb, p.M, p.ldz, p.oz, p.Cd, p.oz, 0);
    // v24: the backward's copy of the forward's output must be the forward's, bit for bit
    bool reok = !v.reout || o1.yre == o1.out;
    if (v.reout) printf("  %-28s the backward's copy of out: %s\n", "", reok ? "bit-identical" : "DIFFERS");
    bool ok = worst < tol && det && fence && reok;
    printf("  %-28s worst %.2e (tol %.0e), deterministic %s, no stray writes %s -> %s\n", "", worst, tol,
           det ? "yes" : "NO", fence ? "yes" : "NO", ok ? "PASS" : "FAIL");
    dev_free(d);
    return ok ? 0 : 1;
}

// ---------------------------------------------------------------- timing at the benchmark sizes
// Inputs drawn on the device (hash -> normal) so big problems start fast.
__device__ float hash_normal(uint64_t i, uint64_t seed) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
    float u1 = ((x >> 40) + 1) * (1.0f / 16777217.0f), u2 = ((x >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
    return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}
__global__ void fill_normal(__nv_bfloat16 *x, size_t n, float scale, float shift, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(hash_normal(i, seed) * scale + shift);
}
static void fill(__nv_bfloat16 *x, size_t n, float scale, float shift, uint64_t seed) {
    fill_normal<<<1024, 256>>>(x, n, scale, shift, seed);
    cudaCheck(cudaGetLastError());
}

struct Timing {
    double fwd, fb;
};
static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
// Big problem on the device; times every version; cross-checks versions against versions[0].
// profile >= 0: run only that version, fwd+bwd twice, and return (for ncu's per-kernel times).
// The timed problem at (rows, T, Cd): random inputs on the device, zeroed parameter-gradient accumulators, the
// corpus's mean document length, a workspace of ws bytes; p holds the shapes only (host data stays empty).
static void timed_problem(int rows, int T, int Cd, size_t ws, Dev &d, Prob &p) {
    int M = rows * T, ldbc = 64 + 2 * NS, ob = 64, oc = 64 + NS, ldz = 2 * Cd, oz = Cd;
    p.rows = rows, p.T = T, p.Cd = Cd, p.M = M, p.ldbc = ldbc, p.ob = ob, p.oc = oc, p.ldz = ldz, p.oz = oz;
    std::vector<double> dummyC(Cd), dummyA((size_t)Cd * NS);
    for (int c = 0; c < Cd; c++) {
        dummyC[c] = 0.2 * nrand();
        for (int n = 0; n < NS; n++) dummyA[(size_t)c * NS + n] = log(n + 1.0) + 0.1 * nrand();
    }
    size_t MC = (size_t)M * Cd;
    cudaCheck(cudaMalloc(&d.u, MC * 2));
    cudaCheck(cudaMalloc(&d.dpre, MC * 2));
    cudaCheck(cudaMalloc(&d.dout, MC * 2));
    cudaCheck(cudaMalloc(&d.xp, (size_t)M * ldbc * 2));
    cudaCheck(cudaMalloc(&d.zb, (size_t)M * ldz * 2));
    fill(d.u, MC, 1, 0, 1), fill(d.dpre, MC, 0.5f, -4.f, 2), fill(d.dout, MC, 1, 0, 3);
    fill(d.xp, (size_t)M * ldbc, 1, 0, 4), fill(d.zb, (size_t)M * ldz, 1, 0, 5);
    d.dt_bias = up_f(dummyC), d.A_log = up_f(dummyA);
    for (auto &x : dummyC) x = 1.0 + 0.3 * nrand();
    d.D = up_f(dummyC);
    cudaCheck(cudaMalloc(&d.out, MC * 2));
    cudaCheck(cudaMalloc(&d.du, MC * 2));
    cudaCheck(cudaMalloc(&d.ddpre, MC * 2));
    cudaCheck(cudaMalloc(&d.yre, MC * 2));
    cudaCheck(cudaMalloc(&d.dxp, (size_t)M * ldbc * 2));
    cudaCheck(cudaMalloc(&d.dzb, (size_t)M * ldz * 2));
    cudaCheck(cudaMalloc(&d.ddt_bias, Cd * 4));
    cudaCheck(cudaMalloc(&d.dD, Cd * 4));
    cudaCheck(cudaMalloc(&d.dA_log, (size_t)Cd * NS * 4));
    cudaCheck(cudaMemset(d.ddt_bias, 0, Cd * 4));
    cudaCheck(cudaMemset(d.dD, 0, Cd * 4));
    cudaCheck(cudaMemset(d.dA_log, 0, (size_t)Cd * NS * 4));
    make_pos(p.pos, M, 640);  // the corpus's mean document length
    cudaCheck(cudaMalloc(&d.pos, M * 4));
    cudaCheck(cudaMemcpy(d.pos, p.pos.data(), M * 4, cudaMemcpyHostToDevice));
    d.ws_bytes = ws;
    cudaCheck(cudaMalloc(&d.ws, ws));
}

static void time_size(int rows, int T, int Cd, Timing *res, int profile = -1) {
    g_poison_states = false;  // (the checks ran before; timings must not include the poisoning)
    size_t ws = 0;
    for (int i = 0; i < nversions; i++) ws = std::max(ws, versions[i].ws(rows * T, T, Cd, NS));
    Dev d;
    Prob p;
    timed_problem(rows, T, Cd, ws, d, p);

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::vector<float> zero((size_t)(2 + NS) * Cd, 0.f);
    Outs first;
    int first_vi = -1;
    if (profile >= 0) {
        for (int i = 0; i < 2; i++) run_fwd(versions[profile], d, p), run_bwd(versions[profile], d, p);
        cudaCheck(cudaDeviceSynchronize());
        dev_free(d);
        return;
    }
    for (int vi = 0; vi < nversions; vi++) {
        const Version &v = versions[vi];
        res[vi].fwd = res[vi].fb = 0;
        if (!selected(v.name)) continue;
        // cross-check against the first version run on this size (dB/dC/params included)
        Outs o = run_once(v, d, p, zero);
        if (first_vi < 0) {
            first = o;
            first_vi = vi;
        } else {
            Grads a = as_grads(o, p, zero), b = as_grads(first, p, zero);
            char label[96];
            snprintf(label, sizeof label, "%s vs %s B%d D%d L%d", v.name, versions[first_vi].name, rows, Cd, T);
            double w = compare(label, a, b);
            printf("  %-28s worst %.2e -> %s\n", "", w, w < 2e-2 ? "agree" : "DISAGREE");
        }
        for (int i = 0; i < 3; i++) run_fwd(v, d, p), run_bwd(v, d, p);
        std::vector<float> tf, tb;
        for (int i = 0; i < 25; i++) {
            float ms;
            cudaCheck(cudaEventRecord(e0));
            run_fwd(v, d, p);
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            tf.push_back(ms);
        }
        for (int i = 0; i < 25; i++) {
            float ms;
            cudaCheck(cudaEventRecord(e0));
            run_fwd(v, d, p);
            run_bwd(v, d, p);
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            tb.push_back(ms);
        }
        cudaCheck(cudaGetLastError());
        res[vi].fwd = median(tf), res[vi].fb = median(tb);
        printf("  timed %-6s B%d D%d L%d: fwd %.3f ms (min %.3f)  fwd+bwd %.3f ms (min %.3f)\n", v.name, rows, Cd, T,
               res[vi].fwd, *std::min_element(tf.begin(), tf.end()), res[vi].fb,
               *std::min_element(tb.begin(), tb.end()));
    }
    dev_free(d);
}

// ---------------------------------------------------------------- beside: work on the backward's idle SMs
// A stand-in for the 370m backward's recompute of a layer (the norm, the conv and dt_proj: ~131 MB read, ~160 MB
// written): dst[i] = 2 src[i mod nsrc], one float4 a thread, one block of 256 threads per 4096 float4s, as the
// element-wise kernels of the backend are launched (many blocks, each placed wherever a slot frees up).
__global__ void beside_copy_kernel(float4 *dst, const float4 *src, size_t n, size_t nsrc) {
    size_t i = blockIdx.x * (size_t)blockDim.x * 16 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 16; k++, i += blockDim.x)
        if (i < n) {
            float4 v = src[i % nsrc];
            dst[i] = make_float4(2 * v.x, 2 * v.y, 2 * v.z, 2 * v.w);
        }
}

static void beside(int vi) {
    const Version &v = versions[vi];
    Dev d;
    Prob p;
    timed_problem(8, 2048, 2048, v.ws(8 * 2048, 2048, 2048, NS), d, p);
    const int rows = p.rows, T = p.T, Cd = p.Cd;
    const size_t nsrc = (131u << 20) / 16, n = (160u << 20) / 16;
    float4 *src, *dst;
    cudaCheck(cudaMalloc(&src, nsrc * 16));
    cudaCheck(cudaMalloc(&dst, n * 16));
    cudaCheck(cudaMemset(src, 0, nsrc * 16));
    cudaStream_t s2;
    cudaCheck(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t e0, e1, e2;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaCheck(cudaEventCreate(&e2));
    const unsigned nblk = (unsigned)((n + 4095) / 4096);
    auto copy = [&](cudaStream_t st) { beside_copy_kernel<<<nblk, 256, 0, st>>>(dst, src, n, nsrc); };
    run_fwd(v, d, p);  // the states the backward reads
    // mode 0: backward alone, 1: copy alone, 2: both (the backward launched first, the copy on s2 after it),
    // 3: both, the copy launched first
    std::vector<float> t[4];
    for (int rep = 0; rep < 12; rep++)
        for (int mode = 0; mode < 4; mode++) {
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaEventRecord(e0, 0));
            cudaCheck(cudaStreamWaitEvent(s2, e0, 0));
            if (mode == 3) copy(s2);
            if (mode != 1) run_bwd(v, d, p);
            if (mode == 1 || mode == 2) copy(s2);
            cudaCheck(cudaEventRecord(e2, s2));
            cudaCheck(cudaStreamWaitEvent(0, e2, 0));
            cudaCheck(cudaEventRecord(e1, 0));
            cudaCheck(cudaEventSynchronize(e1));
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            if (rep >= 2) t[mode].push_back(ms);
        }
    cudaCheck(cudaGetLastError());
    const char *names[4] = {"backward alone", "copy alone (131 MB read, 160 MB written)", "both, backward first",
                            "both, copy first"};
    for (int mode = 0; mode < 4; mode++)
        printf("beside %-6s B%d D%d L%d: %-42s %.4f ms (min %.4f)\n", v.name, rows, Cd, T, names[mode],
               median(t[mode]), *std::min_element(t[mode].begin(), t[mode].end()));
    printf("beside: both - backward alone = %.4f ms of the copy's %.4f (%.0f%% hidden)\n",
           median(t[2]) - median(t[0]), median(t[1]), 100.0 * (1.0 - (median(t[2]) - median(t[0])) / median(t[1])));
    cudaFree(src), cudaFree(dst);
    dev_free(d);
}

int main(int argc, char **argv) {
    bool cpu_only = argc > 1 && !strcmp(argv[1], "cpu");
    if (argc > 2 && !strcmp(argv[1], "profile")) {  // for ncu: one version's fwd+bwd twice at B8 D2048 L2048
        const char *cd = getenv("LAB_PROFILE_CD");    // (or at B8 D$LAB_PROFILE_CD L2048,
        const char *sh = getenv("LAB_PROFILE_SHAPE");  // or at LAB_PROFILE_SHAPE=BxTxCd)
        int rows = 8, T = 2048, Cd = cd && *cd ? atoi(cd) : 2048;
        if (sh && *sh && sscanf(sh, "%dx%dx%d", &rows, &T, &Cd) != 3) {
            fprintf(stderr, "LAB_PROFILE_SHAPE=%s: expected BxTxCd\n", sh);
            return 2;
        }
        for (int vi = 0; vi < nversions; vi++)
            if (!strcmp(versions[vi].name, argv[2])) time_size(rows, T, Cd, NULL, vi);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "beside")) {
        for (int vi = 0; vi < nversions; vi++)
            if (!strcmp(versions[vi].name, argc > 2 ? argv[2] : "prod")) beside(vi);
        return 0;
    }
    int bad = fd_check();
    if (cpu_only) return bad;

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

    // correctness vs the float64 reference: the brief's small size, and an awkward one (Cd not a multiple of
    // the block, T not a multiple of the chunk, odd strides and offsets for B/C and z)
    // (the odd one takes the generic path; the others the staged one, partial blocks and chunks included)
    Shape shapes[] = {{"B2 D256 L512", 2, 512, 256, 80, 48, 64, 512, 256, 60},
                      {"B2 D136 L100 partial", 2, 100, 136, 37, 3, 20, 272, 136, 12},
                      {"B4 D64 L20 tiny", 4, 20, 64, 40, 4, 24, 128, 64, 6},
                      {"B130 D128 L24 many rows", 130, 24, 128, 80, 48, 64, 256, 128, 8},
                      {"B3 D200 L77 odd strides", 3, 77, 200, 37, 3, 20, 403, 201, 9},
                      // v8 cuts rows of >= 128 tokens into time segments: 8 segments of 128 tokens, the last
                      // partial, documents long enough (mean 3000) that states cross segment boundaries
                      {"B1 D128 L1000 segments", 1, 1000, 128, 80, 48, 64, 256, 128, 3000},
                      {"B2 D256 L1024 seg+resets", 2, 1024, 256, 80, 48, 64, 512, 256, 200},
                      {"B4 D512 L1024 seg CH128", 4, 1024, 512, 80, 48, 64, 1024, 512, 300},
                      // v20's 4-threads-per-channel backward takes >= 2 blocks of 32 channels per SM: a partial
                      // block (520 = 16 * 32 + 8) and a partial last chunk (200 = 12 * 16 + 8)
                      {"B16 D520 L200 bwd4", 16, 200, 520, 80, 48, 64, 1040, 520, 70},
                      // the warp-specialized forward (v65-v70: 64-wide blocks) with a partial block (200 = 3 * 64
                      // + 8) and a partial chunk (40 = 2 * 16 + 8)
                      {"B66 D200 L40 v65 partial", 66, 40, 200, 80, 48, 64, 400, 200, 12},
                      // the 2-thread backward's 128-wide plan without segments (one wave: 120 blocks; v72's
                      // warp-specialized backward in sm_90a builds), a partial block and chunk
                      {"B60 D200 L40 128-wide partial", 60, 40, 200, 80, 48, 64, 400, 200, 12}};
    for (int vi = 0; vi < nversions; vi++)
        for (const Shape &s : shapes)
            if ((argc < 3 || !strcmp(argv[2], versions[vi].name)) && selected(versions[vi].name))
                bad |= check_version(versions[vi], s, 1e-2);
    if (argc > 1 && !strcmp(argv[1], "small")) {  // checks only (for compute-sanitizer): scan_lab small [VERSION]
        printf("correctness: %s\n", bad ? "FAIL" : "all PASS");
        return bad;
    }

    // timing at the benchmark sizes
    struct Big {
        int rows, T, Cd;
        double off_fwd, off_fb;
    } bigs[16] = {{8, 2048, 2048, 0.673, 3.215},
                  {2, 8192, 4096, 1.489, 6.696},
                  {8, 2048, 1536, 0, 0},     // the 130m model's scan (d_inner 1536); no official number
                  {1, 16384, 1536, 0, 0}};   // 130m at T = 16384, B = 1 (the study's worst case)
    int nbig = 4;
    // LAB_BIGS="BxTxCd,..." times these sizes instead (no official numbers)
    if (const char *e = getenv("LAB_BIGS")) {
        nbig = 0;
        for (const char *p = e; *p && nbig < 16;) {
            Big b = {0, 0, 0, 0, 0};
            if (sscanf(p, "%dx%dx%d", &b.rows, &b.T, &b.Cd) != 3) break;
            bigs[nbig++] = b;
            p = strchr(p, ',');
            if (!p) break;
            p++;
        }
    }
    Timing tim[16][16];  // (sizes, versions)
    for (int b = 0; b < nbig; b++) time_size(bigs[b].rows, bigs[b].T, bigs[b].Cd, tim[b]);

    // floors: bytes over the copy bandwidth (DESIGN §3: 4.24 TB/s), state exps over the SFU (16/clk/SM, 1.98 GHz)
    const double bw = 4.24e12, sfu = 16.0 * prop.multiProcessorCount * 1.98e9;
    printf("\n%-6s %-16s %9s %11s %9s %9s %12s %12s\n", "ver", "size", "fwd ms", "fwd+bwd ms", "x off fwd",
           "x off f+b", "fwd %floor", "f+b %floor");
    for (int b = 0; b < nbig; b++) {
        double M = (double)bigs[b].rows * bigs[b].T, MC = M * bigs[b].Cd;
        double bytes_f = MC * 2 * 4 + M * (2 * NS * 2 + 4), bytes_fb = bytes_f + MC * 2 * 7 + M * (4 * NS * 2 + 4);
        double floor_f = std::max(bytes_f / bw, MC * NS / sfu) * 1e3;       // one pass of exps
        double floor_fb = std::max(bytes_fb / bw, 2 * MC * NS / sfu) * 1e3;  // fwd + at least one in the bwd
        for (int vi = 0; vi < nversions; vi++) {
            if (!selected(versions[vi].name)) continue;
            char sz[32];
            snprintf(sz, sizeof sz, "B%d D%d L%d", bigs[b].rows, bigs[b].Cd, bigs[b].T);
            printf("%-6s %-16s %9.3f %11.3f %9.2f %9.2f %11.0f%% %11.0f%%\n", versions[vi].name, sz, tim[b][vi].fwd,
                   tim[b][vi].fb, bigs[b].off_fwd / tim[b][vi].fwd, bigs[b].off_fb / tim[b][vi].fb,  // 0: no official
                   100 * floor_f / tim[b][vi].fwd, 100 * floor_fb / tim[b][vi].fb);
        }
        printf("%-6s %-16s %9.3f %11.3f   (bytes %.3f / %.3f ms, exps %.3f / %.3f ms)\n", "floor", "", floor_f,
               floor_fb, bytes_f / bw * 1e3, bytes_fb / bw * 1e3, MC * NS / sfu * 1e3, 2 * MC * NS / sfu * 1e3);
    }
    printf("\ncorrectness: %s\n", bad ? "FAIL" : "all PASS");
    return bad;
}
