// doc_losses.h — what the checkpoint-interop tests share (test_interop.c, test_hf.c): whole documents packed into
// one batch, each document's mean loss from one forward, and the worst relative difference from a reference's.
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "batch.h"
#include "model.h"
#include "util.h"

// Lay n documents (docs[i], len[i] tokens, each <= row_t) first-fit into rows of row_t tokens, never cut (each must
// be whole to match a reference that runs it alone); the rest of each row is padding; b.doc holds the index.
static Batch pack_docs(int n, int32_t *const *docs, const int *len, int row_t) {
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
static void doc_losses(Model *m, const Batch *b, int n_docs, double *out) {
    double *sum = pm_calloc(n_docs, sizeof(double));
    int *cnt = pm_calloc(n_docs, sizeof(int));
    model_forward(m, b, NULL);
    for (int j = 0; j < b->B * b->T; j++)
        if (b->doc[j] >= 0 && b->targets[j] != PM_IGNORE) sum[b->doc[j]] += m->host_losses[j], cnt[b->doc[j]]++;
    for (int i = 0; i < n_docs; i++) out[i] = cnt[i] ? sum[i] / cnt[i] : NAN;
    free(sum), free(cnt);
}

// Largest relative difference over documents with targets; prints each when label is set.
static double max_rel(const char *label, const double *ours, const double *ref, int n) {
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
