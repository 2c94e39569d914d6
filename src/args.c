// args.c — see args.h.
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void print_usage(const char *usage, const ArgSpec *specs, int n) {
    printf("usage: %s\n\noptions:\n", usage);
    for (int i = 0; i < n; i++) {
        const ArgSpec *s = &specs[i];
        char def[64] = "";
        switch (s->kind) {
        case ARG_STR: {
            const char *v = *(const char **)s->value;
            if (v) snprintf(def, sizeof def, " (default: %s)", v);
            break;
        }
        case ARG_INT: snprintf(def, sizeof def, " (default: %d)", *(int *)s->value); break;
        case ARG_FLOAT: snprintf(def, sizeof def, " (default: %g)", *(float *)s->value); break;
        case ARG_BOOL: break;
        }
        printf("  %-22s %s%s\n", s->name, s->help, def);
    }
}

void args_parse(int argc, char **argv, const char *usage, ArgSpec *specs, int nspecs, const char **pos,
                int max_pos, int *npos) {
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(usage, specs, nspecs);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || strlen(a) == 2) {
            if (np >= max_pos) pm_die("%s: unexpected argument '%s' (see --help)", argv[0], a);
            pos[np++] = a;
            continue;
        }
        // --flag=value or --flag value
        char name[64];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) pm_die("%s: unknown option '%s' (see --help)", argv[0], a);
        memcpy(name, a, len);
        name[len] = 0;
        ArgSpec *s = NULL;
        for (int k = 0; k < nspecs; k++)
            if (strcmp(specs[k].name, name) == 0) s = &specs[k];
        if (!s) pm_die("%s: unknown option '%s' (see --help)", argv[0], name);
        if (s->kind == ARG_BOOL) {
            if (eq) pm_die("%s: option %s takes no value", argv[0], name);
            *(int *)s->value = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) pm_die("%s: option %s needs a value", argv[0], name);
        char *end;
        errno = 0;
        switch (s->kind) {
        case ARG_STR: *(const char **)s->value = v; break;
        case ARG_INT: {
            long x = strtol(v, &end, 10);
            if (*v == 0 || *end || errno || x < -2147483647L || x > 2147483647L)
                pm_die("%s: option %s expects an integer, got '%s'", argv[0], name, v);
            *(int *)s->value = (int)x;
            break;
        }
        case ARG_FLOAT: {
            float x = strtof(v, &end);
            if (*v == 0 || *end || errno || !isfinite(x))  // (no option takes nan or inf)
                pm_die("%s: option %s expects a finite number, got '%s'", argv[0], name, v);
            *(float *)s->value = x;
            break;
        }
        case ARG_BOOL: break;
        }
    }
    if (npos) *npos = np;
}
