// test_packing.c — the PackMamba property on the CPU reference backend (DESIGN §2):
//  - packed == separate: random documents packed (with padding) into rows give every document the same loss, and
//    the model the same parameter gradients, as running each document alone and summing;
//  - no leakage: changing a token of one document leaves every other document's logits bit-identical, and the
//    same document's logits before that token too (causality);
//  - the tiny model overfits one packed batch;
//  - gradients written by the step's first backward equal those added into a cleared buffer (grads_write).
// The packing here is the test's own (simple first fit), independent of batcher.c.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "memory_flags.h"
#include "model.h"
#include "util.h"

typedef struct {
    int len, row, start;  // placement in the packed batch
    int32_t *tok;         // (len) tokens; target of token i is tok[i+1], the last one is ignored
} Doc;

// Lay out documents (each of length <= T) into rows by first fit; returns 0 if they do not fit in B rows.
static int pack_docs(Doc *docs, int n, Batch *b) {
    int *used = pm_calloc(b->B, sizeof(int));
    for (int d = 0; d < n; d++) {
        int r = 0;
        while (r < b->B && used[r] + docs[d].len > b->T) r++;
        if (r == b->B) {
            free(used);
            return 0;
        }
        docs[d].row = r, docs[d].start = used[r];
        used[r] += docs[d].len;
    }
    free(used);
    for (int i = 0; i < b->B * b->T; i++) b->tokens[i] = 0, b->pos[i] = 0, b->targets[i] = PM_IGNORE, b->doc[i] = -1;
    for (int d = 0; d < n; d++)
        for (int i = 0; i < docs[d].len; i++) {
            int k = docs[d].row * b->T + docs[d].start + i;
            b->tokens[k] = docs[d].tok[i];
            b->pos[k] = i;
            b->targets[k] = i + 1 < docs[d].len ? docs[d].tok[i + 1] : PM_IGNORE;
            b->doc[k] = d;
        }
    batch_count_valid(b);
    return 1;
}

static void single_doc_batch(const Doc *d, Batch *b) {
    b->B = 1, b->T = d->len;
    for (int i = 0; i < d->len; i++) {
        b->tokens[i] = d->tok[i];
        b->pos[i] = i;
        b->targets[i] = i + 1 < d->len ? d->tok[i + 1] : PM_IGNORE;
        b->doc[i] = 0;
    }
    batch_count_valid(b);
}

static double rel_diff(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += (double)(a[i] - b[i]) * (a[i] - b[i]), den += (double)b[i] * b[i];
    return sqrt(num) / (sqrt(den) + 1e-30);
}

// The model every test here runs: 2 layers of width 32, a vocabulary of 50.
static ModelConfig small_config(void) {
    ModelConfig c = {.n_layer = 2, .d_model = 32, .vocab_size = 50};
    config_derive(&c);
    return c;
}

// Random documents of lengths 1..3T, the longer ones cut into T-sized pieces (each piece its own document).
static int make_docs(PmRng *rng, int T, int vocab, int n_src, Doc *out, int max_out) {
    int n = 0;
    for (int s = 0; s < n_src; s++) {
        int len = 1 + (int)(pm_rng_u64(rng) % (3 * T));
        for (int off = 0; off < len && n < max_out; off += T) {
            Doc *d = &out[n++];
            d->len = len - off < T ? len - off : T;
            d->tok = pm_malloc(sizeof(int32_t) * d->len);
            for (int i = 0; i < d->len; i++) d->tok[i] = (int32_t)(pm_rng_u64(rng) % vocab);
        }
    }
    return n;
}

static void perturb_params(Model *m, PmRng *rng) {
    float *w = pm_malloc(m->n_params * sizeof(float));
    model_get_params(m, w);
    for (size_t i = 0; i < m->n_params; i++) w[i] += 0.05f * pm_rng_normal(rng);
    model_set_params(m, w);
    free(w);
}

static void test_packed_equals_separate(void **state) {
    (void)state;
    const int B = 12, T = 32;  // 4 source documents of <= 3T tokens always fit in 12 rows
    ModelConfig c = small_config();
    Model m;
    model_create(&m, &c, backend_cpu(), 3);
    PmRng rng;
    pm_rng_seed(&rng, 11);
    perturb_params(&m, &rng);
    model_alloc_activations(&m, B, T);

    Doc docs[64];
    int n = make_docs(&rng, T, c.vocab_size, 4, docs, 64);
    Batch packed = batch_alloc(B, T);
    assert_true(pack_docs(docs, n, &packed));
    int pad = 0;
    for (int i = 0; i < B * T; i++) pad += packed.doc[i] < 0;
    assert_true(pad > 0);  // the batch really has padding
    assert_true(n >= 4);

    // Packed: gradient of the summed loss, per-document losses.
    model_zero_grad(&m);
    model_forward_backward(&m, &packed, 1.0f, NULL);
    double *loss_packed = pm_calloc(n, sizeof(double));
    for (int i = 0; i < B * T; i++)
        if (packed.doc[i] >= 0) loss_packed[packed.doc[i]] += m.host_losses[i];
    float *g_packed = pm_malloc(m.n_params * sizeof(float));
    model_get_grads(&m, g_packed);

    // Separate: each document alone, gradients summed (accumulated) over documents.
    model_zero_grad(&m);
    Batch one = batch_alloc(1, T);
    for (int d = 0; d < n; d++) {
        single_doc_batch(&docs[d], &one);
        model_forward_backward(&m, &one, 1.0f, NULL);
        double l = 0;
        for (int i = 0; i < docs[d].len; i++) l += m.host_losses[i];
        double denom = fabs(l) > 1e-6 ? fabs(l) : 1.0;
        if (fabs(l - loss_packed[d]) / denom > 1e-5) {
            fprintf(stderr, "document %d (length %d): packed loss %.9g, alone %.9g\n", d, docs[d].len, loss_packed[d], l);
            fail();
        }
    }
    float *g_sep = pm_malloc(m.n_params * sizeof(float));
    model_get_grads(&m, g_sep);
    double worst = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const ParamInfo *p = &m.tensors[t];
        double r = rel_diff(g_packed + p->offset, g_sep + p->offset, p->size);
        if (r > worst) worst = r;
        if (r > 1e-5) {
            fprintf(stderr, "%s: packed vs separate gradient relative difference %.3g\n", p->name, r);
            fail();
        }
    }
    fprintf(stderr, "%d documents in %d rows: worst gradient relative difference %.3g\n", n, B, worst);
    for (int d = 0; d < n; d++) free(docs[d].tok);
    free(loss_packed), free(g_packed), free(g_sep);
    batch_free(&packed), batch_free(&one);
    model_destroy(&m);
}

static void test_no_leakage(void **state) {
    (void)state;
    const int B = 2, T = 40;
    ModelConfig c = small_config();
    Model m;
    model_create(&m, &c, backend_cpu(), 5);
    PmRng rng;
    pm_rng_seed(&rng, 21);
    perturb_params(&m, &rng);
    model_alloc_activations(&m, B, T);
    Doc docs[16];
    int lens[] = {7, 13, 20, 11, 9, 17};
    int n = 6;
    for (int d = 0; d < n; d++) {
        docs[d].len = lens[d];
        docs[d].tok = pm_malloc(sizeof(int32_t) * lens[d]);
        for (int i = 0; i < lens[d]; i++) docs[d].tok[i] = (int32_t)(pm_rng_u64(&rng) % c.vocab_size);
    }
    Batch b = batch_alloc(B, T);
    assert_true(pack_docs(docs, n, &b));
    size_t nl = (size_t)B * T * c.vocab_pad;
    float *ref = pm_malloc(nl * sizeof(float)), *out = pm_malloc(nl * sizeof(float));
    model_forward(&m, &b, ref);
    for (int victim = 0; victim < n; victim++) {
        for (int which = 0; which < 2; which++) {  // the first token and a random one
            int i = which == 0 ? 0 : (int)(pm_rng_u64(&rng) % docs[victim].len);
            int32_t keep = docs[victim].tok[i];
            docs[victim].tok[i] = (keep + 1 + (int32_t)(pm_rng_u64(&rng) % (c.vocab_size - 1))) % c.vocab_size;
            pack_docs(docs, n, &b);
            model_forward(&m, &b, out);
            for (int k = 0; k < B * T; k++) {
                // Other documents must not change at all; the victim itself only from the changed token on
                // (causality: a token never influences earlier positions).
                if (b.doc[k] < 0 || (b.doc[k] == victim && b.pos[k] >= i)) continue;
                if (memcmp(ref + (size_t)k * c.vocab_pad, out + (size_t)k * c.vocab_pad, c.vocab_pad * sizeof(float))) {
                    fprintf(stderr, "changing document %d token %d changed the logits of document %d position %d\n",
                            victim, i, b.doc[k], b.pos[k]);
                    fail();
                }
            }
            docs[victim].tok[i] = keep;
        }
    }
    for (int d = 0; d < n; d++) free(docs[d].tok);
    free(ref), free(out);
    batch_free(&b);
    model_destroy(&m);
}

static void test_overfit_one_packed_batch(void **state) {
    (void)state;
    ModelConfig c;
    assert_int_equal(config_preset("tiny", 257, &c), 0);
    Model m;
    model_create(&m, &c, backend_cpu(), 1);
    const int B = 2, T = 64;
    model_alloc_activations(&m, B, T);
    PmRng rng;
    pm_rng_seed(&rng, 5);
    Doc docs[8];
    int lens[] = {50, 14, 30, 33, 0};
    int n = 4;
    for (int d = 0; d < n; d++) {
        docs[d].len = lens[d];
        docs[d].tok = pm_malloc(sizeof(int32_t) * lens[d]);
        for (int i = 0; i < lens[d]; i++) docs[d].tok[i] = (int32_t)(pm_rng_u64(&rng) % 256);
    }
    Batch b = batch_alloc(B, T);
    assert_true(pack_docs(docs, n, &b));
    OptimConfig o = optim_defaults();
    o.weight_decay = 0;
    double loss = 0, first = 0;
    int step;
    for (step = 0; step < 400; step++) {
        model_zero_grad(&m);
        loss = model_forward_backward(&m, &b, 1.0f / (float)b.n_valid, NULL);
        if (step == 0) first = loss;
        if (loss < 0.1) break;
        model_optimizer_step(&m, &o, lr_schedule(step, 10, 400, 1e-2f, 0.1f));
    }
    fprintf(stderr, "overfit: loss %.4f -> %.4f in %d steps\n", first, loss, step);
    assert_true(first > 5.0);  // starts near ln(264)
    assert_true(loss < 0.1);
    for (int d = 0; d < n; d++) free(docs[d].tok);
    batch_free(&b);
    model_destroy(&m);
}

// Model.keep_activations (every layer, or only the last, keeps xn, u, dpre, y instead of the backward recomputing
// them) and Model.keep_in_proj (no layer, or only the last, keeps its in_proj output xz; the backward recomputes the
// others'), alone and together, must not change anything: on a packed batch, the losses and every parameter
// gradient are bit-identical to the default model's. (PM_DW_GROUP=1: a group of 2 would round "the last layer" to
// none.)
static void test_keep_activations_same(void **state) {
    (void)state;
    const int B = 9, T = 32;  // 3 source documents of <= 3T tokens always fit in 9 rows
    ModelConfig c = small_config();
    PmRng rng;
    pm_rng_seed(&rng, 5);
    Doc docs[16];
    int n = make_docs(&rng, T, c.vocab_size, 3, docs, 16);
    Batch b = batch_alloc(B, T);
    assert_true(pack_docs(docs, n, &b));
    float *g[9];
    double loss[9];
    assert_true(c.n_layer >= 2);  // else "the last layer only" would be every layer
    setenv("PM_DW_GROUP", "1", 1);
    for (int k = 0; k < 9; k++) {  // k % 3: activations kept by no layer, every one, the last; k / 3: in_proj
                                   // outputs kept by every layer, none, the last
        Model m;
        model_create(&m, &c, backend_cpu(), 9);
        m.keep_activations = k % 3 == 0 ? 0 : k % 3 == 1 ? -1 : 1;
        m.keep_in_proj = k / 3 == 0 ? -1 : k / 3 == 1 ? 0 : 1;
        model_alloc_activations(&m, B, T);
        // else the comparison would be vacuous
        if (k % 3 == 1) assert_non_null(m.layers[0].xn);
        else assert_null(m.layers[0].xn);
        assert_true((m.layers[c.n_layer - 1].xn != NULL) == (k % 3 != 0));
        assert_true((m.xn != NULL) == (k % 3 != 1));  // the shared buffers, where any layer recomputes
        if (k / 3) assert_true(m.layers[0].xz == NULL && m.xz != NULL);
        else assert_true(m.layers[0].xz != NULL && m.xz == NULL);
        assert_true((m.layers[c.n_layer - 1].xz != NULL) == (k / 3 != 1));
        model_zero_grad(&m);
        loss[k] = model_forward_backward(&m, &b, 1.0f / (float)b.n_valid, NULL);
        g[k] = pm_malloc(m.n_params * sizeof(float));
        model_get_grads(&m, g[k]);
        if (k) assert_memory_equal(g[0], g[k], m.n_params * sizeof(float));
        assert_true(loss[0] == loss[k]);
        model_destroy(&m);
    }
    unsetenv("PM_DW_GROUP");
    for (int k = 0; k < 9; k++) free(g[k]);
    for (int d = 0; d < n; d++) free(docs[d].tok);
    batch_free(&b);
}

// Two packed batches of B rows of T, each from 2 random source documents (<= 3T tokens: they always fit in 6 rows).
typedef struct {
    Doc docs[2][16];
    int nd[2];
    Batch b[2];
} TwoBatches;
static void two_batches(TwoBatches *t, PmRng *rng, const ModelConfig *c, int B, int T) {
    for (int i = 0; i < 2; i++) {
        t->b[i] = batch_alloc(B, T);
        t->nd[i] = make_docs(rng, T, c->vocab_size, 2, t->docs[i], 16);
        assert_true(pack_docs(t->docs[i], t->nd[i], &t->b[i]));
    }
}
static void two_batches_free(TwoBatches *t) {
    for (int i = 0; i < 2; i++) {
        for (int d = 0; d < t->nd[i]; d++) free(t->docs[i][d].tok);
        batch_free(&t->b[i]);
    }
}

// Model.dw_group: the backward's out_proj, dt_proj and x_proj weight gradients of groups of layers in one call each
// (Backend.matmul_dw_batch; layer j of a group reading copy j of dh, ddpre, dxdbl, u and y). On the CPU, whose batch
// is the per-layer calls in order, the gradients must be the ungrouped model's bit for bit, in every memory
// setting, over two micro-batches, for groups of 2 and 4 over 3 to 6 layers (whole groups, a short bottom group, a
// lone bottom layer).
static void test_weight_gradient_groups_same(void **state) {
    (void)state;
    const int B = 6, T = 32;
    PmRng rng;
    pm_rng_seed(&rng, 13);
    const int cases[][2] = {{3, 2}, {4, 2}, {4, 4}, {5, 4}, {6, 4}};  // (layers, group)
    for (int ci = 0; ci < 5; ci++) {
        ModelConfig c = small_config();
        c.n_layer = cases[ci][0];
        config_derive(&c);
        TwoBatches tb;
        two_batches(&tb, &rng, &c, B, T);
        const Batch *b = tb.b;
        // default, keep_activations, no in_proj kept, only the top layer's kept, activations kept by the top group
        for (int k = 0; k < 5; k++) {
            float *g[2];
            double loss[2];
            size_t np = 0;
            for (int w = 0; w < 2; w++) {  // w = 0: every layer alone (PM_DW_GROUP=1); 1: in groups
                char gs[8];
                snprintf(gs, sizeof gs, "%d", w ? cases[ci][1] : 1);
                setenv("PM_DW_GROUP", gs, 1);
                Model m;
                model_create(&m, &c, backend_cpu(), 9);
                m.keep_activations = k == 1 ? -1 : k == 4 ? cases[ci][1] : 0;
                m.keep_in_proj = k == 2 ? 0 : k == 3 ? 1 : -1;
                model_alloc_activations(&m, B, T);
                unsetenv("PM_DW_GROUP");
                assert_int_equal(m.dw_group, w ? cases[ci][1] : 1);  // else the comparison would be vacuous
                // the copies: evenly spaced right above each shared buffer (kept activations are per layer)
                assert_true(m.dh_cs >= (size_t)B * T * c.d_model * sizeof(float) && m.ddpre_cs && m.dxdbl_cs);
                const int kept = k == 1 || (k == 4 && cases[ci][1] >= c.n_layer);  // every layer keeps them
                assert_true(kept ? !m.u && !m.u_cs && !m.y_cs : m.u_cs && m.y_cs);
                if (k == 4) assert_non_null(m.layers[c.n_layer - 1].u);
                np = m.n_params;
                model_zero_grad(&m);
                loss[w] = 0;
                for (int i = 0; i < 2; i++)
                    loss[w] += model_forward_backward(&m, &b[i], 1.0f / (float)(b[0].n_valid + b[1].n_valid), NULL);
                g[w] = pm_malloc(np * sizeof(float));
                model_get_grads(&m, g[w]);
                model_destroy(&m);
            }
            size_t differ = 0;
            for (size_t i = 0; i < np; i++) differ += memcmp(&g[0][i], &g[1][i], sizeof(float)) != 0;
            printf("    %d layers in groups of %d, setting %d: %zu of %zu gradients differ from single layers'\n",
                   cases[ci][0], cases[ci][1], k, differ, np);
            assert_int_equal(differ, 0);
            assert_true(loss[0] == loss[1]);
            free(g[0]), free(g[1]);
        }
        two_batches_free(&tb);
    }
}

// Backend.grads_write: model_zero_grad leaves the gradient buffer alone and the step's first backward writes every
// gradient. Against clearing it (PM_GRADS_WRITE=0), with the buffer full of NaN first so a gradient left unwritten,
// or added to, shows: two micro-batches (the second adds) give the same gradients, by value (a zero's sign may
// differ), in every memory setting; and gradients read right after model_zero_grad are zeros.
static void test_grads_written_not_cleared(void **state) {
    (void)state;
    const int B = 6, T = 32;  // 2 source documents of <= 3T tokens a batch always fit in 6 rows
    ModelConfig c = small_config();
    PmRng rng;
    pm_rng_seed(&rng, 11);
    TwoBatches tb;
    two_batches(&tb, &rng, &c, B, T);
    const Batch *b = tb.b;
    assert_non_null(backend_cpu()->grads_write);  // (else this compares the old path with itself)
    for (int k = 0; k < 4; k++) {  // default, keep_activations, no in_proj kept, only the top layer's kept
        float *g[2];
        size_t np = 0;
        for (int w = 0; w < 2; w++) {  // w = 0: cleared (reference); 1: written
            Model m;
            model_create(&m, &c, backend_cpu(), 9);
            m.keep_activations = k == 1 ? -1 : 0, m.keep_in_proj = k == 2 ? 0 : k == 3 ? 1 : -1;
            model_alloc_activations(&m, B, T);
            np = m.n_params;
            float *nan = pm_malloc(np * sizeof(float));
            for (size_t i = 0; i < np; i++) nan[i] = NAN;
            m.bk->upload(m.grads, nan, np * sizeof(float));
            setenv("PM_GRADS_WRITE", w ? "1" : "0", 1);
            model_zero_grad(&m);
            assert_int_equal(m.grads_unset, w);
            if (w) {  // read before any backward: zeros; then NaN again, and deferred again
                float *z = pm_malloc(np * sizeof(float));
                model_get_grads(&m, z);
                for (size_t i = 0; i < np; i++) assert_true(z[i] == 0.0f);
                free(z);
                m.bk->upload(m.grads, nan, np * sizeof(float));
                model_zero_grad(&m);
            }
            free(nan);
            for (int i = 0; i < 2; i++) model_forward_backward(&m, &b[i], 1.0f / (float)(b[0].n_valid + b[1].n_valid), NULL);
            assert_int_equal(m.grads_unset, 0);
            g[w] = pm_malloc(np * sizeof(float));
            model_get_grads(&m, g[w]);
            model_destroy(&m);
        }
        unsetenv("PM_GRADS_WRITE");
        size_t differ = 0, nonfinite = 0;
        for (size_t i = 0; i < np; i++) differ += g[0][i] != g[1][i], nonfinite += !isfinite(g[1][i]);
        printf("    setting %d: %zu gradients, %zu not finite, %zu differ from the cleared buffer's\n", k, np, nonfinite,
               differ);
        assert_int_equal(nonfinite, 0);
        assert_int_equal(differ, 0);
        free(g[0]), free(g[1]);
    }
    two_batches_free(&tb);
}

// model_fit_memory (--memory-budget) against the order it documents, on a backend that keeps scan states and has a
// workspace (the CPU backend with a states size like the CUDA backend's and a fixed workspace; the CPU scan ignores
// the states it is given): for a budget equal to each candidate's bytes, the pick is the first candidate of that
// order that fits; below the leanest, -1 and the leanest. And the accounting: recomputing in_proj saves n_layer - 1
// xz buffers exactly (one shared one remains), and keeping it for only some layers one fewer than the layers that
// do not; keeping activations for all but a group of layers saves that group's less the shared buffers; keeping
// activations costs xn, u, dpre, y per layer less the shared
// ones; and without the workspace, the bytes are those a model with the settings allocates.
static size_t fake_states_bytes(int M, int T, int Cd, int N) {
    (void)T;
    return (size_t)M * Cd * N * 4 / 16;  // a checkpoint every 16 tokens
}
static size_t fake_workspace_bytes(int M, int T, int C, int Cd, int N, int K, int Vp) {
    (void)T, (void)C, (void)Cd, (void)N, (void)K;
    return (size_t)M * Vp * 4;
}
static size_t g_alloc_bytes;  // bytes counting_alloc has handed out
static void *counting_alloc(size_t bytes) {
    g_alloc_bytes += bytes;
    return backend_cpu()->alloc(bytes);
}
static void test_memory_budget_picks_fastest_fit(void **state) {
    (void)state;
    Backend bk = *backend_cpu();
    bk.scan_states_bytes = fake_states_bytes;
    bk.workspace_bytes = fake_workspace_bytes;
    ModelConfig c = {.n_layer = 4, .d_model = 64, .vocab_size = 50};
    config_derive(&c);
    const int B = 2, T = 128, L = c.n_layer;
    const size_t M = (size_t)B * T, a = bk.act_bytes;
    // the documented order, fastest first
    const int G = model_dw_group(&c, &bk);
    assert_int_equal(G, 2);  // (the CPU backend groups layers in pairs at this width: L / G - 1 partial candidates)
    MemorySettings order[L / 2 + (4 + 1) + 4];
    int n = 0;
    order[n++] = (MemorySettings){-1, -1, -1, 0};
    for (int k = L - G; k > 0; k -= G) order[n++] = (MemorySettings){k, -1, -1, 0};  // activations for fewer layers
    const int D = n;  // the default
    for (int k = L; k >= 0; k--) order[n++] = (MemorySettings){0, k == L ? -1 : k, -1, 0};  // states for fewer
    // (the CPU computes from its masters: no weight copy to give up, so no cast_weights candidate)
    for (int k = L - 1; k >= 0; k--) order[n++] = (MemorySettings){0, 0, k, 0};  // then in_proj outputs for fewer
    size_t bytes[16];
    for (int i = 0; i < n; i++) bytes[i] = model_train_bytes(&c, &bk, B, T, &order[i]);
    for (int i = 0; i < n; i++) {
        MemorySettings got;
        assert_int_equal(model_fit_memory(&c, &bk, B, T, bytes[i], &got), 0);
        int first = 0;
        while (bytes[first] > bytes[i]) first++;  // the first candidate that fits this budget
        assert_memory_equal(&got, &order[first], sizeof got);
    }
    size_t leanest = bytes[n - 1];
    for (int i = 0; i < n; i++) assert_true(bytes[i] >= leanest);
    MemorySettings got;
    assert_int_equal(model_fit_memory(&c, &bk, B, T, leanest - 1, &got), -1);
    assert_memory_equal(&got, &order[n - 1], sizeof got);
    // accounting, against sizes computed here
    const size_t xz = M * 2 * c.d_inner * a, states = fake_states_bytes((int)M, T, c.d_inner, c.d_state);
    const size_t keep = M * (c.d_model + 2 * c.d_inner) * a;  // xn, u, dpre per layer (y: see below)
    assert_true(xz % 256 == 0 && states % 256 == 0 && keep % 256 == 0 && M * c.d_model * a % 256 == 0);
    assert_int_equal(bytes[D] - bytes[n - 1], (size_t)L * states + (size_t)(L - 1) * xz);  // default vs leanest
    assert_int_equal(bytes[D] - bytes[D + L], (size_t)L * states);  // the default vs no states kept
    // in_proj outputs for j fewer layers save j - 1 xz buffers: the first one dropped brings the shared one back
    for (int j = 1; j <= L; j++) assert_int_equal(bytes[D + L] - bytes[D + L + j], (size_t)(j - 1) * xz);
    // keep activations: xn, u, dpre, y per layer instead of one shared each (and, where the weight gradients go in
    // groups of layers, instead of the shared u and y's other copies: Model.dw_group)
    const size_t group_copies = (size_t)(model_dw_group(&c, &bk) - 1) * 2 * M * c.d_inner * a;
    assert_true(group_copies > 0);  // (the CPU backend groups: the copies are counted)
    assert_int_equal(bytes[0] - bytes[D], (size_t)(L - 1) * (keep + M * c.d_inner * a) - group_copies);
    // activations for all but the bottom group: that group's own buffers less the shared ones (u and y with their
    // copies: G each)
    const size_t shared = M * (c.d_model + c.d_inner) * a + 2 * (size_t)G * M * c.d_inner * a;
    assert_int_equal(bytes[0] - bytes[1], (size_t)G * (keep + M * c.d_inner * a) - shared);
    // a budget between the default's bytes and those plus the carried state's: the default without carrying, a
    // leaner setting with it, whose estimate counts the carried state's buffers
    const size_t carry = model_carry_train_bytes(&c, &bk, B, T);
    MemoryFlags f = MEMORY_FLAGS_DEFAULT;
    f.memory_budget = (float)((bytes[D] + carry / 2) / 1073741824.0);
    MemorySettings plain, carried;
    size_t est_plain, est_carried;
    assert_int_equal(memory_flags_settings(&f, &c, &bk, B, T, &plain, &est_plain), 0);
    f.carry_state = 1;
    assert_int_equal(memory_flags_settings(&f, &c, &bk, B, T, &carried, &est_carried), 0);
    assert_memory_equal(&plain, &order[D], sizeof plain);
    assert_int_equal(est_plain, bytes[D]);
    assert_true(memcmp(&carried, &plain, sizeof plain) != 0);
    assert_int_equal(est_carried, model_train_bytes(&c, &bk, B, T, &carried) + carry);
    assert_true(est_carried <= (size_t)((double)f.memory_budget * 1073741824.0));
    // and the whole: without the workspace, model_train_bytes is what a model with those settings really allocates
    // (parameters, gradients, Adam moments, activations, scan states), counted through the backend's allocator
    bk.workspace_bytes = NULL;
    bk.alloc = counting_alloc;
    for (int i = 0; i < n; i++) {
        g_alloc_bytes = 0;
        Model m;
        model_create(&m, &c, &bk, 3);
        model_alloc_optimizer(&m);
        model_set_memory_settings(&m, &order[i]);
        model_alloc_activations(&m, B, T);
        assert_int_equal(g_alloc_bytes, model_train_bytes(&c, &bk, B, T, &order[i]));
        model_alloc_carry(&m);  // and the carried state's buffers (train --carry-state adds them to the estimate)
        assert_int_equal(g_alloc_bytes, model_train_bytes(&c, &bk, B, T, &order[i]) + model_carry_train_bytes(&c, &bk, B, T));
        model_destroy(&m);
    }
    // model_limit_dw_group (dist_attach's, before the plan): the estimate and the allocation both leave out the
    // groups' copies, the same bytes as with the groups turned off through PM_DW_GROUP=1; lifting it restores them
    const size_t grouped = model_train_bytes(&c, &bk, B, T, &order[D]);
    setenv("PM_DW_GROUP", "1", 1);
    const size_t alone = model_train_bytes(&c, &bk, B, T, &order[D]);
    unsetenv("PM_DW_GROUP");
    assert_true(alone < grouped);  // (the CPU backend groups by default: there are copies to leave out)
    model_limit_dw_group(1);
    assert_int_equal(model_train_bytes(&c, &bk, B, T, &order[D]), alone);
    g_alloc_bytes = 0;
    Model m;
    model_create(&m, &c, &bk, 3);
    model_alloc_optimizer(&m);
    model_set_memory_settings(&m, &order[D]);
    model_alloc_activations(&m, B, T);
    assert_int_equal(g_alloc_bytes, alone);
    assert_int_equal(m.dw_group, 1);
    assert_int_equal(m.dw_copies, 1);
    model_destroy(&m);
    model_limit_dw_group(0);
    assert_int_equal(model_train_bytes(&c, &bk, B, T, &order[D]), grouped);
}

// Model.hook_orders_itself (dist's overlap hook): with such a hook the backward keeps the backend's side queue and
// deferred reductions, and runs what is held back before each norm region ends (a layer's last), so a hook that
// fences its collectives there finds every gradient of the layer queued; with a plain hook (the bench's profiler)
// it uses neither. The CPU backend wrapped to count: side queue use, and deferral switched on and off. Gradients
// must be the unhooked model's bit for bit either way.
static int g_fake_side, g_fake_defer, g_fake_flushes, g_norm_flush_missing, g_norm_ends;
static void fake_side_begin(void) { g_fake_side++; }
static int fake_side_end(void) { return g_fake_side; }
static void fake_side_wait(int ticket) { (void)ticket; }
static void fake_defer(int on) {
    if (!on && g_fake_defer) g_fake_flushes++;
    g_fake_defer = on;
}
static void norm_checking_hook(void *ctx, const char *region, int begin) {
    static int flushes_at_begin;
    (void)ctx;
    if (strcmp(region, "bwd.norm") != 0) return;
    if (begin) {
        flushes_at_begin = g_fake_flushes;
        return;
    }
    g_norm_ends++;
    // held-back reductions ran inside the region, and deferral is on again for the layers below
    if (g_fake_flushes == flushes_at_begin || !g_fake_defer) g_norm_flush_missing++;
}
static void test_hook_that_orders_itself(void **state) {
    (void)state;
    const int B = 6, T = 32;  // (two_batches: 6 rows hold its documents)
    ModelConfig c = small_config();
    c.n_layer = 3;
    config_derive(&c);
    PmRng rng;
    pm_rng_seed(&rng, 21);
    TwoBatches tb;
    two_batches(&tb, &rng, &c, B, T);
    Backend bk = *backend_cpu();
    bk.side_begin = fake_side_begin, bk.side_end = fake_side_end, bk.side_wait = fake_side_wait;
    bk.defer_reductions = fake_defer;
    float *g[3];
    size_t np = 0;
    for (int mode = 0; mode < 3; mode++) {  // 0: no hook; 1: a plain hook; 2: a hook that orders itself
        g_fake_side = g_fake_defer = g_fake_flushes = g_norm_flush_missing = g_norm_ends = 0;
        Model m;
        model_create(&m, &c, &bk, 4);
        model_alloc_activations(&m, B, T);
        if (mode) m.hook = norm_checking_hook, m.hook_orders_itself = mode == 2;
        model_zero_grad(&m);
        model_forward_backward(&m, &tb.b[0], 1.0f / (float)tb.b[0].n_valid, NULL);
        np = m.n_params;
        g[mode] = pm_malloc(np * sizeof(float));
        model_get_grads(&m, g[mode]);
        model_destroy(&m);
        printf("    %s: side queue used %d times, %d flushes, %d of %d norm regions ended unflushed\n",
               mode == 0 ? "no hook" : mode == 1 ? "plain hook" : "hook that orders itself", g_fake_side,
               g_fake_flushes, g_norm_flush_missing, g_norm_ends);
        assert_int_equal(g_fake_defer, 0);  // deferral off again when the backward returns
        if (mode == 1) {
            assert_int_equal(g_fake_side, 0);
            assert_int_equal(g_fake_flushes, 0);
        } else {
            assert_true(g_fake_side > 0);
            assert_true(g_fake_flushes >= 1);
        }
        if (mode == 2) {
            assert_int_equal(g_norm_ends, c.n_layer + 1);  // norm_f's and every layer's
            assert_int_equal(g_norm_flush_missing, 0);
        }
        if (mode) assert_memory_equal(g[0], g[mode], np * sizeof(float));
    }
    for (int i = 0; i < 3; i++) free(g[i]);
    two_batches_free(&tb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_equals_separate),
        cmocka_unit_test(test_no_leakage),
        cmocka_unit_test(test_overfit_one_packed_batch),
        cmocka_unit_test(test_keep_activations_same),
        cmocka_unit_test(test_weight_gradient_groups_same),
        cmocka_unit_test(test_grads_written_not_cleared),
        cmocka_unit_test(test_memory_budget_picks_fastest_fit),
        cmocka_unit_test(test_hook_that_orders_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
