// backend_cuda_stub.c — stands in for backend_cuda.cu in builds without a CUDA compiler (-DPM_CUDA=OFF).
#include "backend.h"
#include "util.h"

const Backend *backend_cuda(int deterministic) {
    (void)deterministic;
    pm_error("this packmamba was built without CUDA (rebuild with nvcc available to use --device cuda)");
    return NULL;
}
int backend_cuda_gemm_tunings(void) { return 0; }
void backend_cuda_gemm_pick(int pick) { (void)pick; }
int backend_cuda_gemm_picked(int *ran, int *tile, int *split) {
    *ran = 0, *tile = -1, *split = -1;
    return 0;
}
int backend_cuda_gemm_tune_after(void) { return 0; }
int backend_cuda_side_tickets(void) { return 0; }
int backend_cuda_reduction_launches(void) { return 0; }
int backend_cuda_scan_ws_launches(int which) {
    (void)which;
    return 0;
}
int backend_cuda_device_info(int *sms) {
    *sms = 0;
    return 0;
}
int backend_cuda_device_uuid(char *buf, size_t n) {
    if (n) buf[0] = 0;
    return -1;
}

// GPU decoding (cuda_decode.cu): never created here, so the rest is never reached.
#include "cuda_decode.h"
CudaDecoder *cuda_decoder_create(const DecodeWeights *w, int lanes) {
    (void)w, (void)lanes;
    pm_error("this packmamba was built without CUDA: no GPU decoding");
    return NULL;
}
int cuda_decoder_lanes(const CudaDecoder *d) {
    (void)d;
    return 0;
}
void cuda_decoder_reset(CudaDecoder *d) { (void)d; }
void cuda_decoder_save(CudaDecoder *d) { (void)d; }
void cuda_decoder_restore(CudaDecoder *d) { (void)d; }
void cuda_decoder_fill_lanes(CudaDecoder *d) { (void)d; }
const float *cuda_decoder_step_lanes(CudaDecoder *d, const int *tokens) {
    (void)d, (void)tokens;
    return NULL;
}
const float *cuda_decoder_step(CudaDecoder *d, int token) {
    (void)d, (void)token;
    return NULL;
}
const float *cuda_decoder_prefill(CudaDecoder *d, const void *const *acts, const float *xf_last, int n) {
    (void)d, (void)acts, (void)xf_last, (void)n;
    return NULL;
}
void cuda_decoder_free(CudaDecoder *d) { (void)d; }
