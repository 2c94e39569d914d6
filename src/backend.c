// backend.c — backend lookup by name.
#include <string.h>

#include "backend.h"
#include "util.h"

const Backend *backend_get(const char *name, int deterministic) {
    if (strcmp(name, "cpu") == 0) return backend_cpu();
    if (strcmp(name, "cuda") == 0 || strcmp(name, "gpu") == 0) {
        const Backend *b = backend_cuda(deterministic);
        if (!b) pm_die("--device cuda: %s", pm_last_error());
        return b;
    }
    pm_die("--device %s: unknown device (expected cpu or cuda)", name);
}
