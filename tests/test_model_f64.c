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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_whole_model_gradients)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
