// config_file.c — see config_file.h.
#include "config_file.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "batcher.h"
#include "model.h"
#include "util.h"

// "seq_len" / "seq-len" -> "--seq-len"; 0, or -1 if the key is too long or has characters no flag has.
static int key_to_flag(const char *key, char *flag, size_t n) {
    size_t len = strlen(key);
    if (len == 0 || len + 3 > n) return -1;
    flag[0] = flag[1] = '-';
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (c == '_') c = '-';
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return -1;
        flag[2 + i] = c;
    }
    flag[2 + len] = 0;
    return 0;
}

static const ArgSpec *find_spec(const ArgSpec *specs, int nspecs, const char *flag) {
    for (int i = 0; i < nspecs; i++)
        if (strcmp(specs[i].name, flag) == 0) return &specs[i];
    return NULL;
}

// Called for every (key, value) after the type check; returns 0 or -1 with pm_error.
typedef int (*ValueCheck)(const char *path, const char *key, const char *flag, json_t *v);

static const char *type_name(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int load(const char *path, const ArgSpec *specs, int nspecs, ValueCheck check, int argc, char **argv,
                int *out_argc, char ***out_argv) {
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (err.line < 1) return pm_error("%s: cannot read config: %s", path, err.text);
        return pm_error("%s:%d: invalid JSON: %s", path, err.line, err.text);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return pm_error("%s: a config file must be one JSON object of options", path);
    }
    // Worst case two entries per key; argv[0] first, the command line after.
    size_t cap = 1 + 2 * json_object_size(root) + (size_t)(argc > 1 ? argc - 1 : 0) + 1;
    char **out = pm_calloc(cap, sizeof(char *));
    int n = 0;
    out[n++] = argv[0];
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, key, v) {
        char flag[96], val[64];
        const ArgSpec *s = NULL;
        if (key_to_flag(key, flag, sizeof flag) == 0 && strcmp(flag, "--config") != 0 && strcmp(flag, "--help") != 0)
            s = find_spec(specs, nspecs, flag);
        if (!s) {
            rc = pm_error("%s: unknown key '%s' (keys are the command's flag names without dashes; see --help)",
                          path, key);
            break;
        }
        const char *value = NULL;
        switch (s->kind) {
        case ARG_STR:
            if (!json_is_string(v)) rc = pm_error("%s: %s: expected a string, got %s", path, key, type_name(v));
            else value = json_string_value(v);
            break;
        case ARG_INT:
            if (!json_is_integer(v)) {
                rc = pm_error("%s: %s: expected an integer, got %s", path, key, type_name(v));
            } else {
                json_int_t x = json_integer_value(v);
                if (x < -2147483647LL || x > 2147483647LL)
                    rc = pm_error("%s: %s: %lld is out of range", path, key, (long long)x);
                snprintf(val, sizeof val, "%lld", (long long)x);
                value = val;
            }
            break;
        case ARG_FLOAT:
            if (!json_is_number(v)) {
                rc = pm_error("%s: %s: expected a number, got %s", path, key, type_name(v));
            } else {
                double x = json_number_value(v);
                if (!isfinite((float)x)) rc = pm_error("%s: %s: %g is out of range", path, key, x);
                snprintf(val, sizeof val, "%.9g", x);
                value = val;
            }
            break;
        case ARG_BOOL:
            if (!json_is_boolean(v)) rc = pm_error("%s: %s: expected true or false, got %s", path, key, type_name(v));
            break;
        }
        if (rc == 0 && check) rc = check(path, key, flag, v);
        if (rc != 0) break;
        if (s->kind == ARG_BOOL) {
            if (json_is_true(v)) out[n++] = pm_strdup(flag);
        } else {
            out[n++] = pm_strdup(flag);
            out[n++] = pm_strdup(value);
        }
    }
    json_decref(root);
    if (rc != 0) {
        for (int i = 1; i < n; i++) free(out[i]);
        free(out);
        return -1;
    }
    for (int i = 1; i < argc; i++) out[n++] = argv[i];
    out[n] = NULL;
    *out_argc = n;
    *out_argv = out;
    return 0;
}

int config_file_args(const char *path, const ArgSpec *specs, int nspecs, int argc, char **argv, int *out_argc,
                     char ***out_argv) {
    return load(path, specs, nspecs, NULL, argc, argv, out_argc, out_argv);
}

// Lower (and upper) bounds of train's numeric options; hi_open: the upper bound itself is not allowed.
static const struct {
    const char *flag;
    double lo, hi;
    int lo_open, hi_open;
} train_bounds[] = {
    {"--seq-len", 1, 1 << 24, 0, 0},     {"--batch", 1, 1 << 20, 0, 0},     {"--grad-accum", 1, 1 << 20, 0, 0},
    {"--steps", 0, INFINITY, 0, 0},      {"--warmup", 0, INFINITY, 0, 0},   {"--save-every", 0, INFINITY, 0, 0},
    {"--keep", 0, INFINITY, 0, 0},       {"--log-every", 0, INFINITY, 0, 0}, {"--val-every", 0, INFINITY, 0, 0},
    {"--val-batches", 0, INFINITY, 0, 0}, {"--window", 0, INFINITY, 0, 0},  {"--lr", 0, INFINITY, 1, 0},
    {"--min-lr-frac", 0, 1, 0, 0},       {"--beta1", 0, 1, 0, 1},           {"--beta2", 0, 1, 0, 1},
    {"--weight-decay", 0, INFINITY, 0, 0}, {"--grad-clip", 0, INFINITY, 0, 0},
    {"--scan-states-layers", -1, INFINITY, 0, 0},  // -1 (run.json's default): every layer
    {"--memory-budget", 0, INFINITY, 0, 0},        // 0 (run.json's default): not used
};

// 0 where x is in flag's range (or flag has none), else -1 with pm_error "WHERE: NAME: x is not a possible value
// (expected RANGE)".
static int bounds_check(const char *where, const char *name, const char *flag, double x) {
    for (size_t i = 0; i < sizeof train_bounds / sizeof train_bounds[0]; i++) {
        if (strcmp(train_bounds[i].flag, flag) != 0) continue;
        double lo = train_bounds[i].lo, hi = train_bounds[i].hi;
        int bad = train_bounds[i].lo_open ? !(x > lo) : !(x >= lo);
        bad |= train_bounds[i].hi_open ? !(x < hi) : !(x <= hi);
        if (!bad) return 0;
        char range[96];
        if (isinf(hi))
            snprintf(range, sizeof range, "%s %.15g", train_bounds[i].lo_open ? ">" : ">=", lo);
        else
            snprintf(range, sizeof range, "%s%.15g, %.15g%s", train_bounds[i].lo_open ? "(" : "[", lo, hi,
                     train_bounds[i].hi_open ? ")" : "]");
        return pm_error("%s: %s: %g is not a possible value (expected %s)", where, name, x, range);
    }
    return 0;
}

int train_flags_check(const ArgSpec *specs, int nspecs) {
    for (int i = 0; i < nspecs; i++) {
        double x;
        if (specs[i].kind == ARG_INT) x = *(const int *)specs[i].value;
        else if (specs[i].kind == ARG_FLOAT) x = *(const float *)specs[i].value;
        else continue;
        if (bounds_check("train", specs[i].name, specs[i].name, x) != 0) return -1;
    }
    return 0;
}

static int train_check(const char *path, const char *key, const char *flag, json_t *v) {
    if (json_is_number(v)) return bounds_check(path, key, flag, json_number_value(v));
    if (!json_is_string(v)) return 0;
    const char *s = json_string_value(v);
    if (strcmp(flag, "--preset") == 0) {
        ModelConfig c;
        if (config_preset(s, 257, &c) != 0) return pm_error("%s: %s: %s", path, key, pm_last_error());
    } else if (strcmp(flag, "--packing") == 0) {
        if (policy_parse(s) < 0)
            return pm_error("%s: %s: unknown packing '%s' (expected single, pad or pack)", path, key, s);
    } else if (strcmp(flag, "--device") == 0) {
        if (strcmp(s, "cpu") != 0 && strcmp(s, "cuda") != 0 && strcmp(s, "gpu") != 0)
            return pm_error("%s: %s: unknown device '%s' (expected cpu or cuda)", path, key, s);
    } else if (s[0] == 0) {
        return pm_error("%s: %s: empty string", path, key);
    }
    return 0;
}

int train_config_load(const char *path, const ArgSpec *specs, int nspecs, int argc, char **argv, int *out_argc,
                      char ***out_argv) {
    return load(path, specs, nspecs, train_check, argc, argv, out_argc, out_argv);
}

void train_config_free(int out_argc, char **out_argv, int argc) {
    if (!out_argv) return;
    for (int i = 1; i <= out_argc - argc; i++) free(out_argv[i]);  // the file's, after argv[0]; then argv's own
    free(out_argv);
}
