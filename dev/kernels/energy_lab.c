// energy_lab.c — joules per op on the GPU. Every GPU configuration we train runs at the card's power limit
// (docs/perf.md, thirty-eighth session), where the clock-bound parts of a step are paid for in energy: what the
// other ops draw sets the clock they run at. This lab runs each main op of a 370m layer (B8, T2048, and AdamW over
// the whole 370m parameter set) alone, in a loop, for a fixed time after a warm-up, and reads NVML's energy counter
// and clocks through the sampler (nvml_probe; the energy as the counter's rate between its moves): ms a call, J a
// call, mean W and SM clock, the share of samples the power cap held the clock. Inputs are random (zeros would
// flatter the power). docs/bench/energy_lab_370m.txt holds call313's run; call310's, from the difference of two
// readings, are in docs/perf.md (thirty-eighth session).
//
// `gemms` runs instead the main GEMMs of a 370m step (in_proj's and out_proj's forward, input and weight
// gradients, the latter in the step's layer pairs) once with each of cuBLASLt's candidates
// (backend_cuda_gemm_pick): whether the candidate the tuner picks from a few timed runs at one clock
// (backend_cuda.cu, gemm_tune) is also the cheapest sustained at the power limit, where its joules set the clock.
//
// Built by CMake where CUDA is (target energy_lab; dev/gpu.sh pack copies it to .gpu/bin). Run on the GPU machine:
//   .gpu/bin/energy_lab [seconds per op, default 2]
//   .gpu/bin/energy_lab gemms [seconds per candidate, default 1.5]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "bench_cost.h"
#include "model.h"
#include "nvml_probe.h"
#include "util.h"

enum { B = 8, T = 2048, M = B * T };
static int D, DI, N, R, NX, KC;  // the 370m preset's (config_preset): d_model, d_inner, d_state, dt_rank, R+2N, d_conv
static size_t NPARAMS;           // its parameter count (model_num_params)

static const Backend *G;
static PmRng g_rng;  // (seeded in main)
static float urand(float lo, float hi) { return lo + (hi - lo) * pm_rng_uniform(&g_rng); }

// n random F32 values in [lo, hi) on the device
static void *dev_f32(size_t n, float lo, float hi) {
    float *h = pm_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = urand(lo, hi);
    void *d = G->alloc(n * 4);
    G->upload(d, h, n * 4);
    free(h);
    return d;
}
// the same as ACT (bf16)
static void *dev_act(size_t n, float lo, float hi) {
    void *f = dev_f32(n, lo, hi), *a = G->alloc(n * G->act_bytes);
    G->f32_to_act(a, f, n);
    G->synchronize();
    G->free(f);
    return a;
}

// The buffers of one layer (shape comments: rows x columns, row-major)
static void *res, *res2, *h, *nw, *rstd, *xn;          // (M, D) F32, (M, D) F32, (M, D) ACT, (D) F32, (M) F32, (M, D) ACT
static void *w_in, *xz, *cw, *cb, *u;                   // (2DI, D) ACT, (M, 2DI) ACT, (DI, KC) F32, (DI) F32, (M, DI) ACT
static void *xdbl, *dpre, *dtb, *alog, *dd, *states;    // (M, NX) ACT, (M, DI) ACT, (DI) F32, (DI, N) F32, (DI) F32, states
static void *y, *w_out, *out;                           // (M, DI) ACT, (D, DI) ACT, (M, D) ACT
static void *dy, *du, *ddpre, *dxdbl, *dxz, *gdtb, *galog, *gd;  // scan backward's outputs
static void *gw_in, *gw_out2, *dh2, *y2;                // (2DI, D) F32, (2, D, DI) F32, (2, M, D) ACT, (2, M, DI) ACT
static int32_t *pos;                                    // (M) device
static void *p, *pa, *g, *mo, *vo;                      // AdamW: (NPARAMS) F32 x4, ACT copy
static ParamSegment seg;
static int adam_step;

static void op_norm(void) { G->add_rmsnorm_fwd(res2, xn, rstd, res, h, nw, M, D, 1e-5f); }
static void op_in_proj(void) { G->matmul_fwd(xz, 2 * DI, xn, D, w_in, NULL, M, 2 * DI, D); }
static void op_conv(void) { G->conv_silu_fwd(u, xz, 2 * DI, cw, cb, pos, M, T, DI, KC, NULL, NULL); }
static void op_scan_fwd(void) {
    G->scan_fwd(y, u, dpre, dtb, alog, (char *)xdbl + (size_t)R * G->act_bytes,
                (char *)xdbl + (size_t)(R + N) * G->act_bytes, NX, dd, (char *)xz + (size_t)DI * G->act_bytes, 2 * DI,
                pos, M, T, DI, N, states, NULL, NULL);
}
static void op_scan_bwd(void) {
    G->scan_bwd(du, ddpre, (char *)dxdbl + (size_t)R * G->act_bytes, (char *)dxdbl + (size_t)(R + N) * G->act_bytes,
                (char *)dxz + (size_t)DI * G->act_bytes, gdtb, galog, gd, dy, u, dpre, dtb, alog,
                (char *)xdbl + (size_t)R * G->act_bytes, (char *)xdbl + (size_t)(R + N) * G->act_bytes, NX, dd,
                (char *)xz + (size_t)DI * G->act_bytes, 2 * DI, pos, M, T, DI, N, states, y, NULL, NULL);
}
static void op_out_proj(void) { G->matmul_fwd(out, D, y, DI, w_out, NULL, M, D, DI); }
static void op_in_proj_dx(void) { G->matmul_bwd(xn, D, 0, NULL, NULL, xz, 2 * DI, NULL, D, w_in, M, 2 * DI, D); }
static void op_in_proj_dw(void) { G->matmul_bwd(NULL, D, 0, gw_in, NULL, xz, 2 * DI, xn, D, w_in, M, 2 * DI, D); }
static void op_out_proj_dx(void) { G->matmul_bwd(dy, DI, 0, NULL, NULL, out, D, NULL, DI, w_out, M, D, DI); }
static void op_out_proj_dw2(void) {  // two layers' at once, as the step's groups of Model.dw_group = 2 run them
    G->matmul_dw_batch(gw_out2, (size_t)D * DI, dh2, D, (size_t)M * D, y2, DI, (size_t)M * DI, 2, M, D, DI);
}
static void op_adamw(void) {
    AdamWArgs a = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, ++adam_step, 0, 0};
    G->adamw(p, pa, g, mo, vo, &seg, 1, &a);
}
static void op_idle(void) { usleep(20000); }

typedef struct {
    const char *name;
    void (*run)(void);
    const char *region;  // the training step's region whose counted work (bench_cost.c) one call does, or NULL
} Op;

typedef struct {
    double ms, j, w, mhz, capped;  // a call's time and energy, the mean power, SM clock and power-capped share
} Reading;

// Runs `run` in a loop for `secs` after a warm-up of `warm` seconds (the card settles for it), sampled under tag;
// a call's time and energy in *r.
static void measure(NvmlProbe *nv, int tag, void (*run)(void), double warm, double secs, Reading *r) {
    // calls between synchronizations: ~50 ms of work
    double t0 = pm_now();
    run();
    G->synchronize();
    const double t1 = pm_now() - t0;
    const int batch = t1 > 0.05 ? 1 : (int)(0.05 / (t1 > 1e-6 ? t1 : 1e-6)) + 1;
    for (t0 = pm_now(); pm_now() - t0 < warm;) {
        for (int i = 0; i < batch; i++) run();
        G->synchronize();
    }
    nvml_set_tag(nv, tag);
    const double e0 = nvml_energy_j(nv);
    long calls = 0;
    for (t0 = pm_now(); pm_now() - t0 < secs; calls += batch) {
        for (int i = 0; i < batch; i++) run();
        G->synchronize();
    }
    const double dt = pm_now() - t0;
    const double diff = nvml_energy_j(nv) - e0;
    nvml_set_tag(nv, -1);
    NvmlSummary s;
    nvml_summary(nv, tag, &s);
    // (the counter moves in steps, every 100 ms on the H200, call313: its rate between moves, as bench.c takes it)
    const double ej = nvml_interval_energy_j(&s, dt, diff, NULL);
    r->ms = 1e3 * dt / calls, r->j = ej / calls, r->w = ej / dt, r->mhz = s.sm_mhz.mean;
    r->capped = s.reasons_n ? 100.0 * s.power_cap_n / s.reasons_n : NAN;
}

// The gemms mode: each GEMM with each of its candidates
static int run_gemms(NvmlProbe *nv, double secs) {
    const Op ops[] = {
        {"in_proj fwd", op_in_proj, NULL},   {"in_proj dX", op_in_proj_dx, NULL},   {"in_proj dW", op_in_proj_dw, NULL},
        {"out_proj fwd", op_out_proj, NULL}, {"out_proj dX", op_out_proj_dx, NULL},
        {"out_proj dW (2 layers)", op_out_proj_dw2, NULL},
    };
    printf("energy_lab gemms: %s, power limit %.0f W; each candidate alone for %.1f s after 0.5 s\n",
           nvml_device_name(nv), nvml_power_limit_w(nv), secs);
    printf("%-24s %4s %5s %5s %9s %9s %7s %7s %6s %9s\n", "GEMM", "cand", "tile", "split", "ms/call", "J/call", "W",
           "SM MHz", "capped", "Mcycles");
    // the step's first backward writes its weight gradients (=) rather than adding them: the same GEMM plans
    if (G->grads_write) G->grads_write(1);
    int tag = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (int pick = 0; pick < 64; pick++) {
            int ran, tile, split;
            backend_cuda_gemm_pick(pick);
            ops[k].run();
            G->synchronize();
            const int n = backend_cuda_gemm_picked(&ran, &tile, &split);
            if (n == 0 || ran != pick) break;  // (no more candidates)
            Reading r;
            measure(nv, tag++, ops[k].run, 0.5, secs, &r);
            printf("%-24s %4d %5d %5d %9.4f %9.5f %7.1f %7.0f %5.0f%% %9.4f\n", ops[k].name, pick, tile, split, r.ms,
                   r.j, r.w, r.mhz, r.capped, r.ms * r.mhz * 1e-3);
            fflush(stdout);
        }
    backend_cuda_gemm_pick(-1);
    return 0;
}

int main(int argc, char **argv) {
    const int gemms = argc > 1 && strcmp(argv[1], "gemms") == 0;
    const double secs = argc > 1 + gemms ? atof(argv[1 + gemms]) : gemms ? 1.5 : 2.0;
    if (!(secs > 0)) {
        fprintf(stderr, "energy_lab: seconds must be a positive number; usage: energy_lab [gemms] [seconds]\n");
        return 2;
    }
    pm_rng_seed(&g_rng, 88172645463325252ull);
    G = backend_cuda(0);
    if (!G) {
        fprintf(stderr, "energy_lab: no CUDA device: %s\n", pm_last_error());
        return 1;
    }
    char why[512];
    NvmlProbe *nv = nvml_open_cuda_device(1, why, sizeof why);
    if (!nv) {
        fprintf(stderr, "energy_lab: NVML: %s\n", why);
        return 1;
    }
    if (isnan(nvml_energy_j(nv))) {
        fprintf(stderr, "energy_lab: %s does not report its energy\n", nvml_device_name(nv));
        return 1;
    }
    ModelConfig cfg;
    if (config_preset("370m", 50277, &cfg) != 0) {
        fprintf(stderr, "energy_lab: %s\n", pm_last_error());
        return 1;
    }
    D = cfg.d_model, DI = cfg.d_inner, N = cfg.d_state, R = cfg.dt_rank, NX = R + 2 * N, KC = cfg.d_conv;
    NPARAMS = model_num_params(&cfg);
    const size_t e = G->act_bytes;
    res = dev_f32((size_t)M * D, -1, 1), res2 = G->alloc((size_t)M * D * 4), h = dev_act((size_t)M * D, -1, 1);
    nw = dev_f32(D, 0.5f, 1.5f), rstd = G->alloc((size_t)M * 4), xn = dev_act((size_t)M * D, -1, 1);
    w_in = dev_act((size_t)2 * DI * D, -0.03f, 0.03f), xz = dev_act((size_t)M * 2 * DI, -1, 1);
    cw = dev_f32((size_t)DI * KC, -0.5f, 0.5f), cb = dev_f32(DI, -0.1f, 0.1f), u = dev_act((size_t)M * DI, -1, 1);
    xdbl = dev_act((size_t)M * NX, -1, 1), dpre = dev_act((size_t)M * DI, -0.5f, 0.5f);
    dtb = dev_f32(DI, -4.5f, -2.5f), dd = dev_f32(DI, 0.5f, 1.5f);
    {
        float *al = pm_malloc((size_t)DI * N * 4);
        for (int c = 0; c < DI; c++)
            for (int n = 0; n < N; n++) al[(size_t)c * N + n] = logf((float)(n + 1));  // A = -(1..N), as initialized
        alog = G->alloc((size_t)DI * N * 4);
        G->upload(alog, al, (size_t)DI * N * 4);
        free(al);
    }
    states = G->scan_states_bytes ? G->alloc(G->scan_states_bytes(M, T, DI, N)) : NULL;
    y = G->alloc((size_t)M * DI * e), w_out = dev_act((size_t)D * DI, -0.02f, 0.02f), out = G->alloc((size_t)M * D * e);
    dy = dev_act((size_t)M * DI, -1, 1), du = G->alloc((size_t)M * DI * e), ddpre = G->alloc((size_t)M * DI * e);
    dxdbl = G->alloc((size_t)M * NX * e), dxz = G->alloc((size_t)M * 2 * DI * e);
    gdtb = G->alloc(DI * 4), galog = G->alloc((size_t)DI * N * 4), gd = G->alloc(DI * 4);
    {
        int32_t *hp = pm_malloc((size_t)M * 4);  // documents of 100-1100 tokens, restarting at each row
        for (int r = 0, t = 0; r < B; r++)
            for (int i = 0, left = 0, k = 0; i < T; i++, t++) {
                if (left == 0) left = 100 + (int)urand(0, 1000), k = 0;
                hp[t] = k++, left--;
            }
        pos = G->alloc((size_t)M * 4);
        G->upload(pos, hp, (size_t)M * 4);
        free(hp);
    }
    p = dev_f32(NPARAMS, -0.05f, 0.05f), g = dev_f32(NPARAMS, -1e-3f, 1e-3f), mo = G->alloc(NPARAMS * 4);
    vo = G->alloc(NPARAMS * 4), pa = G->alloc(NPARAMS * e);
    seg = (ParamSegment){0, NPARAMS, 1};
    gw_in = G->alloc((size_t)2 * DI * D * 4), gw_out2 = G->alloc((size_t)2 * D * DI * 4);
    dh2 = dev_act((size_t)2 * M * D, -1, 1), y2 = dev_act((size_t)2 * M * DI, -1, 1);
    op_scan_fwd();  // the states the backward reads
    G->synchronize();

    // (in_proj's input gradient has no region of its own: its FLOPs and bytes are the forward's, mirrored)
    const Op ops[] = {
        {"idle (sleeping host)", op_idle, NULL},
        {"norm fwd (add + RMSNorm)", op_norm, "fwd.norm"},
        {"in_proj fwd (GEMM)", op_in_proj, "fwd.in_proj"},
        {"in_proj dX (GEMM)", op_in_proj_dx, "fwd.in_proj"},
        {"conv fwd", op_conv, "fwd.conv"},
        {"scan fwd (keeps states)", op_scan_fwd, "fwd.scan"},
        {"scan bwd (from states)", op_scan_bwd, "bwd.scan"},
        {"out_proj fwd (GEMM)", op_out_proj, "fwd.out_proj"},
        {"AdamW (370m parameters)", op_adamw, "opt.adamw"},
    };
    // each region's counted work a call, as the bench counts it (src/bench_cost.c), with nothing recomputed
    const CostShape cs = {&cfg, NPARAMS, M, e, 4, 1, 0, 0, 0};
    const int nops = sizeof ops / sizeof ops[0];
    nvml_start(nv, 20);
    if (gemms) {
        const int rc = run_gemms(nv, secs);
        nvml_close(nv);
        return rc;
    }
    printf("energy_lab: %s, power limit %.0f W, max SM clock %u MHz; each op alone for %.1f s after a 1 s warm-up\n",
           nvml_device_name(nv), nvml_power_limit_w(nv), nvml_max_sm_mhz(nv), secs);
    printf("%-26s %10s %10s %8s %8s %7s %10s %10s\n", "op", "ms/call", "J/call", "W", "SM MHz", "capped", "J/GB",
           "J/TFLOP");
    for (int k = 0; k < nops; k++) {
        const Op *o = &ops[k];
        OpCost oc = {0};
        if (o->region && op_cost(&cs, o->region, &oc) != 0) oc.calls = 0;
        const double bytes = oc.calls ? oc.bytes / oc.calls : 0, flops = oc.calls ? oc.gemm_flops / oc.calls : 0;
        Reading r;
        measure(nv, k, o->run, 1.0, secs, &r);
        printf("%-26s %10.4f %10.5f %8.1f %8.0f %6.0f%% %10.2f %10.2f\n", o->name, r.ms, r.j, r.w, r.mhz, r.capped,
               bytes > 0 ? r.j / (bytes * 1e-9) : NAN, flops > 0 ? r.j / (flops * 1e-12) : NAN);
        fflush(stdout);
    }
    nvml_close(nv);
    return 0;
}
