// test_cuda_ops.c — every op of the CUDA backend against its CPU twin (backend_cpu, fp32), on fresh random
// inputs. Without a GPU every test is skipped (CI), except the one that checks backend_cuda fails cleanly.
//
// How each op is checked:
// - ACT inputs are rounded to bf16 on the host first and the CPU gets the same rounded values, so the
//   difference measures the GPU's arithmetic and output rounding, not input rounding.
// - GPU outputs are poisoned with NaN before the run (an element the op forgot to write fails), and outputs
//   written through a row stride live in a wider buffer whose other columns must come back untouched.
// - Accumulating outputs (parameter gradients) start from the same small random values on both sides.
// - Relative error ||gpu - cpu|| / ||cpu||: <= 1e-2 where the output is bf16 (8 mantissa bits: ~4e-3 per
//   element at worst), tighter where inputs and outputs are fp32.
// - Deterministic mode (backend_cuda(1)): each op run twice on the same inputs gives identical bits.
// Whole model (the tiny and 130m presets, same seed on both backends): loss and every gradient against the CPU;
// deterministic training (two runs of three AdamW steps, identical bits); packing on the GPU (no leakage in
// either direction, packed = separate). PM_BENCH=1 adds op timings at the 130m shapes (dev/gpu.sh).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "batch.h"
#include "model.h"
#include "util.h"

static const Backend *G, *GD, *CPU;  // CUDA (fast), CUDA (deterministic), CPU reference
static PmRng rng;
// Failed comparisons in the current test: each check prints its number and counts a failure, and the test
// asserts the count at its end, so one run reports every failing output rather than only the first.
static int g_fails;

#define NEED_GPU()   \
    do {             \
        g_fails = 0; \
        if (!G) {    \
            skip();  \
            return;  \
        }            \
    } while (0)
#define FINISH() assert_int_equal(g_fails, 0)

// ---------------------------------------------------------------------------------------------------------
// host helpers

// Round to the nearest bf16 (ties to even), as __float2bfloat16_rn does.
static float bfr(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static float *rnd(size_t n, float lo, float hi) {
    float *a = pm_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * pm_rng_uniform(&rng);
    return a;
}
static float *rnd_bf(size_t n, float lo, float hi) {
    float *a = rnd(n, lo, hi);
    for (size_t i = 0; i < n; i++) a[i] = bfr(a[i]);
    return a;
}
static float *dup(const float *a, size_t n) {
    float *b = pm_malloc(n * sizeof(float));
    memcpy(b, a, n * sizeof(float));
    return b;
}
// a copy of a (rows, ld) buffer with columns [off, off + width) set to NaN: the GPU's poisoned output
static float *poisoned(const float *a, int rows, int ld, int off, int width) {
    float *b = dup(a, (size_t)rows * ld);
    for (int r = 0; r < rows; r++)
        for (int c = off; c < off + width; c++) b[(size_t)r * ld + c] = NAN;
    return b;
}

// CPU backend buffers (host memory holding `real` = float in this build)
static void *c_put(const float *h, size_t n) {
    void *p = CPU->alloc(n * sizeof(float));
    CPU->upload(p, h, n * sizeof(float));
    return p;
}
static void *c_puti(const int32_t *h, size_t n) {
    void *p = CPU->alloc(n * sizeof(int32_t));
    CPU->upload(p, h, n * sizeof(int32_t));
    return p;
}
static float *c_get(const void *p, size_t n) {
    float *h = pm_malloc(n * sizeof(float));
    CPU->download(h, p, n * sizeof(float));
    return h;
}

// GPU buffers
static void *g_f32(const float *h, size_t n) {
    void *p = G->alloc(n * 4);
    G->upload(p, h, n * 4);
    return p;
}
static void g_set_act(void *p, const float *h, size_t n) {
    void *t = g_f32(h, n);
    G->f32_to_act(p, t, n);
    G->free(t);
}
static void *g_act(const float *h, size_t n) {
    void *p = G->alloc(n * G->act_bytes);
    g_set_act(p, h, n);
    return p;
}
static void *g_i32(const int32_t *h, size_t n) {
    void *p = G->alloc(n * sizeof(int32_t));
    G->upload(p, h, n * sizeof(int32_t));
    return p;
}
static float *g_get_f32(const void *p, size_t n) {
    float *h = pm_malloc(n * sizeof(float));
    G->download(h, p, n * 4);
    return h;
}
static float *g_get_act(const void *p, size_t n) {
    void *t = G->alloc(n * 4);
    G->act_to_f32(t, p, n);
    float *h = g_get_f32(t, n);
    G->free(t);
    return h;
}
static void *act_off(void *p, size_t off) { return (char *)p + off * G->act_bytes; }

// ||g - c|| / ||c||, infinite if any GPU value is not finite
static double relerr(const float *g, const float *c, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(g[i])) return INFINITY;
        double d = (double)g[i] - (double)c[i];
        num += d * d;
        den += (double)c[i] * c[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check_rel(const char *what, const float *g, const float *c, size_t n, double tol) {
    double e = relerr(g, c, n);
    printf("    %-34s rel err %.3g (tol %.0e)%s\n", what, e, tol, e <= tol ? "" : "  <-- FAIL");
    g_fails += !(e <= tol);
}

// Columns [off, off+width) of (rows, ld) buffers within tol; every other column bit-identical (untouched).
static void check_slice(const char *what, const float *g, const float *c, int rows, int ld, int off, int width,
                        double tol) {
    float *gs = pm_malloc((size_t)rows * width * sizeof(float)), *cs = pm_malloc((size_t)rows * width * sizeof(float));
    size_t outside_bad = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            size_t i = (size_t)r * ld + j;
            if (j >= off && j < off + width) {
                gs[(size_t)r * width + j - off] = g[i];
                cs[(size_t)r * width + j - off] = c[i];
            } else if (memcmp(&g[i], &c[i], sizeof(float)) != 0) {
                outside_bad++;
            }
        }
    if (outside_bad) printf("    %s: %zu elements outside the written columns changed  <-- FAIL\n", what, outside_bad);
    g_fails += outside_bad != 0;
    check_rel(what, gs, cs, (size_t)rows * width, tol);
    free(gs);
    free(cs);
}

static void check_same_bits(const char *what, const void *a, const void *b, size_t bytes) {
    int same = memcmp(a, b, bytes) == 0;
    printf("    %-34s %s\n", what, same ? "bit-identical" : "DIFFERS  <-- FAIL");
    g_fails += !same;
}

// Positions within documents for B rows of T tokens: documents of random length (some of length 1), and
// rows that continue a document from the previous row (pos > 0 at the row start: the row start must still
// reset the conv and the scan).
static int32_t *make_pos(int B, int T) {
    int32_t *pos = pm_malloc((size_t)B * T * sizeof(int32_t));
    for (int r = 0; r < B; r++) {
        int p = r % 2 ? 5 + r : 0;
        for (int t = 0; t < T; t++) {
            float x = pm_rng_uniform(&rng);
            if (x < 0.08f || (x < 0.12f && t > 0 && pos[(size_t)r * T + t - 1] == 0)) p = 0;
            pos[(size_t)r * T + t] = p++;
        }
    }
    return pos;
}

static int32_t *rnd_tokens(int M, int V) {
    int32_t *t = pm_malloc((size_t)M * sizeof(int32_t));
    for (int i = 0; i < M; i++) t[i] = (int32_t)(pm_rng_u64(&rng) % (uint64_t)V);
    return t;
}

// ---------------------------------------------------------------------------------------------------------

static void test_no_gpu_fails_cleanly(void **state) {
    (void)state;
    if (G) {
        skip();  // covered by every other test
        return;
    }
    assert_null(backend_cuda(0));
    assert_null(backend_cuda(1));
    assert_true(strlen(pm_last_error()) > 0);
    printf("    backend_cuda: %s\n", pm_last_error());
}

// The bench hooks. copy: random bytes arrive bit for bit, and bytes past the copied range stay as they were.
// Events: they bracket the work queued between them on the backend's stream, GEMMs included (cuBLASLt must run
// on that stream: on another one the events would see ~0 ms), so the event time of a large GEMM must match
// the host clock around it (synchronized) within the launch overhead; intervals add up (a->b + b->c = a->c);
// released handles are reused.
static void test_bench_hooks(void **state) {
    (void)state;
    NEED_GPU();
    if (G == CPU) {  // the harness self-check: the CPU has no hooks, and an 8192^3 GEMM would take minutes
        skip();
        return;
    }
    if (!G->event_record || !G->event_elapsed_ms || !G->event_release || !G->copy) {
        printf("    bench hooks missing  <-- FAIL\n");
        g_fails++;
        FINISH();
        return;
    }
    size_t n = (1u << 20) + 3;  // floats; an odd tail
    float *a = rnd(n, -1, 1), *b = rnd(n, -1, 1);
    void *ga = g_f32(a, n), *gb = g_f32(b, n);
    G->copy(gb, ga, (n - 1) * 4);  // all but the last float
    G->synchronize();
    float *got = g_get_f32(gb, n);
    check_same_bits("copy: copied range", a, got, (n - 1) * 4);
    check_same_bits("copy: past the range untouched", b + n - 1, got + n - 1, 4);
    free(a), free(b), free(got), G->free(ga), G->free(gb);

    int D = 8192;  // 1.1 TFLOP: ~1.5 ms on an H200, far above a launch
    size_t nn = (size_t)D * D;
    void *x = G->alloc(nn * 2), *w = G->alloc(nn * 2), *y = G->alloc(nn * 2);
    float *r = rnd(1u << 20, -1, 1);
    void *t = g_f32(r, 1u << 20);
    for (size_t o = 0; o < nn; o += 1u << 20) {  // random data: a GEMM on zeros can run faster
        G->f32_to_act(act_off(x, o), t, 1u << 20);
        G->f32_to_act(act_off(w, o), t, 1u << 20);
    }
    G->matmul_fwd(y, D, x, D, w, NULL, D, D, D);  // warm-up: the plan and the heuristic query
    G->synchronize();
    double host_ms = 1e30, ev_ms = 0;
    for (int rep = 0; rep < 3; rep++) {
        G->synchronize();
        double t0 = pm_now();
        void *e0 = G->event_record();
        G->matmul_fwd(y, D, x, D, w, NULL, D, D, D);
        void *e1 = G->event_record();
        G->matmul_fwd(y, D, x, D, w, NULL, D, D, D);
        void *e2 = G->event_record();
        G->synchronize();
        double h = 1e3 * (pm_now() - t0);
        float m01 = G->event_elapsed_ms(e0, e1), m12 = G->event_elapsed_ms(e1, e2),
              m02 = G->event_elapsed_ms(e0, e2);
        if (rep == 2) {
            host_ms = h, ev_ms = m02;
            double gap = fabs(m01 + m12 - m02);
            printf("    events: GEMM %.3f + %.3f ms = %.3f ms (a->c %.3f); host clock %.3f ms\n", m01, m12,
                   m01 + m12, m02, h);
            if (!(gap <= 1e-3 + 1e-3 * m02)) printf("    events: intervals do not add up  <-- FAIL\n");
            g_fails += !(gap <= 1e-3 + 1e-3 * m02);
        }
        G->event_release(e0), G->event_release(e1), G->event_release(e2);
    }
    // both GEMMs inside the events; the host clock adds only launch and synchronization (~tens of us)
    int ok = ev_ms > 0.8 * host_ms && ev_ms <= host_ms * 1.001 + 0.01;
    printf("    events vs host clock: %.3f / %.3f ms%s\n", ev_ms, host_ms, ok ? "" : "  <-- FAIL");
    g_fails += !ok;
    void *e = G->event_record(), *f = G->event_record();  // from the pool (released above)
    G->synchronize();
    float z = G->event_elapsed_ms(e, f);
    int zok = z >= 0.0f && z < 1.0f;
    printf("    back-to-back events: %.4f ms%s\n", z, zok ? "" : "  <-- FAIL");
    g_fails += !zok;
    G->event_release(e), G->event_release(f);
    free(r), G->free(t), G->free(x), G->free(w), G->free(y);
    FINISH();
}

// Backend.spin (bench's vector and exp ceilings) against the device's per-clock rates: fp32 FMA lanes an SM (64 on
// cc 8.0, 128 on 8.6-9.x) x 2 FLOPs, and 16 exps an SM (the special-function unit). Each rate over its per-clock
// rate is an SM clock, which must lie between 1.0 and 2.1 GHz (a chain optimized away would read faster, a kernel
// bound by latency slower), and the two must be the same clock within 20%.
static void test_spin_rates(void **state) {
    (void)state;
    NEED_GPU();
    if (G == CPU) {
        skip();
        return;
    }
    int sms = 0;
    const int cc = backend_cuda_device_info(&sms), lanes = cc == 80 ? 64 : 128;
    const double per_clock[2] = {2.0 * lanes * sms, 16.0 * sms}, n[2] = {6e11, 4e10};
    double ghz[2];
    for (int k = 0; k < 2; k++) {
        G->spin(k, n[k] / 8);
        double best = 1e30, ops = 0;
        for (int r = 0; r < 3; r++) {
            G->synchronize();
            double t0 = pm_now();
            ops = G->spin(k, n[k]);
            G->synchronize();
            best = fmin(best, pm_now() - t0);
        }
        ghz[k] = ops / best / per_clock[k] * 1e-9;
        const int ok = ghz[k] >= 1.0 && ghz[k] <= 2.1;
        printf("    spin %s: %.3g %s/s in %.2f ms: %.3f GHz at %g a clock%s\n", k ? "exp" : "fma", ops / best,
               k ? "exps" : "FLOPs", 1e3 * best, ghz[k], per_clock[k], ok ? "" : "  <-- FAIL");
        g_fails += !ok;
    }
    const int same = ghz[0] < 1.2 * ghz[1] && ghz[1] < 1.2 * ghz[0];
    if (!same) printf("    spin: the two clocks differ  <-- FAIL\n");
    g_fails += !same;
    FINISH();
}

static void test_convert(void **state) {
    (void)state;
    NEED_GPU();
    size_t n = 100003;
    float *x = rnd(n, -300, 300);
    void *gx = g_f32(x, n);
    void *ga = G->alloc(n * G->act_bytes);
    // from element o on: o = 0 (both aligned: 8 values a thread, then a tail of 3), 1 (neither aligned: one a
    // thread), 8 (aligned again); into a cleared buffer each time, so an element a pass misses reads 0 where it
    // should read x's rounding (x is uniform in [-300, 300]), and the elements before o must stay 0
    for (size_t o = 0; o <= 8; o += o ? 7 : 1) {
        G->memzero(ga, n * G->act_bytes);
        G->f32_to_act((char *)ga + o * G->act_bytes, (const char *)gx + o * 4, n - o);
        float *back = g_get_act(ga, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += back[i] != (i < o ? 0.0f : bfr(x[i]));
        printf("    from element %zu: f32 -> bf16 -> f32 mismatches vs host round-to-nearest-even: %zu of %zu\n", o,
               bad, n);
        assert_int_equal(bad, 0);
        free(back);
    }
    free(x), G->free(gx), G->free(ga);
    FINISH();
}

static void test_embedding(void **state) {
    (void)state;
    NEED_GPU();
    int V = 120, C = 200, M = 700;
    int32_t *tok = rnd_tokens(M, V);
    for (int i = 0; i < M / 3; i++) tok[i * 3] = 7;  // a very frequent token: long runs in the sorted order
    float *wte = rnd_bf((size_t)V * C, -1, 1);
    float *dout = rnd((size_t)M * C, -1, 1);
    float *dw0 = rnd((size_t)V * C, -0.1f, 0.1f);
    // CPU
    void *ct = c_puti(tok, M), *cw = c_put(wte, (size_t)V * C), *co = c_put(dout, (size_t)M * C);
    void *cout = CPU->alloc((size_t)M * C * 4), *cdw = c_put(dw0, (size_t)V * C);
    CPU->embedding_fwd(cout, ct, cw, M, C);
    CPU->embedding_bwd(cdw, co, ct, M, C, V);
    float *ref_out = c_get(cout, (size_t)M * C), *ref_dw = c_get(cdw, (size_t)V * C);
    // GPU
    void *gt = g_i32(tok, M), *gw = g_act(wte, (size_t)V * C), *go = g_f32(dout, (size_t)M * C);
    float *nan = poisoned(dout, M, C, 0, C);
    void *gout = g_f32(nan, (size_t)M * C);
    G->embedding_fwd(gout, gt, gw, M, C);
    float *out = g_get_f32(gout, (size_t)M * C);
    check_rel("embedding_fwd out", out, ref_out, (size_t)M * C, 0);  // a copy: exact
    const Backend *modes[2] = {G, GD};
    float *first = NULL;
    for (int k = 0; k < 2; k++)
        for (int rep = 0; rep < 2; rep++) {
            void *gdw = g_f32(dw0, (size_t)V * C);
            modes[k]->embedding_bwd(gdw, go, gt, M, C, V);
            float *dw = g_get_f32(gdw, (size_t)V * C);
            if (rep == 0) check_rel(k ? "embedding_bwd dwte (deterministic)" : "embedding_bwd dwte (atomics)", dw,
                                    ref_dw, (size_t)V * C, 1e-5);
            if (k == 1 && rep == 0) first = dw;
            else if (k == 1) check_same_bits("embedding_bwd dwte", first, dw, (size_t)V * C * 4), free(dw);
            else free(dw);
            G->free(gdw);
        }
    free(first), free(tok), free(wte), free(dout), free(dw0), free(ref_out), free(ref_dw), free(nan), free(out);
    CPU->free(ct), CPU->free(cw), CPU->free(co), CPU->free(cout), CPU->free(cdw);
    G->free(gt), G->free(gw), G->free(go), G->free(gout);
    FINISH();
}

static void rmsnorm_case(int M, int C, int with_h, int alias) {
    printf("  rmsnorm M=%d C=%d h=%d alias=%d\n", M, C, with_h, alias);
    size_t n = (size_t)M * C;
    float *res = rnd(n, -2, 2), *h = rnd_bf(n, -2, 2), *w = rnd(C, 0.5f, 1.5f);
    float eps = 1e-5f;
    // forward
    void *cres = c_put(res, n), *ch = c_put(h, n), *cw = c_put(w, C);
    void *cro = alias ? cres : CPU->alloc(n * 4), *cxn = CPU->alloc(n * 4), *crs = CPU->alloc(M * 4);
    CPU->add_rmsnorm_fwd(cro, cxn, crs, cres, with_h ? ch : NULL, cw, M, C, eps);
    float *r_ro = c_get(cro, n), *r_xn = c_get(cxn, n), *r_rs = c_get(crs, M);
    float *nan = poisoned(res, M, C, 0, C);
    void *gres = g_f32(res, n), *gh = g_act(h, n), *gw = g_f32(w, C);
    void *gro = alias ? gres : g_f32(nan, n), *gxn = g_act(nan, n), *grs = g_f32(nan, M);
    G->add_rmsnorm_fwd(gro, gxn, grs, gres, with_h ? gh : NULL, gw, M, C, eps);
    float *ro = g_get_f32(gro, n), *xn = g_get_act(gxn, n), *rs = g_get_f32(grs, M);
    check_rel("add_rmsnorm_fwd res_out", ro, r_ro, n, 1e-6);
    check_rel("add_rmsnorm_fwd xn (bf16)", xn, r_xn, n, 1e-2);
    check_rel("add_rmsnorm_fwd rstd", rs, r_rs, M, 1e-5);
    // backward, at the forward's residual and rstd
    float *dxn = rnd_bf(n, -1, 1), *dres0 = rnd(n, -0.1f, 0.1f), *dw0 = rnd(C, -0.1f, 0.1f);
    void *cdxn = c_put(dxn, n), *cdres = c_put(dres0, n), *cda = CPU->alloc(n * 4), *cdw = c_put(dw0, C);
    CPU->rmsnorm_bwd(cdres, cda, cdw, cdxn, cro, cw, crs, M, C);
    float *r_dres = c_get(cdres, n), *r_da = c_get(cda, n), *r_dw = c_get(cdw, C);
    void *gdxn = g_act(dxn, n);
    // the GPU's rstd/res from its own forward differ from the CPU's by rounding: feed it the CPU's
    void *gres_c = g_f32(r_ro, n), *grs_c = g_f32(r_rs, M);
    float *bits_dres = NULL, *bits_dw = NULL;
    const Backend *modes[3] = {G, GD, GD};
    for (int k = 0; k < 3; k++) {
        void *gdres = g_f32(dres0, n), *gda = g_act(nan, n), *gdw = g_f32(dw0, C);
        modes[k]->rmsnorm_bwd(gdres, gda, gdw, gdxn, gres_c, gw, grs_c, M, C);
        float *dres = g_get_f32(gdres, n), *da = g_get_act(gda, n), *dw = g_get_f32(gdw, C);
        if (k == 0) {
            check_rel("rmsnorm_bwd dres", dres, r_dres, n, 1e-5);
            check_rel("rmsnorm_bwd dres_act (bf16)", da, r_da, n, 1e-2);
            check_rel("rmsnorm_bwd dw", dw, r_dw, C, 1e-5);
        } else if (k == 1) {
            bits_dres = dup(dres, n), bits_dw = dup(dw, C);
        } else {
            check_same_bits("rmsnorm_bwd dres", bits_dres, dres, n * 4);
            check_same_bits("rmsnorm_bwd dw", bits_dw, dw, C * 4);
        }
        free(dres), free(da), free(dw);
        G->free(gdres), G->free(gda), G->free(gdw);
    }
    // without dres_act: dres must still be right
    void *gdres = g_f32(dres0, n), *gdw = g_f32(dw0, C);
    G->rmsnorm_bwd(gdres, NULL, gdw, gdxn, gres_c, gw, grs_c, M, C);
    float *dres = g_get_f32(gdres, n);
    check_rel("rmsnorm_bwd dres (no dres_act)", dres, r_dres, n, 1e-5);
    free(dres), G->free(gdres), G->free(gdw);
    free(bits_dres), free(bits_dw), free(res), free(h), free(w), free(r_ro), free(r_xn), free(r_rs), free(nan);
    free(ro), free(xn), free(rs), free(dxn), free(dres0), free(dw0), free(r_dres), free(r_da), free(r_dw);
    if (!alias) CPU->free(cro), G->free(gro);
    CPU->free(cres), CPU->free(ch), CPU->free(cw), CPU->free(cxn), CPU->free(crs);
    CPU->free(cdxn), CPU->free(cdres), CPU->free(cda), CPU->free(cdw);
    G->free(gres), G->free(gh), G->free(gw), G->free(gxn), G->free(grs), G->free(gdxn), G->free(gres_c),
        G->free(grs_c);
}

static void test_rmsnorm(void **state) {
    (void)state;
    NEED_GPU();
    rmsnorm_case(37, 320, 1, 0);
    rmsnorm_case(300, 768, 1, 1);
    rmsnorm_case(1500, 2560, 0, 0);  // many dw partial groups (a last one of 28 tokens); a wide row
    rmsnorm_case(129, 200, 0, 1);    // the model's backward recompute: res_out == res_in with h NULL (res is
                                     // left as is); a row width that is not a multiple of the warp
    rmsnorm_case(70, 202, 1, 0);     // C % 4 != 0: the scalar kernels (no float4 rows)
    rmsnorm_case(100, 2048, 1, 0);   // 1.4b's width: the widest row-in-registers backward (16 float4 per lane)
    rmsnorm_case(40, 1032, 1, 1);    // 12 float4 slots per lane, the last ones idle on most lanes
    FINISH();
}

// out (M, ldo) columns [ooff, ooff+N) = inp (M, K of ldi) @ W^T (+ bias)
static void matmul_case(int M, int N, int K, int ldi, int ldo, int ooff, int with_bias) {
    printf("  matmul_fwd M=%d N=%d K=%d ldi=%d ldo=%d off=%d bias=%d\n", M, N, K, ldi, ldo, ooff, with_bias);
    float *inp = rnd_bf((size_t)M * ldi, -1, 1), *W = rnd_bf((size_t)N * K, -1, 1), *bias = rnd(N, -1, 1);
    float *out0 = rnd_bf((size_t)M * ldo, -1, 1);
    void *ci = c_put(inp, (size_t)M * ldi), *cW = c_put(W, (size_t)N * K), *cb = c_put(bias, N);
    void *co = c_put(out0, (size_t)M * ldo);
    CPU->matmul_fwd((float *)co + ooff, ldo, ci, ldi, cW, with_bias ? cb : NULL, M, N, K);
    float *ref = c_get(co, (size_t)M * ldo);
    float *pois = poisoned(out0, M, ldo, ooff, N);
    void *gi = g_act(inp, (size_t)M * ldi), *gW = g_act(W, (size_t)N * K), *gb = g_f32(bias, N);
    void *go = g_act(pois, (size_t)M * ldo);
    G->matmul_fwd(act_off(go, ooff), ldo, gi, ldi, gW, with_bias ? gb : NULL, M, N, K);
    float *out = g_get_act(go, (size_t)M * ldo);
    check_slice("matmul_fwd out (bf16)", out, ref, M, ldo, ooff, N, 1e-2);
    free(inp), free(W), free(bias), free(out0), free(ref), free(pois), free(out);
    CPU->free(ci), CPU->free(cW), CPU->free(cb), CPU->free(co);
    G->free(gi), G->free(gW), G->free(gb), G->free(go);
}

// dinp (M, ldd) columns [0, K) (= or +=), dW (N, K) +=, dbias (N) +=; dout (M, N of lddo)
static void matmul_bwd_case(int M, int N, int K, int lddo, int ldi, int ldd, int acc, int want_dinp, int want_dW,
                            int want_db) {
    printf("  matmul_bwd M=%d N=%d K=%d lddo=%d ldi=%d ldd=%d acc=%d dinp=%d dW=%d dbias=%d\n", M, N, K, lddo, ldi,
           ldd, acc, want_dinp, want_dW, want_db);
    float *dout = rnd_bf((size_t)M * lddo, -1, 1), *inp = rnd_bf((size_t)M * ldi, -1, 1);
    float *W = rnd_bf((size_t)N * K, -1, 1), *dinp0 = rnd_bf((size_t)M * ldd, -1, 1);
    float *dW0 = rnd((size_t)N * K, -0.1f, 0.1f), *db0 = rnd(N, -0.1f, 0.1f);
    void *cdo = c_put(dout, (size_t)M * lddo), *ci = c_put(inp, (size_t)M * ldi), *cW = c_put(W, (size_t)N * K);
    void *cdi = c_put(dinp0, (size_t)M * ldd), *cdW = c_put(dW0, (size_t)N * K), *cdb = c_put(db0, N);
    CPU->matmul_bwd(want_dinp ? cdi : NULL, ldd, acc, want_dW ? cdW : NULL, want_db ? cdb : NULL, cdo, lddo, ci, ldi,
                    cW, M, N, K);
    float *r_di = c_get(cdi, (size_t)M * ldd), *r_dW = c_get(cdW, (size_t)N * K), *r_db = c_get(cdb, N);
    void *gdo = g_act(dout, (size_t)M * lddo), *gi = g_act(inp, (size_t)M * ldi), *gW = g_act(W, (size_t)N * K);
    float *pois = acc || !want_dinp ? dup(dinp0, (size_t)M * ldd) : poisoned(dinp0, M, ldd, 0, K);
    float *bits_di = NULL, *bits_dW = NULL;
    const Backend *modes[3] = {G, GD, GD};
    for (int k = 0; k < 3; k++) {
        void *gdi = g_act(pois, (size_t)M * ldd), *gdW = g_f32(dW0, (size_t)N * K), *gdb = g_f32(db0, N);
        modes[k]->matmul_bwd(want_dinp ? gdi : NULL, ldd, acc, want_dW ? gdW : NULL, want_db ? gdb : NULL, gdo, lddo,
                             gi, ldi, gW, M, N, K);
        float *di = g_get_act(gdi, (size_t)M * ldd), *dW = g_get_f32(gdW, (size_t)N * K), *db = g_get_f32(gdb, N);
        if (k == 0) {
            if (want_dinp) check_slice("matmul_bwd dinp (bf16)", di, r_di, M, ldd, 0, K, 1e-2);
            else check_rel("matmul_bwd dinp untouched", di, pois, (size_t)M * ldd, 0);
            // bf16 x bf16 products are exact in fp32: only the summation order differs
            check_rel("matmul_bwd dW", dW, r_dW, (size_t)N * K, want_dW ? 1e-4 : 0);
            check_rel("matmul_bwd dbias", db, r_db, N, want_db ? 1e-5 : 0);
        } else if (k == 1) {
            bits_di = dup(di, (size_t)M * ldd), bits_dW = dup(dW, (size_t)N * K);
        } else {
            if (want_dinp) check_same_bits("matmul_bwd dinp", bits_di, di, (size_t)M * ldd * 4);
            if (want_dW) check_same_bits("matmul_bwd dW", bits_dW, dW, (size_t)N * K * 4);
        }
        free(di), free(dW), free(db);
        G->free(gdi), G->free(gdW), G->free(gdb);
    }
    free(bits_di), free(bits_dW), free(dout), free(inp), free(W), free(dinp0), free(dW0), free(db0), free(r_di),
        free(r_dW), free(r_db), free(pois);
    CPU->free(cdo), CPU->free(ci), CPU->free(cW), CPU->free(cdi), CPU->free(cdW), CPU->free(cdb);
    G->free(gdo), G->free(gi), G->free(gW);
}

// Backend.matmul_dw_batch: `count` weight gradients dW_i (N, K) += dout_i^T inp_i, operand i `gap` elements past
// the end of operand i - 1 (the model's layer pairs lie apart like that), against the CPU's matmul_bwd per operand;
// the gaps must stay untouched, and the deterministic backend must repeat its bits.
static void matmul_dw_batch_case(int M, int N, int K, int lddo, int ldi, int count, int gap) {
    printf("  matmul_dw_batch M=%d N=%d K=%d lddo=%d ldi=%d count=%d gap=%d\n", M, N, K, lddo, ldi, count, gap);
    const size_t so = (size_t)M * lddo + gap, si = (size_t)M * ldi + gap, sW = (size_t)N * K + gap;
    float *dout = rnd_bf(so * count, -1, 1), *inp = rnd_bf(si * count, -1, 1), *dW0 = rnd(sW * count, -0.1f, 0.1f);
    float *ref = dup(dW0, sW * count);
    for (int i = 0; i < count; i++) {
        void *cdo = c_put(dout + i * so, (size_t)M * lddo), *ci = c_put(inp + i * si, (size_t)M * ldi);
        void *cdW = c_put(dW0 + i * sW, (size_t)N * K);
        CPU->matmul_bwd(NULL, K, 0, cdW, NULL, cdo, lddo, ci, ldi, NULL, M, N, K);
        float *r = c_get(cdW, (size_t)N * K);
        memcpy(ref + i * sW, r, (size_t)N * K * sizeof(float));
        free(r), CPU->free(cdo), CPU->free(ci), CPU->free(cdW);
    }
    void *gdo = g_act(dout, so * count), *gi = g_act(inp, si * count);
    float *bits = NULL;
    const Backend *modes[3] = {G, GD, GD};
    for (int k = 0; k < 3; k++) {
        void *gdW = g_f32(dW0, sW * count);
        modes[k]->matmul_dw_batch(gdW, sW, gdo, lddo, so, gi, ldi, si, count, M, N, K);
        float *dW = g_get_f32(gdW, sW * count);
        if (k == 0) {  // every operand's slice within the GEMM tolerance, every gap as it was
            check_rel("matmul_dw_batch dW (all slices and gaps)", dW, ref, sW * count, 1e-4);
            size_t moved = 0;
            for (int i = 0; i < count; i++)
                for (int j = 0; j < gap; j++) moved += dW[i * sW + (size_t)N * K + j] != dW0[i * sW + (size_t)N * K + j];
            printf("    %-34s %zu values changed%s\n", "matmul_dw_batch gaps", moved, moved ? "  <-- FAIL" : "");
            g_fails += moved != 0;
        } else if (k == 1) {
            bits = dup(dW, sW * count);
        } else {
            check_same_bits("matmul_dw_batch dW", bits, dW, sW * count * 4);
        }
        free(dW);
        G->free(gdW);
    }
    free(bits), free(dout), free(inp), free(dW0), free(ref);
    G->free(gdo), G->free(gi);
}

static void test_matmul(void **state) {
    (void)state;
    NEED_GPU();
    matmul_case(100, 72, 64, 64, 72, 0, 0);
    matmul_case(257, 96, 80, 96, 136, 8, 1);    // strided in/out, bias epilogue
    matmul_case(300, 40, 128, 128, 40, 0, 0);   // x_proj-like (N = dt_rank + 2N)
    matmul_case(300, 128, 8, 40, 128, 0, 1);    // dt_proj-like: K = dt_rank read from a wider row
    matmul_bwd_case(100, 72, 64, 72, 64, 64, 0, 1, 1, 1);
    matmul_bwd_case(257, 96, 80, 104, 96, 88, 1, 1, 1, 0);  // strided everything, accumulate dinp
    matmul_bwd_case(300, 128, 8, 128, 40, 40, 0, 1, 1, 0);  // dt_proj backward writes dxdbl[:, :R]
    matmul_bwd_case(300, 40, 128, 40, 128, 128, 1, 1, 1, 0);
    matmul_bwd_case(64, 32, 48, 32, 48, 48, 0, 0, 0, 1);    // dbias only
    matmul_bwd_case(2000, 64, 32, 64, 32, 32, 0, 1, 1, 1);  // long K for dW
    matmul_dw_batch_case(1024, 96, 80, 104, 80, 2, 0);       // the model's x_proj pair shape, adjacent operands
    matmul_dw_batch_case(2000, 72, 48, 72, 56, 2, 40);       // strided rows, operands apart
    matmul_dw_batch_case(300, 40, 128, 40, 128, 3, 8);       // three, unaligned strides
    FINISH();
}

// The fast backend times a shape's cuBLASLt candidates when it meets the shape again backend_cuda_gemm_tune_after()
// optimizer steps (adamw calls) after planning it, and keeps the fastest (gemm_tune). The timing runs must not leak
// into results: an accumulating dW (beta = 1) and dinp, called 4 times (2 before those tiny adamw calls, 2 after),
// must equal 4 accumulations on the CPU, a forward repeated 4 times must still give the product and leave the
// columns outside its slice alone, and the deterministic backend, which never runs a timed choice, must give the
// same bits before and after the fast one tuned the shape. (With PM_CUDA_VERBOSE=1 the tuning reports itself in the log.)
static void test_matmul_tuned(void **state) {
    (void)state;
    NEED_GPU();
    const int M = 1024, N = 384, K = 512, ldo = N + 16, REP = 4;
    float *inp = rnd_bf((size_t)M * K, -1, 1), *W = rnd_bf((size_t)N * K, -1, 1), *out0 = rnd_bf((size_t)M * ldo, -1, 1);
    float *dout = rnd_bf((size_t)M * N, -1, 1), *dinp0 = rnd_bf((size_t)M * K, -0.1f, 0.1f);
    float *dW0 = rnd((size_t)N * K, -0.1f, 0.1f);
    void *ci = c_put(inp, (size_t)M * K), *cW = c_put(W, (size_t)N * K), *co = c_put(out0, (size_t)M * ldo);
    void *cdo = c_put(dout, (size_t)M * N), *cdi = c_put(dinp0, (size_t)M * K), *cdW = c_put(dW0, (size_t)N * K);
    CPU->matmul_fwd(co, ldo, ci, K, cW, NULL, M, N, K);
    for (int r = 0; r < REP; r++) CPU->matmul_bwd(cdi, K, 1, cdW, NULL, cdo, N, ci, K, cW, M, N, K);
    float *r_o = c_get(co, (size_t)M * ldo), *r_di = c_get(cdi, (size_t)M * K), *r_dW = c_get(cdW, (size_t)N * K);
    float *pois = poisoned(out0, M, ldo, 0, N);
    void *gi = g_act(inp, (size_t)M * K), *gW = g_act(W, (size_t)N * K), *gdo = g_act(dout, (size_t)M * N);
    void *gdet = g_act(pois, (size_t)M * ldo);
    GD->matmul_fwd(gdet, ldo, gi, K, gW, NULL, M, N, K);
    float *det0 = g_get_act(gdet, (size_t)M * ldo);
    void *go = g_act(pois, (size_t)M * ldo), *gdi = g_act(dinp0, (size_t)M * K), *gdW = g_f32(dW0, (size_t)N * K);
    float one = 1.0f;
    void *tp = g_f32(&one, 1), *tg = g_f32(&one, 1), *tm = g_f32(&one, 1), *tv = g_f32(&one, 1);
    ParamSegment tseg = {0, 1, 0};
    AdamWArgs ta = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1, 0, 0};
    int tunings0 = backend_cuda_gemm_tunings();
    for (int r = 0; r < REP; r++) {
        if (r == REP / 2)  // the steps the backend waits before tuning: the shapes are tuned next
            for (int k = 0; k < backend_cuda_gemm_tune_after(); k++) G->adamw(tp, NULL, tg, tm, tv, &tseg, 1, &ta);
        G->matmul_fwd(go, ldo, gi, K, gW, NULL, M, N, K);
        G->matmul_bwd(gdi, K, 1, gdW, NULL, gdo, N, gi, K, gW, M, N, K);
    }
    G->free(tp), G->free(tg), G->free(tm), G->free(tv);
    const char *tune_env = getenv("PM_GEMM_TUNE");
    if (!(tune_env && tune_env[0] == '0')) {  // else the checks below would not have seen a tuned GEMM
        int tuned = backend_cuda_gemm_tunings() - tunings0;
        printf("    GEMM shapes tuned here: %d (the forward, dinp and dW shapes)\n", tuned);
        g_fails += tuned < 3;
    }
    float *o = g_get_act(go, (size_t)M * ldo), *di = g_get_act(gdi, (size_t)M * K), *dW = g_get_f32(gdW, (size_t)N * K);
    check_slice("tuned matmul_fwd out (bf16)", o, r_o, M, ldo, 0, N, 1e-2);  // and columns past N untouched
    check_rel("tuned matmul_bwd dinp, 4 accumulations (bf16)", di, r_di, (size_t)M * K, 2e-2);
    check_rel("tuned matmul_bwd dW, 4 accumulations", dW, r_dW, (size_t)N * K, 1e-4);
    GD->matmul_fwd(gdet, ldo, gi, K, gW, NULL, M, N, K);
    float *det1 = g_get_act(gdet, (size_t)M * ldo);
    check_same_bits("deterministic matmul_fwd before / after tuning", det0, det1, (size_t)M * ldo * 4);
    free(inp), free(W), free(out0), free(dout), free(dinp0), free(dW0), free(r_o), free(r_di), free(r_dW), free(pois);
    free(det0), free(det1), free(o), free(di), free(dW);
    CPU->free(ci), CPU->free(cW), CPU->free(co), CPU->free(cdo), CPU->free(cdi), CPU->free(cdW);
    G->free(gi), G->free(gW), G->free(gdo), G->free(gdet), G->free(go), G->free(gdi), G->free(gdW);
    FINISH();
}

// The labs' candidate pick (backend_cuda_gemm_pick, dev/kernels/energy_lab.c): each of cuBLASLt's candidates for a
// shape computes the CPU's product, the count reported is the same for every pick, a pick past the last runs the
// first.
static void test_matmul_each_candidate(void **state) {
    (void)state;
    NEED_GPU();
    const int M = 512, N = 256, K = 384;
    float *inp = rnd_bf((size_t)M * K, -1, 1), *W = rnd_bf((size_t)N * K, -1, 1), *zero = calloc((size_t)M * N, 4);
    void *ci = c_put(inp, (size_t)M * K), *cW = c_put(W, (size_t)N * K), *co = c_put(zero, (size_t)M * N);
    CPU->matmul_fwd(co, N, ci, K, cW, NULL, M, N, K);
    float *r_o = c_get(co, (size_t)M * N);
    void *gi = g_act(inp, (size_t)M * K), *gW = g_act(W, (size_t)N * K), *go = g_act(zero, (size_t)M * N);
    int n0 = -1, ran = -1, tile, split;
    for (int pick = 0; pick <= 8; pick++) {
        backend_cuda_gemm_pick(pick);
        G->matmul_fwd(go, N, gi, K, gW, NULL, M, N, K);
        const int n = backend_cuda_gemm_picked(&ran, &tile, &split);
        if (n0 < 0) n0 = n, printf("    %d cuBLASLt candidates for m=%d n=%d k=%d\n", n, N, M, K);
        g_fails += n != n0 || n < 1 || ran != (pick < n ? pick : 0);
        char what[64];
        snprintf(what, sizeof what, "matmul_fwd, candidate %d (tile %d, split %d)", ran, tile, split);
        float *o = g_get_act(go, (size_t)M * N);
        check_rel(what, o, r_o, (size_t)M * N, 1e-2);
        free(o);
    }
    backend_cuda_gemm_pick(-1);
    free(inp), free(W), free(zero), free(r_o);
    CPU->free(ci), CPU->free(cW), CPU->free(co);
    G->free(gi), G->free(gW), G->free(go);
    FINISH();
}

// More distinct GEMM shapes than the backend's plan cache holds (the single and pad policies give a new M at
// every step): the cache recycles its slots, and old and new shapes still compute the right product.
static void test_matmul_many_shapes(void **state) {
    (void)state;
    NEED_GPU();
    const int N = 24, K = 16, MAXM = 300;
    void *gw = G->alloc((size_t)N * K * 2), *gi = G->alloc((size_t)MAXM * K * 2), *go = G->alloc((size_t)MAXM * N * 2);
    for (int M = 1; M <= MAXM; M++) G->matmul_fwd(go, N, gi, K, gw, NULL, M, N, K);
    G->synchronize();
    matmul_case(7, N, K, K, N, 0, 0);  // planned long ago, evicted, planned again
    matmul_case(MAXM - 1, N, K, K, N, 0, 0);
    G->free(gw), G->free(gi), G->free(go);
    FINISH();
}

static void conv_case(int B, int T, int C, int K) {
    int M = B * T, ldx = 2 * C;
    printf("  conv_silu B=%d T=%d C=%d K=%d\n", B, T, C, K);
    int32_t *pos = make_pos(B, T);
    float *xz = rnd_bf((size_t)M * ldx, -2, 2), *w = rnd(C * K, -0.5f, 0.5f), *b = rnd(C, -0.5f, 0.5f);
    float *du = rnd_bf((size_t)M * C, -1, 1), *dw0 = rnd(C * K, -0.1f, 0.1f), *db0 = rnd(C, -0.1f, 0.1f);
    float *dxz0 = rnd_bf((size_t)M * ldx, -1, 1);
    void *cp = c_puti(pos, M), *cx = c_put(xz, (size_t)M * ldx), *cw = c_put(w, C * K), *cb = c_put(b, C);
    void *cu = CPU->alloc((size_t)M * C * 4), *cdu = c_put(du, (size_t)M * C), *cdx = c_put(dxz0, (size_t)M * ldx);
    void *cdw = c_put(dw0, C * K), *cdb = c_put(db0, C);
    CPU->conv_silu_fwd(cu, cx, ldx, cw, cb, cp, M, T, C, K, NULL, NULL);
    CPU->conv_silu_bwd(cdx, ldx, cdw, cdb, cdu, cx, cw, cb, cp, M, T, C, K, NULL, NULL);
    float *r_u = c_get(cu, (size_t)M * C), *r_dx = c_get(cdx, (size_t)M * ldx), *r_dw = c_get(cdw, C * K),
          *r_db = c_get(cdb, C);
    void *gp = g_i32(pos, M), *gx = g_act(xz, (size_t)M * ldx), *gw = g_f32(w, C * K), *gb = g_f32(b, C);
    void *gdu = g_act(du, (size_t)M * C);
    float *nan = poisoned(du, M, C, 0, C), *pois = poisoned(dxz0, M, ldx, 0, C);
    void *gu = g_act(nan, (size_t)M * C);
    G->conv_silu_fwd(gu, gx, ldx, gw, gb, gp, M, T, C, K, NULL, NULL);
    float *u = g_get_act(gu, (size_t)M * C);
    check_rel("conv_silu_fwd u (bf16)", u, r_u, (size_t)M * C, 1e-2);
    float *bits_dx = NULL, *bits_dw = NULL;
    const Backend *modes[3] = {G, GD, GD};
    for (int k = 0; k < 3; k++) {
        void *gdx = g_act(pois, (size_t)M * ldx), *gdw = g_f32(dw0, C * K), *gdb = g_f32(db0, C);
        modes[k]->conv_silu_bwd(gdx, ldx, gdw, gdb, gdu, gx, gw, gb, gp, M, T, C, K, NULL, NULL);
        float *dx = g_get_act(gdx, (size_t)M * ldx), *dw = g_get_f32(gdw, C * K), *db = g_get_f32(gdb, C);
        if (k == 0) {
            check_slice("conv_silu_bwd dxi (bf16)", dx, r_dx, M, ldx, 0, C, 1e-2);
            check_rel("conv_silu_bwd dw", dw, r_dw, C * K, 1e-4);
            check_rel("conv_silu_bwd db", db, r_db, C, 1e-4);
        } else if (k == 1) {
            bits_dx = dup(dx, (size_t)M * ldx), bits_dw = dup(dw, C * K);
        } else {
            check_same_bits("conv_silu_bwd dxi", bits_dx, dx, (size_t)M * ldx * 4);
            check_same_bits("conv_silu_bwd dw", bits_dw, dw, C * K * 4);
        }
        free(dx), free(dw), free(db);
        G->free(gdx), G->free(gdw), G->free(gdb);
    }
    free(bits_dx), free(bits_dw), free(pos), free(xz), free(w), free(b), free(du), free(dw0), free(db0), free(dxz0);
    free(r_u), free(r_dx), free(r_dw), free(r_db), free(nan), free(pois), free(u);
    CPU->free(cp), CPU->free(cx), CPU->free(cw), CPU->free(cb), CPU->free(cu), CPU->free(cdu), CPU->free(cdx),
        CPU->free(cdw), CPU->free(cdb);
    G->free(gp), G->free(gx), G->free(gw), G->free(gb), G->free(gdu), G->free(gu);
}

static void test_conv(void **state) {
    (void)state;
    NEED_GPU();
    conv_case(4, 50, 200, 4);  // runs of 64 tokens cross row starts; channels not a multiple of the block
    conv_case(2, 130, 128, 4);
    conv_case(3, 20, 72, 3);
    conv_case(2, 40, 75, 4);   // odd channel count: the one-channel-per-thread forward (no bf16x2)
    conv_case(1, 300, 66, 2);  // bf16x2 backward: a 33-pair column block (one live lane); the last block's
                               // runs partly past M (and two warps with none)
    conv_case(3, 100, 64, 1);  // K = 1: no halo
    conv_case(2, 257, 130, 3); // runs that cross the row start inside a warp's run
    FINISH();
}

// The scan reads u, dpre (M, Cd), B and C as slices of xdbl (M, R + 2N), z as the second half of xz (M, 2 Cd),
// and writes dB, dC into dxdbl and dz into dxz — the same layout the model uses.
// Launches of the warp-specialized forward and backward in scan_case's first forward and backward calls (PM_SCAN_*_WS
// unset), for test_scan's checks that they ran where the plan takes them.
static int g_case_fwd_ws, g_case_bwd_ws, g_case_fwd_yh;  // (yh: the forward with y's halves, v90)

// both_bwd: the shape lets PM_SCAN_BWD4 force each backward kernel (one wave of 4-thread blocks fits the GPU)
// scan_case with rows carried in from the batch before (set by test_scan_carried): the odd rows continue a
// document, with their carried state h0 random.
static int g_scan_carry;
// pos and first for carried rows: odd rows continue a document from position 3T, rows 1, 5, .. through all their
// tokens (first = T: the carried part reaches every checkpoint and time segment), rows 3, 7, .. until T/2 + 3, where
// a new one starts; the even rows keep make_pos's documents and carry nothing (first 0).
static void carry_rows(int32_t *pos, int32_t *first, int B, int T) {
    for (int r = 0; r < B; r++) {
        first[r] = r % 2 == 0 ? 0 : r % 4 == 1 ? T : T / 2 + 3 < T ? T / 2 + 3 : T;
        if (!first[r]) continue;
        int32_t *p = pos + (size_t)r * T, next = 0;
        for (int t = 0; t < T; t++) {
            if (t < first[r]) p[t] = 3 * T + t;
            else next = t == first[r] || p[t] == 0 ? 0 : next, p[t] = next++;
        }
    }
}

static void scan_case(int B, int T, int Cd, int N, int R, int both_bwd) {
    int M = B * T, nx = R + 2 * N, ldz = 2 * Cd;
    printf("  scan B=%d T=%d Cd=%d N=%d%s\n", B, T, Cd, N, g_scan_carry ? ", rows carried in" : "");
    size_t mc = (size_t)M * Cd;
    int32_t *pos = make_pos(B, T), *first = NULL;
    float *h0 = NULL;
    if (g_scan_carry) {  // odd rows carried in (scan_fwd's first, h0): see carry_rows
        first = pm_malloc((size_t)B * sizeof(int32_t)), h0 = rnd((size_t)B * Cd * N, -1, 1);
        carry_rows(pos, first, B, T);
    }
    float *u = rnd_bf(mc, -1, 1), *dpre = rnd_bf(mc, -1, 1), *xdbl = rnd_bf((size_t)M * nx, -1, 1);
    float *xz = rnd_bf((size_t)M * ldz, -2, 2), *D = rnd(Cd, 0.5f, 1.5f);
    float *dtb = pm_malloc(Cd * sizeof(float)), *Alog = pm_malloc((size_t)Cd * N * sizeof(float));
    for (int c = 0; c < Cd; c++) {
        float dt = expf(logf(1e-3f) + (logf(0.1f) - logf(1e-3f)) * pm_rng_uniform(&rng));
        dtb[c] = logf(expm1f(dt));  // inverse softplus, as the reference initializes it
        for (int n = 0; n < N; n++) Alog[(size_t)c * N + n] = logf((float)(n + 1)) + 0.2f * (pm_rng_uniform(&rng) - 0.5f);
    }
    float *dout = rnd_bf(mc, -1, 1), *dxdbl0 = rnd_bf((size_t)M * nx, -1, 1), *dxz0 = rnd_bf((size_t)M * ldz, -1, 1);
    float *ddtb0 = rnd(Cd, -0.01f, 0.01f), *dA0 = rnd((size_t)Cd * N, -0.01f, 0.01f), *dD0 = rnd(Cd, -0.01f, 0.01f);
    // CPU
    void *cp = c_puti(pos, M), *cu = c_put(u, mc), *cdp = c_put(dpre, mc), *cx = c_put(xdbl, (size_t)M * nx);
    void *cz = c_put(xz, (size_t)M * ldz), *cD = c_put(D, Cd), *cdtb = c_put(dtb, Cd), *cA = c_put(Alog, (size_t)Cd * N);
    void *cout = CPU->alloc(mc * 4), *cdo = c_put(dout, mc), *cdu = CPU->alloc(mc * 4), *cddp = CPU->alloc(mc * 4);
    void *cdx = c_put(dxdbl0, (size_t)M * nx), *cdz = c_put(dxz0, (size_t)M * ldz);
    void *cddtb = c_put(ddtb0, Cd), *cdA = c_put(dA0, (size_t)Cd * N), *cdD = c_put(dD0, Cd);
    void *cyo = CPU->alloc(mc * 4);
    void *cfirst = first ? c_puti(first, B) : NULL, *ch0 = h0 ? c_put(h0, (size_t)B * Cd * N) : NULL;
    void *gfirst = first ? g_i32(first, B) : NULL, *gh0 = h0 ? g_f32(h0, (size_t)B * Cd * N) : NULL;
    float *cxf = cx, *czf = cz, *cdxf = cdx, *cdzf = cdz;
    CPU->scan_fwd(cout, cu, cdp, cdtb, cA, cxf + R, cxf + R + N, nx, cD, czf + Cd, ldz, cp, M, T, Cd, N, NULL, cfirst, ch0);
    CPU->scan_bwd(cdu, cddp, cdxf + R, cdxf + R + N, cdzf + Cd, cddtb, cdA, cdD, cdo, cu, cdp, cdtb, cA, cxf + R,
                  cxf + R + N, nx, cD, czf + Cd, ldz, cp, M, T, Cd, N, NULL, cyo, cfirst, ch0);
    // the backward writes the forward's output again (for the out_proj weight gradient), in the forward's order
    float *r_yo = c_get(cyo, mc);
    float *r_out = c_get(cout, mc), *r_du = c_get(cdu, mc), *r_ddp = c_get(cddp, mc);
    float *r_dx = c_get(cdx, (size_t)M * nx), *r_dz = c_get(cdz, (size_t)M * ldz);
    float *r_ddtb = c_get(cddtb, Cd), *r_dA = c_get(cdA, (size_t)Cd * N), *r_dD = c_get(cdD, Cd);
    check_same_bits("scan_bwd out (CPU) = scan_fwd out", r_yo, r_out, mc * 4);
    if (first) {  // the control: the carried state changes the carried rows' outputs (the test could tell)
        CPU->scan_fwd(cyo, cu, cdp, cdtb, cA, cxf + R, cxf + R + N, nx, cD, czf + Cd, ldz, cp, M, T, Cd, N, NULL, NULL,
                      NULL);
        const float *y0 = cyo;
        double moved = 0;
        for (size_t i = 0; i < mc; i++) moved = fmax(moved, fabs((double)y0[i] - r_out[i]));
        assert_true(moved > 0.05);
    }
    // GPU
    void *gp = g_i32(pos, M), *gu = g_act(u, mc), *gdp = g_act(dpre, mc), *gx = g_act(xdbl, (size_t)M * nx);
    void *gz = g_act(xz, (size_t)M * ldz), *gD = g_f32(D, Cd), *gdtb = g_f32(dtb, Cd), *gA = g_f32(Alog, (size_t)Cd * N);
    void *gdo = g_act(dout, mc);
    float *nan = poisoned(u, M, Cd, 0, Cd);
    float *pdx = poisoned(dxdbl0, M, nx, R, 2 * N), *pdz = poisoned(dxz0, M, ldz, Cd, Cd);
    void *gout = g_act(nan, mc);
    const int fws0 = backend_cuda_scan_ws_launches(0), fyh0 = backend_cuda_scan_ws_launches(2);
    G->scan_fwd(gout, gu, gdp, gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M, T,
                Cd, N, NULL, gfirst, gh0);
    g_case_fwd_ws = backend_cuda_scan_ws_launches(0) - fws0;
    g_case_fwd_yh = backend_cuda_scan_ws_launches(2) - fyh0;
    float *out = g_get_act(gout, mc);
    check_rel("scan_fwd out (bf16)", out, r_out, mc, 1e-2);
    // The forward again, leaving its scan states (in a NaN-poisoned buffer, so a state it fails to write shows):
    // its output must not change, and the backward given those states (k = 3 below) must equal the one that
    // recomputes them (k = 0) bit for bit.
    assert_non_null(G->scan_states_bytes);
    size_t stb = G->scan_states_bytes(M, T, Cd, N);
    float *stnan = malloc(stb);
    memset(stnan, 0xFF, stb);
    void *gst = G->alloc(stb);
    G->upload(gst, stnan, stb);
    void *gout2 = g_act(nan, mc);
    G->scan_fwd(gout2, gu, gdp, gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M,
                T, Cd, N, gst, gfirst, gh0);
    float *out2 = g_get_act(gout2, mc);
    check_same_bits("scan_fwd out, keeping states", out, out2, mc * 4);
    // The staged forward (PM_SCAN_FWD_WS=0) forms every value as the warp-specialized forward (scan v65-v70) that
    // 64-wide plans, and 32-wide ones of one wave, take: the same output and states, bit for bit. (Where the plan
    // has time segments or B/C are not 4-byte aligned, both calls run the staged kernel.)
    setenv("PM_SCAN_FWD_WS", "0", 1);
    void *gst0 = G->alloc(stb), *gout0 = g_act(nan, mc);
    G->upload(gst0, stnan, stb);
    const int fws1 = backend_cuda_scan_ws_launches(0);
    G->scan_fwd(gout0, gu, gdp, gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M,
                T, Cd, N, gst0, gfirst, gh0);
    assert_int_equal(backend_cuda_scan_ws_launches(0) - fws1, 0);  // the switch did turn it off
    unsetenv("PM_SCAN_FWD_WS");
    float *out0 = g_get_act(gout0, mc), *st0 = g_get_f32(gst0, stb / 4), *st2 = g_get_f32(gst, stb / 4);
    check_same_bits("scan_fwd out, staged forward", out2, out0, mc * 4);
    check_same_bits("scan_fwd states, staged forward", st2, st0, stb);
    free(out0), free(st0), free(st2), G->free(gst0), G->free(gout0);
    float *bits[3] = {NULL, NULL, NULL}, *bits_g[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    // The GPU backward's out: the forward's output again, from the states it recomputes, summed over the states in
    // the forward's order: bit-identical to the forward's. Passed in calls 0 and 3 (recomputed and kept states),
    // NULL in 1 and 2. Call 4 repeats call 0 with PM_SCAN_BWD_WS=0: the warp-specialized backward (scan v72: 128-wide
    // plans, in sm_90a code; v76: with time segments too) forms every value as the staged 2-thread kernel does at the
    // same plan, in the same order, so the staged kernel gives call 0's bits. (Where the plan is another, both run
    // one kernel.)
    const Backend *modes[5] = {G, GD, GD, G, G};
    int ws_runs[5] = {0, 0, 0, 0, 0};  // launches of the warp-specialized backward in each call
    for (int k = 0; k < 5; k++) {
        if (k == 4) setenv("PM_SCAN_BWD_WS", "0", 1);
        const int ws0 = backend_cuda_scan_ws_launches(1);
        void *gdu = g_act(nan, mc), *gddp = g_act(nan, mc), *gdx = g_act(pdx, (size_t)M * nx);
        void *gdz = g_act(pdz, (size_t)M * ldz), *gddtb = g_f32(ddtb0, Cd), *gdA = g_f32(dA0, (size_t)Cd * N);
        void *gdD = g_f32(dD0, Cd), *gyo = g_act(nan, mc);
        modes[k]->scan_bwd(gdu, gddp, act_off(gdx, R), act_off(gdx, R + N), act_off(gdz, Cd), gddtb, gdA, gdD, gdo, gu,
                           gdp, gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M, T, Cd,
                           N, k == 3 ? gst : NULL, k == 0 || k >= 3 ? gyo : NULL, gfirst, gh0);
        ws_runs[k] = backend_cuda_scan_ws_launches(1) - ws0;
        if (k == 4) unsetenv("PM_SCAN_BWD_WS");
        float *yo = g_get_act(gyo, mc);
        float *du = g_get_act(gdu, mc), *ddp = g_get_act(gddp, mc), *dx = g_get_act(gdx, (size_t)M * nx);
        float *dz = g_get_act(gdz, (size_t)M * ldz), *ddtb = g_get_f32(gddtb, Cd), *dA = g_get_f32(gdA, (size_t)Cd * N);
        float *dD = g_get_f32(gdD, Cd);
        if (k == 0) {
            check_rel("scan_bwd du (bf16)", du, r_du, mc, 1e-2);
            check_rel("scan_bwd ddpre (bf16)", ddp, r_ddp, mc, 1e-2);
            check_slice("scan_bwd dB|dC (bf16)", dx, r_dx, M, nx, R, 2 * N, 1e-2);
            check_slice("scan_bwd dz (bf16)", dz, r_dz, M, ldz, Cd, Cd, 1e-2);
            // fp32 parameter gradients: only summation order and exp rounding differ (measured ~3e-6)
            check_rel("scan_bwd ddt_bias", ddtb, r_ddtb, Cd, 1e-4);
            check_rel("scan_bwd dA_log", dA, r_dA, (size_t)Cd * N, 1e-4);
            check_rel("scan_bwd dD", dD, r_dD, Cd, 1e-4);
            check_same_bits("scan_bwd out = scan_fwd out", yo, out, mc * 4);
            check_rel("scan_bwd out (bf16) vs CPU", yo, r_out, mc, 1e-2);
            bits_g[0] = dup(du, mc), bits_g[1] = dup(dx, (size_t)M * nx), bits_g[2] = dup(dA, (size_t)Cd * N);
            bits_g[3] = dup(ddp, mc), bits_g[4] = dup(dz, (size_t)M * ldz), bits_g[5] = dup(yo, mc);
        } else if (k >= 3) {
            const char *how = k == 3 ? "kept states" : "staged backward";
            char label[96];
            snprintf(label, sizeof label, "scan_bwd du, %s", how), check_same_bits(label, bits_g[0], du, mc * 4);
            snprintf(label, sizeof label, "scan_bwd dB|dC, %s", how);
            check_same_bits(label, bits_g[1], dx, (size_t)M * nx * 4);
            snprintf(label, sizeof label, "scan_bwd dA_log, %s", how);
            check_same_bits(label, bits_g[2], dA, (size_t)Cd * N * 4);
            snprintf(label, sizeof label, "scan_bwd ddpre, %s", how), check_same_bits(label, bits_g[3], ddp, mc * 4);
            snprintf(label, sizeof label, "scan_bwd dz, %s", how);
            check_same_bits(label, bits_g[4], dz, (size_t)M * ldz * 4);
            snprintf(label, sizeof label, "scan_bwd out, %s", how), check_same_bits(label, bits_g[5], yo, mc * 4);
        } else if (k == 1) {
            bits[0] = dup(du, mc), bits[1] = dup(dx, (size_t)M * nx), bits[2] = dup(dA, (size_t)Cd * N);
        } else {
            check_same_bits("scan_bwd du", bits[0], du, mc * 4);
            check_same_bits("scan_bwd dB|dC", bits[1], dx, (size_t)M * nx * 4);
            check_same_bits("scan_bwd dA_log", bits[2], dA, (size_t)Cd * N * 4);
        }
        free(du), free(ddp), free(dx), free(dz), free(ddtb), free(dA), free(dD), free(yo);
        G->free(gdu), G->free(gddp), G->free(gdx), G->free(gdz), G->free(gddtb), G->free(gdA), G->free(gdD),
            G->free(gyo);
    }
    // The backward has two staged kernels (2 threads per channel; v20's 4 in 32-wide blocks) and picks one by the
    // shape and the GPU's SM count: PM_SCAN_BWD4 forces each, so both meet the CPU at every shape on any GPU.
    // The two kernels sum a channel's states in different orders (8 per lane and 2 lanes, or 4 and 4), so the
    // fp32 ddt_bias differs in its last bits (the bf16 outputs mostly round alike): identical ddt_bias and dB|dC
    // bits would mean the switch ran one kernel twice. The forward sums y's quads in the order of the backward's
    // plan (scan v78: in pairs where it is the 4-thread kernel, a chain elsewhere), so each forced backward's copy
    // of the output is checked against a forward run under the same switch.
    float *dx_forced[2] = {NULL, NULL}, *ddtb_forced[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++) {
        char label[96];
        setenv("PM_SCAN_BWD4", f ? "2" : "0", 1);
        void *gyf = g_act(nan, mc);
        G->scan_fwd(gyf, gu, gdp, gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M, T,
                    Cd, N, NULL, gfirst, gh0);
        float *yf = g_get_act(gyf, mc);
        G->free(gyf);
        void *gdu = g_act(nan, mc), *gddp = g_act(nan, mc), *gdx = g_act(pdx, (size_t)M * nx);
        void *gdz = g_act(pdz, (size_t)M * ldz), *gddtb = g_f32(ddtb0, Cd), *gdA = g_f32(dA0, (size_t)Cd * N);
        void *gdD = g_f32(dD0, Cd), *gyo = g_act(nan, mc);
        G->scan_bwd(gdu, gddp, act_off(gdx, R), act_off(gdx, R + N), act_off(gdz, Cd), gddtb, gdA, gdD, gdo, gu, gdp,
                    gdtb, gA, act_off(gx, R), act_off(gx, R + N), nx, gD, act_off(gz, Cd), ldz, gp, M, T, Cd, N, gst,
                    gyo, gfirst, gh0);
        float *yo = g_get_act(gyo, mc);
        float *du = g_get_act(gdu, mc), *ddp = g_get_act(gddp, mc), *dx = g_get_act(gdx, (size_t)M * nx);
        float *dz = g_get_act(gdz, (size_t)M * ldz), *ddtb = g_get_f32(gddtb, Cd), *dA = g_get_f32(gdA, (size_t)Cd * N);
        float *dD = g_get_f32(gdD, Cd);
        const char *kind = f ? "4 threads/channel" : "2 threads/channel";
        snprintf(label, sizeof label, "scan_bwd du, %s", kind), check_rel(label, du, r_du, mc, 1e-2);
        snprintf(label, sizeof label, "scan_bwd ddpre, %s", kind), check_rel(label, ddp, r_ddp, mc, 1e-2);
        snprintf(label, sizeof label, "scan_bwd dB|dC, %s", kind), check_slice(label, dx, r_dx, M, nx, R, 2 * N, 1e-2);
        snprintf(label, sizeof label, "scan_bwd dz, %s", kind), check_slice(label, dz, r_dz, M, ldz, Cd, Cd, 1e-2);
        snprintf(label, sizeof label, "scan_bwd ddt_bias, %s", kind), check_rel(label, ddtb, r_ddtb, Cd, 1e-4);
        snprintf(label, sizeof label, "scan_bwd dA_log, %s", kind), check_rel(label, dA, r_dA, (size_t)Cd * N, 1e-4);
        snprintf(label, sizeof label, "scan_bwd dD, %s", kind), check_rel(label, dD, r_dD, Cd, 1e-4);
        snprintf(label, sizeof label, "scan_fwd out, %s's plan", kind), check_rel(label, yf, r_out, mc, 1e-2);
        snprintf(label, sizeof label, "scan_bwd out = scan_fwd out, %s", kind), check_same_bits(label, yo, yf, mc * 4);
        dx_forced[f] = dx, ddtb_forced[f] = ddtb;
        free(du), free(ddp), free(dz), free(dA), free(dD), free(yo), free(yf);
        G->free(gdu), G->free(gddp), G->free(gdx), G->free(gdz), G->free(gddtb), G->free(gdA), G->free(gdD),
            G->free(gyo);
    }
    unsetenv("PM_SCAN_BWD4");
    // PM_SCAN_BWD_WS=0 turned the warp-specialized backward off; with kept states it runs as where they are recomputed
    printf("    warp-specialized: forward %s, backward %s\n", g_case_fwd_ws ? "yes" : "no", ws_runs[0] ? "yes" : "no");
    assert_int_equal(ws_runs[4], 0);
    assert_int_equal(ws_runs[3], ws_runs[0]);
    g_case_bwd_ws = ws_runs[0];
    if (Cd % 8 == 0 && both_bwd)  // (otherwise the generic kernel, or the 2-thread one, runs either way)
        assert_true(memcmp(ddtb_forced[0], ddtb_forced[1], (size_t)Cd * sizeof(float)) != 0 ||
                    memcmp(dx_forced[0], dx_forced[1], (size_t)M * nx * sizeof(float)) != 0);
    free(dx_forced[0]), free(dx_forced[1]), free(ddtb_forced[0]), free(ddtb_forced[1]);
    for (int i = 0; i < 3; i++) free(bits[i]);
    for (int i = 0; i < 6; i++) free(bits_g[i]);
    free(stnan), free(out2), G->free(gst), G->free(gout2);
    free(pos), free(u), free(dpre), free(xdbl), free(xz), free(D), free(dtb), free(Alog), free(dout), free(dxdbl0),
        free(dxz0), free(ddtb0), free(dA0), free(dD0);
    free(r_yo), free(r_out), free(r_du), free(r_ddp), free(r_dx), free(r_dz), free(r_ddtb), free(r_dA), free(r_dD), free(nan),
        free(pdx), free(pdz), free(out);
    CPU->free(cp), CPU->free(cu), CPU->free(cdp), CPU->free(cx), CPU->free(cz), CPU->free(cD), CPU->free(cdtb),
        CPU->free(cA), CPU->free(cout), CPU->free(cdo), CPU->free(cdu), CPU->free(cddp), CPU->free(cdx),
        CPU->free(cdz), CPU->free(cddtb), CPU->free(cdA), CPU->free(cdD), CPU->free(cyo);
    G->free(gp), G->free(gu), G->free(gdp), G->free(gx), G->free(gz), G->free(gD), G->free(gdtb), G->free(gA),
        G->free(gdo), G->free(gout);
    if (first) CPU->free(cfirst), CPU->free(ch0), G->free(gfirst), G->free(gh0), free(first), free(h0);
}

static void test_scan(void **state) {
    (void)state;
    NEED_GPU();
    // (what the GPU and the build are: see the note after the 370m case below)
    int sms = 0;
    const char *ptx_env = getenv("PM_TEST_PTX_ONLY");
    const int ptx_only = ptx_env && atoi(ptx_env) == 1, hopper = backend_cuda_device_info(&sms) == 90 && sms == 132;
    scan_case(2, 100, 160, 16, 8, 1);  // chunks not a multiple of T, channels not a multiple of the block
    scan_case(3, 64, 256, 16, 16, 1);
    scan_case(9, 40, 960, 16, 8, 1);   // 135 blocks of 64 channels on a 132-SM H200: the forward takes 32-wide blocks;
                                       // the backward's 2-thread plan is one wave of those (call162's rule), and
                                       // forced, the 4-thread kernel runs in v80's 96-wide blocks (90 of them)
    scan_case(8, 56, 1480, 16, 8, 1);  // v20's 4-threads-per-channel backward (376 blocks of 32 would be its staged
                                       // plan), in v80's 96-wide warp-specialized blocks where the build has sm_90a
                                       // code (128 of them, one wave; the last of each row 40 wide, the last chunk
                                       // 8 tokens): scan_case's PM_SCAN_BWD_WS=0 call runs its staged twin,
                                       // scan_bwd4_kernel<96>, which must give the same bits
    if (hopper) assert_true(ptx_only ? g_case_bwd_ws == 0 : g_case_bwd_ws > 0);
    scan_case(2, 50, 100, 16, 8, 1);   // Cd not a multiple of 8: the generic kernels
    // the 370m width: 128 blocks of 128 channels; on a 132-SM H200 the forward takes 64-wide blocks two an SM
    // (v50) and the backward 128-wide 2-thread ones (512 4-thread blocks would need a second wave)
    // (its forward and backward are the warp-specialized ones)
    scan_case(8, 40, 2048, 16, 8, 0);
    if (hopper) assert_true(g_case_fwd_yh == 0);
    // On a 132-SM Hopper (the H100 SXM and H200: compute capability 9.0, sm_90a code in the default build, CMake's
    // 90a-real) both kernels must have run, or the staged-kernel comparisons above compared a kernel with itself.
    // (A build without sm_90a code fails here on such a GPU: it would train, slower, without a word.) Other SM
    // counts may plan these shapes otherwise.
    // PM_TEST_PTX_ONLY=1 declares a build of compute_90 PTX alone (CMAKE_CUDA_ARCHITECTURES=90-virtual: what a
    // GPU newer than Hopper loads from the default build, compiled by the driver): the warp-specialized backward
    // is then absent (setmaxnreg is sm_90a's) and the staged one must run, with every result above the same.
    // (CUDA_FORCE_PTX_JIT=1 cannot stand in for it: cuBLASLt's kernels carry no PTX and it fails to start.)
    if (hopper) assert_true(g_case_fwd_ws > 0 && (ptx_only ? g_case_bwd_ws == 0 : g_case_bwd_ws > 0));
    // the warp-specialized forward with a partial 64-channel block (1480 = 23 * 64 + 8; 216 blocks, two an SM) and
    // a partial chunk
    scan_case(9, 40, 1480, 16, 8, 0);
    if (hopper) assert_true(g_case_fwd_ws > 0 && g_case_fwd_yh == 0);
    // v90: the B2·D4096·L8192 benchmark's width, 128 blocks of 64 channels one an SM: the warp-specialized forward
    // whose producers add y's two halves (YH), which scan_case's staged-forward call must match bit for bit (and
    // the backward's copy of the output with it); the 370m width above (two blocks an SM) keeps the butterfly
    scan_case(2, 40, 4096, 16, 8, 0);
    if (hopper) assert_true(g_case_fwd_ws > 0 && g_case_fwd_yh > 0);
    // B/C at an odd stride, 2-byte aligned: the warp-specialized forward's 4-byte copies cannot take them, the staged
    // forward runs
    scan_case(8, 40, 2048, 16, 7, 0);
    // the warp-specialized backward (v72) with a partial 128-channel block (200 = 128 + 72; 120 blocks, one wave)
    // and a partial chunk
    scan_case(60, 40, 200, 16, 8, 0);
    if (hopper) assert_true(ptx_only ? g_case_bwd_ws == 0 : g_case_bwd_ws > 0);
    // v76: 32 blocks of 128 channels (the last of 80), so the warp-specialized backward takes four time segments of
    // 12 chunks (the last of 2, ending in a partial chunk) after the segment summaries (v77: over quarter segments
    // of 3 chunks); PM_SCAN_BWD_WS=0 keeps the plan and runs the staged 2-thread kernel's segments, which must give
    // the same bits. (Without v76's rule this shape's plan is 64-wide staged blocks: a warp-specialized launch here
    // is the segmented one.)
    scan_case(2, 600, 2000, 16, 8, 0);
    if (hopper) assert_true(ptx_only ? g_case_bwd_ws == 0 : g_case_bwd_ws > 0);
    FINISH();
}

// The scan with rows carried in (scan_fwd/bwd's first, h0) against the CPU, at test_scan's shapes (each of the
// kernels and plans there: warp-specialized and staged, 2 and 4 threads a channel, the generic kernels) and at two
// with time segments (few rows: the plans cut the rows in time) and carried parts over several of the carry
// kernels' 128-token segments: every check of scan_case, the backward from the forward's states and recomputing
// them alike.
static void test_scan_carried(void **state) {
    (void)state;
    NEED_GPU();
    g_scan_carry = 1;
    scan_case(2, 100, 160, 16, 8, 1);
    scan_case(3, 64, 256, 16, 16, 1);
    scan_case(9, 40, 960, 16, 8, 1);
    scan_case(8, 56, 1480, 16, 8, 1);
    scan_case(2, 50, 100, 16, 8, 1);  // the generic kernels (their own checkpoint layout)
    scan_case(8, 40, 2048, 16, 8, 0);
    scan_case(2, 300, 256, 16, 8, 1);
    scan_case(2, 1000, 512, 16, 8, 1);
    g_scan_carry = 0;
    FINISH();
}

// ---------------------------------------------------------------------------------------------------------
// state carried into rows from the batch before (Backend.carry_*): every op on the CPU (fp32, the reference) and
// the GPU from the same bf16-rounded inputs, in the model's layout (xi and z column slices of xz (M, 2 Cd), B and C
// of xdbl (M, R + 2N)). Four rows: 0 starts afresh (first 0) and its last document, from token T-10, goes on
// (last T-10); 1 continues a document that ends at token 5 (pos[5] = 0) and ends with one that does not go on
// (last -1); 2 is one document throughout (first T, last 0: the state out walks from h0); 3 continues one that ends
// at token f3 (2: fewer than K-1 tokens) and has its last from token f3 + 5. Carried rows count positions on from 3T.

// Buffers of any backend from host floats (ACT: bf16 on the GPU, the floats themselves on the CPU).
static void *b_f32(const Backend *be, const float *h, size_t n) {
    void *p = be->alloc(n * be->f32_bytes);
    be->upload(p, h, n * 4);
    return p;
}
static void *b_act(const Backend *be, const float *h, size_t n) {
    if (be->act_bytes == 4) return b_f32(be, h, n);
    void *t = b_f32(be, h, n), *p = be->alloc(n * be->act_bytes);
    be->f32_to_act(p, t, n);
    be->free(t);
    return p;
}
static void *b_i32(const Backend *be, const int32_t *h, size_t n) {
    void *p = be->alloc(n * sizeof(int32_t));
    be->upload(p, h, n * sizeof(int32_t));
    return p;
}
static float *b_get_f32(const Backend *be, const void *p, size_t n) {
    float *h = pm_malloc(n * sizeof(float));
    be->download(h, p, n * 4);
    return h;
}
static float *b_get_act(const Backend *be, const void *p, size_t n) {
    if (be->act_bytes == 4) return b_get_f32(be, p, n);
    void *t = be->alloc(n * 4);
    be->act_to_f32(t, p, n);
    float *h = b_get_f32(be, t, n);
    be->free(t);
    return h;
}
static void *b_off(const Backend *be, void *p, size_t off) { return (char *)p + off * be->act_bytes; }

typedef struct {
    int rows, T, Cd, N, R, K, M, nx;
    int32_t *pos, *first, *last;
    float *xz, *xdbl, *u, *dpre, *w, *b, *dtb, *Alog, *hist, *h0, *du;  // inputs
    float *dxa0, *dw0, *hout0, *histo0;                                 // outputs' starting values
} CarryIn;
// the conv's outputs with the rows carried in (u, dxa, dw, db) and without (un, dxan, dwn, dbn: first NULL); the
// state out's
typedef struct {
    float *u, *un, *dxa, *dxan, *dw, *db, *dwn, *dbn, *hout, *histo;
} CarryOut;

static void carry_out_free(CarryOut *o) {
    free(o->u), free(o->un), free(o->dxa), free(o->dxan), free(o->dw), free(o->db), free(o->dwn), free(o->dbn);
    free(o->hout), free(o->histo);
}

// The ops that take what is carried in, once each on backend be (on its side queue when side is set), each into its
// own output buffers from the starting values: conv_silu_fwd and conv_silu_bwd with first, hist and without (first
// NULL; the backward adds to its parameter gradients), and carry_state_out. with_states (N = 16, a backend that keeps
// scan states): carry_state_out is given the states of a scan_fwd of the same rows (first, h0 and the row's B, dpre,
// u; D and z from xz), as the model gives them.
static CarryOut run_carry_ops(const Backend *be, const CarryIn *in, int side, int with_states) {
    const int M = in->M, T = in->T, Cd = in->Cd, N = in->N, R = in->R, K = in->K, nx = in->nx, rows = in->rows;
    const size_t mc = (size_t)M * Cd, mz = (size_t)M * 2 * Cd, mx = (size_t)M * nx, nh = (size_t)rows * Cd * N,
                 nhist = (size_t)rows * (K - 1) * Cd, nw = (size_t)Cd * K;
    void *pos = b_i32(be, in->pos, M), *first = b_i32(be, in->first, rows), *last = b_i32(be, in->last, rows);
    void *xz = b_act(be, in->xz, mz), *xdbl = b_act(be, in->xdbl, mx), *uin = b_act(be, in->u, mc);
    void *dpre = b_act(be, in->dpre, mc), *w = b_f32(be, in->w, nw), *b = b_f32(be, in->b, Cd);
    void *dtb = b_f32(be, in->dtb, Cd), *Alog = b_f32(be, in->Alog, (size_t)Cd * N);
    void *hist = b_act(be, in->hist, nhist), *h0 = b_f32(be, in->h0, nh), *du = b_act(be, in->du, mc);
    void *u = be->alloc(mc * be->act_bytes), *un = be->alloc(mc * be->act_bytes);
    void *dxa = b_act(be, in->dxa0, mz), *dxan = b_act(be, in->dxa0, mz);
    void *dw = b_f32(be, in->dw0, nw), *db = b_f32(be, in->dw0 + nw, Cd);
    void *dwn = b_f32(be, in->dw0, nw), *dbn = b_f32(be, in->dw0 + nw, Cd);
    void *hout = b_f32(be, in->hout0, nh), *histo = b_act(be, in->histo0, nhist);
    void *states = NULL, *y = NULL, *Dv = NULL;
    if (with_states && be->scan_states_bytes && N == 16) {
        states = be->alloc(be->scan_states_bytes(M, T, Cd, N)), y = be->alloc(mc * be->act_bytes);
        Dv = b_f32(be, in->b, Cd);  // (any D: the states do not depend on it)
        be->scan_fwd(y, uin, dpre, dtb, Alog, b_off(be, xdbl, R), b_off(be, xdbl, R + N), nx, Dv, b_off(be, xz, Cd),
                     2 * Cd, pos, M, T, Cd, N, states, first, h0);
    }
    const int on_side = side && be->side_begin;
    if (on_side) be->side_begin();
    be->conv_silu_fwd(u, xz, 2 * Cd, w, b, pos, M, T, Cd, K, first, hist);
    be->conv_silu_fwd(un, xz, 2 * Cd, w, b, pos, M, T, Cd, K, NULL, NULL);
    be->conv_silu_bwd(dxa, 2 * Cd, dw, db, du, xz, w, b, pos, M, T, Cd, K, first, hist);
    be->conv_silu_bwd(dxan, 2 * Cd, dwn, dbn, du, xz, w, b, pos, M, T, Cd, K, NULL, NULL);
    be->carry_state_out(hout, histo, uin, dpre, dtb, Alog, b_off(be, xdbl, R), nx, xz, 2 * Cd, first, last, h0, M, T,
                        Cd, N, K, states);
    if (on_side) be->side_wait(be->side_end());
    be->synchronize();
    CarryOut o;
    o.u = b_get_act(be, u, mc), o.un = b_get_act(be, un, mc);
    o.dxa = b_get_act(be, dxa, mz), o.dxan = b_get_act(be, dxan, mz);
    o.dw = b_get_f32(be, dw, nw), o.db = b_get_f32(be, db, Cd), o.dwn = b_get_f32(be, dwn, nw);
    o.dbn = b_get_f32(be, dbn, Cd), o.hout = b_get_f32(be, hout, nh), o.histo = b_get_act(be, histo, nhist);
    void *bufs[] = {pos, first, last, xz, xdbl, uin, dpre, w, b, dtb, Alog, hist, h0, du, u, un, dxa, dxan, dw, db,
                    dwn, dbn, hout, histo};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(bufs[i]);
    if (states) be->free(states), be->free(y), be->free(Dv);
    return o;
}

// a - b, elementwise (n)
static float *diff_of(const float *a, const float *b, size_t n) {
    float *d = pm_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    return d;
}

// (rows, ld) buffers: on the rows (tokens) `mask` marks, columns [off, off + width) within tol of the CPU's (rel
// err over those elements); every other element bit-identical to where it started (untouched).
static void check_carried(const char *what, const float *g, const float *c, const float *orig, int rows, int ld,
                          int off, int width, const uint8_t *mask, double tol) {
    size_t n = 0, changed = 0;
    float *gs = pm_malloc((size_t)rows * width * sizeof(float)), *cs = pm_malloc((size_t)rows * width * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            const size_t i = (size_t)r * ld + j;
            if (mask[r] && j >= off && j < off + width) gs[n] = g[i], cs[n] = c[i], n++;
            else changed += memcmp(&g[i], &orig[i], sizeof(float)) != 0;
        }
    if (changed) printf("    %s: %zu elements it must not touch changed  <-- FAIL\n", what, changed);
    g_fails += changed != 0;
    check_rel(what, gs, cs, n, tol);
    free(gs), free(cs);
}

static void carry_case(int T, int Cd, int N, int R, int K, int f3) {
    CarryIn in;
    const int rows = 4, M = rows * T, nx = R + 2 * N;
    in.rows = rows, in.T = T, in.Cd = Cd, in.N = N, in.R = R, in.K = K, in.M = M, in.nx = nx;
    printf("  carry rows=%d T=%d Cd=%d N=%d K=%d first[3]=%d\n", rows, T, Cd, N, K, f3);
    assert_true(T >= 24);
    const size_t mc = (size_t)M * Cd, mz = (size_t)M * 2 * Cd, mx = (size_t)M * nx, nh = (size_t)rows * Cd * N,
                 nhist = (size_t)rows * (K - 1) * Cd;
    int32_t first[4] = {0, 5, T, f3}, last[4] = {T - 10, -1, 0, f3 + 5};
    // document starts (pos 0) of each row after its first token; carried rows count on from 3T before the first
    const int starts[4][2] = {{13, T - 10}, {5, 20}, {-1, -1}, {f3, f3 + 5}};
    in.first = first, in.last = last;
    in.pos = pm_malloc((size_t)M * sizeof(int32_t));
    for (int r = 0; r < rows; r++) {
        int p = first[r] > 0 ? 3 * T : 0;
        for (int t = 0; t < T; t++) {
            if (t == starts[r][0] || t == starts[r][1]) p = 0;
            in.pos[(size_t)r * T + t] = p++;
        }
    }
    in.xz = rnd_bf(mz, -2, 2), in.xdbl = rnd_bf(mx, -1, 1), in.u = rnd_bf(mc, -1, 1), in.dpre = rnd_bf(mc, -1, 1);
    in.w = rnd((size_t)Cd * K, -0.5f, 0.5f), in.b = rnd(Cd, -0.5f, 0.5f);
    in.dtb = pm_malloc(Cd * sizeof(float)), in.Alog = pm_malloc((size_t)Cd * N * sizeof(float));
    for (int c = 0; c < Cd; c++) {  // as scan_case (the reference's initialization)
        float dt = expf(logf(1e-3f) + (logf(0.1f) - logf(1e-3f)) * pm_rng_uniform(&rng));
        in.dtb[c] = logf(expm1f(dt));
        for (int n = 0; n < N; n++) in.Alog[(size_t)c * N + n] = logf((float)(n + 1)) + 0.2f * (pm_rng_uniform(&rng) - 0.5f);
    }
    in.hist = rnd_bf(nhist, -2, 2), in.h0 = rnd(nh, -1, 1), in.du = rnd_bf(mc, -1, 1);
    // the outputs the ops add to start small, so that what they add shows in the comparison
    in.dxa0 = rnd_bf(mz, -0.1f, 0.1f), in.dw0 = rnd((size_t)Cd * (K + 1), -0.1f, 0.1f);
    in.hout0 = rnd(nh, -5, 5), in.histo0 = rnd_bf(nhist, -3, 3);
    // which tokens each op may change: the conv's first min(K-1, first) of carried rows
    uint8_t *conv_tok = pm_malloc(M), *hrow = pm_malloc(rows * Cd), *hsrow = pm_malloc(rows * (K - 1));
    for (int m = 0; m < M; m++) {
        const int r = m / T, t = m % T;
        conv_tok[m] = first[r] > 0 && t < first[r] && t < K - 1;
    }
    for (int i = 0; i < rows * Cd; i++) hrow[i] = last[i / Cd] >= 0;  // h_out as (rows * Cd, N)
    for (int i = 0; i < rows * (K - 1); i++) hsrow[i] = last[i / (K - 1)] >= 0;  // hist_out as (rows (K-1), Cd)

    // the carried rows change the conv's outputs on their first min(K-1, first) tokens (against the CPU), and nothing
    // else (bit for bit the same as without them); the parameter gradients by their carried part (the difference
    // with and without, against the CPU's)
    CarryOut ref = run_carry_ops(CPU, &in, 0, 0), g = run_carry_ops(G, &in, 0, 0);
    const size_t nw = (size_t)Cd * K;
    check_carried("conv_silu_fwd carried u (bf16)", g.u, ref.u, g.un, M, Cd, 0, Cd, conv_tok, 1e-2);
    check_rel("conv_silu_fwd u without carrying (bf16)", g.un, ref.un, mc, 1e-2);
    check_carried("conv_silu_bwd carried dxi (bf16)", g.dxa, ref.dxa, g.dxan, M, 2 * Cd, 0, Cd, conv_tok, 1e-2);
    // (the CPU's own: only its tokens outside the mask are checked, bit for bit against its plain conv)
    check_carried("conv_silu_bwd carried dxi, CPU", ref.dxa, ref.dxa, ref.dxan, M, 2 * Cd, 0, Cd, conv_tok, 0);
    check_rel("conv_silu_bwd carried dw", g.dw, ref.dw, nw, 1e-3);
    check_rel("conv_silu_bwd carried db", g.db, ref.db, Cd, 1e-3);
    {
        float *gp = diff_of(g.dw, g.dwn, nw), *cp = diff_of(ref.dw, ref.dwn, nw);
        float *gpb = diff_of(g.db, g.dbn, Cd), *cpb = diff_of(ref.db, ref.dbn, Cd);
        check_rel("conv_silu_bwd dw's carried part", gp, cp, nw, 2e-3);
        check_rel("conv_silu_bwd db's carried part", gpb, cpb, Cd, 2e-3);
        free(gp), free(cp), free(gpb), free(cpb);
    }
    check_carried("carry_state_out h_out", g.hout, ref.hout, in.hout0, rows * Cd, N, 0, N, hrow, 1e-3);
    check_carried("carry_state_out hist_out (copy)", g.histo, ref.histo, in.histo0, rows * (K - 1), Cd, 0, Cd, hsrow, 0);
    if (N == 16) {  // the state out from the forward's scan states (as the model has them), the other outputs alike
        CarryOut gs = run_carry_ops(G, &in, 0, 1);
        check_carried("carry_state_out h_out, from the scan states", gs.hout, ref.hout, in.hout0, rows * Cd, N, 0, N,
                      hrow, 1e-3);
        check_same_bits("carry_state_out hist_out, from the scan states", gs.histo, g.histo, nhist * 4);
        carry_out_free(&gs);
    }

    // deterministic: the same bits again, the second time on the side queue (the carry workspace and the conv's
    // partial rows are the side stream's own there)
    CarryOut d1 = run_carry_ops(GD, &in, 0, 0), d2 = run_carry_ops(GD, &in, 1, 0);
    const struct { const char *what; float *a, *b, *c; size_t n; } same[] = {
        {"conv_silu_fwd carried u", g.u, d1.u, d2.u, mc},
        {"conv_silu_bwd carried dxi", g.dxa, d1.dxa, d2.dxa, mz},
        {"conv_silu_bwd carried dw", g.dw, d1.dw, d2.dw, nw},
        {"conv_silu_bwd carried db", g.db, d1.db, d2.db, Cd},
        {"carry_state_out h_out", g.hout, d1.hout, d2.hout, nh},
        {"carry_state_out hist_out", g.histo, d1.histo, d2.histo, nhist},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char label[96];
        snprintf(label, sizeof label, "%s, again", same[i].what);
        check_same_bits(label, same[i].a, same[i].b, same[i].n * 4);
        snprintf(label, sizeof label, "%s, side queue", same[i].what);
        check_same_bits(label, same[i].a, same[i].c, same[i].n * 4);
    }
    carry_out_free(&d1), carry_out_free(&d2), carry_out_free(&g), carry_out_free(&ref);

    // no row carried (every first 0, every last -1): the conv's outputs as without first (its partial row of the
    // carried parts all 0), the state out's untouched
    int32_t none_first[4] = {0, 0, 0, 0}, none_last[4] = {-1, -1, -1, -1};
    in.first = none_first, in.last = none_last;
    memset(hrow, 0, rows * Cd), memset(hsrow, 0, rows * (K - 1));
    CarryOut z = run_carry_ops(G, &in, 0, 0);
    check_same_bits("no carry: u as without first", z.u, z.un, mc * 4);
    check_same_bits("no carry: dxi as without first", z.dxa, z.dxan, mz * 4);
    check_same_bits("no carry: dw as without first", z.dw, z.dwn, nw * 4);
    check_same_bits("no carry: db as without first", z.db, z.dbn, (size_t)Cd * 4);
    check_carried("no carry: h_out untouched", z.hout, in.hout0, in.hout0, rows * Cd, N, 0, N, hrow, 0);
    check_carried("no carry: hist_out untouched", z.histo, in.histo0, in.histo0, rows * (K - 1), Cd, 0, Cd, hsrow, 0);
    carry_out_free(&z);

    free(in.pos), free(in.xz), free(in.xdbl), free(in.u), free(in.dpre), free(in.w), free(in.b), free(in.dtb);
    free(in.Alog), free(in.hist), free(in.h0), free(in.du), free(in.dxa0), free(in.dw0);
    free(in.hout0), free(in.histo0);
    free(conv_tok), free(hrow), free(hsrow);
}

static void test_carry_ops(void **state) {
    (void)state;
    NEED_GPU();
    assert_non_null(G->carry_state_out);
    carry_case(37, 80, 16, 8, 4, 2);   // one block of channels
    carry_case(37, 203, 16, 7, 4, 2);  // two blocks, the second partial; odd strides
    carry_case(30, 40, 8, 8, 3, 2);    // N < 16 (the kernels for 16 states with a run-time N), K = 3
    // time segments of 128 tokens (cuda_carry.cu): row 2 carried over 300 tokens (3 segments, the last partial), row
    // 3 over exactly one (first 128), the state out of rows 2 and 3 over 3 segments (from h0 / from token 133)
    carry_case(300, 160, 16, 8, 4, 128);
    carry_case(300, 40, 8, 8, 4, 200);
    FINISH();
}

// N > 16: the fallback kernels (arrays of 64 states, partly in local memory; the CUDA scan itself takes N = 16 only)
static void test_carry_ops_wide_state(void **state) {
    (void)state;
    NEED_GPU();
    carry_case(30, 40, 32, 8, 2, 2);  // K = 2
    carry_case(200, 40, 32, 8, 2, 150);  // two time segments
    FINISH();
}

// The conv backward with rows carried in, its reduction held back (defer_reductions, grads_write: as in the model's
// backward): the carried rows' partial row goes to the reduction ring with the conv's, and the result is the same
// bits as reducing at once (before the fold, v5, an add kernel had to flush the held-back reductions first).
static void test_carry_conv_deferred(void **state) {
    (void)state;
    NEED_GPU();
    if (!GD->defer_reductions || !GD->grads_write) {
        skip();
        return;
    }
    const int B = 2, T = 64, C = 96, K = 4, M = B * T, ldx = 2 * C;
    int32_t *pos = make_pos(B, T), first[2] = {T, 2};
    for (int t = 0; t < T; t++) pos[t] += 100;  // row 0 one document carried in; row 1 a new start at token 2
    float *xz = rnd_bf((size_t)M * ldx, -2, 2), *w = rnd(C * K, -0.5f, 0.5f), *b = rnd(C, -0.5f, 0.5f);
    float *du = rnd_bf((size_t)M * C, -1, 1), *hist = rnd_bf((size_t)B * (K - 1) * C, -2, 2);
    void *gp = g_i32(pos, M), *gx = g_act(xz, (size_t)M * ldx), *gw = g_f32(w, C * K), *gb = g_f32(b, C);
    void *gdu = g_act(du, (size_t)M * C), *gf = g_i32(first, B), *gh = g_act(hist, (size_t)B * (K - 1) * C);
    float *res[2][3];
    for (int defer = 0; defer < 2; defer++) {
        void *gdx = G->alloc((size_t)M * ldx * G->act_bytes), *gdw = G->alloc(C * K * 4), *gdb = G->alloc(C * 4);
        GD->grads_write(1);
        if (defer) GD->defer_reductions(1);
        GD->conv_silu_bwd(gdx, ldx, gdw, gdb, gdu, gx, gw, gb, gp, M, T, C, K, gf, gh);
        if (defer) GD->defer_reductions(0);
        GD->grads_write(0);
        res[defer][0] = g_get_f32(gdw, C * K), res[defer][1] = g_get_f32(gdb, C);
        res[defer][2] = g_get_act(gdx, (size_t)M * ldx);
        G->free(gdx), G->free(gdw), G->free(gdb);
    }
    check_same_bits("carried conv dw, held back", res[0][0], res[1][0], C * K * 4);
    check_same_bits("carried conv db, held back", res[0][1], res[1][1], C * 4);
    check_same_bits("carried conv dxi, held back", res[0][2], res[1][2], (size_t)M * ldx * 4);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) free(res[i][k]);
    free(pos), free(xz), free(w), free(b), free(du), free(hist);
    G->free(gp), G->free(gx), G->free(gw), G->free(gb), G->free(gdu), G->free(gf), G->free(gh);
    FINISH();
}

// bf16: the classifier's bf16_logits (the training default); the op then rounds the logits to bf16 unless logits
// are asked for (then fp32 as before) or Vp is not a multiple of 8 (then fp32: the register-resident kernel needs
// 16-byte pieces), so the loss agrees with the CPU's to bf16 rounding of a logit (2^-9 relative) instead of fp32's.
static void classifier_case(int M, int C, int Vp, int backward, int want_logits, int bf16) {
    printf("  classifier M=%d C=%d Vp=%d backward=%d logits=%d bf16=%d\n", M, C, Vp, backward, want_logits, bf16);
    const double loss_tol = bf16 && !want_logits && Vp % 8 == 0 ? 4e-3 : 1e-4;
    float *x = rnd_bf((size_t)M * C, -1, 1), *wte = rnd_bf((size_t)Vp * C, -0.5f, 0.5f);
    float *dwte0 = rnd((size_t)Vp * C, -1e-3f, 1e-3f);  // small: the accumulated gradient dominates
    int32_t *tg = rnd_tokens(M, Vp);
    for (int i = 0; i < M; i += 7) tg[i] = -1;  // ignored targets
    float scale = 0.5f;
    void *cx = c_put(x, (size_t)M * C), *cw = c_put(wte, (size_t)Vp * C), *ct = c_puti(tg, M);
    void *cl = CPU->alloc(M * 4), *cdx = CPU->alloc((size_t)M * C * 4), *cdw = c_put(dwte0, (size_t)Vp * C);
    float *r_logits = want_logits ? pm_malloc((size_t)M * Vp * sizeof(float)) : NULL;
    CPU->classifier(cl, backward ? cdx : NULL, backward ? cdw : NULL, r_logits, cx, cw, ct, scale, M, C, Vp, 0);
    float *r_l = c_get(cl, M), *r_dx = c_get(cdx, (size_t)M * C), *r_dw = c_get(cdw, (size_t)Vp * C);
    void *gx = g_act(x, (size_t)M * C), *gw = g_act(wte, (size_t)Vp * C), *gt = g_i32(tg, M);
    float *nan = poisoned(x, M, C, 0, C);
    float *bits_l = NULL, *bits_dw = NULL;
    const Backend *modes[3] = {G, GD, GD};
    for (int k = 0; k < (backward ? 3 : 1); k++) {
        void *gl = g_f32(nan, M), *gdx = g_act(nan, (size_t)M * C), *gdw = g_f32(dwte0, (size_t)Vp * C);
        float *logits = want_logits && k == 0 ? pm_malloc((size_t)M * Vp * sizeof(float)) : NULL;
        if (logits)
            for (size_t i = 0; i < (size_t)M * Vp; i++) logits[i] = NAN;
        modes[k]->classifier(gl, backward ? gdx : NULL, backward ? gdw : NULL, logits, gx, gw, gt, scale, M, C, Vp,
                             bf16);
        float *l = g_get_f32(gl, M), *dx = g_get_act(gdx, (size_t)M * C), *dw = g_get_f32(gdw, (size_t)Vp * C);
        if (k == 0) {
            // logits come from bf16 operands with fp32 accumulation, as on the CPU: fp32-level agreement
            check_rel("classifier loss", l, r_l, M, loss_tol);
            if (logits) check_rel("classifier logits_out", logits, r_logits, (size_t)M * Vp, 1e-4);
            if (backward) {
                check_rel("classifier dx (bf16)", dx, r_dx, (size_t)M * C, 1e-2);
                check_rel("classifier dwte (bf16 dlogits)", dw, r_dw, (size_t)Vp * C, 1e-2);
            } else {
                check_rel("classifier dwte untouched", dw, dwte0, (size_t)Vp * C, 0);
            }
            if (bf16 && !want_logits && Vp % 8 == 0) {
                // the bf16 path ran: its losses are not the fp32 path's bits (the tolerance alone would pass both)
                void *gl32 = g_f32(nan, M);
                G->classifier(gl32, NULL, NULL, NULL, gx, gw, gt, scale, M, C, Vp, 0);
                float *l32 = g_get_f32(gl32, M);
                const int differs = memcmp(l32, l, (size_t)M * sizeof(float)) != 0;
                printf("    classifier loss differs from the fp32 path's: %s\n", differs ? "yes" : "NO  <-- FAIL");
                g_fails += !differs;
                free(l32);
                G->free(gl32);
            }
        } else if (k == 1) {
            bits_l = dup(l, M), bits_dw = dup(dw, (size_t)Vp * C);
        } else {
            check_same_bits("classifier loss", bits_l, l, M * 4);
            check_same_bits("classifier dwte", bits_dw, dw, (size_t)Vp * C * 4);
        }
        free(l), free(dx), free(dw), free(logits);
        G->free(gl), G->free(gdx), G->free(gdw);
    }
    free(bits_l), free(bits_dw), free(x), free(wte), free(dwte0), free(tg), free(r_logits), free(r_l), free(r_dx),
        free(r_dw), free(nan);
    CPU->free(cx), CPU->free(cw), CPU->free(ct), CPU->free(cl), CPU->free(cdx), CPU->free(cdw);
    G->free(gx), G->free(gw), G->free(gt);
}

static void test_classifier(void **state) {
    (void)state;
    NEED_GPU();
    // fp32 logits
    classifier_case(300, 64, 1304, 1, 1, 0);   // Vp > 2x the block: the in-place bf16 narrowing crosses iterations
    classifier_case(4100, 64, 136, 1, 0, 0);   // more tokens than one chunk
    classifier_case(4100, 48, 1000, 0, 1, 0);  // forward only, logits of several chunks
    classifier_case(200, 64, 1302, 1, 1, 0);   // Vp not a multiple of 4: the kernel that streams the row twice
    classifier_case(300, 64, 1308, 1, 1, 0);   // an odd number of float4: the second block's half is one shorter
    classifier_case(50, 32, 4, 1, 1, 0);       // one float4: the second block of the pair holds nothing
    // bf16 logits (softmax_xent_bf16_kernel)
    classifier_case(4100, 64, 136, 1, 0, 1);    // more tokens than one chunk; one 16-byte piece per thread or none
    classifier_case(300, 64, 50280, 1, 0, 1);   // GPT-NeoX's padded vocabulary: 13 pieces per thread, the last partial
    classifier_case(300, 32, 4096, 0, 0, 1);    // forward only: the row is left as the logits
    classifier_case(200, 64, 1304, 1, 1, 1);    // logits asked for: the fp32 path, at fp32's tolerance
    classifier_case(200, 64, 1302, 1, 0, 1);    // Vp not a multiple of 8: the fp32 path
    FINISH();
}

static void test_sumsq(void **state) {
    (void)state;
    NEED_GPU();
    size_t sizes[3] = {1, 1000, 3000017};
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i];
        float *x = rnd(n, -1, 1);
        void *cx = c_put(x, n), *gx = g_f32(x, n);
        double rc = CPU->sumsq(cx, n), rg = G->sumsq(gx, n), rg2 = GD->sumsq(gx, n);
        double e = fabs(rg - rc) / rc;
        printf("    sumsq n=%zu: cpu %.10g gpu %.10g rel err %.3g\n", n, rc, rg, e);
        assert_true(e <= 1e-10);  // both sum fp32 squares in double
        assert_memory_equal(&rg, &rg2, sizeof rg);
        // from an element that is not 16-byte aligned (the sharded optimizer's grads + lo): scalar head first
        for (size_t o = 1; o < 4 && o < n; o++) {
            double rc1 = CPU->sumsq((float *)cx + o, n - o), rg1 = G->sumsq((float *)gx + o, n - o);
            double e1 = rc1 > 0 ? fabs(rg1 - rc1) / rc1 : fabs(rg1);
            if (e1 > 1e-10) printf("    sumsq n=%zu offset %zu: rel err %.3g\n", n - o, o, e1);
            assert_true(e1 <= 1e-10);
        }
        free(x), CPU->free(cx), G->free(gx);
    }
    FINISH();
}

static void test_adamw(void **state) {
    (void)state;
    NEED_GPU();
    ParamSegment segs[5] = {{0, 5000, 1}, {5000, 17, 0}, {5017, 40000, 1}, {45017, 3, 0}, {45020, 9001, 1}};
    size_t n = 54021;
    float *p = rnd(n, -1, 1), *g = rnd(n, -1, 1), *m = rnd(n, -0.1f, 0.1f), *v = rnd(n, 0, 0.01f);
    void *cp = c_put(p, n), *cg = c_put(g, n), *cm = c_put(m, n), *cv = c_put(v, n);
    void *gp = g_f32(p, n), *gg = g_f32(g, n), *gm = g_f32(m, n), *gv = g_f32(v, n);
    float *nan = pm_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) nan[i] = NAN;
    void *gpa = g_act(nan, n);
    for (int step = 1; step <= 3; step++) {
        AdamWArgs a = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                       .grad_scale = 0.7f, .step = step};
        CPU->adamw(cp, NULL, cg, cm, cv, segs, 5, &a);
        (step == 2 ? GD : G)->adamw(gp, gpa, gg, gm, gv, segs, 5, &a);
    }
    float *rp = c_get(cp, n), *rm = c_get(cm, n), *rv = c_get(cv, n);
    float *op = g_get_f32(gp, n), *om = g_get_f32(gm, n), *ov = g_get_f32(gv, n), *opa = g_get_act(gpa, n);
    // the update itself (p - p0), not just p, is what must agree
    float *du_c = pm_malloc(n * sizeof(float)), *du_g = pm_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) du_c[i] = rp[i] - p[i], du_g[i] = op[i] - p[i];
    check_rel("adamw params", op, rp, n, 1e-5);
    check_rel("adamw update p - p0", du_g, du_c, n, 1e-4);
    check_rel("adamw m", om, rm, n, 1e-5);
    check_rel("adamw v", ov, rv, n, 1e-5);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += opa[i] != bfr(op[i]);
    printf("    adamw params_act != bf16(params): %zu\n", bad);
    assert_int_equal(bad, 0);
    free(p), free(g), free(m), free(v), free(nan), free(rp), free(rm), free(rv), free(op), free(om), free(ov),
        free(opa), free(du_c), free(du_g);
    CPU->free(cp), CPU->free(cg), CPU->free(cm), CPU->free(cv);
    G->free(gp), G->free(gg), G->free(gm), G->free(gv), G->free(gpa);
    FINISH();
}

// AdamW on arrays that start at element offsets: off_pg for params, grads and params_act, off_mv for the
// moments. Equal offsets keep the float4 path (the pieces' aligned middles move with the offset); unequal ones
// are the sharded optimizer's case (params + lo against moments from element 0) and take the scalar loop.
static void adamw_offsets_case(int off_pg, int off_mv) {
    printf("  adamw offsets params/grads %d, moments %d\n", off_pg, off_mv);
    ParamSegment segs[3] = {{0, 4099, 1}, {4099, 6, 0}, {4105, 9000, 1}};
    size_t n = 13105, pad = 4;
    float *p = rnd(n + pad, -1, 1), *g = rnd(n + pad, -1, 1), *m = rnd(n + pad, -0.1f, 0.1f);
    float *v = rnd(n + pad, 0, 0.01f);
    void *cp = c_put(p + off_pg, n), *cg = c_put(g + off_pg, n), *cm = c_put(m + off_mv, n), *cv = c_put(v + off_mv, n);
    void *gp = g_f32(p, n + pad), *gg = g_f32(g, n + pad), *gm = g_f32(m, n + pad), *gv = g_f32(v, n + pad);
    float *nan = pm_malloc((n + pad) * sizeof(float));
    for (size_t i = 0; i < n + pad; i++) nan[i] = NAN;
    void *gpa = g_act(nan, n + pad);
    float *gp0 = (float *)gp + off_pg, *gm0 = (float *)gm + off_mv, *gv0 = (float *)gv + off_mv;
    for (int step = 1; step <= 2; step++) {
        AdamWArgs a = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                       .grad_scale = 0.7f, .step = step};
        CPU->adamw(cp, NULL, cg, cm, cv, segs, 3, &a);
        G->adamw(gp0, act_off(gpa, off_pg), (float *)gg + off_pg, gm0, gv0, segs, 3, &a);
    }
    float *rp = c_get(cp, n), *rm = c_get(cm, n), *rv = c_get(cv, n);
    float *op = g_get_f32(gp, n + pad), *om = g_get_f32(gm, n + pad), *ov = g_get_f32(gv, n + pad);
    float *opa = g_get_act(gpa, n + pad);
    check_rel("adamw params (offsets)", op + off_pg, rp, n, 1e-5);
    check_rel("adamw m (offsets)", om + off_mv, rm, n, 1e-5);
    check_rel("adamw v (offsets)", ov + off_mv, rv, n, 1e-5);
    size_t bad = 0, outside = 0;  // params_act = bf16(params) inside the range; nothing outside it touched
    for (size_t i = 0; i < n; i++) bad += opa[off_pg + i] != bfr(op[off_pg + i]);
    for (size_t i = 0; i < n + pad; i++) {
        int in_pg = i >= (size_t)off_pg && i < off_pg + n, in_mv = i >= (size_t)off_mv && i < off_mv + n;
        if (!in_pg) outside += op[i] != p[i] || !isnan(opa[i]);
        if (!in_mv) outside += om[i] != m[i] || ov[i] != v[i];
    }
    printf("    adamw (offsets) params_act != bf16(params): %zu; touched outside the range: %zu\n", bad, outside);
    g_fails += bad != 0 || outside != 0;
    free(p), free(g), free(m), free(v), free(nan), free(rp), free(rm), free(rv), free(op), free(om), free(ov),
        free(opa);
    CPU->free(cp), CPU->free(cg), CPU->free(cm), CPU->free(cv);
    G->free(gp), G->free(gg), G->free(gm), G->free(gv), G->free(gpa);
}

static void test_adamw_offsets(void **state) {
    (void)state;
    NEED_GPU();
    adamw_offsets_case(1, 1);  // float4 path, every array one element past 16-byte alignment
    adamw_offsets_case(2, 2);
    adamw_offsets_case(3, 0);  // phases differ: the one-by-one loop
    FINISH();
}

// ---------------------------------------------------------------------------------------------------------
// whole model: the tiny preset on both backends from the same seed, over one packed batch

// A packed batch: documents of random length laid end to end (a row may start mid-document, which must
// still reset), targets = next token of the same document, ignored at document ends.
static Batch make_batch(int B, int T, int V) {
    Batch b = batch_alloc(B, T);
    int32_t *pos = make_pos(B, T);
    int doc = 0;
    for (int i = 0; i < B * T; i++) {
        b.tokens[i] = (int32_t)(pm_rng_u64(&rng) % (uint64_t)V);
        b.pos[i] = pos[i];
        if (pos[i] == 0) doc++;
        b.doc[i] = doc;
    }
    for (int i = 0; i < B * T; i++) {
        int next_same = (i + 1) % T != 0 && pos[i + 1] != 0;
        b.targets[i] = next_same ? b.tokens[i + 1] : PM_IGNORE;
    }
    batch_count_valid(&b);
    free(pos);
    return b;
}

static void model_vs_cpu_case(const char *preset, int vocab, int B, int T) {
    ModelConfig cfg;
    assert_int_equal(config_preset(preset, vocab, &cfg), 0);
    printf("  model %s (vocab %d), B=%d T=%d, packed\n", preset, vocab, B, T);
    Batch b = make_batch(B, T, cfg.vocab_size);
    float scale = 1.0f / (float)b.n_valid;
    Model mc, mg;
    model_create(&mc, &cfg, CPU, 1234);
    model_create(&mg, &cfg, G, 1234);
    model_alloc_activations(&mc, B, T);
    model_alloc_activations(&mg, B, T);
    model_zero_grad(&mc);
    model_zero_grad(&mg);
    double lc = model_forward(&mc, &b, NULL), lg = model_forward(&mg, &b, NULL);
    model_backward(&mc, scale);
    model_backward(&mg, scale);
    double el = fabs(lg - lc) / fabs(lc);
    int bad_loss = !(el <= 1e-2);
    printf("    %s model loss: cpu %.6f gpu %.6f rel err %.3g%s\n", preset, lc, lg, el, bad_loss ? "  <-- FAIL" : "");
    // bf16 activations: each rounding is <= 2^-9 relative; the loss averages over tokens, so it stays near 1e-3
    g_fails += bad_loss;
    size_t n = mc.n_params;
    float *gc = pm_malloc(n * sizeof(float)), *gg = pm_malloc(n * sizeof(float));
    model_get_grads(&mc, gc);
    model_get_grads(&mg, gg);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < mc.n_tensors; i++) {
        const ParamInfo *t = &mc.tensors[i];
        double e = relerr(gg + t->offset, gc + t->offset, t->size);
        if (e > worst) worst = e, worst_name = t->name;
        if (i < 2 + P_PER_LAYER || i == mc.n_tensors - 1) printf("    grad %-44s rel err %.3g\n", t->name, e);
    }
    double all = relerr(gg, gc, n);
    // A gradient passes through ~10 bf16 roundings per layer (activations and activation gradients), each
    // <= 2^-9 relative and roughly independent: ~1e-2 measured over the 4 tiny layers (2026-11-29), growing
    // like sqrt(n_layer). Bound: 2.5x that, overall; the worst single tensor (small per-channel gradients sum
    // few terms) within 4x the overall bound. A wrong op gives errors near 1.
    double bound = 2.5e-2 * sqrt(cfg.n_layer / 4.0);
    int bad = !(all <= bound) || !(worst <= 4 * bound);
    printf("    all gradients rel err %.3g (bound %.3g); worst tensor %s %.3g (bound %.3g)%s\n", all, bound,
           worst_name, worst, 4 * bound, bad ? "  <-- FAIL" : "");
    g_fails += bad;
    free(gc), free(gg);
    model_destroy(&mc);
    model_destroy(&mg);
    batch_free(&b);
}

static void test_model_vs_cpu(void **state) {
    (void)state;
    NEED_GPU();
    model_vs_cpu_case("tiny", 1000, 3, 96);
    model_vs_cpu_case("130m", 50277, 2, 128);
    FINISH();
}

// Packing on the GPU (DESIGN §2). Documents of a packed batch are split into two sets by document index
// parity, P (even) and Q (odd); only P's targets count.
// - No leakage, forward and backward: redrawing Q's tokens must leave P's per-token losses and every parameter
//   gradient bit-identical (Q's tokens receive exactly zero gradient, so they add exact zeros); redrawing one
//   of P's tokens must change the gradients (the check can fail).
// - Packed = separate: each P document run alone (at the start of row 0, the rest padding, same B x T so every
//   op sees the same shapes) gives the same per-token losses as inside the packed rows, to bf16 rounding.
static void test_model_packing(void **state) {
    (void)state;
    NEED_GPU();
    ModelConfig cfg;
    assert_int_equal(config_preset("tiny", 1000, &cfg), 0);
    int B = 2, T = 96, M = B * T;
    Batch b1 = make_batch(B, T, cfg.vocab_size);
    for (int i = 0; i < M; i++)
        if (b1.doc[i] % 2) b1.targets[i] = PM_IGNORE;
    batch_count_valid(&b1);
    Batch b2 = batch_alloc(B, T), b3 = batch_alloc(B, T);
    Batch *copies[2] = {&b2, &b3};
    for (int k = 0; k < 2; k++) {
        Batch *c = copies[k];
        memcpy(c->tokens, b1.tokens, M * sizeof(int32_t));
        memcpy(c->pos, b1.pos, M * sizeof(int32_t));
        memcpy(c->targets, b1.targets, M * sizeof(int32_t));
        memcpy(c->doc, b1.doc, M * sizeof(int32_t));
        c->n_valid = b1.n_valid;
    }
    int changed_p = -1;
    for (int i = 0; i < M; i++) {
        if (b2.doc[i] % 2) b2.tokens[i] = (int32_t)(pm_rng_u64(&rng) % (uint64_t)cfg.vocab_size);  // redraw Q
        else if (changed_p < 0 && b1.targets[i] != PM_IGNORE) changed_p = i;
    }
    assert_true(changed_p >= 0);
    b3.tokens[changed_p] = (b3.tokens[changed_p] + 1) % cfg.vocab_size;  // one P token (an input, not a target)
    Model m;
    model_create(&m, &cfg, GD, 7);
    model_alloc_activations(&m, B, T);
    size_t n = m.n_params;
    Batch *runs[3] = {&b1, &b2, &b3};
    float *grads[3];
    double *losses[3];
    for (int r = 0; r < 3; r++) {
        model_zero_grad(&m);
        model_forward(&m, runs[r], NULL);
        model_backward(&m, 1.0f / (float)b1.n_valid);
        losses[r] = pm_malloc(M * sizeof(double));
        memcpy(losses[r], m.host_losses, M * sizeof(double));
        grads[r] = pm_malloc(n * sizeof(float));
        model_get_grads(&m, grads[r]);
    }
    size_t loss_diff = 0;
    for (int i = 0; i < M; i++) loss_diff += b1.targets[i] != PM_IGNORE && losses[0][i] != losses[1][i];
    printf("    P losses changed by redrawing Q: %zu\n", loss_diff);
    g_fails += loss_diff != 0;
    check_same_bits("no leakage: gradients, Q redrawn", grads[0], grads[1], n * sizeof(float));
    int differs = memcmp(grads[0], grads[2], n * sizeof(float)) != 0;
    printf("    gradients change when one P token changes: %s\n", differs ? "yes" : "NO  <-- FAIL");
    g_fails += !differs;
    // packed = separate, per P document
    double num = 0, den = 0;
    int ndocs = 0, identical = 1;
    for (int i0 = 0; i0 < M;) {
        int i1 = i0 + 1;
        while (i1 < M && b1.doc[i1] == b1.doc[i0] && i1 % T != 0) i1++;  // [i0, i1): one document piece
        if (b1.doc[i0] % 2 == 0 && b1.pos[i0] == 0) {
            Batch s1 = batch_alloc(B, T);  // the document alone in row 0, padding elsewhere
            for (int i = i0; i < i1; i++) {
                s1.tokens[i - i0] = b1.tokens[i];
                s1.pos[i - i0] = b1.pos[i];
                s1.targets[i - i0] = b1.targets[i];
                s1.doc[i - i0] = 0;
            }
            batch_count_valid(&s1);
            model_forward(&m, &s1, NULL);
            for (int i = i0; i < i1; i++) {
                double d = m.host_losses[i - i0] - losses[0][i];
                num += d * d, den += losses[0][i] * losses[0][i];
                identical &= m.host_losses[i - i0] == losses[0][i];
            }
            ndocs++;
            batch_free(&s1);
        }
        i0 = i1;
    }
    double e = den > 0 ? sqrt(num / den) : 0;
    printf("    packed vs separate: %d documents, per-token loss rel err %.3g (%s)%s\n", ndocs, e,
           identical ? "bit-identical" : "not bit-identical", e <= 1e-2 ? "" : "  <-- FAIL");
    g_fails += !(e <= 1e-2) || ndocs == 0;
    for (int r = 0; r < 3; r++) free(grads[r]), free(losses[r]);
    model_destroy(&m);
    batch_free(&b1), batch_free(&b2), batch_free(&b3);
    FINISH();
}

// Deterministic mode: two fresh models, three optimizer steps each on the same batches: identical losses and
// parameters, bit for bit.
static void test_model_deterministic(void **state) {
    (void)state;
    NEED_GPU();
    ModelConfig cfg;
    assert_int_equal(config_preset("tiny", 1000, &cfg), 0);
    int B = 4, T = 128;
    Batch bs[3];
    for (int s = 0; s < 3; s++) bs[s] = make_batch(B, T, cfg.vocab_size);
    double losses[2][3];
    float *params[2];
    OptimConfig o = optim_defaults();
    for (int r = 0; r < 2; r++) {
        Model m;
        model_create(&m, &cfg, GD, 99);
        model_alloc_activations(&m, B, T);
        for (int s = 0; s < 3; s++) {
            model_zero_grad(&m);
            losses[r][s] = model_forward(&m, &bs[s], NULL);
            model_backward(&m, 1.0f / (float)bs[s].n_valid);
            model_optimizer_step(&m, &o, 1e-3f);
        }
        params[r] = pm_malloc(m.n_params * sizeof(float));
        model_get_params(&m, params[r]);
        if (r == 1) {
            printf("    losses run 1: %.9f %.9f %.9f\n", losses[0][0], losses[0][1], losses[0][2]);
            printf("    losses run 2: %.9f %.9f %.9f\n", losses[1][0], losses[1][1], losses[1][2]);
            check_same_bits("deterministic: losses of 3 steps", losses[0], losses[1], sizeof losses[0]);
            check_same_bits("deterministic: params after 3 steps", params[0], params[1], m.n_params * sizeof(float));
        }
        model_destroy(&m);
    }
    assert_true(losses[0][2] < losses[0][0] + 1.0);  // training did something sane
    free(params[0]), free(params[1]);
    for (int s = 0; s < 3; s++) batch_free(&bs[s]);
    FINISH();
}

// The tiny preset at width 512 and 3 layers: wide enough, at B4 T512, that the GEMMs take more than a few blocks.
static ModelConfig wide_model_config(void) {
    ModelConfig cfg;
    assert_int_equal(config_preset("tiny", 1000, &cfg), 0);
    cfg.d_model = 512, cfg.n_layer = 3;
    config_derive(&cfg);
    return cfg;
}

// The gradient buffer full of NaN: a gradient that is neither written nor cleared before it is added to shows.
static void fill_grads_nan(Model *m) {
    float *nan = pm_malloc(m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) nan[i] = NAN;
    m->bk->upload(m->grads, nan, m->n_params * sizeof(float));
    free(nan);
}

// Backend.grads_write on the GPU (both backends): model_zero_grad leaves the buffer alone and the step's first
// backward writes every gradient (the weight-gradient GEMMs with beta 0, the column sums and the scan's parameter
// sums written, the classifier's first chunk written). Against clearing it (PM_GRADS_WRITE=0), with the buffer full
// of NaN first, two micro-batches: every gradient finite and within the GEMMs' summation-order error (a beta-0
// GEMM may run another cuBLASLt algorithm), in two memory settings.
static void test_model_grads_written(void **state) {
    (void)state;
    NEED_GPU();
    const ModelConfig cfg = wide_model_config();
    const int B = 4, T = 512;
    Batch bs[2] = {make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size)};
    assert_non_null(G->grads_write);
    const Backend *bks[2] = {GD, G};
    for (int r = 0; r < 4; r++) {  // backend (deterministic, fast) x (default, keep activations)
        float *g[2];
        size_t np = 0;
        for (int w = 0; w < 2; w++) {
            Model m;
            model_create(&m, &cfg, bks[r / 2], 5);
            m.keep_activations = r % 2 ? -1 : 0;
            model_alloc_activations(&m, B, T);
            np = m.n_params;
            fill_grads_nan(&m);
            setenv("PM_GRADS_WRITE", w ? "1" : "0", 1);
            model_zero_grad(&m);
            assert_int_equal(m.grads_unset, w);  // (else both runs clear the buffer)
            for (int s = 0; s < 2; s++) model_forward_backward(&m, &bs[s], 1.0f / (float)bs[s].n_valid, NULL);
            g[w] = pm_malloc(np * sizeof(float));
            model_get_grads(&m, g[w]);
            model_destroy(&m);
        }
        unsetenv("PM_GRADS_WRITE");
        size_t nonfinite = 0;
        for (size_t i = 0; i < np; i++) nonfinite += !isfinite(g[1][i]);
        char what[96];
        snprintf(what, sizeof what, "grads written (%s, %s)", r / 2 ? "fast" : "deterministic",
                 r % 2 ? "keep activations" : "default");
        printf("    %-34s %zu of %zu not finite%s\n", what, nonfinite, np, nonfinite ? "  <-- FAIL" : "");
        g_fails += nonfinite != 0;
        if (!nonfinite) check_rel(what, g[1], g[0], np, 1e-5);
        free(g[0]), free(g[1]);
    }
    for (int s = 0; s < 2; s++) batch_free(&bs[s]);
    FINISH();
}

// Backend.defer_reductions: the norm, conv and scan backwards' parameter-gradient reductions held back and run
// a few at a time give the same bits as each run at once (PM_DEFER_REDUCTIONS=0), with the step's first backward
// writing into a NaN-filled buffer and the second adding; PM_REDUCTION_BATCH=2 launches every two jobs, so ring
// slices are reused in the middle of a backward. The launch counts show which path ran: 3 reductions a layer and
// the final norm's, each its own launch at once, one launch a backward held back.
static void test_model_deferred_reductions(void **state) {
    (void)state;
    NEED_GPU();
    assert_non_null(GD->defer_reductions);
    const ModelConfig cfg = wide_model_config();
    const int B = 4, T = 512, jobs = 3 * cfg.n_layer + 1;
    Batch bs[2] = {make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size)};
    const char *defer[3] = {"0", "1", "1"}, *batch[3] = {NULL, NULL, "2"};
    const int launches_want[3] = {2 * jobs, 2, 2 * ((jobs + 1) / 2)};
    for (int keep = 0; keep < 2; keep++) {
        float *g[3];
        size_t np = 0;
        for (int r = 0; r < 3; r++) {
            setenv("PM_DEFER_REDUCTIONS", defer[r], 1);
            if (batch[r]) setenv("PM_REDUCTION_BATCH", batch[r], 1);
            Model m;
            model_create(&m, &cfg, GD, 5);
            m.keep_activations = keep ? -1 : 0;
            model_alloc_activations(&m, B, T);
            np = m.n_params;
            fill_grads_nan(&m);
            model_zero_grad(&m);
            const int l0 = backend_cuda_reduction_launches();
            for (int s = 0; s < 2; s++) model_forward_backward(&m, &bs[s], 1.0f / (float)bs[s].n_valid, NULL);
            const int launches = backend_cuda_reduction_launches() - l0;
            g[r] = pm_malloc(np * sizeof(float));
            model_get_grads(&m, g[r]);
            model_destroy(&m);
            unsetenv("PM_DEFER_REDUCTIONS"), unsetenv("PM_REDUCTION_BATCH");
            printf("    reductions %-22s %s: %d launches (want %d)%s\n",
                   r == 0 ? "each at once" : r == 1 ? "held back" : "held back, 2 a launch",
                   keep ? "keep activations" : "default", launches, launches_want[r],
                   launches != launches_want[r] ? "  <-- FAIL" : "");
            g_fails += launches != launches_want[r];
        }
        for (int r = 1; r < 3; r++) {
            size_t diff = 0;
            for (size_t i = 0; i < np; i++) diff += memcmp(&g[r][i], &g[0][i], sizeof(float)) != 0;
            printf("    gradients, run %d against each at once: %zu of %zu differ%s\n", r, diff, np,
                   diff ? "  <-- FAIL" : "");
            g_fails += diff != 0;
        }
        size_t nonfinite = 0;
        for (size_t i = 0; i < np; i++) nonfinite += !isfinite(g[0][i]);
        g_fails += nonfinite != 0;
        for (int r = 0; r < 3; r++) free(g[r]);
    }
    for (int s = 0; s < 2; s++) batch_free(&bs[s]);
    FINISH();
}

// The backward's weight gradients on the side queue (model.c, backward_body) give the same bits as in order on
// one queue. PM_SIDE_STREAM=2 holds each piece of side work back ~0.3 ms before it starts, so a hazard the model
// does not wait for (the main queue rewriting a buffer a side GEMM still has to read) changes the results
// instead of depending on luck. Widths and rows large enough that the GEMMs take more than a few blocks.
static void test_model_side_stream(void **state) {
    (void)state;
    NEED_GPU();
    const ModelConfig cfg = wide_model_config();
    const int B = 4, T = 512;
    Batch bs[2] = {make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size)};
    const char *mode[6] = {"0", "2", "0", "2", "0", "2"};  // in order / held-back side queue, three settings
    double losses[6][2];
    float *params[6];
    OptimConfig o = optim_defaults();
    const char *was = getenv("PM_SIDE_STREAM");
    char *saved = was ? strdup(was) : NULL;
    setenv("PM_DW_GROUP", "2", 1);
    for (int r = 0; r < 6; r++) {
        setenv("PM_SIDE_STREAM", mode[r], 1);
        Model m;
        model_create(&m, &cfg, GD, 5);
        model_alloc_optimizer(&m);
        m.keep_activations = r / 2 == 1 ? -1 : 0;
        m.keep_in_proj = r / 2 == 2 ? 0 : -1;
        model_alloc_activations(&m, B, T);
        const int tickets0 = backend_cuda_side_tickets();
        for (int s = 0; s < 2; s++) {
            model_zero_grad(&m);
            losses[r][s] = model_forward_backward(&m, &bs[s], 1.0f / (float)bs[s].n_valid, NULL);
            model_optimizer_step(&m, &o, 1e-3f);
        }
        const int used = backend_cuda_side_tickets() - tickets0;
        // 4 weight-gradient GEMMs a layer and step, each its own ticket, or none in order; with the layers in
        // groups (Model.dw_group), in_proj's a layer and the other three a group (PM_DW_GROUP=2 here: 3 layers make
        // a pair and a lone layer, so both kinds of place are checked by the held-back side queue)
        // (and with Model.recompute_slots 2, every recomputing layer's recompute but the top one's, each its own
        // ticket: run beside the scan backward of the layer above)
        assert_int_equal(m.dw_group, 2);
        const int ahead = m.recompute_slots > 1 && r / 2 != 1 ? cfg.n_layer - 1 : 0;
        const int groups = (cfg.n_layer + m.dw_group - 1) / m.dw_group, per_step = cfg.n_layer + 3 * groups + ahead;
        // (and the second step's forward queues the first step's update of every layer but layer 0 beside the
        // scan of the layer below: model.c, update_ahead)
        if (used != (r % 2 ? 2 * per_step + cfg.n_layer - 1 : 0)) {
            printf("    run %d (PM_SIDE_STREAM=%s): %d side tickets\n", r, mode[r], used);
            g_fails++;
        }
        params[r] = pm_malloc(m.n_params * sizeof(float));
        model_get_params(&m, params[r]);
        if (r % 2) {
            const char *what[3] = {"default", "keep activations", "in_proj recomputed"};
            char buf[96];
            snprintf(buf, sizeof buf, "side queue, %s: losses", what[r / 2]);
            check_same_bits(buf, losses[r - 1], losses[r], sizeof losses[r]);
            snprintf(buf, sizeof buf, "side queue, %s: params after 2 steps", what[r / 2]);
            check_same_bits(buf, params[r - 1], params[r], m.n_params * sizeof(float));
        }
        model_destroy(&m);
    }
    if (saved) setenv("PM_SIDE_STREAM", saved, 1), free(saved);
    else unsetenv("PM_SIDE_STREAM");
    unsetenv("PM_DW_GROUP");
    for (int r = 0; r < 6; r++) free(params[r]);
    for (int s = 0; s < 2; s++) batch_free(&bs[s]);
    FINISH();
}

// The update ahead (model.c: model_optimizer_step leaves layers 1 .. L-1 pending, the next forward queues each
// on the side queue beside a scan) gives the bits of the whole update at once: three optimizer steps each way,
// the side queue held back 0.3 ms a piece (PM_SIDE_STREAM=2) so a missing wait would show; losses (which read the
// updated weights) and the parameters and moments after the last step (which settle what is still pending).
static void test_model_update_ahead(void **state) {
    (void)state;
    NEED_GPU();
    const ModelConfig cfg = wide_model_config();
    const int B = 4, T = 512, S = 3;
    Batch bs[3] = {make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size)};
    double losses[2][3];
    float *params[2], *moments[2];
    size_t np = 0;
    OptimConfig o = optim_defaults();
    setenv("PM_SIDE_STREAM", "2", 1);
    for (int r = 0; r < 2; r++) {
        setenv("PM_UPDATE_AHEAD", r ? "1" : "0", 1);
        Model m;
        model_create(&m, &cfg, GD, 7);
        model_alloc_optimizer(&m);
        model_alloc_activations(&m, B, T);
        for (int s = 0; s < S; s++) {
            model_zero_grad(&m);
            losses[r][s] = model_forward_backward(&m, &bs[s], 1.0f / (float)bs[s].n_valid, NULL);
            model_optimizer_step(&m, &o, 1e-3f);
            if (r && s + 1 < S && m.upd_lo != 1) {
                printf("    after step %d: layers from %d pending, expected 1\n", s, m.upd_lo);
                g_fails++;
            }
        }
        np = m.n_params;
        params[r] = pm_malloc(m.n_params * sizeof(float));
        model_get_params(&m, params[r]);
        if (m.upd_lo != 0 || m.upd_t != 0) printf("    model_get_params left updates pending\n"), g_fails++;
        moments[r] = pm_malloc(m.n_params * sizeof(float));
        GD->download(moments[r], m.adam_v, m.n_params * sizeof(float));
        model_destroy(&m);
    }
    unsetenv("PM_UPDATE_AHEAD");
    unsetenv("PM_SIDE_STREAM");
    check_same_bits("update ahead: losses", losses[0], losses[1], sizeof losses[0]);
    check_same_bits("update ahead: params after 3 steps", params[0], params[1], np * sizeof(float));
    check_same_bits("update ahead: second moments after 3 steps", moments[0], moments[1], np * sizeof(float));
    for (int r = 0; r < 2; r++) free(params[r]), free(moments[r]);
    for (int s = 0; s < S; s++) batch_free(&bs[s]);
    FINISH();
}

// --memory-budget on the GPU at 1.4b B4 with 0.8x the official peak (29.76 GiB): with every layer's scan states
// given up, the layers' bf16 weight copy goes next (Model.cast_weights) before in_proj outputs do, and that saves
// exactly the copy's bytes beyond the embedding's and two layers' (model_weight_copy_elems), 2 bytes an element.
static void test_memory_budget_casts_weights(void **state) {
    (void)state;
    NEED_GPU();
    ModelConfig c;
    assert_int_equal(config_preset("1.4b", 50280, &c), 0);
    const int B = 4, T = 2048;
    const size_t np = model_num_params(&c), cast = model_weight_copy_elems(&c, 1);
    assert_int_equal(model_weight_copy_elems(&c, 0), np);
    assert_true(cast < np / 8);  // the embedding's copy (103M) and two layers' (2 x 26M) of 1.4G
    MemorySettings keep = {0, 0, -1, 0}, give = {0, 0, -1, 1};
    const size_t bk = model_train_bytes(&c, G, B, T, &keep), bg = model_train_bytes(&c, G, B, T, &give);
    if (bk - bg != (np - cast) * G->act_bytes) {
        printf("    casting the weights saves %zu bytes, expected %zu\n", bk - bg, (np - cast) * G->act_bytes);
        g_fails++;
    }
    MemorySettings got;
    assert_int_equal(model_fit_memory(&c, G, B, T, (size_t)(29.76 * 1073741824.0), &got), 0);
    char line[200];
    model_memory_settings_text(line, sizeof line, &c, G, &got);
    printf("    1.4b B4 in 29.76 GiB: %s\n", line);
    g_fails += !(got.cast_weights == 1 && got.keep_scan_states == 0 && got.keep_activations == 0 &&
                 got.keep_in_proj > 17 && got.keep_in_proj < c.n_layer);
    FINISH();
}

// Kept scan states (Model.keep_scan_states, the training default on the GPU) against recomputing them: two
// optimizer steps of model_forward_backward on packed batches (documents starting inside rows), once with each;
// losses and parameters must be bit-identical (the backward reads the same state values either way). Also a
// batch of shorter rows than allocated (more rows, more chunk states than the buffer holds): the model must fall
// back to recomputing, with the same result. And with only the last layer keeping its states
// (--scan-states-layers 1): the same bits as recomputing every layer's. And with every layer's in_proj output
// recomputed in the backward (Model.keep_in_proj 0), or all but the last layer's (1): the same bits as keeping it.
// And with activations kept by the top two layers only (Model.keep_activations 2): the same bits as keeping none.
// And with no bf16 copy of the layers' weights kept (Model.cast_weights: each layer's cast into a slot when used,
// the slots refreshed after each optimizer step): the same bits as keeping it.
static void test_model_scan_states(void **state) {
    (void)state;
    NEED_GPU();
    ModelConfig cfg;
    assert_int_equal(config_preset("tiny", 1000, &cfg), 0);
    const int B = 2, T = 160;
    Batch bs[3] = {make_batch(B, T, cfg.vocab_size), make_batch(B, T, cfg.vocab_size),
                   make_batch(18, 17, cfg.vocab_size)};  // 18 rows x 2 chunks of 16 > 2 rows x 10
    double losses[8][3];
    int valid[8][3];
    float *params[8];
    OptimConfig o = optim_defaults();
    // kept states; recomputed; kept states and kept activations (Model.keep_*); only the last layer keeps states;
    // kept states and the in_proj output recomputed; the same with the last layer keeping its in_proj output;
    // kept states, activations kept by the top two layers (a whole weight-gradient group); kept states, the
    // layers' weights cast when used
    for (int r = 0; r < 8; r++) {
        Model m;
        model_create(&m, &cfg, GD, 5);  // deterministic mode: the embedding backward's atomics would differ run to run
        model_alloc_optimizer(&m);
        assert_true(cfg.n_layer >= 2);  // else "the last layer only" would be every layer
        m.keep_scan_states = r == 1 ? 0 : r == 3 ? 1 : cfg.n_layer;
        m.keep_activations = r == 2 ? -1 : r == 6 ? 2 : 0;
        m.cast_weights = r == 7;  // (model_alloc_activations lays the weight copy out for it)
        m.keep_in_proj = r == 4 ? 0 : r == 5 ? 1 : -1;
        model_alloc_activations(&m, B, T);
        if (r != 1) assert_non_null(m.arena_states);  // else the comparison below would be vacuous
        if (r == 1) assert_null(m.arena_states);
        for (int s = 0; s < 3; s++) {
            model_zero_grad(&m);
            losses[r][s] = model_forward_backward(&m, &bs[s], 1.0f / (float)bs[s].n_valid, NULL);
            valid[r][s] = m.states_valid;
            model_optimizer_step(&m, &o, 1e-3f);
        }
        params[r] = pm_malloc(m.n_params * sizeof(float));
        model_get_params(&m, params[r]);
        if (r == 1) {
            printf("    states kept: %d %d %d (run 1), %d %d %d (run 2)\n", valid[0][0], valid[0][1], valid[0][2],
                   valid[1][0], valid[1][1], valid[1][2]);
            g_fails += !(valid[0][0] && valid[0][1] && !valid[0][2] && !valid[1][0]);
            check_same_bits("kept scan states: losses", losses[0], losses[1], sizeof losses[0]);
            check_same_bits("kept scan states: params after 3 steps", params[0], params[1], m.n_params * sizeof(float));
        }
        if (r == 2) {
            check_same_bits("kept activations: losses", losses[0], losses[2], sizeof losses[0]);
            check_same_bits("kept activations: params after 3 steps", params[0], params[2], m.n_params * sizeof(float));
        }
        if (r == 3) {
            g_fails += !(m.layers[cfg.n_layer - 1].scan_states && !m.layers[0].scan_states && valid[3][0]);
            check_same_bits("last layer's states kept: losses", losses[1], losses[3], sizeof losses[0]);
            check_same_bits("last layer's states kept: params", params[1], params[3], m.n_params * sizeof(float));
        }
        if (r == 4) {
            g_fails += !(m.xz && !m.layers[0].xz);
            check_same_bits("in_proj recomputed: losses", losses[0], losses[4], sizeof losses[0]);
            check_same_bits("in_proj recomputed: params after 3 steps", params[0], params[4], m.n_params * sizeof(float));
        }
        if (r == 5) {
            g_fails += !(m.xz && !m.layers[0].xz && m.layers[cfg.n_layer - 1].xz);
            check_same_bits("last layer's in_proj kept: losses", losses[0], losses[5], sizeof losses[0]);
            check_same_bits("last layer's in_proj kept: params", params[0], params[5], m.n_params * sizeof(float));
        }
        if (r == 6) {
            g_fails += !(cfg.n_layer > 2 && m.layers[cfg.n_layer - 1].u && m.layers[cfg.n_layer - 2].u &&
                         !m.layers[0].u && m.u);
            check_same_bits("top two layers' activations kept: losses", losses[0], losses[6], sizeof losses[0]);
            check_same_bits("top two layers' activations kept: params", params[0], params[6], m.n_params * sizeof(float));
        }
        if (r == 7) {
            g_fails += !m.weights_cast;  // else the comparison would be vacuous
            check_same_bits("layer weights cast when used: losses", losses[0], losses[7], sizeof losses[0]);
            check_same_bits("layer weights cast when used: params", params[0], params[7], m.n_params * sizeof(float));
        }
        model_destroy(&m);
    }
    for (int r = 0; r < 8; r++) free(params[r]);
    for (int s = 0; s < 3; s++) batch_free(&bs[s]);
    FINISH();
}

// ---------------------------------------------------------------------------------------------------------
// op timings at the 130m shapes (B 8, T 2048), only with PM_BENCH=1 (dev/gpu.sh): median of 10 runs, each
// synchronized, after one warm-up. Not a check: numbers for docs/perf.md.

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double g_bench_total;  // estimated step time, ms

// Each op: host clock around call + synchronize (as in earlier versions of this table: includes ~10 us of
// launch and sync) and, where the backend has them, GPU events around the call alone ("ev"; SUM uses these).
// Medians of 10 runs after one warm-up.
#define TIME_OP(name, count, flops, bytes, CALL)                                                              \
    do {                                                                                                    \
        CALL;                                                                                               \
        G->synchronize();                                                                                   \
        double ts_[10], te_[10];                                                                            \
        int ev_ = G->event_record != NULL;                                                                  \
        for (int r_ = 0; r_ < 10; r_++) {                                                                   \
            double t0_ = pm_now();                                                                          \
            void *e0_ = ev_ ? G->event_record() : NULL;                                                     \
            CALL;                                                                                           \
            void *e1_ = ev_ ? G->event_record() : NULL;                                                     \
            G->synchronize();                                                                               \
            ts_[r_] = pm_now() - t0_;                                                                       \
            te_[r_] = ev_ ? 1e-3 * G->event_elapsed_ms(e0_, e1_) : ts_[r_];                                 \
            if (ev_) G->event_release(e0_), G->event_release(e1_);                                          \
        }                                                                                                   \
        qsort(ts_, 10, sizeof(double), cmp_double);                                                         \
        qsort(te_, 10, sizeof(double), cmp_double);                                                         \
        double med_ = te_[5];                                                                               \
        g_bench_total += (count) * med_ * 1e3;                                                              \
        printf("    op %-30s x%-3d host %8.3f ms  ev %8.3f ms %8.1f TFLOP/s %7.0f GB/s\n", name, (int)(count),    \
               ts_[5] * 1e3, med_ * 1e3, (double)(flops) / med_ / 1e12, (double)(bytes) / med_ / 1e9);       \
    } while (0)

static void test_op_timings(void **state) {
    (void)state;
    NEED_GPU();
    if (!getenv("PM_BENCH")) {
        skip();
        return;
    }
    const int Bb = 8, T = 2048, M = Bb * T, d = 768, di = 1536, R = 48, N = 16, nx = R + 2 * N, Vp = 50280,
              K = 4, L = 24;
    const size_t nparams = 129000000;
    printf("  130m shapes: M=%d d=%d d_inner=%d Vp=%d; x = times per step\n", M, d, di, Vp);
    size_t big = (size_t)Vp * d > (size_t)M * 2 * di ? (size_t)Vp * d : (size_t)M * 2 * di;
    float *h = rnd(big, -1, 1);
    int32_t *pos = make_pos(Bb, T), *tok = rnd_tokens(M, Vp);
    for (int i = 0; i < M; i++) pos[i] = i % T;  // fixed-length rows
    void *gpos = g_i32(pos, M), *gtok = g_i32(tok, M);
    // activations (ACT) and F32 buffers
    void *xn = g_act(h, (size_t)M * d), *xz = g_act(h, (size_t)M * 2 * di), *u = g_act(h, (size_t)M * di);
    void *xdbl = g_act(h, (size_t)M * nx), *dpre = g_act(h, (size_t)M * di), *y = g_act(h, (size_t)M * di);
    void *hh = g_act(h, (size_t)M * d), *dxz = g_act(h, (size_t)M * 2 * di), *du = g_act(h, (size_t)M * di);
    void *ddpre = g_act(h, (size_t)M * di), *dxdbl = g_act(h, (size_t)M * nx), *dy = g_act(h, (size_t)M * di);
    void *dxn = g_act(h, (size_t)M * d);
    void *res = g_f32(h, (size_t)M * d), *dres = g_f32(h, (size_t)M * d), *rstd = g_f32(h, M);
    void *wte = g_act(h, (size_t)Vp * d), *dwte = g_f32(h, (size_t)Vp * d);
    void *Win = g_act(h, (size_t)2 * di * d), *Wx = g_act(h, (size_t)nx * di), *Wdt = g_act(h, (size_t)di * R);
    void *Wout = g_act(h, (size_t)d * di), *dW = g_f32(h, (size_t)2 * di * d);
    void *wn = g_f32(h, d), *dwn = g_f32(h, d), *cw = g_f32(h, di * K), *cb = g_f32(h, di), *dcw = g_f32(h, di * K);
    void *dcb = g_f32(h, di);
    float *dtb_h = pm_malloc(di * sizeof(float)), *al_h = pm_malloc((size_t)di * N * sizeof(float));
    for (int c = 0; c < di; c++) {
        dtb_h[c] = logf(expm1f(0.01f));
        for (int n = 0; n < N; n++) al_h[c * N + n] = logf((float)(n + 1));
    }
    void *dtb = g_f32(dtb_h, di), *Al = g_f32(al_h, (size_t)di * N), *Dd = g_f32(h, di);
    void *ddtb = g_f32(h, di), *dAl = g_f32(h, (size_t)di * N), *dD = g_f32(h, di), *loss = g_f32(h, M);
    int32_t *tg = rnd_tokens(M, Vp);
    void *gtg = g_i32(tg, M);
    g_bench_total = 0;
    double Md = (double)M;
    TIME_OP("embedding_fwd", 1, 0, Md * d * 6, G->embedding_fwd(res, gtok, wte, M, d));
    TIME_OP("embedding_bwd (atomic)", 0, 0, Md * d * 8, G->embedding_bwd(dwte, res, gtok, M, d, Vp));
    TIME_OP("embedding_bwd (det)", 1, 0, Md * d * 8, GD->embedding_bwd(dwte, res, gtok, M, d, Vp));
    TIME_OP("add_rmsnorm_fwd", L + 1, 0, Md * d * 14, G->add_rmsnorm_fwd(res, xn, rstd, res, hh, wn, M, d, 1e-5f));
    TIME_OP("add_rmsnorm_fwd (recompute)", L, 0, Md * d * 6,
            G->add_rmsnorm_fwd(res, xn, rstd, res, NULL, wn, M, d, 1e-5f));  // bwd.recompute: res read, not written
    TIME_OP("rmsnorm_bwd", L + 1, 0, Md * d * 16, G->rmsnorm_bwd(dres, dxn, dwn, dxn, res, wn, rstd, M, d));
    TIME_OP("in_proj fwd", L, 2 * Md * 2 * di * d, 0, G->matmul_fwd(xz, 2 * di, xn, d, Win, NULL, M, 2 * di, d));
    TIME_OP("x_proj fwd", L, 2 * Md * nx * di, 0, G->matmul_fwd(xdbl, nx, u, di, Wx, NULL, M, nx, di));
    TIME_OP("dt_proj fwd (+ recompute)", 2 * L, 2 * Md * di * R, 0, G->matmul_fwd(dpre, di, xdbl, nx, Wdt, NULL, M, di, R));
    TIME_OP("out_proj fwd", L, 2 * Md * d * di, 0, G->matmul_fwd(hh, d, y, di, Wout, NULL, M, d, di));
    TIME_OP("in_proj bwd", L, 4 * Md * 2 * di * d, 0,
            G->matmul_bwd(dxn, d, 0, dW, NULL, dxz, 2 * di, xn, d, Win, M, 2 * di, d));
    TIME_OP("x_proj bwd", L, 4 * Md * nx * di, 0,
            G->matmul_bwd(du, di, 1, dW, NULL, dxdbl, nx, u, di, Wx, M, nx, di));
    TIME_OP("dt_proj bwd", L, 4 * Md * di * R, 0,
            G->matmul_bwd(dxdbl, nx, 0, dW, NULL, ddpre, di, xdbl, nx, Wdt, M, di, R));
    TIME_OP("out_proj bwd", L, 4 * Md * d * di, 0,
            G->matmul_bwd(dy, di, 0, dW, NULL, hh, d, y, di, Wout, M, d, di));
    TIME_OP("conv_silu_fwd (+ recompute)", 2 * L, 0, Md * di * 4, G->conv_silu_fwd(u, xz, 2 * di, cw, cb, gpos, M, T, di, K, NULL, NULL));
    TIME_OP("conv_silu_bwd", L, 0, Md * di * 8,
            G->conv_silu_bwd(dxz, 2 * di, dcw, dcb, du, xz, cw, cb, gpos, M, T, di, K, NULL, NULL));
    TIME_OP("scan_fwd", L, 0, Md * di * 10, G->scan_fwd(y, u, dpre, dtb, Al, act_off(xdbl, R), act_off(xdbl, R + N),
                                                        nx, Dd, act_off(xz, di), 2 * di, gpos, M, T, di, N, NULL, NULL, NULL));
    TIME_OP("scan_bwd", L, 0, Md * di * 18,
            G->scan_bwd(du, ddpre, act_off(dxdbl, R), act_off(dxdbl, R + N), act_off(dxz, di), ddtb, dAl, dD, dy, u,
                        dpre, dtb, Al, act_off(xdbl, R), act_off(xdbl, R + N), nx, Dd, act_off(xz, di), 2 * di, gpos,
                        M, T, di, N, NULL, y, NULL, NULL));  // (writes the forward's output again, as in training)
    TIME_OP("classifier fwd+bwd", 1, 6 * Md * Vp * d, 0,
            G->classifier(loss, dxn, dwte, NULL, xn, wte, gtg, 1.0f / M, M, d, Vp, 1));
    G->free(xz), G->free(dxz), G->free(u), G->free(du);  // room for the optimizer's buffers
    void *P = G->alloc(nparams * 4), *Gr = G->alloc(nparams * 4), *Mm = G->alloc(nparams * 4);
    void *Vv = G->alloc(nparams * 4), *Pa = G->alloc(nparams * 2);
    for (size_t o = 0; o < nparams; o += big) {  // random parameters and gradients, never zeros
        size_t k = nparams - o < big ? nparams - o : big;
        G->upload((float *)P + o, h, k * 4);
        G->upload((float *)Gr + o, h + (o / big) % 7, k * 4 - (o / big) % 7 * 4);
    }
    ParamSegment seg = {0, nparams, 1};
    AdamWArgs a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1, 0, 0};
    TIME_OP("sumsq (130M params)", 1, 0, (double)nparams * 4, G->sumsq(Gr, nparams));
    TIME_OP("adamw (130M params)", 1, 0, (double)nparams * 22, G->adamw(P, Pa, Gr, Mm, Vv, &seg, 1, &a));
    printf("    op %-26s      %9.3f ms  => %.0f tokens/s if nothing else ran\n", "SUM (one 130m step)", g_bench_total,
           M / (g_bench_total / 1e3));
    G->free(P), G->free(Gr), G->free(Mm), G->free(Vv), G->free(Pa);
    void *bufs[] = {gpos, gtok, xn, xdbl, dpre, y, hh, ddpre, dxdbl, dy, dxn, res, dres, rstd, wte, dwte, Win, Wx,
                    Wdt, Wout, dW, wn, dwn, cw, cb, dcw, dcb, dtb, Al, Dd, ddtb, dAl, dD, loss, gtg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) G->free(bufs[i]);
    free(h), free(pos), free(tok), free(dtb_h), free(al_h), free(tg);
    FINISH();
}

// The carry ops, and the scan with and without rows carried in, at B 8, T 2048, d_inner 2048 (370m), N 16, every
// row carried over all its tokens (first T, last 0: the most work they can have), only with PM_BENCH=1. Not a check:
// numbers for the report.
static void carry_timings(int T, int Cd);
static void test_carry_timings(void **state) {
    (void)state;
    NEED_GPU();
    if (!getenv("PM_BENCH")) {
        skip();
        return;
    }
    carry_timings(2048, 2048);  // the 370m width at T = 2048
    carry_timings(512, 1536);   // 130m at T = 512, where carrying cost 4.7% a step (call345)
    FINISH();
}
static void carry_timings(int T, int Cd) {
    const int rows = 8, M = rows * T, N = 16, K = 4, R = 64, nx = R + 2 * N;
    printf("  carry ops: B=%d T=%d Cd=%d N=%d K=%d, every row carried over all T tokens\n", rows, T, Cd, N, K);
    size_t big = (size_t)M * 2 * Cd;
    float *h = rnd(big, -1, 1);
    int32_t *pos = pm_malloc((size_t)M * sizeof(int32_t)), first[8], last[8];
    for (int i = 0; i < M; i++) pos[i] = 3 * T + i % T;
    for (int r = 0; r < rows; r++) first[r] = T, last[r] = 0;
    float *dtb_h = pm_malloc(Cd * sizeof(float)), *al_h = pm_malloc((size_t)Cd * N * sizeof(float));
    for (int c = 0; c < Cd; c++) {
        dtb_h[c] = logf(expm1f(0.01f));
        for (int n = 0; n < N; n++) al_h[c * N + n] = logf((float)(n + 1));
    }
    void *gpos = g_i32(pos, M), *gfirst = g_i32(first, rows), *glast = g_i32(last, rows);
    void *xz = g_act(h, big), *dxz = g_act(h, big), *u = g_act(h, (size_t)M * Cd), *du = g_act(h, (size_t)M * Cd);
    void *dpre = g_act(h, (size_t)M * Cd), *ddpre = g_act(h, (size_t)M * Cd), *y = g_act(h, (size_t)M * Cd);
    void *dy = g_act(h, (size_t)M * Cd), *xdbl = g_act(h, (size_t)M * nx), *dxdbl = g_act(h, (size_t)M * nx);
    void *hist = g_act(h, (size_t)rows * (K - 1) * Cd), *histo = g_act(h, (size_t)rows * (K - 1) * Cd);
    void *h0 = g_f32(h, (size_t)rows * Cd * N), *hout = g_f32(h, (size_t)rows * Cd * N);
    void *cw = g_f32(h, Cd * K), *cb = g_f32(h, Cd), *dcw = g_f32(h, Cd * K), *dcb = g_f32(h, Cd);
    void *dtb = g_f32(dtb_h, Cd), *Al = g_f32(al_h, (size_t)Cd * N), *ddtb = g_f32(h, Cd), *dAl = g_f32(h, (size_t)Cd * N);
    void *dD = g_f32(h, Cd), *st = G->alloc(G->scan_states_bytes(M, T, Cd, N));
    if (G->spin) G->spin(PM_SPIN_FMA, 2e13);  // ~0.3 s of work first: the clocks up from idle
    G->synchronize();
    const double Md = (double)M;
    // the scan, every row from zero (as where nothing is carried) and every row carried in; the backward from the
    // forward's states (as in training) and recomputing them (where a memory budget keeps none)
#define TIME_SCAN_FWD(name, F, H)                                                                                 \
    TIME_OP(name, 0, 0, Md * Cd * 10,                                                                          \
            G->scan_fwd(y, u, dpre, dtb, Al, act_off(xdbl, R), act_off(xdbl, R + N), nx, cb, act_off(xz, Cd), 2 * Cd, \
                        gpos, M, T, Cd, N, st, F, H))
#define TIME_SCAN_BWD(name, S, F, H)                                                                              \
    TIME_OP(name, 0, 0, Md * Cd * 14,                                                                          \
            G->scan_bwd(du, ddpre, act_off(dxdbl, R), act_off(dxdbl, R + N), act_off(dxz, Cd), ddtb, dAl, dD, dy, u, \
                        dpre, dtb, Al, act_off(xdbl, R), act_off(xdbl, R + N), nx, cb, act_off(xz, Cd), 2 * Cd, gpos, \
                        M, T, Cd, N, S, NULL, F, H))
    TIME_SCAN_FWD("scan_fwd, nothing carried", NULL, NULL);
    TIME_SCAN_BWD("scan_bwd, nothing carried", st, NULL, NULL);
    TIME_SCAN_FWD("scan_fwd, every row carried", gfirst, h0);
    TIME_SCAN_BWD("scan_bwd, every row carried", st, gfirst, h0);
    TIME_SCAN_BWD("scan_bwd recomputing states, carried", NULL, gfirst, h0);
    TIME_SCAN_BWD("scan_bwd recomputing states", NULL, NULL, NULL);
#undef TIME_SCAN_FWD
#undef TIME_SCAN_BWD
    TIME_OP("conv_silu_fwd", 1, 0, 0, G->conv_silu_fwd(u, xz, 2 * Cd, cw, cb, gpos, M, T, Cd, K, NULL, NULL));
    TIME_OP("conv_silu_fwd, every row carried", 1, 0, 0,
            G->conv_silu_fwd(u, xz, 2 * Cd, cw, cb, gpos, M, T, Cd, K, gfirst, hist));
    TIME_OP("conv_silu_bwd", 1, 0, 0,
            G->conv_silu_bwd(dxz, 2 * Cd, dcw, dcb, du, xz, cw, cb, gpos, M, T, Cd, K, NULL, NULL));
    TIME_OP("conv_silu_bwd, every row carried", 1, 0, 0,
            G->conv_silu_bwd(dxz, 2 * Cd, dcw, dcb, du, xz, cw, cb, gpos, M, T, Cd, K, gfirst, hist));
    TIME_OP("carry_state_out", 1, 0, Md * Cd * 4,
            G->carry_state_out(hout, histo, u, dpre, dtb, Al, act_off(xdbl, R), nx, xz, 2 * Cd, gfirst, glast, h0, M, T,
                               Cd, N, K, NULL));
    TIME_OP("carry_state_out from the states", 1, 0, 0,
            G->carry_state_out(hout, histo, u, dpre, dtb, Al, act_off(xdbl, R), nx, xz, 2 * Cd, gfirst, glast, h0, M, T,
                               Cd, N, K, st));
    void *bufs[] = {gpos, gfirst, glast, xz, dxz, u, du, dpre, ddpre, y, dy, xdbl, dxdbl, hist, histo, h0, hout, cw, cb,
                    dcw, dcb, dtb, Al, ddtb, dAl, dD, st};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) G->free(bufs[i]);
    free(h), free(pos), free(dtb_h), free(al_h);
}

int main(void) {
    pm_rng_seed(&rng, 20261129);
    CPU = backend_cpu();
    G = backend_cuda(0);
    GD = G ? backend_cuda(1) : NULL;
    // Self-check of this harness without a GPU: the CPU stands in for the GPU (every comparison must then be
    // exact, except the two bf16 rounding checks, which fail by design).
    if (!G && getenv("PM_TEST_CPU_AS_GPU")) G = GD = CPU;
    if (!G) printf("no GPU (%s): CUDA op tests skipped\n", pm_last_error());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_gpu_fails_cleanly),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_matmul_tuned),  // first: tuning stops once many shapes have been planned
        cmocka_unit_test(test_matmul_each_candidate),
        cmocka_unit_test(test_bench_hooks),
        cmocka_unit_test(test_spin_rates),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_many_shapes),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_carried),
        cmocka_unit_test(test_carry_ops),
        cmocka_unit_test(test_carry_ops_wide_state),
        cmocka_unit_test(test_carry_conv_deferred),
        cmocka_unit_test(test_classifier),
        cmocka_unit_test(test_sumsq),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_adamw_offsets),
        cmocka_unit_test(test_model_vs_cpu),
        cmocka_unit_test(test_model_deterministic),
        cmocka_unit_test(test_model_scan_states),
        cmocka_unit_test(test_memory_budget_casts_weights),
        cmocka_unit_test(test_model_side_stream),
        cmocka_unit_test(test_model_update_ahead),
        cmocka_unit_test(test_model_grads_written),
        cmocka_unit_test(test_model_deferred_reductions),
        cmocka_unit_test(test_model_packing),
        cmocka_unit_test(test_op_timings),
        cmocka_unit_test(test_carry_timings),
    };
    // PM_TEST_FILTER picks tests by name; dev/gpu.sh: PM_ONLY_BENCH runs just the timings, PM_SKIP_MODEL leaves
    // out the model tests (sanitizer run)
    if (getenv("PM_TEST_FILTER")) cmocka_set_test_filter(getenv("PM_TEST_FILTER"));  // e.g. "test_model_*"
    else if (getenv("PM_ONLY_BENCH")) cmocka_set_test_filter("test_op_timings");
    else if (getenv("PM_SKIP_MODEL")) cmocka_set_skip_filter("test_model_*");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
