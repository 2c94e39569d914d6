// test_model_f64.c — whole-model gradient check in float64: every parameter tensor's analytic gradient (model.c
// backward over the CPU backend) against central finite differences of the summed loss.
//
// Tolerance: in float64 with step h = 1e-5 the central difference has truncation error ~h^2 * |f'''| (~1e-10 here)
// and rounding error ~1e-16 * |f| / h (~1e-10 for |f| ~ 50), so 1e-6 relative (+1e-8 absolute) leaves a wide
// margin while any real backward bug (a missing term, a wrong index) shows up as an O(1) relative error.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "util.h"

static void random_batch(Batch *b, PmRng *rng, int vocab) {
    int M = b->B * b->T;
    int pos = 0;
    for (int i = 0; i < M; i++) {
        if (i % b->T == 0 || pm_rng_uniform(rng) < 0.15f) pos = 0;  // new document
        b->tokens[i] = (int32_t)(pm_rng_u64(rng) % vocab);
        b->pos[i] = pos++;
        b->doc[i] = 0;
    }
    for (int i = 0; i < M; i++) {
        int last_in_row = (i % b->T) == b->T - 1;
        b->targets[i] = (!last_in_row && b->pos[i + 1] != 0) ? b->tokens[i + 1] : PM_IGNORE;
    }
    b->targets[3] = PM_IGNORE;  // an ignored target inside a document
    batch_count_valid(b);
}

static double summed_loss(Model *m, const Batch *b) { return model_forward(m, b, NULL) * (double)b->n_valid; }

static void test_whole_model_gradients(void **state) {
    (void)state;
    ModelConfig c = {.n_layer = 2, .d_model = 16, .vocab_size = 37};
    config_derive(&c);
    Model m;
    model_create(&m, &c, backend_cpu(), 7);
    assert_int_equal(m.bk->f32_bytes, sizeof(double));
    double *p = (double *)m.params;  // CPU backend memory is host memory
    PmRng rng;
    pm_rng_seed(&rng, 99);
    // Move every parameter off its special initial value (norm weights 1, D 1, ...), so no term is blind.
    for (size_t i = 0; i < m.n_params; i++) p[i] += 0.1 * pm_rng_normal(&rng);
    for (size_t i = 0; i < m.tensors[0].size; i++) p[i] *= 10;  // the embedding (tensor 0): larger logits
    model_alloc_activations(&m, 2, 12);
    Batch b = batch_alloc(2, 12);
    random_batch(&b, &rng, c.vocab_size);

    model_zero_grad(&m);
    summed_loss(&m, &b);
    model_backward(&m, 1.0f);
    const double *g = (const double *)m.grads;

    const double h = 1e-5;
    int checked = 0;
    double worst = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const ParamInfo *pi = &m.tensors[t];
        for (int k = 0; k < 4; k++) {
            size_t i = pi->offset + pm_rng_u64(&rng) % pi->size;
            if (t == 0) {  // embedding: pick rows of tokens that occur, so the lookup path is exercised too
                int tok = b.tokens[pm_rng_u64(&rng) % (b.B * b.T)];
                i = (size_t)tok * c.d_model + pm_rng_u64(&rng) % c.d_model;
            }
            double keep = p[i];
            p[i] = keep + h;
            double fp = summed_loss(&m, &b);
            p[i] = keep - h;
            double fm = summed_loss(&m, &b);
            p[i] = keep;
            double fd = (fp - fm) / (2 * h);
            double err = fabs(fd - g[i]) / (fabs(fd) + 1e-2);
            if (err > worst) worst = err;
            if (fabs(fd - g[i]) > 1e-6 * fabs(fd) + 1e-8) {
                fprintf(stderr, "%s[%zu]: analytic %.12g, finite difference %.12g\n", pi->name, i - pi->offset, g[i],
                        fd);
                fail();
            }
            checked++;
        }
    }
    fprintf(stderr, "checked %d parameters of %d tensors, worst relative error %.3g\n", checked, m.n_tensors, worst);
    batch_free(&b);
    model_destroy(&m);
}

// A carried batch (Batch.carry_in: rows that start from the state the batch before left): the gradient the backward
// gives is that of this batch's loss with the carried state held constant (no gradient flows into the batch
// before): checked against finite differences of the forward from the same carried state, for every tensor.
static void test_carried_model_gradients(void **state) {
    (void)state;
    ModelConfig c = {.n_layer = 2, .d_model = 16, .vocab_size = 37};
    config_derive(&c);
    Model m;
    model_create(&m, &c, backend_cpu(), 11);
    double *p = (double *)m.params;
    PmRng rng;
    pm_rng_seed(&rng, 5);
    for (size_t i = 0; i < m.n_params; i++) p[i] += 0.1 * pm_rng_normal(&rng);
    for (size_t i = 0; i < m.tensors[0].size; i++) p[i] *= 10;
    const int B = 3, T = 12;
    model_alloc_activations(&m, B, T);
    model_alloc_carry(&m);
    Batch b = batch_alloc(B, T);
    random_batch(&b, &rng, c.vocab_size);
    // row 0 continues a document throughout; row 1 continues one for 5 tokens, then new documents; row 2 is fresh.
    // Rows 0 and 1 go on in the next batch (carry_state_out runs; the loss does not see it).
    for (int t = 0; t < T; t++) b.pos[t] = 40 + t;
    for (int t = 0; t < 5; t++) b.pos[T + t] = 17 + t;
    b.pos[T + 5] = 0;
    for (int t = 6; t < T; t++) b.pos[T + t] = b.pos[T + t - 1] + 1;
    for (int i = 0; i < B * T; i++)
        b.targets[i] = (i % T) != T - 1 && b.pos[i + 1] != 0 ? b.tokens[i + 1] : (int32_t)(pm_rng_u64(&rng) % c.vocab_size);
    batch_count_valid(&b);
    b.carry_in[0] = b.carry_in[1] = 1, b.carry_out[0] = b.carry_out[1] = 1;
    // a carried state of the size a layer's state has after some tokens
    const size_t cb = model_carry_bytes(&m);
    double *carry = (double *)pm_malloc(cb);
    for (size_t i = 0; i < cb / sizeof(double); i++) carry[i] = 0.5 * pm_rng_normal(&rng);

    model_set_carry(&m, carry);
    model_zero_grad(&m);
    const double loss_carried = model_forward(&m, &b, NULL);
    model_backward(&m, 1.0f);
    const double *g = (const double *)m.grads;
    // (the forward wrote the rows' final states to the other set and made it current: each forward below first
    // puts the state under test back with model_set_carry)
    // the carried state matters (else the check would not test the carry ops)
    double *zero = (double *)pm_calloc(1, cb);
    model_set_carry(&m, zero);
    assert_true(fabs(model_forward(&m, &b, NULL) - loss_carried) > 1e-3);
    free(zero);
    model_set_carry(&m, carry);
    assert_true(fabs(model_forward(&m, &b, NULL) - loss_carried) < 1e-12);

    // (h 1e-4: this loss is larger than the other test's, so at 1e-5 its rounding, ~1e-16 |f| / h, reaches the
    // tolerance; the central difference's truncation error at 1e-4 is still ~1e-10)
    const double h = 1e-4;
    double worst = 0;
    int checked = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const ParamInfo *pi = &m.tensors[t];
        for (int k = 0; k < 6; k++) {
            size_t i = pi->offset + pm_rng_u64(&rng) % pi->size;
            if (t == 0) i = (size_t)b.tokens[pm_rng_u64(&rng) % (B * T)] * c.d_model + pm_rng_u64(&rng) % c.d_model;
            const double keep = p[i];
            p[i] = keep + h;
            model_set_carry(&m, carry);
            const double fp = summed_loss(&m, &b);
            p[i] = keep - h;
            model_set_carry(&m, carry);
            const double fm = summed_loss(&m, &b);
            p[i] = keep;
            const double fd = (fp - fm) / (2 * h), err = fabs(fd - g[i]) / (fabs(fd) + 1e-2);
            if (err > worst) worst = err;
            if (fabs(fd - g[i]) > 1e-6 * fabs(fd) + 1e-8) {
                fprintf(stderr, "%s[%zu]: analytic %.12g, finite difference %.12g\n", pi->name, i - pi->offset, g[i], fd);
                fail();
            }
            checked++;
        }
    }
    fprintf(stderr, "carried batch: checked %d parameters of %d tensors, worst relative error %.3g\n", checked,
            m.n_tensors, worst);
    free(carry);
    batch_free(&b);
    model_destroy(&m);
}

// One document of 3T tokens trained as three carried pieces (rows of T, each the next batch's row 0, beside a
// fresh row of other documents) gives every token the loss it has in one unbroken row of 3T: the carried state
// makes the cut invisible to the forward. Without it (the pieces restarted, as the batcher cuts without carry) the
// later pieces' losses differ.
static void test_carried_equals_unbroken(void **state) {
    (void)state;
    ModelConfig c = {.n_layer = 2, .d_model = 16, .vocab_size = 37};
    config_derive(&c);
    const int T = 12, L = 3 * T;
    Model whole, cut;
    model_create(&whole, &c, backend_cpu(), 3);
    model_create(&cut, &c, backend_cpu(), 3);
    PmRng rng;
    pm_rng_seed(&rng, 8);
    double *pw = (double *)whole.params, *pc = (double *)cut.params;
    for (size_t i = 0; i < whole.n_params; i++) pw[i] = pc[i] = pw[i] + 0.1 * pm_rng_normal(&rng);
    model_alloc_activations(&whole, 1, L);
    model_alloc_activations(&cut, 2, T);
    model_alloc_carry(&cut);
    int32_t doc[3 * 12 + 1];
    for (int t = 0; t <= L; t++) doc[t] = (int32_t)(pm_rng_u64(&rng) % c.vocab_size);
    Batch bw = batch_alloc(1, L);
    for (int t = 0; t < L; t++) bw.tokens[t] = doc[t], bw.pos[t] = t, bw.targets[t] = doc[t + 1], bw.doc[t] = 0;
    batch_count_valid(&bw);
    model_forward(&whole, &bw, NULL);
    double worst = 0, control = 0;
    for (int with_carry = 1; with_carry >= 0; with_carry--) {
        Batch b = batch_alloc(2, T);
        for (int k = 0; k < 3; k++) {
            for (int t = 0; t < T; t++) {
                const int i = k * T + t;
                b.tokens[t] = doc[i], b.pos[t] = with_carry ? i : t, b.targets[t] = doc[i + 1], b.doc[t] = 0;
                // row 1: short fresh documents of 4 tokens
                b.tokens[T + t] = (int32_t)(pm_rng_u64(&rng) % c.vocab_size), b.pos[T + t] = t % 4, b.doc[T + t] = 1;
                b.targets[T + t] = t % 4 == 3 ? PM_IGNORE : (int32_t)(pm_rng_u64(&rng) % c.vocab_size);
            }
            b.carry_in[0] = with_carry && k > 0, b.carry_out[0] = with_carry && k < 2;
            batch_count_valid(&b);
            model_forward(&cut, &b, NULL);
            for (int t = 0; t < T; t++) {
                const double d = fabs(cut.host_losses[t] - whole.host_losses[k * T + t]);
                if (with_carry) worst = fmax(worst, d);
                else control = fmax(control, d);
            }
        }
        batch_free(&b);
    }
    fprintf(stderr, "carried pieces vs one row: worst loss difference %.3g (restarted pieces: %.3g)\n", worst, control);
    assert_true(worst < 1e-10);
    assert_true(control > 1e-3);
    batch_free(&bw);
    model_destroy(&whole);
    model_destroy(&cut);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_whole_model_gradients),
                                       cmocka_unit_test(test_carried_model_gradients),
                                       cmocka_unit_test(test_carried_equals_unbroken)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
