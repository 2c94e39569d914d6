// test_generate.c — recurrent decoding (generate.c, one token at a time with conv and SSM states) against the
// parallel forward (model.c over the CPU backend): the same logits at every position, and greedy generation picks
// the same tokens as re-running the full forward at each step. Prefill through the parallel forward
// (decoder_prefill) leaves the same states as feeding the prompt token by token: same logits after the prompt and
// along a greedy continuation.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "logits.h"
#include "model.h"
#include "util.h"

static void make_model(Model *m, int T) {
    ModelConfig c = {.n_layer = 3, .d_model = 32, .vocab_size = 61};
    config_derive(&c);
    model_create(m, &c, backend_cpu(), 4);
    float *w = pm_malloc(m->n_params * sizeof(float));
    model_get_params(m, w);
    PmRng rng;
    pm_rng_seed(&rng, 8);
    for (size_t i = 0; i < m->n_params; i++) w[i] += 0.1f * pm_rng_normal(&rng);
    for (size_t i = 0; i < m->tensors[0].size; i++) w[i] *= 5;  // larger logits: greedy choices are clear
    // Strong mixers, so that the tied head does not simply predict the input token again.
    for (int l = 0; l < c.n_layer; l++) {
        const ParamInfo *p = &m->tensors[model_tensor_index(&c, l, P_OUT_PROJ)];
        for (size_t i = 0; i < p->size; i++) w[p->offset + i] *= 30;
    }
    model_set_params(m, w);
    free(w);
    model_alloc_activations(m, 1, T);
}

static void fill_row(Batch *b, const int32_t *tok, int n) {
    b->B = 1, b->T = n;
    for (int i = 0; i < n; i++) b->tokens[i] = tok[i], b->pos[i] = i, b->targets[i] = PM_IGNORE, b->doc[i] = 0;
    batch_count_valid(b);
}

static void test_recurrent_logits_match_parallel(void **state) {
    (void)state;
    const int T = 48;
    Model m;
    make_model(&m, T);
    const int Vp = m.cfg.vocab_pad;
    int32_t tok[48];
    PmRng rng;
    pm_rng_seed(&rng, 3);
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(pm_rng_u64(&rng) % m.cfg.vocab_size);
    Batch b = batch_alloc(1, T);
    fill_row(&b, tok, T);
    float *par = pm_malloc(sizeof(float) * T * Vp);
    model_forward(&m, &b, par);
    Decoder *d = decoder_create(&m);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        const float *rec = decoder_step(d, tok[t]);
        double num = 0, den = 0;
        for (int v = 0; v < Vp; v++) {
            double e = rec[v] - par[(size_t)t * Vp + v];
            num += e * e, den += (double)rec[v] * rec[v];
        }
        double r = sqrt(num / den);
        if (r > worst) worst = r;
        if (r > 1e-4) {
            fprintf(stderr, "position %d: recurrent vs parallel logits differ by %.3g (relative)\n", t, r);
            fail();
        }
    }
    fprintf(stderr, "recurrent vs parallel logits: worst relative difference %.3g over %d positions\n", worst, T);
    decoder_free(d);
    free(par);
    batch_free(&b);
    model_destroy(&m);
}

static void test_greedy_generation_matches_full_forward(void **state) {
    (void)state;
    const int T = 40, prompt = 5;
    Model m;
    make_model(&m, T);
    const int Vp = m.cfg.vocab_pad, V = m.cfg.vocab_size;
    int32_t seq[40] = {7, 3, 19, 42, 11};
    Decoder *d = decoder_create(&m);
    const float *logits = NULL;
    for (int i = 0; i < prompt; i++) logits = decoder_step(d, seq[i]);
    int32_t rec[40];
    for (int i = prompt; i < T; i++) {
        rec[i] = sample_token(logits, V, 0.0f, 0, 1.0f, NULL);
        logits = decoder_step(d, rec[i]);
    }
    Batch b = batch_alloc(1, T);
    float *par = pm_malloc(sizeof(float) * T * Vp);
    int distinct = 0;
    for (int n = prompt; n < T; n++) {  // full forward over everything so far, argmax at the last position
        fill_row(&b, seq, n);
        model_forward(&m, &b, par);
        seq[n] = sample_token(par + (size_t)(n - 1) * Vp, V, 0.0f, 0, 1.0f, NULL);
        assert_int_equal(seq[n], rec[n]);
        distinct += seq[n] != seq[n - 1];
    }
    assert_true(distinct > 3);  // the model is not stuck on one token, so the comparison means something
    decoder_free(d);
    free(par);
    batch_free(&b);
    model_destroy(&m);
}

static void test_parallel_prefill_matches_recurrent(void **state) {
    (void)state;
    const int T = 48, steps = 24;  // T: the model's row length; the longest prompt is over twice that
    Model m;
    make_model(&m, T);
    const int Vp = m.cfg.vocab_pad, V = m.cfg.vocab_size, K = m.cfg.d_conv;
    const int lens[] = {1, 2, K - 1, K, 37, 113};
    int32_t tok[113];
    PmRng rng;
    pm_rng_seed(&rng, 11);
    Decoder *dp = decoder_create(&m);  // reused: a prefill must replace whatever state the decoder had
    for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
        const int n = lens[li];
        for (int i = 0; i < n; i++) tok[i] = (int32_t)(pm_rng_u64(&rng) % V);
        for (int i = 0; i < 3; i++) decoder_step(dp, (int)(pm_rng_u64(&rng) % V));  // stale state to overwrite
        Decoder *dr = decoder_create(&m);
        const float *r = NULL;
        for (int i = 0; i < n; i++) r = decoder_step(dr, tok[i]);
        const float *p = decoder_prefill(dp, &m, tok, n);
        double worst = rel_diff(p, r, Vp);
        if (worst > 1e-4) {
            fprintf(stderr, "prompt of %d tokens: parallel vs recurrent prefill logits differ by %.3g\n", n, worst);
            fail();
        }
        int distinct = 0, prev = -1;
        for (int s = 0; s < steps; s++) {  // greedy continuation from both states
            int a = sample_token(r, V, 0.0f, 0, 1.0f, NULL), b = sample_token(p, V, 0.0f, 0, 1.0f, NULL);
            assert_int_equal(a, b);
            distinct += a != prev, prev = a;
            r = decoder_step(dr, a);
            p = decoder_step(dp, b);
            double e = rel_diff(p, r, Vp);
            if (e > 1e-4) {
                fprintf(stderr, "prompt of %d tokens, step %d: continuation logits differ by %.3g\n", n, s, e);
                fail();
            }
            if (e > worst) worst = e;
        }
        assert_true(distinct > 3);  // the continuation is not one repeated token
        fprintf(stderr, "prompt %3d tokens: parallel vs recurrent prefill, worst relative logit difference %.3g over "
                        "%d greedy steps\n", n, worst, steps);
        decoder_free(dr);
    }
    assert_true(m.T >= 113);  // the longest prompt did not fit a row: the activations were reallocated for it
    decoder_free(dp);
    model_destroy(&m);
}

// A decoder of several lanes (generate --samples): after a prefill into lane 0 and decoder_fill_lanes, each lane fed
// its own tokens gives, bit for bit, the logits of a one-lane decoder prefilled alike and fed that lane's tokens; the
// lanes' logits differ (their states are their own). save/restore covers every lane.
static void test_lanes_match_one_lane(void **state) {
    (void)state;
    const int T = 48, S = 3, n = 30, steps = 12;
    Model m;
    make_model(&m, T);
    const int Vp = m.cfg.vocab_pad, V = m.cfg.vocab_size;
    int32_t prompt[30], tok[12][3];
    PmRng rng;
    pm_rng_seed(&rng, 17);
    for (int i = 0; i < n; i++) prompt[i] = (int32_t)(pm_rng_u64(&rng) % V);
    for (int k = 0; k < steps; k++)
        for (int s = 0; s < S; s++) tok[k][s] = (int32_t)(pm_rng_u64(&rng) % V);
    Decoder *d = decoder_create_lanes(&m, S);
    assert_int_equal(decoder_lanes(d), S);
    decoder_prefill(d, &m, prompt, n);
    decoder_fill_lanes(d);
    decoder_save(d);
    float *lanes = pm_malloc(sizeof(float) * steps * S * Vp);  // (steps, S, Vp)
    for (int k = 0; k < steps; k++) memcpy(lanes + (size_t)k * S * Vp, decoder_step_lanes(d, tok[k]), sizeof(float) * S * Vp);
    for (int s = 0; s < S; s++) {
        Decoder *one = decoder_create(&m);
        decoder_prefill(one, &m, prompt, n);
        for (int k = 0; k < steps; k++)
            assert_memory_equal(decoder_step(one, tok[k][s]), lanes + ((size_t)k * S + s) * Vp, sizeof(float) * Vp);
        decoder_free(one);
    }
    assert_true(rel_diff(lanes + (size_t)(steps - 1) * S * Vp, lanes + ((size_t)(steps - 1) * S + 1) * Vp, Vp) > 1e-3);
    decoder_restore(d);  // every lane back to the prompt's state: the same logits again
    for (int k = 0; k < steps; k++)
        assert_memory_equal(decoder_step_lanes(d, tok[k]), lanes + (size_t)k * S * Vp, sizeof(float) * S * Vp);
    free(lanes);
    decoder_free(d);
    model_destroy(&m);
}

// A model set to recompute its in_proj outputs (Model.keep_in_proj 0, a training setting) keeps no per-layer xz,
// which the prefill reads: the prefill must still work on it (it allocates per-layer buffers again), with the same
// logits as on a model that keeps them.
static void test_prefill_on_recompute_in_proj_model(void **state) {
    (void)state;
    const int T = 48, n = 37;
    Model a, b;
    make_model(&a, T);
    make_model(&b, T);
    b.keep_in_proj = 0;
    model_alloc_activations(&b, 1, T);
    assert_null(b.layers[0].xz);  // else the test would not test the case
    int32_t tok[37];
    PmRng rng;
    pm_rng_seed(&rng, 12);
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(pm_rng_u64(&rng) % a.cfg.vocab_size);
    Decoder *da = decoder_create(&a), *db = decoder_create(&b);
    const float *pa = decoder_prefill(da, &a, tok, n), *pb = decoder_prefill(db, &b, tok, n);
    assert_memory_equal(pa, pb, (size_t)a.cfg.vocab_pad * sizeof(float));
    decoder_free(da), decoder_free(db);
    model_destroy(&a), model_destroy(&b);
}

// Sampling against its definition: draws follow softmax(logits / T) restricted to the k most likely tokens (ties
// in id order) and to the shortest such prefix holding top_p of the mass, sampled in that order.
static int ref_cmp(const void *a, const void *b) {  // descending p, then ascending id
    const double *x = a, *y = b;
    return x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : (x[1] > y[1]) - (x[1] < y[1]);
}
static int ref_sample(const float *logits, int V, float temp, int top_k, float top_p, PmRng *rng) {
    double *c = pm_malloc(sizeof(double) * 2 * V), mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < V; i++) c[2 * i] = expf((logits[i] - (float)mx) / temp), c[2 * i + 1] = i, sum += c[2 * i];
    qsort(c, V, 2 * sizeof(double), ref_cmp);
    int n = top_k > 0 && top_k < V ? top_k : V;
    double acc = 0, total = 0;
    for (int i = 0; top_p < 1 && i < n; i++)
        if ((acc += c[2 * i] / sum) >= top_p) n = i + 1;
    for (int i = 0; i < n; i++) total += c[2 * i];
    double r = pm_rng_uniform(rng) * total;
    int id = (int)c[2 * (n - 1) + 1];
    for (int i = 0; i < n; i++)
        if ((r -= c[2 * i]) <= 0) {
            id = (int)c[2 * i + 1];
            break;
        }
    free(c);
    return id;
}

static void test_sampling(void **state) {
    (void)state;
    // frequencies: p = (0.5, 0.3, 0.15, 0.05) at temperature 1
    const float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    const double p[4] = {0.5, 0.3, 0.15, 0.05};
    struct {
        int top_k;
        float top_p;
        int kept;
    } cases[] = {{0, 1.0f, 4}, {2, 1.0f, 2}, {0, 0.7f, 2}, {0, 0.9f, 3}, {1, 1.0f, 1}, {3, 0.6f, 2}};
    PmRng rng;
    pm_rng_seed(&rng, 5);
    const int draws = 200000;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int count[4] = {0};
        for (int i = 0; i < draws; i++) count[sample_token(logits, 4, 1.0f, cases[k].top_k, cases[k].top_p, &rng)]++;
        double mass = 0;
        for (int v = 0; v < cases[k].kept; v++) mass += p[v];
        for (int v = 0; v < 4; v++) {
            double want = v < cases[k].kept ? p[v] / mass : 0.0, got = (double)count[v] / draws;
            double sd = sqrt(want * (1 - want) / draws) + 1e-12;
            if (fabs(got - want) > 5 * sd) {
                fprintf(stderr, "top_k %d top_p %.2f: token %d drawn %.4f of the time, expected %.4f\n",
                        cases[k].top_k, (double)cases[k].top_p, v, got, want);
                fail();
            }
        }
    }
    // a 50K vocabulary with many ties (logits on a coarse grid): the same draws as the definition, from the same
    // random numbers, at several temperatures and filters
    const int V = 50257;
    float *big = pm_malloc(sizeof(float) * V);
    for (int i = 0; i < V; i++) big[i] = (float)(pm_rng_u64(&rng) % 64) * 0.25f - 8.0f;
    big[777] = 9.0f, big[778] = 9.0f;  // two tied leaders: top_k 1 takes the lower id
    PmRng a, b;
    pm_rng_seed(&a, 9), pm_rng_seed(&b, 9);
    assert_int_equal(sample_token(big, V, 1.0f, 1, 1.0f, &a), 777);
    assert_int_equal(ref_sample(big, V, 1.0f, 1, 1.0f, &b), 777);
    const float temps[] = {0.1f, 0.3f, 1.0f, 2.5f}, tops[] = {1.0f, 0.99f, 0.95f, 0.5f};
    const int ks[] = {0, 40, 3000};
    int differ = 0, drawn = 0;
    for (int t = 0; t < 4; t++)
        for (int q = 0; q < 4; q++)
            for (int kk = 0; kk < 3; kk++)
                for (int i = 0; i < 20; i++, drawn++)
                    differ += sample_token(big, V, temps[t], ks[kk], tops[q], &a) !=
                              ref_sample(big, V, temps[t], ks[kk], tops[q], &b);
    assert_int_equal(differ, 0);
    assert_int_equal(drawn, 960);
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_prefill_on_recompute_in_proj_model),
        cmocka_unit_test(test_recurrent_logits_match_parallel),
        cmocka_unit_test(test_greedy_generation_matches_full_forward),
        cmocka_unit_test(test_parallel_prefill_matches_recurrent),
        cmocka_unit_test(test_lanes_match_one_lane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
