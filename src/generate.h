// generate.h — decoding of a model on the host (or the GPU) for `packmamba generate`: prompt prefill through the parallel
// forward, then recurrent (one token at a time) decoding from each layer's conv and SSM state.
#pragma once
#include "model.h"
#include "util.h"

typedef struct Decoder Decoder;
Decoder *decoder_create(const Model *m);  // copies the model's parameters; states zeroed
// Decoding on the GPU (cuda_decode.h) from the fp32 weights of m, a model on the CUDA backend, which must outlive
// the decoder unchanged; the functions below then run there. NULL with pm_error where it cannot.
Decoder *decoder_create_cuda(const Model *m);
// Decoders of `lanes` sequences stepped together, each with its own states (on the GPU, lanes <= 8: each weight read
// once for all of them). A lane's logits are those of a one-lane decoder fed the same tokens.
Decoder *decoder_create_lanes(const Model *m, int lanes);
Decoder *decoder_create_cuda_lanes(const Model *m, int lanes);
int decoder_lanes(const Decoder *d);
void decoder_reset(Decoder *d);           // zero the states (a new document), every lane's
void decoder_save(Decoder *d);            // copy the states aside (one copy: a later save replaces it)
void decoder_restore(Decoder *d);         // and back (after a save)
void decoder_fill_lanes(Decoder *d);      // every lane's states = lane 0's
// Feed one token (to every lane); returns the logits (vocab_pad) for the next one, lane 0's (valid until the next
// call).
const float *decoder_step(Decoder *d, int token);
// Feed tokens[s] to lane s; returns the logits (lanes, vocab_pad) for the next ones (valid until the next call).
const float *decoder_step_lanes(Decoder *d, const int32_t *tokens);
// Prefill with the parallel forward: run m (the model d was created from, on any backend) over the prompt as one
// document in one row, then derive every layer's conv and SSM state after the prompt from what the forward stored
// (xz and xdbl per layer), replacing lane 0's states. Returns the logits for the token after the prompt (valid until the
// next call), as decoder_step gives after feeding the prompt token by token. n >= 1. Reallocates m's activations
// to one row of n tokens when they hold fewer.
const float *decoder_prefill(Decoder *d, Model *m, const int32_t *tokens, int n);
void decoder_free(Decoder *d);
// temperature <= 0: greedy (argmax); else softmax(logits / temperature) restricted to top_k / top_p.
int sample_token(const float *logits, int vocab, float temperature, int top_k, float top_p, PmRng *rng);
