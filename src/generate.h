// generate.h — recurrent (one token at a time) decoding of a model on the host, for `packmamba generate`.
#pragma once
#include "model.h"
#include "util.h"

typedef struct Decoder Decoder;
Decoder *decoder_create(const Model *m);  // copies the model's parameters; states zeroed
void decoder_reset(Decoder *d);           // zero the states (a new document)
// Feed one token; returns the logits (vocab_pad) for the next one (valid until the next call).
const float *decoder_step(Decoder *d, int token);
void decoder_free(Decoder *d);
// temperature <= 0: greedy (argmax); else softmax(logits / temperature) restricted to top_k / top_p.
int sample_token(const float *logits, int vocab, float temperature, int top_k, float top_p, PmRng *rng);
