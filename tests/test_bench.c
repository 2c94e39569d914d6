// test_bench.c — `packmamba bench` on the CPU with tiny shapes, in process: a 2x2 sweep whose outputs are checked
// against independent truths (every configuration present with positive throughput; per-op times that add up to
// the step time they were measured inside; op call counts and parameter memory that follow from the model's
// structure; GEMM FLOPs that follow from the parameter shapes; each op's floor and bound from its counted work and
// the measured ceilings, op_floor_s itself on worked and random cases), the Chrome trace parsed back, and report.html
// rendered in headless Chromium (skipped with a message when Chromium is absent). Also: the synthetic batch
// generator's document semantics and length distribution, sweep lists and files, the NVML sampler over a fake
// library, and a sweep over real prepared documents.
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "batcher.h"
#include "bench.h"
#include "bench_cost.h"
#include "cmd_data.h"
#include "model.h"
#include "nvml_probe.h"
#include "profiler.h"
#include "shell.h"
#include "util.h"

static char g_tmp[256];  // scratch directory of this test run
static char g_out[512];  // the 2x2 sweep's output directory

// The sweep: T in {32, 64} x B in {1, 2}, a 2-layer width-32 model with a 64-token vocabulary.
#define N_LAYER 2
#define D_MODEL 32
#define VOCAB 64
static const int sweep_T[2] = {32, 64}, sweep_B[2] = {1, 2};

static int run_bench(int argc, const char **argv) { return cmd_bench(argc, (char **)argv); }

static int setup(void **state) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/pm_test_bench_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    snprintf(g_out, sizeof g_out, "%s/sweep", g_tmp);
    const char *argv[] = {"bench", "--device", "cpu", "--preset", "tiny", "--n-layer", "2", "--d-model", "32",
                          "--vocab", "64", "--seq-len", "32,64", "--batch", "1,2", "--policy", "pack", "--steps", "4",
                          "--warmup", "1", "--out", g_out};
    return run_bench(sizeof argv / sizeof argv[0], argv);
}

static int teardown(void **state) { return pm_remove_tree(g_tmp); }

static json_t *load_json(const char *name) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", g_out, name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) fail_msg("%s: not JSON: line %d: %s", path, e.line, e.text);
    return j;
}

static char *read_text(const char *dir, const char *name) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    char *s = pm_read_file(path, &n);
    if (!s) fail_msg("%s", pm_last_error());
    return s;
}

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

static void expect_label(char *label, size_t n, int T, int B) {
    snprintf(label, n, "L%d-d%d T=%d B=%d pack", N_LAYER, D_MODEL, T, B);
}

// ---------------------------------------------------------------------------------------------------------------

static void test_results_have_every_configuration(void **state) {
    json_t *r = load_json("results.json");
    json_t *cfgs = json_object_get(r, "configs");
    assert_int_equal(json_array_size(cfgs), 4);
    char *csv = read_text(g_out, "results.csv");
    int lines = 0;
    for (char *p = csv; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 5);  // header + 4
    for (int t = 0; t < 2; t++)
        for (int b = 0; b < 2; b++) {
            char label[128], quoted[140];
            expect_label(label, sizeof label, sweep_T[t], sweep_B[b]);
            json_t *found = NULL;
            size_t i;
            json_t *c;
            json_array_foreach(cfgs, i, c) if (!strcmp(json_string_value(json_object_get(c, "label")), label)) found = c;
            if (!found) fail_msg("results.json lacks %s", label);
            assert_string_equal(json_string_value(json_object_get(found, "status")), "ok");
            assert_true(num(found, "tok_per_s") > 0);
            assert_int_equal((int)num(found, "T"), sweep_T[t]);
            assert_int_equal((int)num(found, "B"), sweep_B[b]);
            // pack rows are always full B x T shapes; documents longer than T are cut, so fill is near 1
            assert_true(num(found, "computed_tokens_per_step") == sweep_T[t] * sweep_B[b]);
            assert_true(num(found, "fill") > 0.5 && num(found, "fill") <= 1.0);
            // tokens/s is tokens per step over the mean step time (independent of how bench summed them)
            double mean_ms = num(json_object_get(found, "step_ms"), "mean");
            assert_true(fabs(num(found, "tok_per_s") - num(found, "tokens_per_step") / (mean_ms * 1e-3)) <
                        1e-6 * num(found, "tok_per_s") + 1e-9);
            json_t *sm = json_object_get(found, "step_ms");
            assert_true(num(sm, "min") <= num(sm, "p10") && num(sm, "p10") <= num(sm, "median") &&
                        num(sm, "median") <= num(sm, "p90") && num(sm, "p90") <= num(sm, "max"));
            assert_true(json_is_true(json_object_get(found, "loss_finite")));
            // the CSV row: quoted label followed by a positive tokens/s
            snprintf(quoted, sizeof quoted, "\"%s\",\"ok\"", label);
            char *at = strstr(csv, quoted);
            if (!at) fail_msg("results.csv lacks %s", label);
            char *start = at;
            while (start > csv && start[-1] != '\n') start--;
            char *row = strndup(start, (size_t)(strchr(at, '\n') - start));
            int col = 0;
            char *fields[64];
            for (char *tok = strtok(row, ","); tok && col < 64; tok = strtok(NULL, ",")) fields[col++] = tok;
            assert_true(col > 16);
            assert_true(atof(fields[16]) > 0);  // tok_per_s is column 17 (see the header)
            free(row);
        }
    char *hdr_end = strchr(csv, '\n');
    *hdr_end = 0;
    char *h = pm_strdup(csv);
    int col = 0;
    for (char *tok = strtok(h, ","); tok; tok = strtok(NULL, ","), col++)
        if (col == 16) assert_string_equal(tok, "tok_per_s");
    free(h);
    free(csv);
    json_decref(r);
}

static void test_op_times_add_up_to_the_step(void **state) {
    // The regions the model's hook brackets cover the whole step except batch upload and loss download: in some
    // profiled step they cover at least 90% of it (a host busy with other work can preempt the process between
    // regions in any one step, which once failed this under ctest -j2 when it compared the means), and their sum
    // is not more than 10% over the step time measured around the step with another clock reading.
    json_t *r = load_json("results.json");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "configs"), i, c) {
        double sum = 0;
        size_t j;
        json_t *o;
        json_array_foreach(json_object_get(c, "ops"), j, o) {
            assert_true(num(o, "ms") >= 0);
            sum += num(o, "ms");
        }
        double step = num(json_object_get(c, "step_ms"), "mean"), cover = num(c, "profiled_cover_max");
        const char *label = json_string_value(json_object_get(c, "label"));
        if (sum > 1.10 * step) fail_msg("%s: ops sum to %.3f ms, the step took %.3f ms", label, sum, step);
        if (!(cover >= 0.90 && cover <= 1.0 + 1e-9))
            fail_msg("%s: the regions cover at most %.1f%% of a profiled step", label, 100 * cover);
        // the categories partition the same time
        double cs = 0;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(c, "categories"), k, v) cs += num(v, "ms");
        assert_true(fabs(cs - fmax(step, sum)) < 0.10 * step);
    }
    json_decref(r);
}

static void test_op_calls_memory_and_flops_follow_the_model(void **state) {
    json_t *r = load_json("results.json");
    json_t *c = json_array_get(json_object_get(r, "configs"), 3);
    ModelConfig mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layer = N_LAYER, mc.d_model = D_MODEL, mc.vocab_size = VOCAB;
    config_derive(&mc);
    size_t np = model_num_params(&mc);
    assert_int_equal((size_t)num(json_object_get(c, "model"), "n_params"), np);
    // every per-layer op runs once per layer, norms once more (the final norm), the rest once per step
    size_t j;
    json_t *o;
    int seen = 0;
    json_array_foreach(json_object_get(c, "ops"), j, o) {
        const char *name = json_string_value(json_object_get(o, "region"));
        const char *cat = json_string_value(json_object_get(o, "category"));
        // (out_proj's backward is two calls per layer: d(y) before the scan's backward, dW after it)
        int want = !strcmp(cat, "norm") ? N_LAYER + 1
                   : (!strcmp(cat, "classifier") || !strcmp(cat, "embedding") || !strcmp(cat, "optimizer")) ? 1
                   : !strcmp(name, "bwd.out_proj")                                                            ? 2 * N_LAYER
                                                                                                            : N_LAYER;
        if ((int)num(o, "calls") != want) fail_msg("%s: %g calls per step, expected %d", name, num(o, "calls"), want);
        seen++;
    }
    assert_int_equal(seen, 21);  // 8 forward, 1 classifier, 8 backward + recompute, zero_grad, grad_norm, adamw
    // memory: the CPU computes from fp32 master weights (no separate copy), so parameters and gradients are
    // 4 bytes per parameter and AdamW's two moments 8
    json_t *mem = json_object_get(c, "memory");
    assert_int_equal((size_t)num(mem, "parameters"), 4 * np);
    assert_int_equal((size_t)num(mem, "gradients"), 4 * np);
    assert_int_equal((size_t)num(mem, "optimizer"), 8 * np);
    assert_true(num(mem, "activations") > 0 && num(mem, "activation_grads") < num(mem, "activations"));
    // the estimate bench uses to skip configurations that would not fit matches what the model allocated
    // (model.c rounds each tensor up to 256 bytes)
    assert_true(fabs(num(mem, "activations_estimate") - num(mem, "activations")) < 256.0 * 24 * (N_LAYER + 2));
    assert_true(num(mem, "peak") >= num(mem, "parameters") + num(mem, "gradients") + num(mem, "optimizer") +
                                        num(mem, "activations"));

    // GEMM FLOPs from the parameter shapes: forward 2 x tokens x (matrix parameters per layer), backward twice
    // that; classifier 6 x tokens x Vp x d plus the softmax
    int nt = model_param_infos(&mc, NULL);
    ParamInfo *pi = pm_malloc(sizeof(ParamInfo) * nt);
    model_param_infos(&mc, pi);
    double mat = 0;
    for (int t = 0; t < nt; t++)
        if (strstr(pi[t].name, "_proj.weight")) mat += (double)pi[t].size;
    free(pi);
    double M = num(c, "computed_tokens_per_step"), fwd = 0, bwd = 0, cls = 0;
    json_array_foreach(json_object_get(c, "ops"), j, o) {
        const char *name = json_string_value(json_object_get(o, "region"));
        if (strstr(name, "_proj") && !strncmp(name, "fwd.", 4)) fwd += num(o, "flops");
        if (strstr(name, "_proj") && !strncmp(name, "bwd.", 4)) bwd += num(o, "flops");
        if (!strcmp(name, "fwdbwd.classifier")) cls = num(o, "flops");
    }
    assert_true(fabs(fwd - 2 * M * mat) < 1e-9 * fwd);
    assert_true(fabs(bwd - 4 * M * mat) < 1e-9 * bwd);
    assert_true(fabs(cls - (6 * M * mc.vocab_pad * mc.d_model + 5 * M * mc.vocab_pad)) < 1e-9 * cls);
    // MFU and achieved rates are consistent with the measured ceiling
    double gemm = num(json_object_get(r, "ceilings"), "gemm_flops_per_s");
    assert_true(gemm > 0);
    double mfu = num(c, "mfu");
    assert_true(fabs(mfu - num(c, "model_flops_per_token") * num(c, "tok_per_s") / gemm) < 1e-6 * mfu);
    // the vector and exp ceilings (Backend.spin): measured, and an exp on the CPU's FMA pipe (a range reduction
    // and a degree-7 polynomial) costs more than one multiply-add's 2 FLOPs
    json_t *ceil = json_object_get(r, "ceilings");
    const Ceilings k = {gemm, num(ceil, "vector_flops_per_s"), num(ceil, "copy_bytes_per_s"), num(ceil, "exps_per_s")};
    assert_true(k.vector_flops_per_s > 0 && k.exps_per_s > 0 && isfinite(k.vector_flops_per_s));
    assert_true(k.exps_per_s < k.vector_flops_per_s / 2);
    // every op's floor, bound and fraction follow from its counted work and the ceilings
    json_array_foreach(json_object_get(c, "ops"), j, o) {
        const OpCost oc = {.flops = num(o, "flops"), .bytes = num(o, "bytes"), .exps = num(o, "exps"),
                           .gemm_flops = num(o, "gemm_flops")};
        const char *bound;
        const double fl = op_floor_s(&oc, &k, &bound);
        const char *name = json_string_value(json_object_get(o, "region"));
        if (fabs(num(o, "floor_ms") - 1e3 * fl) > 1e-9 * 1e3 * fl)
            fail_msg("%s: floor %g ms, expected %g", name, num(o, "floor_ms"), 1e3 * fl);
        assert_string_equal(json_string_value(json_object_get(o, "bound")), bound);
        assert_true(fabs(num(o, "roof_fraction") - num(o, "floor_ms") / num(o, "ms")) < 1e-9 * num(o, "roof_fraction"));
        // the GEMM part of the counted FLOPs: all of a projection's, none of the scan's
        if (strstr(name, "_proj"))
            assert_true(num(o, "gemm_flops") == num(o, "flops"));
        if (strstr(name, ".scan") || strstr(name, ".conv")) assert_true(num(o, "gemm_flops") == 0);
    }
    json_decref(r);
}

// The scan backward's cost with layers that do not keep their scan states (--recompute-scan, a partial
// --scan-states-layers): each such layer adds one checkpoint pass, the forward recurrence without its output
// (one exp per state and token plus the softplus), so the cost grows by the same amount per layer, and by less
// than a whole forward scan (which also writes its output and reads C).
static void test_scan_cost_counts_the_checkpoint_pass(void **state) {
    (void)state;
    ModelConfig mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layer = 4, mc.d_model = 64, mc.d_state = 16, mc.vocab_size = VOCAB;
    config_derive(&mc);
    OpCost c[3], fwd;
    for (int k = 0; k < 3; k++) {
        CostShape cs = {&mc, model_num_params(&mc), 1000, 2, 4, 1, 0, 0, k};
        assert_int_equal(op_cost(&cs, "bwd.scan", &c[k]), 0);
        assert_int_equal(c[k].calls, mc.n_layer);
        if (k == 0) assert_int_equal(op_cost(&cs, "fwd.scan", &fwd), 0);
    }
    const double per_layer_exps = 1000.0 * mc.d_inner * (mc.d_state + 1);
    assert_true(fabs(c[1].exps - c[0].exps - per_layer_exps) < 1e-9 * per_layer_exps);
    assert_true(fabs((c[2].exps - c[1].exps) - (c[1].exps - c[0].exps)) < 1e-9 * per_layer_exps);
    assert_true(fabs((c[2].flops - c[1].flops) - (c[1].flops - c[0].flops)) < 1e-9 * c[0].flops);
    assert_true(c[1].bytes > c[0].bytes && c[1].flops > c[0].flops);
    // one layer's checkpoint pass: less than one layer's forward scan in every count
    assert_true(c[1].flops - c[0].flops < fwd.flops / mc.n_layer);
    assert_true(c[1].bytes - c[0].bytes < fwd.bytes / mc.n_layer);
    assert_true(c[1].exps - c[0].exps < fwd.exps / mc.n_layer);
}

// op_floor_s: an op's floor is its busiest unit's time at that unit's ceiling. Worked cases (each term by hand),
// then random costs and ceilings, some ceilings unmeasured: the floor is one of the four terms, none is above it,
// and the bound names the first term that reaches it.
static void test_op_floor_is_the_busiest_unit(void **state) {
    (void)state;
    const char *b;
    // 10 FLOPs of which 6 GEMM, 100 bytes, 3 exps: GEMM 6/2 = 3 s, vector 4/1 = 4, memory 100/50 = 2, exp 3/1 = 3
    OpCost c = {.flops = 10, .gemm_flops = 6, .bytes = 100, .exps = 3};
    Ceilings k = {.gemm_flops_per_s = 2, .vector_flops_per_s = 1, .bytes_per_s = 50, .exps_per_s = 1};
    assert_true(fabs(op_floor_s(&c, &k, &b) - 4) < 1e-12);
    assert_string_equal(b, "vector");
    // without a vector ceiling every FLOP goes on the GEMM one: 10/2 = 5
    k.vector_flops_per_s = 0;
    assert_true(fabs(op_floor_s(&c, &k, &b) - 5) < 1e-12);
    assert_string_equal(b, "gemm");
    // the exps bind once their rate is low enough (3/0.5 = 6), and drop out where it was not measured
    k.exps_per_s = 0.5;
    assert_true(fabs(op_floor_s(&c, &k, &b) - 6) < 1e-12);
    assert_string_equal(b, "exp");
    k.exps_per_s = 0, k.gemm_flops_per_s = 100;  // flops 0.1 s: the bytes bind
    assert_true(fabs(op_floor_s(&c, &k, &b) - 2) < 1e-12);
    assert_string_equal(b, "memory");
    OpCost zero = {0};
    assert_true(op_floor_s(&zero, &k, &b) == 0);
    assert_string_equal(b, "none");
    // random ones: the floor is one of the four terms and no term is above it
    PmRng r;
    pm_rng_seed(&r, 11);
    for (int it = 0; it < 2000; it++) {
        OpCost o = {.flops = 1 + 1e6 * pm_rng_uniform(&r), .bytes = 1e6 * pm_rng_uniform(&r),
                    .exps = pm_rng_uniform(&r) < 0.5 ? 0 : 1e5 * pm_rng_uniform(&r)};
        o.gemm_flops = o.flops * (pm_rng_uniform(&r) < 0.3 ? 0 : pm_rng_uniform(&r));
        Ceilings q = {1 + 1e3 * pm_rng_uniform(&r), pm_rng_uniform(&r) < 0.2 ? 0 : 1 + 1e2 * pm_rng_uniform(&r),
                      1 + 1e3 * pm_rng_uniform(&r), pm_rng_uniform(&r) < 0.2 ? 0 : 1 + 1e1 * pm_rng_uniform(&r)};
        const double terms[4] = {q.vector_flops_per_s > 0 ? o.gemm_flops / q.gemm_flops_per_s : o.flops / q.gemm_flops_per_s,
                                 q.vector_flops_per_s > 0 ? (o.flops - o.gemm_flops) / q.vector_flops_per_s : 0,
                                 o.bytes / q.bytes_per_s, q.exps_per_s > 0 ? o.exps / q.exps_per_s : 0};
        static const char *const names[4] = {"gemm", "vector", "memory", "exp"};
        const double f = op_floor_s(&o, &q, &b);
        int hit = -1;
        for (int i = 0; i < 4; i++) {
            assert_true(terms[i] <= f * (1 + 1e-12));
            if (fabs(terms[i] - f) <= 1e-12 * f && hit < 0) hit = i;
        }
        assert_true(hit >= 0);
        assert_string_equal(b, names[hit]);
    }
}

static void test_trace_is_a_chrome_trace(void **state) {
    json_t *t = load_json("trace.json");
    json_t *ev = json_object_get(t, "traceEvents");
    assert_true(json_is_array(ev));
    int per_pid[8] = {0}, names = 0, scan_fwd = 0, scan_bwd = 0, bwd_layer[8] = {0}, out_proj_bwd[8][N_LAYER];
    memset(out_proj_bwd, 0, sizeof out_proj_bwd);
    double step_dur[8] = {0};
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        assert_true(pid >= 1 && pid <= 4);
        if (!strcmp(ph, "M")) {
            names += !strcmp(json_string_value(json_object_get(e, "name")), "process_name");
            continue;
        }
        assert_string_equal(ph, "X");
        double ts = num(e, "ts"), dur = num(e, "dur");
        assert_true(ts >= 0 && dur >= 0);
        const char *n = json_string_value(json_object_get(e, "name"));
        if (!strcmp(n, "step")) step_dur[pid] = dur;
        else per_pid[pid]++;
        scan_fwd += !strcmp(n, "fwd.scan");
        scan_bwd += !strcmp(n, "bwd.scan");
        // each backward region of a layer is labelled with that layer: out_proj's two regions a layer (d(y), then
        // its weight gradient) both with the layer of the bwd.scan between them
        json_t *lay = json_object_get(json_object_get(e, "args"), "layer");
        if (!strcmp(n, "bwd.scan")) {
            assert_true(json_is_integer(lay));
            bwd_layer[pid] = (int)json_integer_value(lay);
            assert_true(bwd_layer[pid] >= 0 && bwd_layer[pid] < N_LAYER);
        }
        if (!strcmp(n, "bwd.out_proj")) {
            assert_true(json_is_integer(lay));
            const int l = (int)json_integer_value(lay);
            assert_true(l >= 0 && l < N_LAYER);
            out_proj_bwd[pid][l]++;
            // the second one of a layer follows that layer's scan
            if (out_proj_bwd[pid][l] == 2) assert_int_equal(l, bwd_layer[pid]);
        }
    }
    for (int p = 1; p <= 4; p++)
        for (int l = 0; l < N_LAYER; l++) assert_int_equal(out_proj_bwd[p][l], 2);
    assert_int_equal(names, 4);
    for (int p = 1; p <= 4; p++) {
        // one step: 8 forward ops per layer... every region call of the step, as counted from the model
        // (the backward also recomputes xn, u and dpre once per layer: + N_LAYER; out_proj's backward is two calls)
        int want = 1 + 1 + (N_LAYER + 1) + 6 * N_LAYER + 1 + (N_LAYER + 1) + 6 * N_LAYER + N_LAYER + N_LAYER + 1 + 2;
        assert_int_equal(per_pid[p], want);
        assert_true(step_dur[p] > 0);
    }
    assert_int_equal(scan_fwd, 4 * N_LAYER);
    assert_int_equal(scan_bwd, 4 * N_LAYER);
    // every op of a step lies inside the step
    json_array_foreach(ev, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X")) continue;
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        assert_true(num(e, "ts") + num(e, "dur") <= step_dur[pid] + 1e-3);  // same clock; JSON rounding
    }
    json_decref(t);
}

static const char *find_chromium(void) {
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    for (int i = 0; names[i]; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) return names[i];
    }
    return NULL;
}

static void test_report_renders_every_configuration(void **state) {
    const char *chromium = find_chromium();
    if (!chromium) {
        print_message("SKIP: chromium is not installed (Debian package chromium); report.html not rendered\n");
        skip();
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "timeout 180 %s --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=%s/chrome "
             "--dump-dom 'file://%s/report.html' 2>/dev/null",
             chromium, g_tmp, g_out);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 20, n = 0;
    char *dom = pm_malloc(cap);
    for (size_t k; (k = fread(dom + n, 1, cap - n - 1, p)) > 0;)
        if ((n += k) + 1 == cap) dom = pm_realloc(dom, cap *= 2);
    dom[n] = 0;
    int rc = pclose(p);
    if (rc != 0 || n == 0) fail_msg("chromium --dump-dom failed (status %d, %zu bytes)", rc, n);
    // The configuration table is built by the page's script from the embedded results: rows exist in the DOM
    // only if the script ran without error.
    for (int t = 0; t < 2; t++)
        for (int b = 0; b < 2; b++) {
            char label[128], attr[160];
            expect_label(label, sizeof label, sweep_T[t], sweep_B[b]);
            snprintf(attr, sizeof attr, "data-config=\"%s\"", label);
            if (!strstr(dom, attr)) fail_msg("the rendered report has no row for %s", label);
        }
    // per-op detail tables for each configuration (built after the main table)
    int ops = 0;
    for (char *q = dom; (q = strstr(q, "data-op=\"bwd.scan\"")); q++) ops++;
    assert_int_equal(ops, 4);
    free(dom);
}

static void test_report_can_be_remade(void **state) {
    // --report remakes the tables, plots and HTML from results.json alone (e.g. after a GPU run without gnuplot)
    char *before = read_text(g_out, "results.csv");
    char path[700];
    snprintf(path, sizeof path, "%s/results.csv", g_out);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/report.html", g_out);
    assert_int_equal(unlink(path), 0);
    const char *argv[] = {"bench", "--report", g_out, "--no-plots"};
    assert_int_equal(run_bench(4, argv), 0);
    char *after = read_text(g_out, "results.csv");
    assert_string_equal(before, after);
    char *html = read_text(g_out, "report.html");
    assert_non_null(strstr(html, "--no-plots"));
    assert_non_null(strstr(html, "plots.gp"));
    free(before), free(after), free(html);
}

// The clocks plot: from a GPU run's nvml_samples.csv (here a made-up one: a cool start, then timed steps held down by
// the power cap, with some samples that report no reasons), gnuplot draws the clock of the timed and the other
// samples, the power and the capped samples; every series must find points in the file (gnuplot warns of a
// series with none, as a wrong column would give). A run without NVML (the CPU sweep) has no such plot.
static void test_report_plots_the_clocks(void **state) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        print_message("SKIP: gnuplot is not installed (Debian package gnuplot-nox)\n");
        skip();
    }
    char *gp_cpu = read_text(g_out, "plots.gp");
    assert_null(strstr(gp_cpu, "nvml_samples.csv"));
    free(gp_cpu);
    char dir[700], path[800];
    snprintf(dir, sizeof dir, "%s/clocks", g_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    json_t *root = load_json("results.json");
    json_object_set_new(root, "nvml", json_pack("{s:b, s:s, s:i, s:i, s:i, s:f}", "available", 1, "device", "Fake H200",
                                                "max_sm_mhz", 1980, "max_mem_mhz", 3201, "sample_ms", 50,
                                                "power_limit_w", 700.0));
    snprintf(path, sizeof path, "%s/results.json", dir);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
    snprintf(path, sizeof path, "%s/nvml_samples.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "t_s,config,sm_mhz,mem_mhz,power_w,temp_c,util_gpu,util_mem,mem_used_bytes,clock_reasons,power_capped\n");
    for (int i = 0; i < 60; i++) {
        const int timed = i >= 20 && i < 50, capped = i >= 15;
        fprintf(f, "%.3f,%d,%d,3201,%.1f,50,100,40,1000000,", 0.05 * i, timed ? i / 40 : -1,
                capped ? 1700 + 10 * (i % 9) : 1980, capped ? 690.0 : 150.0 + i);
        if (i % 7 == 3) fprintf(f, ",\n");  // reasons not reported
        else fprintf(f, "0x%x,%d\n", capped ? 0x4 : 0x0, capped);
    }
    fclose(f);
    const char *argv[] = {"bench", "--report", dir};
    assert_int_equal(run_bench(3, argv), 0);
    char *gp = read_text(dir, "plots.gp");
    assert_non_null(strstr(gp, "'nvml_samples.csv'"));
    free(gp);
    char *log = read_text(dir, "gnuplot.log");
    if (strstr(log, "no valid points")) fail_msg("gnuplot found a series without points: %s", log);
    free(log);
    char *svg = read_text(dir, "clocks.svg");
    assert_non_null(strstr(svg, "power cap holding the clock"));
    assert_non_null(strstr(svg, "SM clock, timed steps"));
    free(svg);
    char *html = read_text(dir, "report.html");
    assert_non_null(strstr(html, "id='plot-clocks'"));
    assert_non_null(strstr(html, "power limit 700 W"));
    free(html);
}

// --warmup-s: the warm-up lasts at least that long, cycling through its batches, and results.json says how many
// steps and seconds it took; without it, exactly --warmup steps (the CPU's default).
static void test_timed_warmup(void **state) {
    char dir[700];
    for (int timed = 0; timed < 2; timed++) {
        snprintf(dir, sizeof dir, "%s/warm%d", g_tmp, timed);
        const char *argv[] = {"bench", "--device", "cpu", "--preset", "tiny", "--n-layer", "1", "--d-model", "32",
                              "--vocab", "64", "--seq-len", "32", "--batch", "1", "--steps", "2", "--warmup", "1",
                              "--warmup-s", timed ? "1" : "0", "--no-plots", "--out", dir};
        assert_int_equal(run_bench(sizeof argv / sizeof argv[0], argv), 0);
        char path[800];
        snprintf(path, sizeof path, "%s/results.json", dir);
        json_error_t e;
        json_t *r = json_load_file(path, 0, &e);
        assert_non_null(r);
        json_t *c = json_array_get(json_object_get(r, "configs"), 0);
        const double steps = num(c, "warmup"), secs = num(c, "warmup_s");
        if (timed) {  // (one step of this model takes milliseconds, well under 1 s even on a loaded machine)
            assert_true(secs >= 1.0 && secs < 10.0);
            assert_true(steps > 1);  // more steps than the one warm-up batch: they cycle through it
        } else {
            assert_true(steps == 1);
        }
        assert_true(num(json_object_get(r, "options"), "warmup_s") == (timed ? 1.0 : 0.0));
        json_decref(r);
    }
}

// A warm-up past an hour is refused at once with one line (it ran for as long as it was told). Run as a command
// (PM_BIN): a forked copy of this process would exit through the sanitizers' leak check with this test's memory.
static void test_warmup_bound(void **state) {
    const char *bin = getenv("PM_BIN");
    if (!bin) {
        skip();
        return;
    }
    assert_int_equal(sh("timeout 60 %s bench --device cpu --preset tiny --warmup-s 1e30 --no-plots --out %s/wb "
                        "2>%s/warmup_bound.log", bin, g_tmp, g_tmp), 1);
    char *text = read_text(g_tmp, "warmup_bound.log");
    const int found = strstr(text, "--warmup-s 1e+30: at most 3600") != NULL;
    if (!found) fprintf(stderr, "bench's stderr: %s\n", text);
    free(text);
    assert_true(found);
}

// ---------------------------------------------------------------------------------------------------------------

static void test_sweep_lists(void **state) {
    BenchConfig *c = NULL;
    int n = 0;
    assert_int_equal(bench_expand("tiny,130m", "2", NULL, NULL, "1K,16k", "1,4", 0, "pack,pad", &c, &n), 16);
    assert_int_equal(n, 16);
    assert_int_equal(c[0].T, 1024);
    assert_int_equal(c[15].T, 16384);
    assert_int_equal(c[15].B, 4);
    assert_int_equal(c[15].policy, PM_POLICY_PAD);
    assert_int_equal(c[8].d_model, 768);  // the 130m preset's width, its depth overridden
    assert_int_equal(c[8].n_layer, 2);
    assert_int_equal(bench_expand("tiny", NULL, NULL, NULL, "512,x", "1", 0, "pack", &c, &n), -1);
    assert_non_null(strstr(pm_last_error(), "'x'"));
    assert_int_equal(bench_expand("tiny", NULL, NULL, NULL, "512", "1", 0, "packed", &c, &n), -1);
    assert_non_null(strstr(pm_last_error(), "packed"));
    assert_int_equal(bench_expand("nope", NULL, NULL, NULL, "512", "1", 0, "pack", &c, &n), -1);
    assert_int_equal(bench_expand("tiny", NULL, NULL, NULL, "512,,1024", "1", 0, "pack", &c, &n), -1);
    // tokens per step instead of a batch list: B = tokens / T (at least 1)
    n = 0;
    assert_int_equal(bench_expand("tiny", NULL, NULL, NULL, "512,4K,32K", "3", 16384, "fixed", &c, &n), 3);
    assert_int_equal(c[0].B, 32);
    assert_int_equal(c[1].B, 4);
    assert_int_equal(c[2].B, 1);
    free(c);
}

static void put_file(const char *name, const char *text, char *path, size_t n) {
    snprintf(path, n, "%s/%s", g_tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_sweep_file(void **state) {
    char path[600];
    put_file("sweep.json",
             "{\"steps\": 7, \"warmup\": 0, \"sweeps\": [\n"
             " {\"preset\": \"tiny\", \"seq_len\": [512, \"2K\"], \"batch\": 8, \"policy\": \"fixed\"},\n"
             " {\"preset\": [\"130m\"], \"n_layer\": [12, 24], \"seq_len\": 1024, \"batch\": [1, 2], \"policy\": [\"pack\", \"pad\"],\n"
             "  \"data\": \"/some/corpus\"},\n"
             " {\"preset\": \"tiny\", \"seq_len\": [1024, 4096], \"tokens\": 8192}]}",
             path, sizeof path);
    BenchConfig *c = NULL;
    int n = 0;
    BenchFileOptions o;
    memset(&o, 0, sizeof o);
    o.steps = 10, o.warmup = 2;
    assert_int_equal(bench_parse_sweep_file(path, &c, &n, &o), 0);
    assert_int_equal(n, 2 + 8 + 2);
    assert_string_equal(c[0].data, "");
    assert_string_equal(c[5].data, "/some/corpus");
    assert_int_equal(c[10].B, 8);
    assert_int_equal(c[11].B, 2);
    assert_int_equal(c[11].tokens, 8192);
    assert_int_equal(o.steps, 7);
    assert_int_equal(o.warmup, 0);
    assert_int_equal(c[1].T, 2048);
    assert_int_equal(c[1].policy, BENCH_POLICY_FIXED);
    assert_int_equal(c[9].n_layer, 24);
    assert_int_equal(c[9].B, 2);
    assert_int_equal(c[9].policy, PM_POLICY_PAD);
    free(c);
    // errors name the file and the problem
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"sweeps\": [{\"preset\": \"tiny\", \"seq_len\": 5", "line"},
        {"{\"sweeps\": [{\"preset\": \"tiny\", \"seqlen\": 512}]}", "seqlen"},
        {"{\"sweeps\": [{\"preset\": \"tiny\", \"batch\": [1.5]}]}", "batch"},
        {"{\"sweeps\": []}", "sweeps"},
        {"{\"steps\": \"ten\"}", "steps"},
        {"[1, 2]", "object"},
        {"{\"sweeps\": [{\"seq_len\": 512, \"batch\": 2, \"tokens\": 4096}]}", "not both"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_file("bad.json", bad[i].text, path, sizeof path);
        c = NULL, n = 0;
        assert_int_equal(bench_parse_sweep_file(path, &c, &n, &o), -1);
        const char *e = pm_last_error();
        if (!strstr(e, path) || !strstr(e, bad[i].want)) fail_msg("case %zu: message '%s'", i, e);
        free(c);
    }
}

// ---------------------------------------------------------------------------------------------------------------

// Document semantics of a batch: a document's tokens are contiguous with positions 0, 1, 2, ...; padding is
// doc -1 with ignored targets; a target is the next token of the same piece or, at a piece's end, the EOD
// stand-in (vocab - 1) or nothing.
static void check_batch(const Batch *b, int vocab) {
    for (int r = 0; r < b->B; r++)
        for (int t = 0; t < b->T; t++) {
            int i = r * b->T + t;
            if (b->doc[i] < 0) {
                assert_int_equal(b->targets[i], PM_IGNORE);
                continue;
            }
            assert_true(b->tokens[i] >= 0 && b->tokens[i] < vocab);
            if (b->pos[i] > 0) {
                assert_true(t > 0);
                assert_int_equal(b->doc[i - 1], b->doc[i]);
                assert_int_equal(b->pos[i - 1], b->pos[i] - 1);
            }
            int next_same = t + 1 < b->T && b->doc[i + 1] == b->doc[i] && b->pos[i + 1] == b->pos[i] + 1;
            if (next_same) assert_int_equal(b->targets[i], b->tokens[i + 1]);
            else assert_true(b->targets[i] == vocab - 1 || b->targets[i] == PM_IGNORE);
        }
}

static void test_synthetic_batches(void **state) {
    // lengths: lognormal with median 398 and mean 640 (DESIGN §3), clamped to [2, 4096]
    enum { NS = 200000 };
    PmRng r;
    pm_rng_seed(&r, 3);
    int *len = pm_malloc(sizeof(int) * NS);
    double mean = 0;
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < NS; i++) {
        len[i] = bench_synth_doc_len(&r);
        mean += len[i] / (double)NS;
        lo = len[i] < lo ? len[i] : lo;
        hi = len[i] > hi ? len[i] : hi;
    }
    int below = 0;
    for (int i = 0; i < NS; i++) below += len[i] < 398;
    assert_true(fabs(below / (double)NS - 0.5) < 0.01);  // the median
    assert_true(fabs(mean - 640) < 0.03 * 640);         // the 4096 clamp trims the mean a little
    assert_true(lo >= 2 && hi <= 4096);
    free(len);

    const int B = 4, T = 1024, V = 100;
    for (int policy = 0; policy <= BENCH_POLICY_FIXED; policy++) {
        BenchSynth s;
        memset(&s, 0, sizeof s);
        pm_rng_seed(&s.rng, 11);
        Batch b = batch_alloc(B, T);
        int64_t real = 0, cells = 0;
        for (int step = 0; step < 30; step++) {
            bench_synth_batch(&s, &b, policy, B, T, V);
            assert_true(b.B >= 1 && b.B <= B && b.T >= 1 && b.T <= T);
            check_batch(&b, V);
            int64_t valid = 0;
            for (int i = 0; i < b.B * b.T; i++) real += b.doc[i] >= 0, valid += b.targets[i] != PM_IGNORE;
            assert_int_equal(b.n_valid, valid);
            cells += (int64_t)b.B * b.T;
            if (policy == PM_POLICY_SINGLE) assert_int_equal(b.B, 1);
            if (policy == PM_POLICY_PACK || policy == BENCH_POLICY_FIXED) assert_true(b.B == B && b.T == T);
        }
        double fill = (double)real / cells;
        if (policy == PM_POLICY_SINGLE || policy == BENCH_POLICY_FIXED) assert_true(fill == 1.0);
        if (policy == PM_POLICY_PACK) assert_true(fill > 0.95);  // best fit over a window of short pieces
        if (policy == PM_POLICY_PAD) assert_true(fill < 0.9);    // lognormal lengths waste padding
        batch_free(&b);
        bench_synth_free(&s);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The profiler's GPU-event path, over a backend whose "events" are host timestamps.

static int g_live_events;
static void *fake_event_record(void) {
    double *e = pm_malloc(sizeof(double));
    *e = pm_now();
    g_live_events++;
    return e;
}
static float fake_event_ms(void *a, void *b) { return (float)(1e3 * (*(double *)b - *(double *)a)); }
static void fake_event_release(void *e) {
    free(e);
    g_live_events--;
}
static int g_syncs;
static void fake_sync(void) { g_syncs++; }

static void test_profiler_event_path(void **state) {
    Backend fake = *backend_cpu();
    fake.synchronize = fake_sync;
    fake.event_record = fake_event_record;
    fake.event_elapsed_ms = fake_event_ms;
    fake.event_release = fake_event_release;
    Profiler p;
    prof_init(&p, &fake, 1);
    assert_int_equal(p.use_events, 1);
    for (int step = 0; step < 2; step++) {
        g_syncs = 0;
        prof_step_begin(&p);
        for (int l = 0; l < 3; l++) {
            prof_hook(&p, "fwd.scan", 1);
            usleep(4000);
            prof_hook(&p, "fwd.scan", 0);
            prof_hook(&p, "fwd.conv", 1);
            usleep(1000);
            prof_hook(&p, "fwd.conv", 0);
        }
        assert_int_equal(g_syncs, 0);  // no synchronize inside the step: that is the point of events
        prof_step_end(&p, 1);
        assert_true(p.step_s >= p.ev[p.n_ev - 1].t1);
        assert_int_equal(g_live_events, 0);  // every event went back to the pool
    }
    assert_int_equal(p.steps, 2);
    int ks = prof_key(&p, "fwd.scan"), kc = prof_key(&p, "fwd.conv");
    assert_true(ks >= 0 && kc >= 0);
    assert_int_equal(p.calls[ks], 6);
    assert_true(p.total_s[ks] >= 6 * 0.004 && p.total_s[ks] < 6 * 0.004 + 0.5);
    assert_true(p.total_s[kc] >= 6 * 0.001 && p.total_s[kc] < p.total_s[ks]);
    // the last step's events, in order, with their call numbers and increasing times
    assert_int_equal(p.n_ev, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(p.ev[i].call, i / 2);
        assert_true(p.ev[i].t1 >= p.ev[i].t0);
        if (i) assert_true(p.ev[i].t0 >= p.ev[i - 1].t1);
    }
    // without events: a synchronize around every region
    Profiler h;
    prof_init(&h, &fake, 0);
    g_syncs = 0;
    prof_step_begin(&h);
    prof_hook(&h, "fwd.scan", 1);
    prof_hook(&h, "fwd.scan", 0);
    prof_step_end(&h, 1);
    assert_int_equal(g_syncs, 4);  // step begin, region begin and end, step end
    prof_free(&h);
    prof_free(&p);
}

// ---------------------------------------------------------------------------------------------------------------
// NVML over a fake library: the sampler tags readings and summarizes them.

static int fake_init(void) { return 0; }
static int fake_shutdown(void) { return 0; }
static int fake_handle(unsigned i, void **d) { return i == 0 ? (*d = (void *)0x1, 0) : 2; }
static int fake_clock(void *d, int type, unsigned *v) { return *v = type == NVML_SM_CLOCK ? 1980 : 3201, 0; }
static int fake_power(void *d, unsigned *mw) { return *mw = 450000, 0; }
static int fake_temp(void *d, int s, unsigned *c) { return 3; }  // not supported: reported as missing
static int fake_name(void *d, char *b, unsigned n) { return snprintf(b, n, "Fake H200"), 0; }
static int fake_power_limit(void *d, unsigned *mw) { return *mw = 700000, 0; }
static unsigned long long g_fake_mj = 5000000;  // the energy counter: 0.25 J more at every reading
static int fake_energy(void *d, unsigned long long *mj) { return *mj = (g_fake_mj += 250), 0; }
// a device drawing 700 W whose counter the driver moves every 100 ms (as real ones move in steps)
static double g_stepped_t0;
static int fake_energy_stepped(void *d, unsigned long long *mj) {
    const double t = pm_now() - g_stepped_t0;
    *mj = (unsigned long long)(700e3 * 0.1 * floor(t / 0.1));
    return 0;
}
// a cycle of three readings: not reported (an error code), the power cap, idle
static int g_reason_calls;
static int fake_reasons(void *d, unsigned long long *mask) {
    const int k = g_reason_calls++ % 3;
    if (k == 0) return 3;
    *mask = k == 1 ? NVML_REASON_SW_POWER_CAP : 0x1;
    return 0;
}

// The fake library's table: clocks, power, name, power limit and clock event reasons; no temperature, no energy.
static NvmlApi fake_api(void) {
    NvmlApi a;
    memset(&a, 0, sizeof a);
    a.init = fake_init, a.shutdown = fake_shutdown, a.get_handle = fake_handle, a.clock = fake_clock;
    a.max_clock = fake_clock, a.power = fake_power, a.temperature = fake_temp, a.name = fake_name;
    a.power_limit = fake_power_limit, a.clock_reasons = fake_reasons;
    return a;
}

// Samples every period_ms for usec microseconds under `tag`, stops the sampler and summarizes that tag.
static void sample_tagged(NvmlProbe *p, int period_ms, int tag, unsigned usec, NvmlSummary *s) {
    assert_int_equal(nvml_start(p, period_ms), 0);
    nvml_set_tag(p, tag);
    usleep(usec);
    nvml_set_tag(p, -1);
    nvml_stop(p);
    nvml_summary(p, tag, s);
}

static void test_nvml_sampler_with_fake_library(void **state) {
    NvmlApi a = fake_api();
    char why[256];
    assert_null(nvml_open_api(&a, 1, NULL, why, sizeof why));
    assert_non_null(strstr(why, "device 1"));
    NvmlProbe *p = nvml_open_api(&a, 0, NULL, why, sizeof why);
    assert_non_null(p);
    assert_string_equal(nvml_device_name(p), "Fake H200");
    assert_int_equal(nvml_max_sm_mhz(p), 1980);
    assert_true(fabs(nvml_power_limit_w(p) - 700.0) < 1e-9);
    NvmlSummary s;
    sample_tagged(p, 2, 5, 60000, &s);
    assert_true(s.samples >= 3);
    assert_true(s.sm_mhz.n == s.samples && s.sm_mhz.mean == 1980 && s.sm_mhz.min == 1980);
    assert_true(s.mem_mhz.mean == 3201);
    assert_true(fabs(s.power_w.mean - 450) < 1e-3);
    assert_int_equal(s.temp_c.n, 0);  // the fake reports no temperature
    assert_true(isnan(s.temp_c.mean));
    // clock event reasons: consecutive readings cycle through unreported / power cap / idle
    assert_true(s.reasons_n < s.samples && s.reasons_n >= (2 * s.samples) / 3 - 1);
    assert_true(s.power_cap_n >= 1 && abs(2 * s.power_cap_n - s.reasons_n) <= 1);
    assert_int_equal(s.thermal_n, 0);
    assert_int_equal(s.hw_slowdown_n, 0);
    int n_all = 0;
    NvmlSample *all = nvml_samples(p, &n_all);
    int unreported = 0;
    for (int i = 0; i < n_all; i++) unreported += all[i].reasons < 0;
    assert_true(unreported >= n_all / 3 - 1 && unreported <= n_all / 3 + 1);
    free(all);
    nvml_summary(p, 9, &s);
    assert_int_equal(s.samples, 0);
    nvml_close(p);
    // a missing library is a reason, not a crash
    assert_null(nvml_open("libnvidia-ml-not-here.so.1", 0, NULL, why, sizeof why));
    assert_non_null(strstr(why, "libnvidia-ml-not-here.so.1"));
}

// Two devices told apart by UUID (as ranks of a data-parallel run and CUDA_VISIBLE_DEVICES need): the device a
// UUID names is the one opened, whatever the index says; an unknown UUID is a reason; a library without the
// lookup falls back to the index; without nvmlDeviceGetUUID the UUID reads "".
static int g_dev[2];
static int fake_handle2(unsigned i, void **d) { return i < 2 ? (*d = &g_dev[i], 0) : 2; }
static int fake_by_uuid(const char *u, void **d) {
    if (!strcmp(u, "GPU-aaaa")) return *d = &g_dev[0], 0;
    if (!strcmp(u, "GPU-bbbb")) return *d = &g_dev[1], 0;
    return 6;  // NVML_ERROR_NOT_FOUND
}
static int fake_uuid2(void *d, char *b, unsigned n) {
    return snprintf(b, n, "GPU-%s", d == &g_dev[0] ? "aaaa" : "bbbb"), 0;
}
static int fake_name2(void *d, char *b, unsigned n) { return snprintf(b, n, "card %d", d == &g_dev[0] ? 0 : 1), 0; }

static void test_nvml_device_by_uuid(void **state) {
    NvmlApi a = fake_api();
    a.get_handle = fake_handle2, a.name = fake_name2, a.uuid = fake_uuid2, a.get_handle_by_uuid = fake_by_uuid;
    char why[256];
    NvmlProbe *p = nvml_open_api(&a, 0, "GPU-bbbb", why, sizeof why);
    assert_non_null(p);
    assert_string_equal(nvml_device_name(p), "card 1");
    assert_string_equal(nvml_device_uuid(p), "GPU-bbbb");
    nvml_close(p);
    p = nvml_open_api(&a, 1, NULL, why, sizeof why);  // no UUID: the index
    assert_string_equal(nvml_device_name(p), "card 1");
    nvml_close(p);
    assert_null(nvml_open_api(&a, 0, "GPU-cccc", why, sizeof why));
    assert_non_null(strstr(why, "GPU-cccc"));
    a.get_handle_by_uuid = NULL;  // an NVML without the lookup: the index
    p = nvml_open_api(&a, 0, "GPU-bbbb", why, sizeof why);
    assert_string_equal(nvml_device_name(p), "card 0");
    nvml_close(p);
    a.uuid = NULL;
    p = nvml_open_api(&a, 1, NULL, why, sizeof why);
    assert_string_equal(nvml_device_uuid(p), "");
    nvml_close(p);
}

// The energy counter: absent, read as joules, and (counters move in steps) its rate between moves.
static void test_nvml_energy_with_fake_counters(void **state) {
    NvmlApi a = fake_api();
    char why[256];
    NvmlProbe *p = nvml_open_api(&a, 0, NULL, why, sizeof why);
    assert_true(isnan(nvml_energy_j(p)));  // not counted by this device
    nvml_close(p);
    a.energy = fake_energy;
    p = nvml_open_api(&a, 0, NULL, why, sizeof why);
    const double e0 = nvml_energy_j(p), e1 = nvml_energy_j(p);
    assert_true(fabs(e0 - 5000.25) < 1e-9 && fabs(e1 - e0 - 0.25) < 1e-9);
    nvml_close(p);
    // the mean power between the counter's moves recovers the 700 W that a difference of two readings at
    // arbitrary times gets wrong by up to a step (70 J) at each end
    a.energy = fake_energy_stepped;
    g_stepped_t0 = pm_now() - 0.05;
    p = nvml_open_api(&a, 0, NULL, why, sizeof why);
    NvmlSummary s;
    sample_tagged(p, 5, 1, 750000, &s);
    assert_true(s.energy_updates >= 5 && s.energy_updates <= 9);
    assert_true(s.energy_window_s > 0.35 && s.energy_window_s < 0.85);
    if (fabs(s.energy_rate_w - 700.0) > 35.0) fail_msg("energy rate %.1f W, not ~700", s.energy_rate_w);
    // an interval's energy: by that rate where it is known, else the counter's difference given
    int by_rate = -1;
    assert_true(fabs(nvml_interval_energy_j(&s, 2.0, 1.0, &by_rate) - 2.0 * s.energy_rate_w) < 1e-9 && by_rate == 1);
    NvmlSummary none = s;
    none.energy_updates = 1;
    assert_true(nvml_interval_energy_j(&none, 2.0, 1234.5, &by_rate) == 1234.5 && by_rate == 0);
    nvml_close(p);
}

// ---------------------------------------------------------------------------------------------------------------
// Real documents: prepare a small corpus (byte tokenizer) and compare the policies on it.

static void test_policies_on_prepared_data(void **state) {
    char in[600], data[600], out[600];
    snprintf(in, sizeof in, "%s/docs.jsonl", g_tmp);
    snprintf(data, sizeof data, "%s/data", g_tmp);
    snprintf(out, sizeof out, "%s/policies", g_tmp);
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    PmRng r;
    pm_rng_seed(&r, 5);
    for (int d = 0; d < 200; d++) {
        int n = 5 + (int)(pm_rng_u64(&r) % 120);  // 5..124 bytes
        fputs("{\"text\": \"", f);
        for (int k = 0; k < n; k++) fputc('a' + (int)(pm_rng_u64(&r) % 26), f);
        fputs("\"}\n", f);
    }
    fclose(f);
    const char *pargv[] = {"prepare", "--out", data, "--val-fraction", "0", in};
    assert_int_equal(cmd_prepare(6, (char **)pargv), 0);
    // a sweep file: the policies on the prepared data, and an entry whose data directory is missing (skipped)
    char sweep[700], text[1600];
    snprintf(text, sizeof text,
             "{\"steps\": 3, \"warmup\": 0, \"sweeps\": ["
             "{\"n_layer\": 1, \"d_model\": 32, \"seq_len\": 128, \"batch\": 4, \"policy\": [\"single\", \"pad\", \"pack\"], \"data\": \"%s\"},"
             "{\"n_layer\": 1, \"d_model\": 32, \"seq_len\": 128, \"batch\": 4, \"policy\": \"pack\", \"data\": \"%s/none\"}]}",
             data, g_tmp);
    put_file("policies.json", text, sweep, sizeof sweep);
    const char *argv[] = {"bench", "--sweep", sweep, "--no-plots", "--out", out};
    assert_int_equal(cmd_bench(sizeof argv / sizeof argv[0], (char **)argv), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    assert_non_null(j);
    json_t *c = json_object_get(j, "configs");
    assert_int_equal(json_array_size(c), 4);
    json_t *sk = json_array_get(c, 3);
    assert_true(!strncmp(json_string_value(json_object_get(sk, "status")), "skipped", 7));
    assert_non_null(strstr(json_string_value(json_object_get(sk, "status")), "none"));
    double fill[3];
    for (int i = 0; i < 3; i++) {
        json_t *x = json_array_get(c, i);
        assert_string_equal(json_string_value(json_object_get(x, "status")), "ok");
        assert_true(num(x, "tok_per_s") > 0);
        assert_int_equal((int)num(json_object_get(x, "model"), "vocab_size"), 257);  // the data's tokenizer
        fill[i] = num(x, "fill");
    }
    assert_true(fill[0] == 1.0);                     // single: one whole document, no padding
    assert_true(fill[2] > fill[1]);                  // pack fills rows better than padding to the longest
    assert_true(num(json_array_get(c, 0), "computed_tokens_per_step") <= 128);
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_have_every_configuration),
        cmocka_unit_test(test_op_times_add_up_to_the_step),
        cmocka_unit_test(test_op_calls_memory_and_flops_follow_the_model),
        cmocka_unit_test(test_scan_cost_counts_the_checkpoint_pass),
        cmocka_unit_test(test_op_floor_is_the_busiest_unit),
        cmocka_unit_test(test_trace_is_a_chrome_trace),
        cmocka_unit_test(test_report_renders_every_configuration),
        cmocka_unit_test(test_report_can_be_remade),
        cmocka_unit_test(test_report_plots_the_clocks),
        cmocka_unit_test(test_timed_warmup),
        cmocka_unit_test(test_sweep_lists),
        cmocka_unit_test(test_warmup_bound),
        cmocka_unit_test(test_sweep_file),
        cmocka_unit_test(test_synthetic_batches),
        cmocka_unit_test(test_profiler_event_path),
        cmocka_unit_test(test_nvml_sampler_with_fake_library),
        cmocka_unit_test(test_nvml_energy_with_fake_counters),
        cmocka_unit_test(test_nvml_device_by_uuid),
        cmocka_unit_test(test_policies_on_prepared_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
