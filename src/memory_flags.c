// memory_flags.c — see memory_flags.h.
#include "memory_flags.h"

#include <math.h>
#include <stdio.h>

#include "util.h"

void memory_flags_check(const MemoryFlags *f, const char *cmd) {
    if (f->scan_states_layers < -1) pm_die("%s: --scan-states-layers %d: must be >= 0", cmd, f->scan_states_layers);
    if (f->in_proj_layers < -1) pm_die("%s: --in-proj-layers %d: must be >= 0", cmd, f->in_proj_layers);
    if (f->activations_layers < -1) pm_die("%s: --activations-layers %d: must be >= 0", cmd, f->activations_layers);
    if (f->activations_layers != -1 && f->keep_activations)
        pm_die("%s: --activations-layers and --keep-activations: give one (--keep-activations is every layer)", cmd);
    if (f->in_proj_layers != -1 && f->recompute_in_proj)
        pm_die("%s: --in-proj-layers and --recompute-in-proj: give one (--recompute-in-proj is --in-proj-layers 0)", cmd);
    if (f->memory_budget < 0 || !isfinite(f->memory_budget))
        pm_die("%s: --memory-budget %g: must be a positive number of GiB", cmd, (double)f->memory_budget);
    if (f->memory_budget > 0 &&
        (f->recompute_scan || f->keep_activations || f->activations_layers != -1 || f->scan_states_layers != -1 ||
         f->recompute_in_proj || f->in_proj_layers != -1 || f->cast_weights))
        pm_die("%s: --memory-budget picks --keep-activations, --activations-layers, --recompute-scan, "
               "--scan-states-layers, --recompute-in-proj, --in-proj-layers and --cast-weights itself: give it or "
               "them",
               cmd);
}

int memory_flags_settings(const MemoryFlags *f, const ModelConfig *c, const Backend *bk, int B, int T,
                          MemorySettings *s, size_t *bytes) {
    *s = (MemorySettings){f->keep_activations ? -1 : f->activations_layers > 0 ? f->activations_layers : 0,
                          f->recompute_scan ? 0 : f->scan_states_layers,
                          f->recompute_in_proj ? 0 : f->in_proj_layers, f->cast_weights};
    const size_t carry = f->carry_state ? model_carry_train_bytes(c, bk, B, T) : 0;
    const size_t budget = (size_t)((double)f->memory_budget * 1073741824.0);
    const int rc = f->memory_budget <= 0 ? 0 : model_fit_memory(c, bk, B, T, budget > carry ? budget - carry : 0, s);
    *bytes = model_train_bytes(c, bk, B, T, s) + carry;
    return rc;
}

void memory_flags_describe(char *buf, size_t n, const MemoryFlags *f, const ModelConfig *c, const Backend *bk,
                           const MemorySettings *s, size_t bytes) {
    char what[160];
    model_memory_settings_text(what, sizeof what, c, bk, s);
    snprintf(buf, n, "--memory-budget %.2f GiB: %s (estimated %.2f GiB)", (double)f->memory_budget, what,
             bytes / 1073741824.0);
}

void memory_flags_note_rounding(const MemoryFlags *f, const ModelConfig *c, const Backend *bk, const char *cmd) {
    const int want = f->activations_layers, G = model_dw_group(c, bk);
    if (want <= 0 || want >= c->n_layer) return;
    const int got = model_activation_layers(c, want, G);
    if (got != want)
        fprintf(stderr,
                "packmamba: %s: --activations-layers %d: %d layers keep activations (whole groups of %d layers: their "
                "weight gradients are computed together)\n",
                cmd, want, got, G);
}
