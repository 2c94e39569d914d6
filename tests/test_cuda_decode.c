// test_cuda_decode.c — decoding on the GPU (cuda_decode.cu) against the host decoder (generate.c), which
// test_generate checks against the parallel forward. Skipped without a GPU.
// - Steps: the same tokens fed to both give the same logits (fp32 both; the GPU's sums run in other orders) at
//   every position, with the CUDA graph (replayed from the second token) and programmatic dependent launches,
//   and without either (PM_DECODE_GRAPH=0 PM_DECODE_PDL=0).
// - Prefill: after the CUDA model's parallel forward over a prompt, the states the GPU rebuilds from its stored
//   activations and those the host rebuilds from the same tensors give the same logits after the prompt and along
//   a continuation; a decoder that had already decoded other tokens is reused, so the prefill must replace them.
// - Reset: a reset decoder decodes as a new one.
// - Lanes: a decoder of several sequences gives each the logits of a one-lane decoder, bit for bit.
// - Refusals: a model on the CPU backend, and a width the kernels do not take, each with its reason.
// - The command: greedy `generate --device cuda` writes the host decoder's text through every prefill path.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_decode.h"
#include "generate.h"
#include "logits.h"
#include "shell.h"
#include "model.h"
#include "util.h"

static const Backend *G;

// A random model (the same weights on the CPU and on the GPU, from one seed) with strong mixers, so that the logits
// depend on the states and not only on the last token.
static void make_model(Model *m, const Backend *bk, int T) {
    ModelConfig c = {.n_layer = 3, .d_model = 64, .vocab_size = 301};
    config_derive(&c);
    model_create(m, &c, bk, 4);
    float *w = pm_malloc(m->n_params * sizeof(float));
    PmRng rng;
    pm_rng_seed(&rng, 8);
    for (size_t i = 0; i < m->n_params; i++) w[i] = 0.1f * pm_rng_normal(&rng);
    for (int l = 0; l < c.n_layer; l++) {  // A = -exp(A_log) from -1 to -16 as at initialization, D 1, norms 1
        for (int ch = 0; ch < c.d_inner; ch++)
            for (int n = 0; n < c.d_state; n++)
                w[m->tensors[model_tensor_index(&c, l, P_A_LOG)].offset + ch * c.d_state + n] = logf(n + 1.0f);
        const ParamInfo *p = &m->tensors[model_tensor_index(&c, l, P_OUT_PROJ)];
        for (size_t i = 0; i < p->size; i++) w[p->offset + i] *= 10;
        const ParamInfo *nw = &m->tensors[model_tensor_index(&c, l, P_NORM)];
        for (size_t i = 0; i < nw->size; i++) w[nw->offset + i] = 1.0f;
    }
    for (size_t i = 0; i < m->tensors[0].size; i++) w[i] *= 5;
    model_set_params(m, w);
    free(w);
    model_alloc_activations(m, 1, T);
}

static void random_tokens(int32_t *tok, int n, int V, uint64_t seed) {
    PmRng rng;
    pm_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(pm_rng_u64(&rng) % V);
}

// Feeds tok to both decoders; returns the worst relative logit difference (and fails above 1e-4).
static double feed_both(Decoder *host, Decoder *gpu, const int32_t *tok, int n, int Vp, const char *what) {
    double worst = 0;
    for (int t = 0; t < n; t++) {
        const float *a = decoder_step(host, tok[t]), *b = decoder_step(gpu, tok[t]);
        double e = rel_diff(b, a, Vp);
        if (e > worst) worst = e;
        if (!(e <= 1e-4)) {
            fprintf(stderr, "%s, position %d: GPU vs host logits differ by %.3g (relative)\n", what, t, e);
            fail();
        }
    }
    return worst;
}

static void test_steps_match_host(void **state) {
    (void)state;
    if (!G) {
        skip();
        return;
    }
    const int T = 16, n = 64;
    Model mc, mg;
    make_model(&mc, backend_cpu(), T);
    make_model(&mg, G, T);
    const int Vp = mc.cfg.vocab_pad;
    int32_t tok[64];
    random_tokens(tok, n, mc.cfg.vocab_size, 3);
    Decoder *host = decoder_create(&mc), *gpu = decoder_create_cuda(&mg);
    assert_non_null(gpu);
    double w = feed_both(host, gpu, tok, n, Vp, "graph");
    fprintf(stderr, "GPU vs host decoding (CUDA graph from the second token): worst relative difference %.3g over %d "
                    "tokens\n", w, n);
    // without the graph and without dependent launches: every kernel launched each token after the one before
    // has finished; the same numbers as with both (a missing wait would read a half-written input)
    setenv("PM_DECODE_GRAPH", "0", 1), setenv("PM_DECODE_PDL", "0", 1);
    Decoder *eager = decoder_create_cuda(&mg);
    unsetenv("PM_DECODE_GRAPH"), unsetenv("PM_DECODE_PDL");
    Decoder *gpu2 = decoder_create_cuda(&mg);
    for (int t = 0; t < n; t++) {
        const float *a = decoder_step(eager, tok[t]), *b = decoder_step(gpu2, tok[t]);  // (each its own buffer)
        double e = rel_diff(b, a, Vp);
        if (!(e <= 1e-6)) {
            fprintf(stderr, "position %d: graph vs launched kernels differ by %.3g\n", t, e);
            fail();
        }
    }
    // reset: a new document from both
    decoder_reset(host), decoder_reset(gpu);
    random_tokens(tok, n, mc.cfg.vocab_size, 4);
    w = feed_both(host, gpu, tok, 20, Vp, "after reset");
    fprintf(stderr, "after a reset: worst relative difference %.3g\n", w);
    decoder_free(host), decoder_free(gpu), decoder_free(eager), decoder_free(gpu2);
    model_destroy(&mc), model_destroy(&mg);
}

static void test_prefill_matches_host_rebuild(void **state) {
    (void)state;
    if (!G) {
        skip();
        return;
    }
    const int T = 48;
    Model mg;  // deterministic: the host's and the GPU's prefills run the forward each, and must see the same bits
    make_model(&mg, backend_cuda(1), T);
    const int Vp = mg.cfg.vocab_pad, V = mg.cfg.vocab_size, K = mg.cfg.d_conv;
    const int lens[] = {1, K - 1, K, 37, 113};
    int32_t tok[113], cont[16];
    Decoder *gpu = decoder_create_cuda(&mg);  // reused: a prefill must replace what it held
    assert_non_null(gpu);
    for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
        const int n = lens[li];
        random_tokens(tok, n, V, 20 + li);
        random_tokens(cont, 16, V, 40 + li);
        for (int i = 0; i < 3; i++) decoder_step(gpu, cont[i]);  // stale states
        Decoder *host = decoder_create(&mg);  // the host rebuild, from the same stored activations
        const float *a = decoder_prefill(host, &mg, tok, n);
        const float *b = decoder_prefill(gpu, &mg, tok, n);  // the forward runs again: the same activations
        double e = rel_diff(b, a, Vp);
        if (!(e <= 1e-4)) {
            fprintf(stderr, "prompt of %d tokens: logits after the prefill differ by %.3g\n", n, e);
            fail();
        }
        double w = feed_both(host, gpu, cont, 16, Vp, "continuation");
        fprintf(stderr, "prompt %3d tokens: GPU vs host state rebuild, after the prompt %.3g, continuation worst %.3g\n",
                n, e, w);
        decoder_free(host);
    }
    decoder_free(gpu);
    model_destroy(&mg);
}

// Lanes (generate --samples): a GPU decoder of S lanes, prefilled into lane 0 and filled, each lane fed its own
// tokens, gives bit for bit the logits of one-lane GPU decoders fed each lane's tokens (each lane's arithmetic is the
// one-lane kernels', in the same order), and the host's within 1e-4; at S = 3 and at the most lanes, 8. More than 8
// lanes are refused with a reason.
static void test_lanes_match_one_lane(void **state) {
    (void)state;
    if (!G) {
        skip();
        return;
    }
    const int T = 48, n = 30, steps = 10;
    Model mg;
    make_model(&mg, backend_cuda(1), T);
    const int Vp = mg.cfg.vocab_pad, V = mg.cfg.vocab_size;
    int32_t prompt[30], tok[10][CUDA_DECODE_MAX_LANES];
    random_tokens(prompt, n, V, 50);
    random_tokens(&tok[0][0], steps * CUDA_DECODE_MAX_LANES, V, 51);
    const int sizes[] = {3, CUDA_DECODE_MAX_LANES};
    for (int si = 0; si < 2; si++) {
        const int S = sizes[si];
        Decoder *d = decoder_create_cuda_lanes(&mg, S);
        assert_non_null(d);
        assert_int_equal(decoder_lanes(d), S);
        decoder_prefill(d, &mg, prompt, n);
        decoder_fill_lanes(d);
        float *lanes = pm_malloc(sizeof(float) * steps * S * Vp);  // (steps, S, Vp)
        for (int k = 0; k < steps; k++)
            memcpy(lanes + (size_t)k * S * Vp, decoder_step_lanes(d, tok[k]), sizeof(float) * S * Vp);
        double worst = 0;
        for (int s = 0; s < S; s++) {
            Decoder *one = decoder_create_cuda(&mg), *host = decoder_create(&mg);
            decoder_prefill(one, &mg, prompt, n);
            decoder_prefill(host, &mg, prompt, n);
            for (int k = 0; k < steps; k++) {
                const float *l = lanes + ((size_t)k * S + s) * Vp;
                assert_memory_equal(decoder_step(one, tok[k][s]), l, sizeof(float) * Vp);
                const double e = rel_diff(l, decoder_step(host, tok[k][s]), Vp);
                if (e > worst) worst = e;
            }
            decoder_free(one), decoder_free(host);
        }
        fprintf(stderr, "%d lanes: each the one-lane decoder's bits; against the host, worst relative difference %.3g\n", S,
                worst);
        assert_true(worst <= 1e-4);
        free(lanes);
        decoder_free(d);
    }
    assert_null(decoder_create_cuda_lanes(&mg, CUDA_DECODE_MAX_LANES + 1));
    assert_non_null(strstr(pm_last_error(), "lanes"));
    model_destroy(&mg);
}

static void test_cpu_model_refused(void **state) {
    (void)state;
    Model mc;
    make_model(&mc, backend_cpu(), 8);
    assert_null(decoder_create_cuda(&mc));
    assert_non_null(strstr(pm_last_error(), "CUDA backend"));
    model_destroy(&mc);
}

// Timing (PM_BENCH=1; asserts nothing): a token's decoding step on the GPU for the presets' shapes (freshly
// initialized weights, vocabulary 50277 as the official checkpoints'), against the floor of reading every fp32
// weight once at the copy bandwidth the bench measures (~4.2 TB/s on the H200).
static void test_decode_speed(void **state) {
    (void)state;
    if (!G || !getenv("PM_BENCH")) {
        skip();
        return;
    }
    const char *presets[] = {"130m", "370m", "1.4b"};
    for (int p = 0; p < 3; p++) {
        ModelConfig c;
        assert_int_equal(config_preset(presets[p], 50277, &c), 0);
        Model m;
        model_create(&m, &c, G, 1);
        const char *modes[] = {"graph+pdl", "graph", "pdl", "eager"};  // the CUDA graph, dependent launches
        for (int mode = 0; mode < 4; mode++) {
            const int graph = mode < 2;
            setenv("PM_DECODE_GRAPH", graph ? "1" : "0", 1);
            setenv("PM_DECODE_PDL", mode % 2 == 0 ? "1" : "0", 1);
            Decoder *d = decoder_create_cuda(&m);
            unsetenv("PM_DECODE_GRAPH"), unsetenv("PM_DECODE_PDL");
            int tok = 1;
            for (int i = 0; i < 20; i++) tok = (int)(decoder_step(d, tok)[0] > 0) + 2 * i;  // warm-up; graph capture
            const int n = 200;
            double t0 = pm_now();
            for (int i = 0; i < n; i++) decoder_step(d, (i * 7919) % c.vocab_size);
            double ms = (pm_now() - t0) / n * 1e3, gb = (double)m.n_params * 4 / 1e9;
            printf("    decode %-5s %-9s %.3f ms a token (%.0f tok/s); fp32 weights %.2f GB: %.2f TB/s, floor %.3f ms at "
                   "4.2 TB/s\n", presets[p], modes[mode], ms, 1e3 / ms, gb, gb / ms, gb / 4.2);
            decoder_free(d);
        }
        for (int S = 2; S <= CUDA_DECODE_MAX_LANES; S *= 2) {  // lanes: S tokens a step (graph+pdl)
            Decoder *d = decoder_create_cuda_lanes(&m, S);
            int32_t tk[CUDA_DECODE_MAX_LANES];
            for (int i = 0; i < 20; i++) {
                for (int s = 0; s < S; s++) tk[s] = (i * 31 + s) % c.vocab_size;
                decoder_step_lanes(d, tk);
            }
            const int n = 200;
            double t0 = pm_now();
            for (int i = 0; i < n; i++) {
                for (int s = 0; s < S; s++) tk[s] = (i * 7919 + s * 104729) % c.vocab_size;
                decoder_step_lanes(d, tk);
            }
            double ms = (pm_now() - t0) / n * 1e3;
            printf("    decode %-5s %d lanes   %.3f ms a step (%.0f tok/s)\n", presets[p], S, ms, S * 1e3 / ms);
            decoder_free(d);
        }
        model_destroy(&m);
    }
}

// A width the kernels do not take (d_model not a multiple of 4: their 16-byte loads) is refused with a reason,
// which generate prints before decoding on the host.
static void test_odd_width_refused(void **state) {
    (void)state;
    if (!G) {
        skip();
        return;
    }
    ModelConfig c = {.n_layer = 1, .d_model = 30, .vocab_size = 61};
    config_derive(&c);
    Model m;
    model_create(&m, &c, G, 4);
    assert_null(decoder_create_cuda(&m));
    assert_non_null(strstr(pm_last_error(), "d_model a multiple of 4"));
    model_destroy(&m);
}

// The command as a user runs it (PM_BIN): a tiny model trained for a few steps on the CPU, then `generate
// --device cuda` greedy. Decoded on the GPU it writes the host decoder's text (--decode host), through every
// prefill path: parallel, recurrent, parallel for one token then recurrent, and an empty prompt. --samples
// restores the GPU's states before each sample.
static void test_cli_greedy_matches_host(void **state) {
    (void)state;
    const char *bin = getenv("PM_BIN");
    if (!G || !bin) {
        skip();
        return;
    }
    char dir[] = "/tmp/pm_decode_XXXXXX";
    assert_non_null(mkdtemp(dir));
    FILE *f;
    char path[256];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    assert_non_null(f = fopen(path, "w"));
    for (int i = 0; i < 400; i++) fprintf(f, "line %d: the kernel schedules task %d on cpu %d.\n", i, i * 7 % 13, i % 4);
    fclose(f);
    assert_int_equal(sh("%s prepare --out %s/data %s >/dev/null 2>&1", bin, dir, path), 0);
    assert_int_equal(sh("%s train --data %s/data --out %s/run --preset tiny --seq-len 64 --batch 2 --steps 30 "
                        "--log-every 0 >/dev/null 2>&1", bin, dir, dir), 0);
    size_t bytes;
    const char *prompts[] = {"line 12: the", ""};
    const char *paths[] = {"", "--prefill recurrent", "--prefill-max 1"};
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++) {
            char *text[2];
            for (int host = 0; host < 2; host++) {
                char out[300];
                snprintf(out, sizeof out, "%s/out_%d_%d_%d.txt", dir, p, q, host);
                assert_int_equal(sh("%s generate --checkpoint %s/run --device cuda --decode %s --prompt '%s' --tokens 120 "
                                    "--temperature 0 --no-stop %s >%s 2>%s.log", bin, dir, host ? "host" : "device",
                                    prompts[p], paths[q], out, out), 0);
                text[host] = pm_read_file(out, &bytes);
                assert_non_null(text[host]);
            }
            if (strcmp(text[0], text[1]) != 0) {
                fprintf(stderr, "prompt '%s' %s: GPU and host decoding wrote different text:\n%s\n---\n%s\n",
                        prompts[p], paths[q], text[0], text[1]);
                fail();
            }
            assert_true(strlen(text[0]) > strlen(prompts[p]) + 20);  // it generated something
            free(text[0]), free(text[1]);
        }
    // --samples: the GPU decoder's states restored before each sample, so the third of three (seed 5 + 2) is a
    // run of one with seed 7
    char out[300], one[300];
    snprintf(out, sizeof out, "%s/samples.txt", dir);
    snprintf(one, sizeof one, "%s/one.txt", dir);
    const char *sampling = "--device cuda --prompt 'line 3' --tokens 80 --temperature 1 --top-k 20 --no-stop";
    assert_int_equal(sh("%s generate --checkpoint %s/run %s --seed 5 --samples 3 >%s 2>/dev/null && %s generate "
                        "--checkpoint %s/run %s --seed 7 >%s 2>/dev/null", bin, dir, sampling, out, bin, dir, sampling,
                        one), 0);
    char *all = pm_read_file(out, &bytes), *alone = pm_read_file(one, &bytes);
    const char *third = strstr(all, "=== sample 3 of 3 ===\n");
    assert_non_null(third);
    assert_string_equal(third + strlen("=== sample 3 of 3 ===\n"), alone);
    free(all), free(alone);
    char log[300];
    snprintf(log, sizeof log, "%s/out_0_0_0.txt.log", dir);
    char *l = pm_read_file(log, &bytes);
    assert_non_null(strstr(l, "decoded on the GPU"));
    free(l);
    snprintf(log, sizeof log, "%s/out_0_0_1.txt.log", dir);
    l = pm_read_file(log, &bytes);
    assert_non_null(strstr(l, "decoded on the host"));
    free(l);
    sh("rm -rf %s", dir);
}

int main(void) {
    G = backend_cuda(0);
    if (!G) printf("no GPU (%s): GPU decoding tests skipped\n", pm_last_error());
    if (getenv("PM_TEST_FILTER")) cmocka_set_test_filter(getenv("PM_TEST_FILTER"));  // e.g. "test_decode_speed"
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_model_refused),
        cmocka_unit_test(test_odd_width_refused),
        cmocka_unit_test(test_steps_match_host),
        cmocka_unit_test(test_prefill_matches_host_rebuild),
        cmocka_unit_test(test_lanes_match_one_lane),
        cmocka_unit_test(test_cli_greedy_matches_host),
        cmocka_unit_test(test_decode_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
