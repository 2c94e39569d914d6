// memory_flags.h — the memory/speed flags `train` and `bench` share: --recompute-scan, --scan-states-layers,
// --keep-activations, --activations-layers, --recompute-in-proj, --in-proj-layers, --cast-weights and
// --memory-budget; their checks, and the
// MemorySettings (model.h) they come to for a model and a batch shape.
#pragma once
#include "args.h"
#include "backend.h"
#include "model.h"

typedef struct {
    // scan_states_layers, in_proj_layers -1: every layer; activations_layers -1: not given (none)
    int recompute_scan, scan_states_layers, keep_activations, activations_layers, recompute_in_proj, in_proj_layers;
    int cast_weights;
    float memory_budget;  // GiB; 0: not used
    int carry_state;      // (set by the command, no flag of its own) the estimate counts the carried state's buffers
} MemoryFlags;
#define MEMORY_FLAGS_DEFAULT {0, -1, 0, -1, 0, -1, 0, 0.0f, 0}

// The eight flags' entries of a command's ArgSpec table, writing into the MemoryFlags f.
#define MEMORY_FLAG_SPECS(f)                                                                                          \
    {"--recompute-scan", ARG_BOOL, &(f).recompute_scan,                                                               \
     "GPU: the backward recomputes the scan states instead of keeping them from the forward (less memory, slower)"}, \
        {"--scan-states-layers", ARG_INT, &(f).scan_states_layers,                                                    \
         "GPU: only the last N layers keep their scan states (between --recompute-scan and the default, all)"},       \
        {"--keep-activations", ARG_BOOL, &(f).keep_activations,                                                       \
         "every layer keeps its norm, conv, dt_proj and scan outputs instead of the backward recomputing them "       \
         "(faster, more memory)"},                                                                                    \
        {"--activations-layers", ARG_INT, &(f).activations_layers,                                                    \
         "only the last N layers keep them (between the default, none, and --keep-activations, all)"},                \
        {"--recompute-in-proj", ARG_BOOL, &(f).recompute_in_proj,                                                     \
         "the backward recomputes each layer's in_proj output instead of keeping it (less memory, slower)"},          \
        {"--in-proj-layers", ARG_INT, &(f).in_proj_layers,                                                            \
         "only the last N layers keep their in_proj output (between --recompute-in-proj and the default, all)"},      \
        {"--cast-weights", ARG_BOOL, &(f).cast_weights,                                                               \
         "GPU: keep no bf16 copy of the layers' weights; cast each layer's from the fp32 masters when it runs "        \
         "(2 bytes a parameter less, slower)"},                                                                       \
        {"--memory-budget", ARG_FLOAT, &(f).memory_budget,                                                            \
         "GiB: the fastest of the settings above whose estimated training bytes fit (0: not used)"}

// Dies with one line naming cmd on a negative --scan-states-layers, --activations-layers, --in-proj-layers or
// --memory-budget, --in-proj-layers given with --recompute-in-proj or --activations-layers with
// --keep-activations, or a budget given together with any of the settings it picks
// itself.
void memory_flags_check(const MemoryFlags *f, const char *cmd);
// The settings for a model c on bk training batches (B, T): the flags' as given, or with a budget the fastest
// that fit (model_fit_memory), and in *bytes their estimated training bytes (model_train_bytes, plus
// model_carry_train_bytes with f->carry_state). Returns 0, or -1 when even the leanest does not fit (*s is then the
// leanest).
int memory_flags_settings(const MemoryFlags *f, const ModelConfig *c, const Backend *bk, int B, int T,
                          MemorySettings *s, size_t *bytes);
// One line for logs, from the settings and estimate memory_flags_settings gave: "--memory-budget 29.76 GiB:
// recompute activations, scan states for 0 of 48 layers, in_proj outputs for 18 of 48 layers (estimated 29.7 GiB)".
void memory_flags_describe(char *buf, size_t n, const MemoryFlags *f, const ModelConfig *c, const Backend *bk,
                           const MemorySettings *s, size_t bytes);
// One stderr line when --activations-layers N is not a whole number of weight-gradient groups (model_dw_group),
// saying how many layers keep activations (model_activation_layers rounds down).
void memory_flags_note_rounding(const MemoryFlags *f, const ModelConfig *c, const Backend *bk, const char *cmd);
