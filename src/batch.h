// batch.h — one training/eval batch: B rows of T tokens, each token carrying its id, its position within its
// document and its target. This is the only thing the model sees of the data (DESIGN §2).
#pragma once
#include <stdint.h>

#define PM_IGNORE (-1)  // target value for tokens that contribute no loss (document end, padding)

typedef struct {
    int B, T;          // rows, tokens per row
    int32_t *tokens;   // (B*T) token ids; padding uses any valid id (0)
    int32_t *pos;      // (B*T) position within the token's document: 0 at a document's first token.
                       //       A row starts a new document for the kernels unless carry_in says it continues
                       //       one (then it starts from the carried state; backend.h).
    int32_t *targets;  // (B*T) next token of the same document, or PM_IGNORE
    int32_t *doc;      // (B*T) index of the token's document in the data set, -1 for padding
    int64_t n_valid;   // number of targets != PM_IGNORE
    // Carried state (DESIGN §2; batcher_set_carry, Model carry): only a batcher in carry mode sets these; every
    // other batch has them all 0.
    int32_t *carry_in;   // (B) 1: the row's first token continues the document whose previous piece ended the
                         //     same row of the previous batch; the model starts that row from the scan and conv
                         //     state the previous batch left (pos then counts on through the document, not 0)
    int32_t *carry_out;  // (B) 1: the row's last piece does not end its document; the next batch's same row
                         //     continues it (carry_in), so the model keeps the row's final state
} Batch;

Batch batch_alloc(int B, int T);  // all tokens padding: tokens 0, pos 0, targets ignore, doc -1, no carry
void batch_free(Batch *b);
void batch_count_valid(Batch *b);  // recompute n_valid from targets
