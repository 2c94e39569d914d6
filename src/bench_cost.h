// bench_cost.h — the work each profiled region of one training step does, counted from the shapes: floating-point
// operations, the bytes it must move at least (each input read once, each output written once), and for the scan
// the exp() count (the special-function unit is a ceiling of its own). These are models of the algorithm, not
// instruction counts of any one kernel: they place each op on a roofline of four measured ceilings (op_floor_s)
// and give MFU.
#pragma once
#include <stddef.h>

#include "model.h"

typedef struct {
    double flops, bytes, exps;
    double gemm_flops;  // the part of flops that is matrix products (tensor cores on a GPU, BLAS on the CPU)
    int calls;          // how many times the region runs per step
} OpCost;

// The device's measured ceilings (bench's measure_ceilings); 0 where one was not measured.
typedef struct {
    double gemm_flops_per_s;    // a large bf16 (GPU) or fp32 (CPU) GEMM
    double vector_flops_per_s;  // independent fp32 multiply-adds, 2 FLOPs each (Backend.spin)
    double bytes_per_s;         // a streaming copy, read + write
    double exps_per_s;          // independent exps, the scan's own (Backend.spin)
} Ceilings;

// The least time an op of cost c can take under ceilings k: the largest of its GEMM FLOPs over the GEMM rate, its
// other FLOPs over the vector rate, its bytes over the copy bandwidth and its exps over the exp rate (each unit
// is a ceiling of its own and all of its work must pass through it). Without a vector ceiling every FLOP goes on
// the GEMM one (the two-ceiling roofline); a term whose ceiling is 0 is left out. *bound (if not NULL) names the
// largest term: "gemm", "vector", "memory" or "exp" ("none" when there is no work).
double op_floor_s(const OpCost *c, const Ceilings *k, const char **bound);

typedef struct {
    const ModelConfig *cfg;
    size_t n_params;
    double M;            // tokens computed per step (B*T, padding included)
    size_t act_bytes;    // Backend.act_bytes
    size_t f32_bytes;    // Backend.f32_bytes
    int act_copy;        // 1: the backend keeps a separate ACT copy of the weights (refreshed by AdamW)
    // layers whose backward recomputes their norm, conv and dt_proj outputs (Model.keep_activations), and their
    // in_proj output (Model.keep_in_proj)
    int recompute_acts, recompute_in_proj;
    // layers whose scan states are not kept (Model.keep_scan_states): their backward first runs the checkpoint pass
    int recompute_states;
} CostShape;

// Cost of one step's region `region` ("fwd.scan", "opt.adamw", ...), summed over its calls. 0, or -1 for a
// region this file does not know (its cost is then reported as unknown).
int op_cost(const CostShape *s, const char *region, OpCost *out);
// The op category of a region: "scan", "conv", "in_proj", "x_proj", "dt_proj", "out_proj", "norm",
// "classifier", "embedding", "optimizer", or "other".
const char *op_category(const char *region);
// Direction: "fwd", "bwd", "fwdbwd" (the fused classifier) or "opt".
const char *op_direction(const char *region);
// The categories in report order (NULL-terminated).
extern const char *const op_categories[];
// Training FLOPs per token for MFU: 6 x parameters (every weight is used in one forward and two backward GEMMs
// per token) plus the selective scan's forward and backward, which are not GEMMs.
double model_flops_per_token(const ModelConfig *c, size_t n_params);
