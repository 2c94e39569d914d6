// bench.c — `packmamba bench` (bench.h): builds the sweep, measures ceilings, runs every configuration with the
// profiler on the model's hook, accounts memory through a counting wrapper around the backend's allocator, samples
// NVML, and hands the results document to report.c.
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "backend.h"
#include "batcher.h"
#include "bench_cost.h"
#include "memory_flags.h"
#include "model.h"
#include "nvml_probe.h"
#include "profiler.h"
#include "report.h"
#include "tokenizer.h"

// A JSON number, or null where the value is not finite (jansson has no NaN).
static json_t *jr(double v) { return isfinite(v) ? json_real(v) : json_null(); }

// ---------------------------------------------------------------------------------------------------------------
// sweep lists

const char *bench_policy_name(int p) {
    switch (p) {
        case PM_POLICY_SINGLE: return "single";
        case PM_POLICY_PAD: return "pad";
        case PM_POLICY_PACK: return "pack";
        case BENCH_POLICY_FIXED: return "fixed";
    }
    return "?";
}

int bench_policy_parse(const char *s) {
    for (int p = 0; p <= BENCH_POLICY_FIXED; p++)
        if (strcmp(s, bench_policy_name(p)) == 0) return p;
    return -1;
}

// Splits a comma list into at most `max` trimmed items of at most 63 characters. Returns the count or -1.
static int split_list(const char *what, const char *s, char items[][64], int max) {
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (*p == ' ')) p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len == 0) return pm_error("%s '%s': empty item in the list", what, s);
        if (len > 63) return pm_error("%s '%s': item too long", what, s);
        if (n == max) return pm_error("%s '%s': more than %d items", what, s, max);
        memcpy(items[n], p, len);
        items[n][len] = 0;
        n++;
        if (!e) break;
        p = e + 1;
    }
    return n;
}

// Integer with an optional K (x1024) suffix, >= 1.
static int parse_count(const char *what, const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end != s && (*end == 'K' || *end == 'k')) v *= 1024, end++;
    if (end == s || *end || errno || v < 1 || v > (1L << 30)) return pm_error("%s: '%s' is not a positive integer", what, s);
    *out = (int)v;
    return 0;
}

static int int_list(const char *what, const char *s, int *v, int max) {
    if (!s || !*s) return 0;
    char items[64][64];
    int n = split_list(what, s, items, max < 64 ? max : 64);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++)
        if (parse_count(what, items[i], &v[i]) != 0) return -1;
    return n;
}

int bench_expand(const char *presets, const char *n_layers, const char *d_models, const char *d_states,
                 const char *seq_lens, const char *batches, int tokens, const char *policies, BenchConfig **out,
                 int *n) {
    char pr[64][64], po[64][64];
    int nl[64], dm[64], ds[64], ts[64], bs[64];
    int npr = split_list("--preset", presets && *presets ? presets : "tiny", pr, 64);
    int npo = split_list("--policy", policies && *policies ? policies : "fixed", po, 64);
    int nnl = int_list("--n-layer", n_layers, nl, 64), ndm = int_list("--d-model", d_models, dm, 64);
    int nds = int_list("--d-state", d_states, ds, 64);
    int nts = int_list("--seq-len", seq_lens && *seq_lens ? seq_lens : "512", ts, 64);
    int nbs = tokens > 0 ? 1 : int_list("--batch", batches && *batches ? batches : "1", bs, 64);
    if (tokens < 0) return pm_error("--tokens %d: must be positive", tokens);
    if (npr < 0 || npo < 0 || nnl < 0 || ndm < 0 || nds < 0 || nts < 0 || nbs < 0) return -1;
    int pol[64];
    for (int i = 0; i < npo; i++)
        if ((pol[i] = bench_policy_parse(po[i])) < 0)
            return pm_error("--policy %s: unknown policy (expected fixed, single, pad or pack)", po[i]);
    int added = 0;
    for (int a = 0; a < npr; a++) {
        ModelConfig base;
        if (config_preset(pr[a], 256, &base) != 0) return pm_error("--preset: %s", pm_last_error());
        for (int b = 0; b < (nnl ? nnl : 1); b++)
            for (int c = 0; c < (ndm ? ndm : 1); c++)
                for (int d = 0; d < (nds ? nds : 1); d++)
                    for (int e = 0; e < nts; e++)
                        for (int f = 0; f < nbs; f++)
                            for (int g = 0; g < npo; g++) {
                                BenchConfig x;
                                memset(&x, 0, sizeof x);
                                snprintf(x.preset, sizeof x.preset, "%.31s", pr[a]);
                                x.n_layer = nnl ? nl[b] : base.n_layer;
                                x.d_model = ndm ? dm[c] : base.d_model;
                                x.d_state = nds ? ds[d] : 16;
                                x.T = ts[e], x.policy = pol[g];
                                x.B = tokens > 0 ? (tokens / ts[e] > 1 ? tokens / ts[e] : 1) : bs[f];
                                x.tokens = tokens > 0 ? tokens : 0;
                                *out = pm_realloc(*out, sizeof(BenchConfig) * (*n + 1));
                                (*out)[(*n)++] = x;
                                added++;
                            }
    }
    return added;
}

// A sweep-file value (number, string, or array of them) as a comma list in buf. 0, 1 when absent, or -1.
static int json_list(const char *path, json_t *obj, const char *key, char *buf, size_t n) {
    json_t *v = json_object_get(obj, key);
    buf[0] = 0;
    if (!v) return 1;
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (count == 0) return pm_error("%s: \"%s\" is an empty list", path, key);
    for (size_t i = 0; i < count; i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        char item[64];
        if (json_is_integer(x)) snprintf(item, sizeof item, "%lld", (long long)json_integer_value(x));
        else if (json_is_string(x)) snprintf(item, sizeof item, "%s", json_string_value(x));
        else return pm_error("%s: \"%s\" must be a number, a string or a list of them", path, key);
        size_t used = strlen(buf);
        if (used + strlen(item) + 2 > n) return pm_error("%s: \"%s\" is too long", path, key);
        snprintf(buf + used, n - used, "%s%s", i ? "," : "", item);
    }
    return 0;
}

int bench_parse_sweep_file(const char *path, BenchConfig **out, int *n, BenchFileOptions *opt) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root && err.line < 1) return pm_error("%s: %s", path, err.text);
    if (!root) return pm_error("%s: line %d: %s", path, err.line, err.text);
    int rc = -1;
    if (!json_is_object(root)) {
        pm_error("%s: expected a JSON object with a \"sweeps\" list", path);
        goto done;
    }
    static const char *const known[] = {"steps", "warmup", "profile_steps", "vocab", "device", "data", "sweeps",
                                        "preset", "n_layer", "d_model", "d_state", "seq_len", "batch", "policy",
                                        "tokens", "comment", NULL};
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        int ok = 0;
        for (int i = 0; known[i]; i++) ok |= strcmp(key, known[i]) == 0;
        if (!ok) {
            pm_error("%s: unknown key \"%s\"", path, key);
            goto done;
        }
    }
    struct {
        const char *key;
        int *dst;
    } ints[] = {{"steps", &opt->steps}, {"warmup", &opt->warmup}, {"profile_steps", &opt->profile_steps},
                {"vocab", &opt->vocab}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        json_t *v = json_object_get(root, ints[i].key);
        if (!v) continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            pm_error("%s: \"%s\" must be a non-negative integer", path, ints[i].key);
            goto done;
        }
        *ints[i].dst = (int)json_integer_value(v);
    }
    json_t *dev = json_object_get(root, "device"), *data = json_object_get(root, "data");
    if (dev) {
        if (!json_is_string(dev)) {
            pm_error("%s: \"device\" must be a string", path);
            goto done;
        }
        snprintf(opt->device, sizeof opt->device, "%s", json_string_value(dev));
    }
    if (data) {
        if (!json_is_string(data)) {
            pm_error("%s: \"data\" must be a string", path);
            goto done;
        }
        snprintf(opt->data, sizeof opt->data, "%s", json_string_value(data));
    }
    json_t *sweeps = json_object_get(root, "sweeps");
    if (sweeps && (!json_is_array(sweeps) || json_array_size(sweeps) == 0)) {
        pm_error("%s: \"sweeps\" must be a non-empty list of objects", path);
        goto done;
    }
    size_t ns = sweeps ? json_array_size(sweeps) : 1;
    for (size_t i = 0; i < ns; i++) {
        json_t *s = sweeps ? json_array_get(sweeps, i) : root;
        if (!json_is_object(s)) {
            pm_error("%s: sweeps[%zu] is not an object", path, i);
            goto done;
        }
        static const char *const fields[] = {"preset", "n_layer", "d_model", "d_state", "seq_len", "batch",
                                             "policy"};
        char v[7][1024];
        for (int f = 0; f < 7; f++)
            if (json_list(path, s, fields[f], v[f], sizeof v[f]) < 0) goto done;
        json_t *tok = json_object_get(s, "tokens"), *bdata = sweeps ? json_object_get(s, "data") : NULL;
        if (tok && (!json_is_integer(tok) || json_integer_value(tok) < 1 || json_integer_value(tok) > (1 << 30))) {
            pm_error("%s: sweeps[%zu]: \"tokens\" must be a positive integer", path, i);
            goto done;
        }
        if (tok && json_object_get(s, "batch")) {
            pm_error("%s: sweeps[%zu]: give \"tokens\" or \"batch\", not both", path, i);
            goto done;
        }
        if (bdata && (!json_is_string(bdata) || strlen(json_string_value(bdata)) >= sizeof((BenchConfig *)0)->data)) {
            pm_error("%s: sweeps[%zu]: \"data\" must be a directory name", path, i);
            goto done;
        }
        if (sweeps) {
            json_object_foreach(s, key, val) {
                int ok = !strcmp(key, "comment") || !strcmp(key, "tokens") || !strcmp(key, "data");
                for (int f = 0; f < 7; f++) ok |= strcmp(key, fields[f]) == 0;
                if (!ok) {
                    pm_error("%s: sweeps[%zu]: unknown key \"%s\"", path, i, key);
                    goto done;
                }
            }
        }
        int first = *n;
        if (bench_expand(v[0], v[1], v[2], v[3], v[4], v[5], tok ? (int)json_integer_value(tok) : 0, v[6], out, n) < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", pm_last_error());
            pm_error("%s: sweeps[%zu]: %s", path, i, msg);
            goto done;
        }
        if (bdata)
            for (int k = first; k < *n; k++) snprintf((*out)[k].data, sizeof (*out)[k].data, "%s", json_string_value(bdata));
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

// ---------------------------------------------------------------------------------------------------------------
// synthetic batches

int bench_synth_doc_len(PmRng *r) {
    // lognormal: median e^mu = 398; mean e^(mu + s^2/2) = 640 -> s^2 = 2 ln(640/398)
    const double mu = log(398.0), sigma = sqrt(2.0 * log(640.0 / 398.0));
    double L = exp(mu + sigma * pm_rng_normal(r));
    if (L < 2) L = 2;
    if (L > 4096) L = 4096;
    return (int)L;
}

// The next piece of the document stream: documents longer than T are cut into T-sized pieces (DESIGN §2).
static void next_piece(BenchSynth *s, int T, int *len, int *doc, int *last) {
    if (s->carry_len <= 0) {
        s->carry_len = bench_synth_doc_len(&s->rng);
        s->carry_doc = s->next_doc++;
    }
    *len = s->carry_len < T ? s->carry_len : T;
    *doc = s->carry_doc;
    s->carry_len -= *len;
    *last = s->carry_len == 0;
}

// Writes one piece at b's flat offset `off`: random tokens, positions from 0, targets the next token (the
// piece's last token predicts an end-of-document id, vocab-1, or nothing when the document goes on).
static void put_piece(BenchSynth *s, Batch *b, int off, int len, int doc, int last, int vocab) {
    for (int i = 0; i < len; i++) b->tokens[off + i] = (int32_t)(pm_rng_u64(&s->rng) % (uint64_t)(vocab - 1));
    for (int i = 0; i < len; i++) {
        b->pos[off + i] = i;
        b->doc[off + i] = doc;
        b->targets[off + i] = i + 1 < len ? b->tokens[off + i + 1] : last ? vocab - 1 : PM_IGNORE;
    }
}

static void clear_rows(Batch *b, int n) {
    for (int i = 0; i < n; i++) b->tokens[i] = 0, b->pos[i] = 0, b->targets[i] = PM_IGNORE, b->doc[i] = -1;
}

#define SYNTH_WINDOW 64  // pieces considered for best fit when packing

void bench_synth_batch(BenchSynth *s, Batch *b, int policy, int B, int T, int vocab) {
    int len, doc, last;
    if (policy == BENCH_POLICY_FIXED) {
        b->B = B, b->T = T;
        for (int r = 0; r < B; r++) put_piece(s, b, r * T, T, s->next_doc++, 1, vocab);
    } else if (policy == PM_POLICY_SINGLE) {
        next_piece(s, T, &len, &doc, &last);
        b->B = 1, b->T = len;
        put_piece(s, b, 0, len, doc, last, vocab);
    } else if (policy == PM_POLICY_PAD) {
        int L[B], D[B], F[B], maxl = 1;
        for (int r = 0; r < B; r++) {
            next_piece(s, T, &L[r], &D[r], &F[r]);
            if (L[r] > maxl) maxl = L[r];
        }
        b->B = B, b->T = maxl;
        clear_rows(b, B * maxl);
        for (int r = 0; r < B; r++) put_piece(s, b, r * maxl, L[r], D[r], F[r], vocab);
    } else {  // pack: best fit over a window of pending pieces
        if (!s->pool) {
            s->pool = pm_malloc(sizeof(int) * SYNTH_WINDOW);
            s->pool_doc = pm_malloc(sizeof(int) * SYNTH_WINDOW);
            s->pool_last = pm_malloc(sizeof(int) * SYNTH_WINDOW);
        }
        b->B = B, b->T = T;
        clear_rows(b, B * T);
        for (int r = 0; r < B; r++) {
            int used = 0;
            for (;;) {
                while (s->pool_n < SYNTH_WINDOW) {
                    next_piece(s, T, &len, &doc, &last);
                    s->pool[s->pool_n] = len, s->pool_doc[s->pool_n] = doc, s->pool_last[s->pool_n] = last;
                    s->pool_n++;
                }
                int best = -1;
                for (int i = 0; i < s->pool_n; i++)
                    if (s->pool[i] <= T - used && (best < 0 || s->pool[i] > s->pool[best])) best = i;
                if (best < 0) break;
                put_piece(s, b, r * T + used, s->pool[best], s->pool_doc[best], s->pool_last[best], vocab);
                used += s->pool[best];
                // keep the pool in arrival order so the oldest pieces are not starved
                for (int i = best; i + 1 < s->pool_n; i++) {
                    s->pool[i] = s->pool[i + 1], s->pool_doc[i] = s->pool_doc[i + 1];
                    s->pool_last[i] = s->pool_last[i + 1];
                }
                s->pool_n--;
            }
        }
    }
    batch_count_valid(b);
}

void bench_synth_free(BenchSynth *s) {
    free(s->pool);
    free(s->pool_doc);
    free(s->pool_last);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------------------------------------------------------
// memory: a counting wrapper around the backend's allocator, device/process usage

enum { MEM_PARAMS, MEM_GRADS, MEM_OPT, MEM_ACTS, MEM_BENCH, MEM_NCAT };
static const Backend *g_real;  // the wrapped backend
static struct {
    void *p;
    size_t bytes;
    int cat;
} *g_recs;
static int g_nrec, g_caprec, g_cat;

static void *count_alloc(size_t bytes) {
    void *p = g_real->alloc(bytes);
    if (g_nrec == g_caprec) {
        g_caprec = g_caprec ? 2 * g_caprec : 64;
        g_recs = pm_realloc(g_recs, sizeof *g_recs * g_caprec);
    }
    g_recs[g_nrec].p = p, g_recs[g_nrec].bytes = bytes, g_recs[g_nrec].cat = g_cat;
    g_nrec++;
    return p;
}

static void count_free(void *p) {
    for (int i = 0; i < g_nrec; i++)
        if (g_recs[i].p == p) {
            g_recs[i] = g_recs[--g_nrec];
            break;
        }
    g_real->free(p);
}

static size_t rec_bytes(const void *p) {
    for (int i = 0; i < g_nrec; i++)
        if (g_recs[i].p == p) return g_recs[i].bytes;
    return 0;
}

static void rec_set_cat(const void *p, int cat) {
    for (int i = 0; i < g_nrec; i++)
        if (g_recs[i].p == p) g_recs[i].cat = cat;
}

static size_t cat_bytes(int cat) {
    size_t s = 0;
    for (int i = 0; i < g_nrec; i++)
        if (g_recs[i].cat == cat) s += g_recs[i].bytes;
    return s;
}

static int g_is_cuda;

// Memory in use now: device memory (CUDA) or the process's resident set (CPU). 0 if unknown.
static size_t mem_in_use(void) {
    if (g_real && g_real->mem_info) {  // device memory
        size_t fr = 0, tot = 0;
        return g_real->mem_info(&fr, &tot) == 0 ? tot - fr : 0;
    }
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, rss = 0;
    int ok = fscanf(f, "%lu %lu", &size, &rss) == 2;
    fclose(f);
    return ok ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

// Memory a new allocation could still get: free device memory, or MemAvailable. 0 if unknown.
static size_t mem_available(void) {
    if (g_real && g_real->mem_info) {
        size_t fr = 0, tot = 0;
        return g_real->mem_info(&fr, &tot) == 0 ? fr : 0;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static size_t g_mem_peak;
static void mem_sample(void *ctx) {
    size_t u = mem_in_use();
    if (u > g_mem_peak) g_mem_peak = u;
}

// ---------------------------------------------------------------------------------------------------------------
// ceilings: a streaming copy and a large GEMM through the backend; the vector and special-function units through
// Backend.spin where the backend has it

// One run of a ceiling's work: the backend's copy or F32 -> ACT conversion of `bytes`, or Backend.spin of about n
// operations of `kind`; a run returns what spin returns (0 for the others).
typedef struct {
    void *dst, *src;
    size_t bytes;
    int kind;
    double n;
} CeilingJob;
static double run_copy(const Backend *bk, const CeilingJob *j) {
    bk->copy(j->dst, j->src, j->bytes);
    return 0;
}
static double run_convert(const Backend *bk, const CeilingJob *j) {
    bk->f32_to_act(j->dst, j->src, j->bytes / bk->f32_bytes);
    return 0;
}
static double run_spin(const Backend *bk, const CeilingJob *j) { return bk->spin(j->kind, j->n); }
// The best time of `reps` runs, each between two synchronizes, after one untimed run; *ret gets a run's return.
static double best_run_s(const Backend *bk, int reps, double (*run)(const Backend *, const CeilingJob *),
                         const CeilingJob *j, double *ret) {
    double best = 1e30, r = run(bk, j);
    for (int i = 0; i < reps; i++) {
        bk->synchronize();
        const double t = pm_now();
        r = run(bk, j);
        bk->synchronize();
        if (pm_now() - t < best) best = pm_now() - t;
    }
    if (ret) *ret = r;
    return best;
}

static void measure_ceilings(const Backend *bk, json_t *out, Ceilings *k) {
    const int gpu = g_is_cuda;
    // copy: 1 GiB on a GPU (well past every cache), 64 MiB on the CPU
    size_t bytes = gpu ? (1ull << 30) : (64ull << 20);
    int reps = gpu ? 20 : 5;
    CeilingJob cj = {bk->alloc(bytes), bk->alloc(bytes), bytes, 0, 0};
    const char *method = bk->copy ? "backend copy (read + write)" : "f32_to_act conversion (read F32 + write ACT)";
    const double moved = bk->copy ? 2.0 * bytes : (double)(bytes / bk->f32_bytes) * (bk->f32_bytes + bk->act_bytes);
    k->bytes_per_s = moved / best_run_s(bk, reps, bk->copy ? run_copy : run_convert, &cj, NULL);
    bk->free(cj.src);
    bk->free(cj.dst);

    // GEMM: square, random operands (zeros would flatter a GPU's power and clocks)
    int n = gpu ? 8192 : 1024;
    reps = gpu ? 20 : 3;
    size_t nn = (size_t)n * n;
    float *host = pm_malloc(nn * sizeof(float));
    PmRng rng;
    pm_rng_seed(&rng, 7);
    for (size_t i = 0; i < nn; i++) host[i] = pm_rng_uniform(&rng) - 0.5f;
    void *f32 = bk->alloc(nn * bk->f32_bytes), *A = bk->alloc(nn * bk->act_bytes), *W = bk->alloc(nn * bk->act_bytes),
         *C = bk->alloc(nn * bk->act_bytes);
    bk->upload(f32, host, nn * sizeof(float));
    bk->f32_to_act(A, f32, nn);
    bk->f32_to_act(W, f32, nn);
    free(host);
    bk->free(f32);
    bk->matmul_fwd(C, n, A, n, W, NULL, n, n, n);
    bk->synchronize();
    double t = pm_now();
    for (int r = 0; r < reps; r++) bk->matmul_fwd(C, n, A, n, W, NULL, n, n, n);
    bk->synchronize();
    double dt = pm_now() - t;
    bk->free(A);
    bk->free(W);
    bk->free(C);
    k->gemm_flops_per_s = 2.0 * n * (double)n * n * reps / dt;
    json_object_set_new(out, "copy_bytes_per_s", jr(k->bytes_per_s));
    json_object_set_new(out, "copy_method", json_string(method));
    json_object_set_new(out, "copy_bytes", json_integer((json_int_t)bytes));
    json_object_set_new(out, "gemm_flops_per_s", jr(k->gemm_flops_per_s));
    json_object_set_new(out, "gemm_mnk", json_integer(n));
    json_object_set_new(out, "gemm_dtype", json_string(bk->act_bytes == 2 ? "bf16" : bk->act_bytes == 4 ? "fp32" : "fp64"));
    // vector FMAs and exps: ~10 ms of each at the GPU's rates, ~50 ms at a few CPU cores'
    k->vector_flops_per_s = k->exps_per_s = 0;
    if (bk->spin) {
        double ops, s;
        CeilingJob fma = {NULL, NULL, 0, PM_SPIN_FMA, gpu ? 6e11 : 2e9}, ex = {NULL, NULL, 0, PM_SPIN_EXP, gpu ? 4e10 : 2e8};
        s = best_run_s(bk, 5, run_spin, &fma, &ops);
        k->vector_flops_per_s = ops / s;
        s = best_run_s(bk, 5, run_spin, &ex, &ops);
        k->exps_per_s = ops / s;
        json_object_set_new(out, "vector_flops_per_s", jr(k->vector_flops_per_s));
        json_object_set_new(out, "exps_per_s", jr(k->exps_per_s));
        json_object_set_new(out, "spin_method", json_string(gpu ? "Backend.spin: fp32 FMA / ex2.approx chains, 8 a thread, 2048 threads an SM"
                                                                : "Backend.spin: fp32 FMA / exp chains in omp simd loops, every thread"));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// progress

typedef struct {
    int tty;
    long total, done;
    double t0;
    int n_cfg;
} Progress;

static void progress_draw(Progress *p, int ci, const char *label, int step, int steps) {
    if (!p->tty) return;
    double frac = p->total ? (double)p->done / p->total : 0, el = pm_now() - p->t0;
    int w = 30, fill = (int)(frac * w);
    char bar[64];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '-';
    bar[w] = 0;
    char eta[32] = "?";
    if (frac > 0.02) {
        int s = (int)(el / frac - el);
        snprintf(eta, sizeof eta, "%d:%02d", s / 60, s % 60);
    }
    fprintf(stderr, "\r\033[K[%s] %3.0f%%  %d/%d %s  step %d/%d  eta %s", bar, 100 * frac, ci + 1, p->n_cfg, label, step,
            steps, eta);
    fflush(stderr);
}

static void progress_line(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress_line(Progress *p, const char *fmt, ...) {
    if (p->tty) fprintf(stderr, "\r\033[K");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

// ---------------------------------------------------------------------------------------------------------------
// one configuration

typedef struct {
    const Backend *bk;  // the counting wrapper
    const char *device, *out;
    int steps, warmup, profile_steps, seed, window, vocab, use_events;
    double warmup_s;  // the warm-up also lasts at least this long (seconds), cycling through its batches
    int fp32_logits;  // --fp32-logits (Model.fp32_logits)
    int carry_state;  // --carry-state: pack with data, the batcher's chains and the model's carried state
    MemoryFlags mem;  // the memory/speed flags: each configuration's MemorySettings (memory_flags_settings)
    Ceilings ceil;    // measured at start (measure_ceilings)
    size_t mem_base;  // memory in use before any model
    Profiler prof;
    NvmlProbe *nvml;
    Progress progress;
    json_t *trace;  // traceEvents array
} Bench;

static void model_label(const BenchConfig *c, char *buf, size_t n) {
    ModelConfig p;
    if (c->preset[0] && config_preset(c->preset, 256, &p) == 0 && p.n_layer == c->n_layer && p.d_model == c->d_model &&
        c->d_state == 16)
        snprintf(buf, n, "%s", c->preset);
    else if (c->d_state == 16)
        snprintf(buf, n, "L%d-d%d", c->n_layer, c->d_model);
    else
        snprintf(buf, n, "L%d-d%d-N%d", c->n_layer, c->d_model, c->d_state);
}

// The run's --data, used by configurations that name no data of their own.
static const char *g_default_data;

// The data directory of a configuration, or NULL for synthetic batches.
static const char *config_data(const BenchConfig *c) { return c->data[0] ? c->data : g_default_data; }

// "synthetic", or the data directory's last component.
static void data_label(const BenchConfig *c, char *buf, size_t n) {
    const char *d = config_data(c);
    if (!d) {
        snprintf(buf, n, "synthetic");
        return;
    }
    size_t len = strlen(d);
    while (len > 1 && d[len - 1] == '/') len--;
    const char *b = d + len;
    while (b > d && b[-1] != '/') b--;
    snprintf(buf, n, "%.*s", (int)(d + len - b), b);
}

static int g_carry_label;  // (--carry-state: "pack+carry" in the labels)
static void config_label(const BenchConfig *c, char *buf, size_t n) {
    char m[64], dl[128];
    model_label(c, m, sizeof m);
    data_label(c, dl, sizeof dl);
    if (config_data(c))
        snprintf(buf, n, "%s T=%d B=%d %s%s data=%s", m, c->T, c->B, bench_policy_name(c->policy),
                 g_carry_label && c->policy == PM_POLICY_PACK ? "+carry" : "", dl);
    else snprintf(buf, n, "%s T=%d B=%d %s", m, c->T, c->B, bench_policy_name(c->policy));
}

static ModelConfig model_config(const BenchConfig *c, int vocab) {
    ModelConfig mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layer = c->n_layer, mc.d_model = c->d_model, mc.d_state = c->d_state, mc.vocab_size = vocab;
    config_derive(&mc);
    return mc;
}

static int same_model(const BenchConfig *a, const BenchConfig *b) {
    return a->n_layer == b->n_layer && a->d_model == b->d_model && a->d_state == b->d_state;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Quantile q of sorted v (linear interpolation between order statistics).
static double quantile(const double *v, int n, double q) {
    if (n == 0) return NAN;
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static json_t *stat_json(const NvmlStat *s) {
    if (!s->n) return json_null();
    return json_pack("{s:f, s:f, s:f}", "mean", s->mean, "min", s->min, "max", s->max);
}

// One training step; returns its wall time (seconds) and its loss in *loss.
static double train_step(Bench *bn, Model *m, const Batch *b, int hooked, int accumulate, double *loss) {
    static const OptimConfig oc = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    m->hook = hooked ? prof_hook : NULL;
    m->hook_ctx = &bn->prof;
    if (hooked) prof_step_begin(&bn->prof);
    double t0 = pm_now();
    if (hooked) prof_hook(&bn->prof, "opt.zero_grad", 1);
    model_zero_grad(m);
    if (hooked) prof_hook(&bn->prof, "opt.zero_grad", 0);
    *loss = model_forward_backward(m, b, b->n_valid ? 1.0f / (float)b->n_valid : 0.0f, NULL);
    model_optimizer_step(m, &oc, oc.lr);
    bn->bk->synchronize();
    double dt = pm_now() - t0;
    if (hooked) prof_step_end(&bn->prof, accumulate);
    m->hook = NULL;
    return dt;
}

static void add_trace(Bench *bn, int ci, const char *label, const Model *m, double step_s) {
    json_t *ev = bn->trace;
    int pid = ci + 1;
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", pid,
                                        "tid", 1, "args", "name", label));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name", "process_sort_index", "ph", "M", "pid",
                                        pid, "tid", 1, "args", "sort_index", pid));
    json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i}", "name", "step", "cat", "step", "ph", "X",
                                        "ts", 0.0, "dur", step_s * 1e6, "pid", pid, "tid", 1));
    const int L = m->cfg.n_layer;
    int bwd_norms = 0;  // backward norm regions so far: each layer's backward ends with its norm's
    for (int i = 0; i < bn->prof.n_ev; i++) {
        const ProfEvent *e = &bn->prof.ev[i];
        const char *cat = op_category(e->name), *dir = op_direction(e->name);
        // which layer: forward ops run layers 0..L-1 (the norm's last call is the final norm); the backward runs
        // them in reverse, starting with the final norm, each layer's regions ending with its norm's (counting by
        // norms, not by calls of a name: out_proj's backward is two regions a layer)
        int layer = -1;
        int per_layer = strcmp(cat, "norm") && strcmp(cat, "classifier") && strcmp(cat, "embedding") &&
                        strcmp(cat, "optimizer");
        if (!strcmp(dir, "fwd")) layer = per_layer || (!strcmp(cat, "norm") && e->call < L) ? e->call : -1;
        else if (!strcmp(dir, "bwd") && !strcmp(cat, "norm")) layer = ++bwd_norms > 1 ? L - bwd_norms + 1 : -1;
        else if (!strcmp(dir, "bwd") && per_layer) layer = L - bwd_norms;
        json_t *args = json_pack("{s:i, s:s}", "call", e->call, "direction", dir);
        if (layer >= 0) json_object_set_new(args, "layer", json_integer(layer));
        json_array_append_new(ev, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:o}", "name", e->name, "cat", cat, "ph",
                                            "X", "ts", e->t0 * 1e6, "dur", (e->t1 - e->t0) * 1e6, "pid", pid, "tid", 1,
                                            "args", args));
    }
}

static json_t *skipped(const BenchConfig *c, int ci, const char *label, const char *why) {
    char m[64], dl[128];
    model_label(c, m, sizeof m);
    data_label(c, dl, sizeof dl);
    json_t *r = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:i, s:i, s:i}, s:s, s:i, s:i, s:s}", "index", ci, "label", label,
                     "status", why, "model_label", m, "model", "preset", c->preset, "n_layer", c->n_layer, "d_model",
                     c->d_model, "d_state", c->d_state, "policy", bench_policy_name(c->policy), "B", c->B, "T", c->T,
                     "data_label", dl);
    if (c->tokens) json_object_set_new(r, "tokens_target", json_integer(c->tokens));
    return r;
}

static json_t *run_config(Bench *bn, int ci, const BenchConfig *c, Model *m) {
    const Backend *bk = bn->bk;
    char label[256];
    config_label(c, label, sizeof label);
    MemorySettings ms;
    size_t est;  // estimated training bytes of those settings
    if (memory_flags_settings(&bn->mem, &m->cfg, bk, c->B, c->T, &ms, &est) != 0) {
        char why[200];
        snprintf(why, sizeof why, "skipped: --memory-budget %.2f GiB: the leanest settings need %.2f GiB",
                 (double)bn->mem.memory_budget, est / 1073741824.0);
        return skipped(c, ci, label, why);
    }
    // Will the activations fit? (bk->alloc dies when memory runs out, losing the sweep.)
    double need = (double)model_activation_bytes(&m->cfg, bk, c->B, c->T, ms.keep_scan_states, ms.keep_activations,
                                                 ms.keep_in_proj);
    size_t avail = mem_available();
    if (avail) avail += cat_bytes(MEM_ACTS);  // the previous configuration's activations are freed first
    if (avail && need > 0.9 * (double)avail) {
        char why[160];
        snprintf(why, sizeof why, "skipped: activations need %.1f GiB, %.1f GiB available", need / 1073741824.0,
                 avail / 1073741824.0);
        return skipped(c, ci, label, why);
    }
    g_cat = MEM_PARAMS;  // (with cast_weights the weights' compute copy is laid out again: a parameter buffer)
    model_set_memory_settings(m, &ms);
    g_cat = MEM_ACTS;
    memory_flags_note_rounding(&bn->mem, &m->cfg, bk, "bench");
    m->fp32_logits = bn->fp32_logits;
    if (bn->mem.memory_budget > 0) {
        char line[320];
        memory_flags_describe(line, sizeof line, &bn->mem, &m->cfg, bk, &ms, est);
        fprintf(stderr, "packmamba: bench: %s: %s\n", label, line);
    }
    model_alloc_activations(m, c->B, c->T);
    const int carry = bn->carry_state && config_data(c) && c->policy == PM_POLICY_PACK;
    if (carry) model_alloc_carry(m);  // (the warm-up cycles its batches: a carried state from another batch there)
    g_cat = MEM_BENCH;

    // every batch is made before the clock starts, so timing sees only the model
    // The timed steps run unhooked, as `train` does; the per-op profile comes from profile_steps hooked steps after
    // them. (Until 2026-11-30 the timed steps carried the GPU-event hooks when the backend had events, taking them
    // for free: the two event records around each of a 130m step's ~390 regions cost it 2.3%, docs/perf.md "Sixth
    // session".) On the CPU the hooks only read the clock, so the timed steps are the profiled ones there.
    const int timed_profiled = !g_is_cuda;
    const int n_prof = timed_profiled ? 0 : bn->profile_steps;
    const int nb = bn->warmup + bn->steps + n_prof + 1;
    Batch *bs = pm_malloc(sizeof(Batch) * nb);
    for (int i = 0; i < nb; i++) bs[i] = batch_alloc(c->B, c->T);
    const char *data = config_data(c);
    if (data) {
        Batcher *bt = batcher_open(data, PM_SPLIT_TRAIN, c->policy, c->B, c->T, (uint64_t)bn->seed, 0, 1, bn->window);
        if (!bt) pm_die("%s", pm_last_error());
        if (carry && batcher_set_carry(bt, 1) != 0) pm_die("bench: --carry-state: %s", pm_last_error());
        for (int i = 0; i < nb; i++) {
            batcher_next(bt, &bs[i]);
            for (int k = 0; k < bs[i].B * bs[i].T; k++)
                if (bs[i].tokens[k] >= m->cfg.vocab_size)
                    pm_die("%s: token id %d is outside the vocabulary (%d)", data, bs[i].tokens[k], m->cfg.vocab_size);
        }
        batcher_close(bt);
    } else {
        BenchSynth s;
        memset(&s, 0, sizeof s);
        pm_rng_seed(&s.rng, (uint64_t)bn->seed * 1000003u + (uint64_t)ci);
        for (int i = 0; i < nb; i++) bench_synth_batch(&s, &bs[i], c->policy, c->B, c->T, m->cfg.vocab_size);
        bench_synth_free(&s);
    }
    int64_t *real = pm_calloc(nb, sizeof(int64_t));
    for (int i = 0; i < nb; i++)
        for (int k = 0; k < bs[i].B * bs[i].T; k++) real[i] += bs[i].doc[k] >= 0;

    int bi = 0, total_steps = nb;
    double loss, loss_first = NAN, loss_last = NAN;
    // warm-up: at least bn->warmup steps and bn->warmup_s seconds (so the timed steps see the card settled at the
    // clocks and power a long run has; steps past the warm-up batches cycle through them)
    const double tw0 = pm_now();
    int warm_steps = 0;
    for (; warm_steps < bn->warmup || (pm_now() - tw0 < bn->warmup_s && warm_steps < 100000); warm_steps++) {
        const int wb = warm_steps % bn->warmup;
        progress_draw(&bn->progress, ci, label, wb + 1, total_steps);
        train_step(bn, m, &bs[wb], 0, 0, &loss);
        if (warm_steps == 0) loss_first = loss;
        if (warm_steps < bn->warmup) bn->progress.done++;
    }
    const double warm_s = pm_now() - tw0;
    bi = bn->warmup;
    // timed steps
    prof_reset_totals(&bn->prof);
    if (bn->nvml) nvml_set_tag(bn->nvml, ci);
    const double energy0 = bn->nvml ? nvml_energy_j(bn->nvml) : NAN;
    double *times = pm_malloc(sizeof(double) * (bn->steps ? bn->steps : 1));
    double sum_t = 0, prof_t = 0, prof_M = 0;
    int64_t sum_real = 0, sum_computed = 0;
    for (int i = 0; i < bn->steps; i++, bi++) {
        progress_draw(&bn->progress, ci, label, bi + 1, total_steps);
        times[i] = train_step(bn, m, &bs[bi], timed_profiled, 1, &loss);
        if (isnan(loss_first)) loss_first = loss;
        loss_last = loss;
        sum_t += times[i];
        sum_real += real[bi];
        sum_computed += (int64_t)bs[bi].B * bs[bi].T;
        if (timed_profiled) prof_t += times[i], prof_M += (double)bs[bi].B * bs[bi].T;
        bn->progress.done++;
    }
    if (bn->nvml) nvml_set_tag(bn->nvml, -1);
    const double energy_j = bn->nvml ? nvml_energy_j(bn->nvml) - energy0 : NAN;
    // (the last timed step's pending layer updates, outside the profiled steps: each of those then updates its
    // own layers whole, inside its opt.adamw region)
    model_settle_updates(m);
    // profiled steps (on a GPU: hooks of any kind would distort the timed steps)
    for (int i = 0; i < n_prof; i++, bi++) {
        progress_draw(&bn->progress, ci, label, bi + 1, total_steps);
        prof_t += train_step(bn, m, &bs[bi], 1, 1, &loss);
        prof_M += (double)bs[bi].B * bs[bi].T;
        bn->progress.done++;
    }
    if (bn->prof.steps) add_trace(bn, ci, label, m, bn->prof.step_s);  // the last profiled step
    const int psteps = bn->prof.steps;
    double op_s[PROF_MAX_KEYS];
    long op_calls[PROF_MAX_KEYS];
    int n_ops = bn->prof.n_keys;
    memcpy(op_s, bn->prof.total_s, sizeof op_s);
    memcpy(op_calls, bn->prof.calls, sizeof op_calls);
    // memory step: sample usage at every region's end (outside timing)
    g_mem_peak = mem_in_use();
    bn->prof.on_end = mem_sample;
    train_step(bn, m, &bs[bi], 1, 0, &loss);
    bn->prof.on_end = NULL;
    mem_sample(NULL);
    bn->progress.done++;

    // ---- results ----
    json_t *r = json_object();
    char ml[64];
    model_label(c, ml, sizeof ml);
    json_object_set_new(r, "index", json_integer(ci));
    json_object_set_new(r, "label", json_string(label));
    json_object_set_new(r, "status", json_string("ok"));
    json_object_set_new(r, "model_label", json_string(ml));
    json_object_set_new(r, "model", json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I}", "preset", c->preset,
                                              "n_layer", m->cfg.n_layer, "d_model", m->cfg.d_model, "d_state",
                                              m->cfg.d_state, "d_inner", m->cfg.d_inner, "dt_rank", m->cfg.dt_rank,
                                              "vocab_size", m->cfg.vocab_size, "vocab_pad", m->cfg.vocab_pad, "n_params",
                                              (json_int_t)m->n_params));
    json_object_set_new(r, "policy", json_string(bench_policy_name(c->policy)));
    if (bn->carry_state && config_data(c) && c->policy == PM_POLICY_PACK) json_object_set_new(r, "carry_state", json_true());
    json_object_set_new(r, "B", json_integer(c->B));
    json_object_set_new(r, "T", json_integer(c->T));
    char dl[128];
    data_label(c, dl, sizeof dl);
    json_object_set_new(r, "data", json_string(data ? data : "synthetic"));
    json_object_set_new(r, "data_label", json_string(dl));
    if (c->tokens) json_object_set_new(r, "tokens_target", json_integer(c->tokens));
    json_object_set_new(r, "steps", json_integer(bn->steps));
    json_object_set_new(r, "warmup", json_integer(warm_steps));
    json_object_set_new(r, "warmup_s", json_real(warm_s));
    const int ns = bn->steps;
    double tps = sum_t > 0 ? sum_real / sum_t : 0, ctps = sum_t > 0 ? sum_computed / sum_t : 0;
    json_object_set_new(r, "tokens_per_step", jr(ns ? (double)sum_real / ns : 0));
    json_object_set_new(r, "computed_tokens_per_step", jr(ns ? (double)sum_computed / ns : 0));
    json_object_set_new(r, "fill", jr(sum_computed ? (double)sum_real / sum_computed : 0));
    json_object_set_new(r, "tok_per_s", jr(tps));
    json_object_set_new(r, "computed_tok_per_s", jr(ctps));
    double *sorted = pm_malloc(sizeof(double) * (ns ? ns : 1));
    double mean = 0, var = 0;
    for (int i = 0; i < ns; i++) sorted[i] = 1e3 * times[i], mean += sorted[i] / ns;
    for (int i = 0; i < ns; i++) var += (sorted[i] - mean) * (sorted[i] - mean) / (ns > 1 ? ns - 1 : 1);
    qsort(sorted, ns, sizeof(double), cmp_double);
    json_object_set_new(r, "step_ms", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "median", quantile(sorted, ns, 0.5),
                                                "mean", mean, "std", sqrt(var), "min", ns ? sorted[0] : NAN, "max",
                                                ns ? sorted[ns - 1] : NAN, "p10", quantile(sorted, ns, 0.1), "p90",
                                                quantile(sorted, ns, 0.9)));
    json_t *each = json_array();  // every timed step in order (a slow step's place tells a start-up cost from noise)
    for (int i = 0; i < ns; i++) json_array_append_new(each, jr(1e3 * times[i]));
    json_object_set_new(json_object_get(r, "step_ms"), "each", each);
    json_object_set_new(r, "loss_first", isfinite(loss_first) ? jr(loss_first) : json_null());
    json_object_set_new(r, "loss_last", isfinite(loss_last) ? jr(loss_last) : json_null());
    json_object_set_new(r, "loss_finite", json_boolean(isfinite(loss_first) && isfinite(loss_last)));

    // per-op times and costs; cost at the profiled steps' mean token count (every formula is affine in M)
    json_object_set_new(r, "timing", json_string(bn->prof.use_events ? "backend events" : "synchronize + host clock"));
    json_object_set_new(r, "profiled_steps", json_integer(psteps));
    double prof_step_ms = psteps ? 1e3 * prof_t / psteps : 0;
    json_object_set_new(r, "profiled_step_ms", jr(prof_step_ms));
    // (the most of one profiled step its regions cover: what the profile leaves out, read without the noise of
    // the steps a loaded host preempts between regions)
    json_object_set_new(r, "profiled_cover_max", jr(bn->prof.cover_max));
    // layers keeping activations and in_proj outputs (the groups: as allocated)
    const int act_layers = model_activation_layers(&m->cfg, ms.keep_activations, m->dw_copies),
              xz_layers = model_in_proj_layers(&m->cfg, ms.keep_in_proj);
    CostShape cs = {&m->cfg, m->n_params, psteps ? prof_M / psteps : 0, bk->act_bytes, bk->f32_bytes,
                    m->params_act != m->params && !m->weights_cast, m->cfg.n_layer - act_layers,
                    m->cfg.n_layer - xz_layers, m->cfg.n_layer - model_state_layers(&m->cfg, bk, ms.keep_scan_states)};
    json_t *ops = json_array(), *cats = json_object();
    for (int k = 0; op_categories[k]; k++)
        json_object_set_new(cats, op_categories[k], json_pack("{s:f}", "ms", 0.0));
    json_object_set_new(cats, "other", json_pack("{s:f}", "ms", 0.0));
    double ops_ms = 0, flops_step = 0, bytes_step = 0;
    for (int k = 0; k < n_ops && psteps; k++) {
        const char *name = bn->prof.keys[k];
        double ms = 1e3 * op_s[k] / psteps;
        OpCost oc;
        int known = op_cost(&cs, name, &oc) == 0;
        json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:f}", "region", name, "category", op_category(name), "direction",
                              op_direction(name), "ms", ms, "calls", (double)op_calls[k] / psteps);
        if (known) {
            double s = ms * 1e-3, ai = oc.bytes > 0 ? oc.flops / oc.bytes : 0;
            // the two-ceiling roof at the op's intensity (the roofline plot's), on the ceiling its FLOPs run on
            const double fps = oc.gemm_flops >= 0.5 * oc.flops || bn->ceil.vector_flops_per_s <= 0
                                   ? bn->ceil.gemm_flops_per_s
                                   : bn->ceil.vector_flops_per_s;
            double roof = fmin(fps, bn->ceil.bytes_per_s * ai);
            const char *bound;
            const double floor_s = op_floor_s(&oc, &bn->ceil, &bound);
            json_object_set_new(o, "expected_calls", json_integer(oc.calls));
            json_object_set_new(o, "flops", jr(oc.flops));
            json_object_set_new(o, "bytes", jr(oc.bytes));
            json_object_set_new(o, "exps", jr(oc.exps));
            json_object_set_new(o, "intensity", jr(ai));
            json_object_set_new(o, "flops_per_s", jr(s > 0 ? oc.flops / s : 0));
            json_object_set_new(o, "bytes_per_s", jr(s > 0 ? oc.bytes / s : 0));
            json_object_set_new(o, "gemm_flops", jr(oc.gemm_flops));
            json_object_set_new(o, "exps_per_s", jr(s > 0 ? oc.exps / s : 0));
            json_object_set_new(o, "roof_flops_per_s", jr(roof));
            // the op's floor: its busiest unit's time at that unit's measured ceiling (op_floor_s), and the
            // fraction of it reached
            json_object_set_new(o, "floor_ms", jr(1e3 * floor_s));
            json_object_set_new(o, "bound", json_string(bound));
            json_object_set_new(o, "roof_fraction", jr(s > 0 ? floor_s / s : 0));
            flops_step += oc.flops;
            bytes_step += oc.bytes;
        }
        json_array_append_new(ops, o);
        ops_ms += ms;
        json_t *cat = json_object_get(cats, op_category(name));
        const char *dir = op_direction(name);
        // forward and backward apart where they are apart (the classifier is one fused pass, the optimizer neither)
        const char *field = !strcmp(dir, "bwd") ? "bwd_ms" : !strcmp(dir, "fwd") ? "fwd_ms" : NULL;
        if (field) json_object_set_new(cat, field, jr(json_number_value(json_object_get(cat, field)) + ms));
        json_object_set_new(cat, "ms", jr(json_number_value(json_object_get(cat, "ms")) + ms));
    }
    double other = prof_step_ms - ops_ms;
    json_t *oc_ = json_object_get(cats, "other");
    json_object_set_new(oc_, "ms", jr(other > 0 ? other : 0));
    json_object_set_new(r, "ops", ops);
    json_object_set_new(r, "categories", cats);
    json_object_set_new(r, "ops_ms", jr(ops_ms));
    json_object_set_new(r, "other_ms", jr(other));
    json_object_set_new(r, "flops_per_step", jr(flops_step));
    json_object_set_new(r, "bytes_per_step", jr(bytes_step));
    json_object_set_new(r, "achieved_flops_per_s", jr(prof_step_ms > 0 ? flops_step / (prof_step_ms * 1e-3) : 0));
    double fpt = model_flops_per_token(&m->cfg, m->n_params);
    json_object_set_new(r, "model_flops_per_token", jr(fpt));
    json_object_set_new(r, "mfu", jr(bn->ceil.gemm_flops_per_s > 0 ? fpt * tps / bn->ceil.gemm_flops_per_s : 0));

    // memory
    size_t params = cat_bytes(MEM_PARAMS), grads = cat_bytes(MEM_GRADS), opt = cat_bytes(MEM_OPT);
    size_t acts = cat_bytes(MEM_ACTS);
    // backward scratch: the tail of each arena from its first gradient buffer on (model.c's layout)
    size_t fa = rec_bytes(m->arena_f32), aa = rec_bytes(m->arena_act), agrad = 0;
    if ((char *)m->dres >= (char *)m->arena_f32 && (char *)m->dres < (char *)m->arena_f32 + fa)
        agrad += fa - (size_t)((char *)m->dres - (char *)m->arena_f32);
    if ((char *)m->dh >= (char *)m->arena_act && (char *)m->dh < (char *)m->arena_act + aa)
        agrad += aa - (size_t)((char *)m->dh - (char *)m->arena_act);
    size_t counted = params + grads + opt + acts;
    size_t peak = g_mem_peak > bn->mem_base ? g_mem_peak - bn->mem_base : 0;
    size_t work = peak > counted ? peak - counted : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    json_object_set_new(r, "memory_settings",
                        json_pack("{s:b, s:i, s:i, s:b, s:i, s:b, s:I}", "keep_activations", act_layers == m->cfg.n_layer,
                                  "activations_layers", act_layers, "scan_states_layers", model_state_layers(&m->cfg, bk, ms.keep_scan_states),
                                  "recompute_in_proj", xz_layers == 0, "in_proj_layers", xz_layers,
                                  "cast_weights", m->weights_cast,
                                  "train_bytes_estimate", (json_int_t)est));
    json_object_set_new(r, "fp32_logits", json_boolean(m->fp32_logits));
    json_object_set_new(r, "memory",
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "activations_estimate",
                                  (json_int_t)need, "scan_states", (json_int_t)(m->arena_states ? rec_bytes(m->arena_states) : 0),
                                  "process_max_rss",
                                  (json_int_t)ru.ru_maxrss * 1024, "parameters", (json_int_t)params,
                                  "gradients", (json_int_t)grads, "optimizer", (json_int_t)opt, "activations",
                                  (json_int_t)acts, "activation_grads", (json_int_t)agrad, "workspace", (json_int_t)work,
                                  "peak", (json_int_t)(peak > counted ? peak : counted), "peak_method",
                                  g_is_cuda ? "device memory in use (the backend's mem_info) minus before the first model"
                                            : "resident set size minus before the first model"));
    if (bn->nvml) {
        NvmlSummary s;
        nvml_summary(bn->nvml, ci, &s);
        json_t *nv = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "samples", s.samples, "sm_mhz",
                               stat_json(&s.sm_mhz), "mem_mhz", stat_json(&s.mem_mhz), "power_w",
                               stat_json(&s.power_w), "temp_c", stat_json(&s.temp_c), "util_gpu",
                               stat_json(&s.util_gpu), "mem_used", stat_json(&s.mem_used));
        // The device's energy over the timed steps. NVML's counter moves in steps (two identical 2 s runs read 82.5
        // and 86.7 J a 370m step from the difference of two readings, call311), so where the sampler saw it move at
        // least twice during the timed steps, the mean power between those moves times the mean step time is the
        // energy a step; else the difference of the readings before and after.
        if (energy_j > 0 && bn->steps > 0) {
            int by_rate;
            const double jps = nvml_interval_energy_j(&s, sum_t, energy_j, &by_rate) / bn->steps;
            json_object_set_new(r, "energy",
                                json_pack("{s:f, s:f, s:f, s:s, s:f, s:f, s:i, s:f}", "j_per_step", jps, "tokens_per_j",
                                          (double)sum_real / bn->steps / jps, "joules", jps * bn->steps, "method",
                                          by_rate ? "counter rate between its updates x mean step time"
                                                  : "counter difference over the timed steps",
                                          "counter_difference_j", energy_j, "rate_w",
                                          by_rate ? s.energy_rate_w : energy_j / sum_t, "counter_updates",
                                          s.energy_updates, "window_s", by_rate ? s.energy_window_s : sum_t));
        }
        // what held the clocks down, as fractions of the timed steps' samples (null: not reported)
        const double rn = s.reasons_n;
        json_object_set_new(nv, "clock_reason_samples", json_integer(s.reasons_n));
        json_object_set_new(nv, "power_capped", rn > 0 ? json_real(s.power_cap_n / rn) : json_null());
        json_object_set_new(nv, "thermal_limited", rn > 0 ? json_real(s.thermal_n / rn) : json_null());
        json_object_set_new(nv, "hw_slowdown", rn > 0 ? json_real(s.hw_slowdown_n / rn) : json_null());
        json_object_set_new(r, "nvml", nv);
    }
    for (int i = 0; i < nb; i++) batch_free(&bs[i]);
    free(bs);
    free(real);
    free(times);
    free(sorted);
    return r;
}

// ---------------------------------------------------------------------------------------------------------------
// the command


static void write_json(const char *dir, const char *name, json_t *j) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!s || pm_write_file_atomic(path, s, strlen(s)) != 0) pm_die("%s", pm_last_error());
    free(s);
}

static void write_nvml_csv(const char *dir, NvmlProbe *p) {
    int n;
    NvmlSample *s = nvml_samples(p, &n);
    size_t cap = 128 + (size_t)n * 224, len = 0;
    char *buf = pm_malloc(cap);
    // clock_reasons: NVML's clock event reason mask in hex; power_capped: 1 where it holds the power cap (0x4), 0
    // where not (both blank where the device does not report reasons). config: the configuration whose timed steps
    // were running, -1 outside them. (report.c's clocks plot reads columns 1, 2, 3, 5 and 11.)
    len += snprintf(buf + len, cap - len,
                    "t_s,config,sm_mhz,mem_mhz,power_w,temp_c,util_gpu,util_mem,mem_used_bytes,clock_reasons,"
                    "power_capped,energy_j\n");
    for (int i = 0; i < n; i++) {
        len += snprintf(buf + len, cap - len, "%.4f,%d,%g,%g,%g,%g,%g,%g,%.0f,", s[i].t - s[0].t, s[i].tag, s[i].sm_mhz,
                        s[i].mem_mhz, s[i].power_w, s[i].temp_c, s[i].util_gpu, s[i].util_mem, s[i].mem_used);
        len += s[i].reasons >= 0 ? snprintf(buf + len, cap - len, "0x%llx,%d,", (unsigned long long)s[i].reasons,
                                            (s[i].reasons & NVML_REASON_SW_POWER_CAP) != 0)
                                 : snprintf(buf + len, cap - len, ",,");
        len += isnan(s[i].energy_j) ? snprintf(buf + len, cap - len, "\n")
                                    : snprintf(buf + len, cap - len, "%.3f\n", s[i].energy_j);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/nvml_samples.csv", dir);
    if (pm_write_file_atomic(path, buf, len) != 0) pm_die("%s", pm_last_error());
    free(buf);
    free(s);
}

static void cpu_name(char *buf, size_t n) {
    snprintf(buf, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

int cmd_bench(int argc, char **argv) {
    const char *device = "cpu", *presets = "tiny", *n_layer = NULL, *d_model = NULL, *d_state = NULL;
    const char *seq_len = "512", *batch = "1", *policy = NULL, *out = NULL, *data = NULL, *sweep = NULL;
    const char *report_dir = NULL;
    int steps = 10, warmup = 2, profile_steps = 3, seed = 1, window = 0, vocab = 0, sample_ms = 20, tokens = 0;
    int deterministic = 0, no_events = 0, no_plots = 0, list = 0, fp32_logits = 0, carry_state = 0;
    float time_limit = 0, warmup_s = -1;
    MemoryFlags mem = MEMORY_FLAGS_DEFAULT;
    ArgSpec specs[] = {
        {"--device", ARG_STR, &device, "cpu or cuda"},
        {"--preset", ARG_STR, &presets, "model preset(s), comma list: tiny, 130m, 370m, 790m, 1.4b, 2.8b"},
        {"--n-layer", ARG_STR, &n_layer, "layer count(s), overriding the preset's"},
        {"--d-model", ARG_STR, &d_model, "model width(s), overriding the preset's"},
        {"--d-state", ARG_STR, &d_state, "SSM state size(s) (16)"},
        {"--seq-len", ARG_STR, &seq_len, "row length(s) T, comma list; 16K = 16384"},
        {"--batch", ARG_STR, &batch, "rows per batch B, comma list"},
        {"--tokens", ARG_INT, &tokens, "tokens per step instead of --batch: B = tokens / T for each T"},
        {"--policy", ARG_STR, &policy,
         "batching policy list: fixed (synthetic rows of one T-token document), single, pad, pack (default: fixed, "
         "or pack with --data)"},
        {"--steps", ARG_INT, &steps, "timed steps per configuration"},
        {"--warmup", ARG_INT, &warmup, "untimed steps first"},
        {"--warmup-s", ARG_FLOAT, &warmup_s, "warm up for at least this many seconds too (-1: 2 on a GPU, where "
                                             "the card takes ~1.3 s to settle at its power limit; 0 on the CPU)"},
        {"--profile-steps", ARG_INT, &profile_steps,
         "per-op profiled steps after the timed ones on a GPU (GPU events, or synchronize per op without them)"},
        {"--sweep", ARG_STR, &sweep, "JSON sweep file (see docs/bench): replaces the sweep flags"},
        {"--data", ARG_STR, &data, "prepared data directory (or several, a,b): real documents (default: synthetic lognormal lengths)"},
        {"--vocab", ARG_INT, &vocab, "vocabulary size without --data (default 50277, GPT-NeoX)"},
        {"--window", ARG_INT, &window, "pack's best-fit window with --data (0: the batcher's default)"},
        {"--seed", ARG_INT, &seed, "seed of weights and synthetic data"},
        {"--out", ARG_STR, &out, "output directory (results.csv/json, trace.json, plots, report.html)"},
        {"--report", ARG_STR, &report_dir, "only (re)make the CSV, plots and report.html of DIR/results.json"},
        {"--sample-ms", ARG_INT, &sample_ms, "NVML sampling period"},
        {"--time-limit", ARG_FLOAT, &time_limit, "start no configuration after this many seconds (0: none)"},
        {"--no-events", ARG_BOOL, &no_events, "time ops with synchronize + host clock even if GPU events exist"},
        {"--no-plots", ARG_BOOL, &no_plots, "do not run gnuplot (the .gp scripts are still written)"},
        {"--deterministic", ARG_BOOL, &deterministic, "the backend's deterministic kernels"},
        {"--fp32-logits", ARG_BOOL, &fp32_logits, "GPU: the training step's logits in fp32 (default: bf16, as autocast)"},
        {"--carry-state", ARG_BOOL, &carry_state,
         "pack with --data: documents longer than --seq-len go on in the same row of the next batch from the state "
         "the last piece left (as train --carry-state)"},
        MEMORY_FLAG_SPECS(mem),
        {"--list", ARG_BOOL, &list, "print the configurations in the order they would run, then exit"},
    };
    args_parse(argc, argv, "packmamba bench --out DIR [--device cpu|cuda] [--preset P] [--seq-len 512,1024] "
               "[--batch 1,4] [--policy pack,pad] [--steps N] [options]   |   packmamba bench --report DIR",
               specs, sizeof specs / sizeof specs[0], NULL, 0, NULL);

    if (report_dir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/results.json", report_dir);
        json_error_t err;
        json_t *root = json_load_file(path, 0, &err);
        if (!root) pm_die("%s: %s", path, err.text);
        if (!json_is_array(json_object_get(root, "configs"))) pm_die("%s: no \"configs\" list (not a bench result)", path);
        if (report_write_data(report_dir, root) != 0 || report_write_html(report_dir, root, !no_plots) != 0)
            pm_die("%s", pm_last_error());
        fprintf(stderr, "packmamba: report written to %s/report.html\n", report_dir);
        json_decref(root);
        return 0;
    }
    if (!out && !list) pm_die("bench: --out DIR is required");
    memory_flags_check(&mem, "bench");

    BenchConfig *cfgs = NULL;
    int n_cfg = 0;
    BenchFileOptions fo;  // (a sweep file's options; device and data point into it from here on)
    memset(&fo, 0, sizeof fo);
    if (sweep) {
        fo.steps = steps, fo.warmup = warmup, fo.profile_steps = profile_steps, fo.vocab = vocab;
        snprintf(fo.device, sizeof fo.device, "%s", device);
        snprintf(fo.data, sizeof fo.data, "%s", data ? data : "");
        if (bench_parse_sweep_file(sweep, &cfgs, &n_cfg, &fo) != 0) pm_die("%s", pm_last_error());
        steps = fo.steps, warmup = fo.warmup, profile_steps = fo.profile_steps, vocab = fo.vocab;
        device = fo.device;
        data = fo.data[0] ? fo.data : NULL;
    } else {
        if (!policy) policy = data ? "pack" : "fixed";
        if (bench_expand(presets, n_layer, d_model, d_state, seq_len, batch, tokens, policy, &cfgs, &n_cfg) < 0)
            pm_die("bench: %s", pm_last_error());
    }
    if (steps < 1 || warmup < 0 || profile_steps < 1) {  // (where the sweep file set them, it is named)
        if (sweep) pm_die("%s: \"steps\" and \"profile_steps\" must be >= 1, \"warmup\" >= 0", sweep);
        pm_die("bench: --steps and --profile-steps must be >= 1, --warmup >= 0");
    }
    if (!(warmup_s >= 0) && warmup_s != -1) pm_die("bench: --warmup-s must be >= 0 (or -1: the device's default)");
    if (warmup_s > 3600) pm_die("bench: --warmup-s %g: at most 3600 (a card settles within seconds)", (double)warmup_s);
    g_default_data = data;
    for (int i = 0; i < n_cfg; i++) {
        if (config_data(&cfgs[i]) && cfgs[i].policy == BENCH_POLICY_FIXED)
            pm_die("%s: policy fixed makes synthetic rows; with data (%s) use single, pad or pack", sweep ? sweep : "bench",
                   config_data(&cfgs[i]));
        if (carry_state && (!config_data(&cfgs[i]) || cfgs[i].policy != PM_POLICY_PACK))
            pm_die("%s: --carry-state needs real documents (--data) and the pack policy", sweep ? sweep : "bench");
        if (cfgs[i].n_layer < 1 || cfgs[i].d_model < 1 || cfgs[i].d_state < 1)
            pm_die("%s: n_layer, d_model and d_state must be >= 1", sweep ? sweep : "bench: --n-layer, --d-model, --d-state");
    }
    // group configurations of one model shape (stable), so each model is built once
    for (int i = 1; i < n_cfg; i++) {
        int j = i;
        while (j > 0 && !same_model(&cfgs[j - 1], &cfgs[i])) j--;
        if (j > 0 && j < i) {
            BenchConfig x = cfgs[i];
            memmove(&cfgs[j + 1], &cfgs[j], sizeof(BenchConfig) * (i - j));
            cfgs[j] = x;
        }
    }
    // vocabulary: --vocab, else the largest of the data's tokenizers (as `train` would build the model), else
    // GPT-NeoX's 50277; one vocabulary for every configuration, so synthetic and real batches share models
    // A sweep file's per-entry data directory that is not there skips those configurations (so one study file
    // serves machines with and without the corpus); the command line's --data must exist.
    int data_vocab = 0;
    char (*missing)[512] = pm_calloc(n_cfg ? n_cfg : 1, sizeof *missing);
    for (int i = 0; i < n_cfg; i++) {
        const char *d = config_data(&cfgs[i]);
        if (!d) continue;
        Tokenizer *tok = tokenizer_load_from_data(d);
        if (!tok && cfgs[i].data[0]) {
            snprintf(missing[i], sizeof missing[i], "skipped: %.480s", pm_last_error());
            continue;
        }
        if (!tok) pm_die("%s", pm_last_error());
        if (vocab && vocab < tokenizer_vocab_size(tok))
            pm_die("%s: vocab %d is smaller than %s's tokenizer (%d)", sweep ? sweep : "bench: --vocab", vocab, d,
                   tokenizer_vocab_size(tok));
        if (tokenizer_vocab_size(tok) > data_vocab) data_vocab = tokenizer_vocab_size(tok);
        tokenizer_free(tok);
    }
    if (!vocab) vocab = data_vocab ? data_vocab : 50277;
    if (vocab < 2) pm_die("%s: vocab must be >= 2", sweep ? sweep : "bench: --vocab");
    if (list) {
        printf("%d configurations on %s, vocabulary %d, %d warm-up + %d timed steps each:\n", n_cfg, device, vocab, warmup,
               steps);
        for (int i = 0; i < n_cfg; i++) {
            char label[256];
            config_label(&cfgs[i], label, sizeof label);
            printf("%3d  %s%s%s\n", i, label, missing[i][0] ? "  -- " : "", missing[i]);
        }
        free(cfgs);
        free(missing);
        return 0;
    }
    if (pm_mkdir_p(out) != 0) pm_die("%s", pm_last_error());

    // the backend, wrapped so every allocation is counted by category
    g_real = backend_get(device, deterministic);
    g_is_cuda = strcmp(g_real->name, "cpu") != 0;
    static Backend wrapped;
    wrapped = *g_real;
    wrapped.alloc = count_alloc;
    wrapped.free = count_free;
    Bench bn;
    // The timed steps must run the GEMMs the backend settles on: its tuner times each shape's candidates
    // backend_cuda_gemm_tune_after() steps into a run (PM_GEMM_TUNE_AFTER), so the warm-up lasts past that.
    const int warmup_asked = warmup, tune_after = g_is_cuda ? backend_cuda_gemm_tune_after() : 0;
    if (tune_after > 0 && warmup < tune_after + 1) {
        warmup = tune_after + 1;
        fprintf(stderr, "packmamba: bench: %d warm-up steps (asked %d): the GEMM tuner times its candidates at step %d\n",
                warmup, warmup_asked, tune_after + 1);
    }
    // (call308: after 11 steps and 1-2.5 s of warm-up the thirds of 25-80 timed steps read within 1.6% of each other
    // at 130m, 370m and 1.4b; 2 s is the margin over the ~1.3 s NVML's averaged power takes to reach the limit)
    if (warmup_s < 0) warmup_s = g_is_cuda ? 2.0f : 0.0f;
    if (warmup_s > 0 && warmup < 1) warmup = 1;  // (a timed warm-up cycles through the warm-up batches)
    memset(&bn, 0, sizeof bn);
    bn.bk = &wrapped;
    bn.device = device, bn.out = out;
    bn.mem = mem;
    bn.fp32_logits = fp32_logits;
    bn.carry_state = carry_state;
    g_carry_label = carry_state;
    bn.steps = steps, bn.warmup = warmup, bn.profile_steps = profile_steps, bn.seed = seed, bn.window = window;
    bn.warmup_s = warmup_s;
    bn.vocab = vocab;
    prof_init(&bn.prof, bn.bk, !no_events);
    bn.progress.tty = isatty(2);
    bn.progress.n_cfg = n_cfg;
    bn.trace = json_array();

    json_t *root = json_object();
    char cmd[4096] = "packmamba";
    for (int i = 0; i < argc; i++) {
        size_t u = strlen(cmd);
        snprintf(cmd + u, sizeof cmd - u, " %s", argv[i]);
    }
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_object_set_new(root, "packmamba_bench", json_integer(1));
    json_object_set_new(root, "created", json_string(when));
    json_object_set_new(root, "command", json_string(cmd));

    // NVML: GPUs only (nvml_open_cuda_device: the CUDA device this process computes on, by its UUID)
    json_t *nv = json_object();
    char why[512] = "";
    if (g_is_cuda) {
        bn.nvml = nvml_open_cuda_device(1, why, sizeof why);
    } else {
        snprintf(why, sizeof why, "not used with --device cpu");
    }
    json_object_set_new(nv, "available", json_boolean(bn.nvml != NULL));
    if (bn.nvml) {
        json_object_set_new(nv, "device", json_string(nvml_device_name(bn.nvml)));
        json_object_set_new(nv, "max_sm_mhz", json_integer(nvml_max_sm_mhz(bn.nvml)));
        json_object_set_new(nv, "max_mem_mhz", json_integer(nvml_max_mem_mhz(bn.nvml)));
        json_object_set_new(nv, "power_limit_w", nvml_power_limit_w(bn.nvml) > 0 ? json_real(nvml_power_limit_w(bn.nvml))
                                                                                : json_null());
        json_object_set_new(nv, "sample_ms", json_integer(sample_ms));
    } else {
        json_object_set_new(nv, "reason", json_string(why));
        if (g_is_cuda) fprintf(stderr, "packmamba: bench: NVML unavailable (%s): no clocks or power\n", why);
    }
    char dname[256];
    if (bn.nvml) snprintf(dname, sizeof dname, "%s", nvml_device_name(bn.nvml));
    else if (g_is_cuda) snprintf(dname, sizeof dname, "CUDA device");
    else cpu_name(dname, sizeof dname);
    json_object_set_new(root, "device",
                        json_pack("{s:s, s:s, s:i, s:i, s:i, s:s}", "backend", g_real->name, "name", dname, "threads",
                                  g_is_cuda ? 0 : omp_get_max_threads(), "act_bytes", (int)g_real->act_bytes,
                                  "f32_bytes", (int)g_real->f32_bytes, "timing",
                                  bn.prof.use_events ? "backend events" : "synchronize + host clock"));
    json_object_set_new(root, "nvml", nv);
    json_object_set_new(root, "options",
                        json_pack("{s:i, s:i, s:i, s:f, s:i, s:i, s:i, s:s}", "steps", steps, "warmup", warmup,
                                  "warmup_asked", warmup_asked, "warmup_s", (double)warmup_s, "profile_steps",
                                  profile_steps, "seed", seed, "vocab", vocab, "data", data ? data : "synthetic"));

    fprintf(stderr, "packmamba: bench: %d configuration%s on %s (%s); measuring ceilings...\n", n_cfg,
            n_cfg == 1 ? "" : "s", g_real->name, dname);
    g_cat = MEM_BENCH;
    json_t *ceil = json_object();
    measure_ceilings(bn.bk, ceil, &bn.ceil);
    json_object_set_new(root, "ceilings", ceil);
    fprintf(stderr, "packmamba: bench: copy %.1f GB/s, GEMM %.2f TFLOP/s (%s), vector %.2f TFLOP/s, exp %.1f G/s\n",
            bn.ceil.bytes_per_s * 1e-9, bn.ceil.gemm_flops_per_s * 1e-12,
            json_string_value(json_object_get(ceil, "gemm_dtype")), bn.ceil.vector_flops_per_s * 1e-12,
            bn.ceil.exps_per_s * 1e-9);
    bn.mem_base = mem_in_use();
    if (bn.nvml && nvml_start(bn.nvml, sample_ms) != 0) fprintf(stderr, "packmamba: bench: NVML sampler did not start\n");

    json_t *results = json_array();
    json_object_set_new(root, "configs", results);
    bn.progress.t0 = pm_now();
    bn.progress.total = (long)n_cfg * (warmup + steps + 1 + (!g_is_cuda ? 0 : profile_steps));
    Model m;
    int have_model = 0;
    const BenchConfig *mcfg = NULL;
    double t_start = pm_now();
    for (int ci = 0; ci < n_cfg; ci++) {
        const BenchConfig *c = &cfgs[ci];
        char label[256];
        config_label(c, label, sizeof label);
        json_t *r;
        if (missing[ci][0]) {
            r = skipped(c, ci, label, missing[ci]);
        } else if (time_limit > 0 && pm_now() - t_start > time_limit) {
            r = skipped(c, ci, label, "skipped: --time-limit reached");
        } else {
            if (!have_model || !same_model(mcfg, c)) {
                if (have_model) model_destroy(&m);
                ModelConfig mc = model_config(c, vocab);
                g_cat = MEM_PARAMS;
                model_create(&m, &mc, bn.bk, (uint64_t)seed);
                rec_set_cat(m.grads, MEM_GRADS);
                g_cat = MEM_OPT;
                model_alloc_optimizer(&m);
                g_cat = MEM_BENCH;
                have_model = 1, mcfg = c;
            }
            r = run_config(&bn, ci, c, &m);
        }
        const char *st = json_string_value(json_object_get(r, "status"));
        if (!strcmp(st, "ok")) {
            json_t *sm = json_object_get(r, "step_ms");
            progress_line(&bn.progress, "packmamba: bench: [%d/%d] %s: %.0f tok/s, step %.2f ms (p10-p90 %.2f-%.2f), MFU %.1f%%",
                          ci + 1, n_cfg, label, json_real_value(json_object_get(r, "tok_per_s")),
                          json_real_value(json_object_get(sm, "median")), json_real_value(json_object_get(sm, "p10")),
                          json_real_value(json_object_get(sm, "p90")), 100 * json_real_value(json_object_get(r, "mfu")));
            json_t *nv = json_object_get(r, "nvml");
            if (nv && json_integer_value(json_object_get(nv, "samples")) > 0) {
                // what the clocks did over the timed steps: a step that draws the board's power limit runs below
                // the maximum SM clock, and so below the GEMM ceiling measured at the start
                char lim[160] = "";
                const double pl = nvml_power_limit_w(bn.nvml);
                json_t *pc = json_object_get(nv, "power_capped");
                int o = 0;
                if (pl > 0) o += snprintf(lim + o, sizeof lim - o, " of a %.0f W limit", pl);
                if (json_is_number(pc))
                    snprintf(lim + o, sizeof lim - o, "; power-capped in %.0f%% of samples%s",
                             100 * json_number_value(pc),
                             json_number_value(json_object_get(nv, "thermal_limited")) > 0 ? ", thermal limits seen" : "");
                char en[96] = "";
                json_t *e = json_object_get(r, "energy");
                if (e)
                    snprintf(en, sizeof en, "; %.1f J a step, %.0f tokens/J",
                             json_number_value(json_object_get(e, "j_per_step")),
                             json_number_value(json_object_get(e, "tokens_per_j")));
                progress_line(&bn.progress, "packmamba: bench:     SM clock %.0f MHz mean (max %u), %.0f W mean%s%s",
                              json_number_value(json_object_get(json_object_get(nv, "sm_mhz"), "mean")),
                              nvml_max_sm_mhz(bn.nvml),
                              json_number_value(json_object_get(json_object_get(nv, "power_w"), "mean")), lim, en);
            }
            if (!json_is_true(json_object_get(r, "loss_finite")))
                progress_line(&bn.progress, "packmamba: bench: warning: %s: the loss is not finite", label);
        } else {
            progress_line(&bn.progress, "packmamba: bench: [%d/%d] %s: %s", ci + 1, n_cfg, label, st);
        }
        if (strcmp(st, "ok")) bn.progress.done += bn.progress.total / (n_cfg ? n_cfg : 1);  // its share of the bar
        json_array_append_new(results, r);
        // written after every configuration, so a crash or a kill keeps what was measured
        if (report_write_data(out, root) != 0) pm_die("%s", pm_last_error());
        json_t *tr = json_pack("{s:O, s:s}", "traceEvents", bn.trace, "displayTimeUnit", "ms");
        write_json(out, "trace.json", tr);
        json_decref(tr);
    }
    if (have_model) model_destroy(&m);
    if (bn.nvml) {
        nvml_stop(bn.nvml);
        write_nvml_csv(out, bn.nvml);
        nvml_close(bn.nvml);
    }
    if (report_write_html(out, root, !no_plots) != 0) pm_die("%s", pm_last_error());
    fprintf(stderr, "packmamba: bench: wrote %s/{results.csv,results.json,ops.csv,trace.json,report.html}\n", out);
    prof_free(&bn.prof);
    json_decref(bn.trace);
    json_decref(root);
    free(cfgs);
    free(missing);
    return 0;
}
