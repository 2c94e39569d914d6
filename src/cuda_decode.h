// cuda_decode.h — recurrent decoding on the GPU for `packmamba generate` (cuda_decode.cu): one token at a time
// through every layer, with each layer's conv and SSM states kept on the device. The math is generate.c's host
// decoder (DESIGN §1 specialised to one token), in fp32 from the model's fp32 master weights, which the decoder
// reads where the CUDA backend keeps them (no copy). After the parallel prefill it rebuilds the states on the
// device from the forward's stored activations. C interface; without CUDA (backend_cuda_stub.c) create fails.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One layer's fp32 weights, device pointers (the reference layout: in_proj (2 d_inner, d_model) row-major, ...).
typedef struct {
    const float *norm;      // (d_model)
    const float *A_log;     // (d_inner, N)
    const float *D;         // (d_inner)
    const float *in_proj;   // (2 d_inner, d_model)
    const float *conv_w;    // (d_inner, K)
    const float *conv_b;    // (d_inner)
    const float *x_proj;    // (dt_rank + 2N, d_inner)
    const float *dt_w;      // (d_inner, dt_rank)
    const float *dt_b;      // (d_inner)
    const float *out_proj;  // (d_model, d_inner)
} DecodeLayerWeights;

typedef struct {
    int n_layer, d_model, d_inner, d_state, d_conv, dt_rank, vocab_pad;
    float norm_eps;
    const float *embedding;            // (vocab_pad, d_model), tied with the classifier
    const float *norm_f;               // (d_model)
    const DecodeLayerWeights *layers;  // (n_layer), host array of device pointers (copied by create)
} DecodeWeights;

typedef struct CudaDecoder CudaDecoder;
#define CUDA_DECODE_MAX_LANES 8  // sequences a decoder steps at once (cuda_decoder_create's lanes)

// A decoder of `lanes` (1 .. CUDA_DECODE_MAX_LANES) sequences, each with its own states, stepped together.
// NULL with pm_error where there is no CUDA (a CPU-only build) or the shapes are outside the kernels' (d_state
// <= 16, d_conv <= 4, d_model a multiple of 4, lanes x d_model floats of shared memory; generate then decodes on the
// host). The weights must stay alive and unchanged while the decoder is used.
CudaDecoder *cuda_decoder_create(const DecodeWeights *w, int lanes);
int cuda_decoder_lanes(const CudaDecoder *d);
void cuda_decoder_reset(CudaDecoder *d);  // zero every state (a new document)
void cuda_decoder_save(CudaDecoder *d);     // copy every state aside (one copy: a later save replaces it)
void cuda_decoder_restore(CudaDecoder *d);  // and back
void cuda_decoder_fill_lanes(CudaDecoder *d);  // every lane's states = lane 0's
// Feed one token a lane (tokens: lanes ints); returns the logits for the next ones (lanes x vocab_pad floats, lane
// by lane, host memory, valid until the next call).
const float *cuda_decoder_step_lanes(CudaDecoder *d, const int *tokens);
// The same token to every lane (one lane: its logits).
const float *cuda_decoder_step(CudaDecoder *d, int token);
// Lane 0's states after a prompt of n tokens (one document from position 0) that the parallel forward has just run
// over, from what it stored for each layer on the device: acts[l] its xz (n, 2 d_inner) and acts[n_layer + l] its
// xdbl (n, dt_rank + 2N), bf16; replaces lane 0's states. Then the logits of the token after the prompt from xf_last,
// the final normed hidden state of its last token (d_model fp32, device, 16-byte aligned), as lane 0's (the other
// lanes' logits are stale). Returns them as cuda_decoder_step does.
const float *cuda_decoder_prefill(CudaDecoder *d, const void *const *acts, const float *xf_last, int n);
void cuda_decoder_free(CudaDecoder *d);

#ifdef __cplusplus
}
#endif
