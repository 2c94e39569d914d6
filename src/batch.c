// batch.c — see batch.h.
#include "batch.h"

#include "util.h"

Batch batch_alloc(int B, int T) {
    Batch b = {.B = B, .T = T};
    size_t n = (size_t)B * T;
    b.tokens = pm_calloc(n, sizeof(int32_t));
    b.pos = pm_calloc(n, sizeof(int32_t));
    b.targets = pm_malloc(n * sizeof(int32_t));
    b.doc = pm_malloc(n * sizeof(int32_t));
    b.carry_in = pm_calloc(B > 0 ? B : 1, sizeof(int32_t));
    b.carry_out = pm_calloc(B > 0 ? B : 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) b.targets[i] = PM_IGNORE, b.doc[i] = -1;
    return b;
}

void batch_free(Batch *b) {
    free(b->tokens);
    free(b->pos);
    free(b->targets);
    free(b->doc);
    free(b->carry_in);
    free(b->carry_out);
    b->tokens = b->pos = b->targets = b->doc = b->carry_in = b->carry_out = NULL;
}

void batch_count_valid(Batch *b) {
    int64_t n = 0;
    for (int64_t i = 0; i < (int64_t)b->B * b->T; i++) n += b->targets[i] != PM_IGNORE;
    b->n_valid = n;
}
