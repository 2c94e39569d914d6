// doc_losses.h — what the checkpoint-interop tests share (test_interop.c, test_hf.c, test_bin.c): a model loaded
// from a checkpoint directory and its parameters, whole documents packed into one batch, each document's mean loss
// from one forward, the worst relative difference from a reference's, and the control of two layers swapped.
// Include after cmocka.h.
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "batch.h"
#include "checkpoint.h"
#include "model.h"
#include "util.h"

// A model on the CPU created from dir's config and loaded from it (the test fails with the loader's message
// otherwise).
static inline void load_dir(const char *dir, Model *m) {
    ModelConfig c;
    if (checkpoint_load_config(dir, &c) != 0) fail_msg("%s", pm_last_error());
    model_create(m, &c, backend_cpu(), 7);  // the init is overwritten by the load
    if (checkpoint_load_model(dir, m) != 0) fail_msg("%s", pm_last_error());
}

static inline float *params_of(const Model *m) {  // (n_params), allocated
    float *w = pm_malloc(m->n_params * sizeof(float));
    model_get_params(m, w);
    return w;
}

// The control every loss comparison runs: layers 0 and 1 exchanged, so a comparison that passes either way has
// not looked at the layers.
static inline void swap_layers_0_1(Model *m) {
    float *w = params_of(m), *sw = params_of(m);
    for (int k = 0; k < P_PER_LAYER; k++) {
        const ParamInfo *p0 = &m->tensors[model_tensor_index(&m->cfg, 0, k)];
        const ParamInfo *p1 = &m->tensors[model_tensor_index(&m->cfg, 1, k)];
        assert_int_equal(p0->size, p1->size);
        memcpy(sw + p0->offset, w + p1->offset, p0->size * sizeof(float));
        memcpy(sw + p1->offset, w + p0->offset, p0->size * sizeof(float));
    }
    model_set_params(m, sw);
    free(w), free(sw);
}

// Lay n documents (docs[i], len[i] tokens, each <= row_t) first-fit into rows of row_t tokens, never cut (each must
// be whole to match a reference that runs it alone); the rest of each row is padding; b.doc holds the index.
static inline Batch pack_docs(int n, int32_t *const *docs, const int *len, int row_t) {
    int *used = pm_calloc(n, sizeof(int));  // tokens used per row; at most one row per document
    int *row = pm_malloc(n * sizeof(int)), *at = pm_malloc(n * sizeof(int));
    int B = 0;
    for (int i = 0; i < n; i++) {
        int r = 0;
        while (r < B && used[r] + len[i] > row_t) r++;
        if (r == B) B++;
        row[i] = r, at[i] = used[r];
        used[r] += len[i];
    }
    Batch b = batch_alloc(B, row_t);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < len[i]; k++) {
            size_t j = (size_t)row[i] * row_t + at[i] + k;
            b.tokens[j] = docs[i][k];
            b.pos[j] = k;
            b.targets[j] = k + 1 < len[i] ? docs[i][k + 1] : PM_IGNORE;
            b.doc[j] = i;
        }
    batch_count_valid(&b);
    free(used), free(row), free(at);
    return b;
}

// Forward the packed batch; out[i] = mean loss of document i's targets (NaN if none).
static inline void doc_losses(Model *m, const Batch *b, int n_docs, double *out) {
    double *sum = pm_calloc(n_docs, sizeof(double));
    int *cnt = pm_calloc(n_docs, sizeof(int));
    model_forward(m, b, NULL);
    for (int j = 0; j < b->B * b->T; j++)
        if (b->doc[j] >= 0 && b->targets[j] != PM_IGNORE) sum[b->doc[j]] += m->host_losses[j], cnt[b->doc[j]]++;
    for (int i = 0; i < n_docs; i++) out[i] = cnt[i] ? sum[i] / cnt[i] : NAN;
    free(sum), free(cnt);
}

// Largest relative difference over documents with targets; prints each when label is set.
static inline double max_rel(const char *label, const double *ours, const double *ref, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(ref[i]) && isnan(ours[i])) continue;
        double e = fabs(ours[i] - ref[i]) / fabs(ref[i]);
        if (isnan(e)) e = INFINITY;
        if (label) printf("  %s doc %d: ours %.9f  reference %.9f  rel err %.2e\n", label, i, ours[i], ref[i], e);
        if (e > worst) worst = e;
    }
    return worst;
}
