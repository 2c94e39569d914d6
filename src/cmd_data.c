// cmd_data.c — see cmd_data.h. prepare: inputs -> tokenizer -> DIR/data.pms + DIR/tokenizer.json;
// stats: length distribution and the fill of each batching policy; tokenize: ids of a text.
#define _GNU_SOURCE
#include "cmd_data.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batcher.h"
#include "corpus.h"
#include "shard.h"
#include "tokenizer.h"
#include "util.h"

#define DEFAULT_VAL_FRACTION 0.01

static int need_value(int i, int argc, char **argv) {
    if (i + 1 >= argc) {
        fprintf(stderr, "packmamba %s: %s needs a value\n", argv[0], argv[i]);
        return 0;
    }
    return 1;
}


static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------------------------------------------
// prepare

// Documents are collected in groups and each group is tokenized in parallel (OpenMP; the tokenizer is read-only
// and every call has its own scratch), then written in input order, so the shard does not depend on threads.
#define GROUP_DOCS 512
#define GROUP_BYTES (8u << 20)

typedef struct {
    char *text, *source;
    size_t n;
    int32_t *ids;  // reused across groups
    size_t cap;
    int64_t k;     // ids produced, -1 on error
    char err[512];
} Pending;

typedef struct {
    Tokenizer *tk;
    ShardWriter *w;
    Pending pend[GROUP_DOCS];
    int n_pend;
    size_t pend_bytes;
    double val_fraction;
    uint64_t min_hash, min_hash_doc, n_val;
    int64_t tokens;
} Prep;

// Held-out split: document i goes to val when a hash of i falls below val_fraction — fixed by the document's
// index alone, so re-running prepare on the same inputs gives the same split.
static int prep_flush(Prep *p) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < p->n_pend; i++) {
        Pending *d = &p->pend[i];
        d->k = tokenizer_encode(p->tk, d->text, d->n, 0, &d->ids, &d->cap);
        if (d->k < 0) snprintf(d->err, sizeof d->err, "%s", pm_last_error());
    }
    int rc = 0;
    for (int i = 0; i < p->n_pend; i++) {
        Pending *d = &p->pend[i];
        if (rc == 0 && d->k < 0) rc = pm_error("%s: %s", d->source, d->err);
        if (rc == 0 && d->k > 0) {
            uint64_t doc = shard_writer_docs(p->w);
            uint64_t h = splitmix(doc ^ 0x76616c73706c6974ull);
            int val = (double)(h >> 11) * 0x1p-53 < p->val_fraction;
            if (doc == 0 || h < p->min_hash) p->min_hash = h, p->min_hash_doc = doc;
            p->n_val += val;
            p->tokens += d->k;
            rc = shard_writer_add(p->w, d->ids, (size_t)d->k, val ? 2 : 1);
        }
        free(d->text), free(d->source);
        d->text = d->source = NULL;
    }
    p->n_pend = 0;
    p->pend_bytes = 0;
    return rc;
}

static int prep_doc(void *ctx, const char *text, size_t n, const char *source) {
    Prep *p = ctx;
    Pending *d = &p->pend[p->n_pend++];
    d->text = pm_malloc(n + 1);
    memcpy(d->text, text, n);
    d->n = n;
    d->source = pm_strdup(source);
    p->pend_bytes += n;
    if (p->n_pend == GROUP_DOCS || p->pend_bytes >= GROUP_BYTES) return prep_flush(p);
    return 0;
}

static void prep_free(Prep *p) {
    for (int i = 0; i < GROUP_DOCS; i++) free(p->pend[i].ids), free(p->pend[i].text), free(p->pend[i].source);
}

static void prepare_usage(void) {
    printf("usage: packmamba prepare --out DIR [options] INPUT...\n"
           "Tokenizes text into DIR/data.pms (token shard) and DIR/tokenizer.json.\n"
           "INPUT: text files (one document each), directories (recursive), JSONL (\"text\" field per line),\n"
           "       any of them gzip'd; fortune files (NAME with NAME.dat beside it) split on lines \"%%\".\n"
           "  --out DIR            output directory (created)\n"
           "  --tokenizer T        byte | tokenizer.json | directory | vocab.json | encoder.json  (default byte)\n"
           "  --val-fraction F     fraction of documents held out for validation (default %.2f)\n"
           "  --ext LIST           in directories, only files ending in these extensions, e.g. rst,txt\n"
           "                       (a trailing .gz is ignored; default: every file)\n"
           "  --split-on LINE      cut every plain file into documents at lines equal to LINE\n"
           "  --invalid MODE       invalid UTF-8: error | replace (U+FFFD) | skip (the document)  (default error)\n"
           "  --force              replace an existing DIR/data.pms\n",
           DEFAULT_VAL_FRACTION);
}

int cmd_prepare(int argc, char **argv) {
    const char *out = NULL, *tok_path = "byte", *split_on = NULL, *ext = NULL;
    double val_fraction = DEFAULT_VAL_FRACTION;
    int invalid = PM_INVALID_ERROR, force = 0;
    char **inputs = pm_calloc(argc, sizeof(char *));
    int n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            prepare_usage();
            free(inputs);
            return 0;
        } else if (!strcmp(a, "--out") || !strcmp(a, "--tokenizer") || !strcmp(a, "--val-fraction") ||
                   !strcmp(a, "--ext") || !strcmp(a, "--split-on") || !strcmp(a, "--invalid")) {
            if (!need_value(i, argc, argv)) return free(inputs), 2;
            const char *v = argv[++i];
            if (!strcmp(a, "--out")) out = v;
            else if (!strcmp(a, "--tokenizer")) tok_path = v;
            else if (!strcmp(a, "--ext")) ext = v;
            else if (!strcmp(a, "--split-on")) split_on = v;
            else if (!strcmp(a, "--val-fraction")) {
                char *end;
                val_fraction = strtod(v, &end);
                if (*end || !(val_fraction >= 0 && val_fraction < 1)) {
                    fprintf(stderr, "packmamba prepare: --val-fraction must be in [0, 1), got \"%s\"\n", v);
                    return free(inputs), 2;
                }
            } else {
                invalid = !strcmp(v, "error") ? PM_INVALID_ERROR : !strcmp(v, "replace") ? PM_INVALID_REPLACE
                        : !strcmp(v, "skip") ? PM_INVALID_SKIP : -1;
                if (invalid < 0) {
                    fprintf(stderr, "packmamba prepare: --invalid must be error, replace or skip, got \"%s\"\n", v);
                    return free(inputs), 2;
                }
            }
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "packmamba prepare: unknown flag %s (see --help)\n", a);
            return free(inputs), 2;
        } else {
            inputs[n_inputs++] = argv[i];
        }
    }
    if (!out || n_inputs == 0) {
        fprintf(stderr, "packmamba prepare: %s (see --help)\n", !out ? "--out DIR is required" : "no INPUT given");
        return free(inputs), 2;
    }
    CorpusOptions opt = {.split_on = split_on, .invalid = invalid};
    char *ext_copy = NULL;
    if (ext) {
        ext_copy = pm_strdup(ext);
        opt.ext = pm_calloc(strlen(ext) + 1, sizeof(char *));
        for (char *s = strtok(ext_copy, ","); s; s = strtok(NULL, ",")) opt.ext[opt.n_ext++] = *s == '.' ? s + 1 : s;
    }
    int rc = 1;
    char shard_path[4096], tk_json[4096], info_path[4096];
    snprintf(shard_path, sizeof shard_path, "%s/%s", out, PM_SHARD_FILE);
    snprintf(tk_json, sizeof tk_json, "%s/tokenizer.json", out);
    snprintf(info_path, sizeof info_path, "%s/prepare.json", out);
    Prep *pp = pm_calloc(1, sizeof(Prep));
    pp->val_fraction = val_fraction;
    if (!force && access(shard_path, F_OK) == 0) {
        fprintf(stderr, "packmamba: %s: already exists (use --force to replace it)\n", shard_path);
        goto done;
    }
    if (!(pp->tk = tokenizer_load(tok_path)) || pm_mkdir_p(out) != 0 ||
        !(pp->w = shard_writer_open(shard_path, tokenizer_vocab_size(pp->tk), tokenizer_eod_id(pp->tk)))) {
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        goto done;
    }
    double t0 = pm_now();
    CorpusCounts c;
    int r = corpus_read(inputs, n_inputs, &opt, prep_doc, pp, &c);
    if (r == 0) r = prep_flush(pp);
    double secs = pm_now() - t0;
    if (r == 0 && shard_writer_docs(pp->w) == 0)
        r = pm_error("%s%s: no non-empty documents (%lld empty skipped, %lld with invalid UTF-8 skipped)", inputs[0],
                     n_inputs > 1 ? " (and the other inputs)" : "", (long long)c.empty_skipped,
                     (long long)c.invalid_skipped);
    if (r != 0) {
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        shard_writer_abort(pp->w);  // the temp shard is removed; nothing under DIR is replaced
        goto done;
    }
    uint64_t n_docs = shard_writer_docs(pp->w);
    if (val_fraction > 0 && pp->n_val == 0 && n_docs >= 2) {  // tiny corpora still get one held-out document
        shard_writer_set_split(pp->w, pp->min_hash_doc, 2);
        pp->n_val = 1;
    }
    if (tokenizer_save(pp->tk, tk_json) != 0) {
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        shard_writer_abort(pp->w);
        goto done;
    }
    if (shard_writer_finish(pp->w) != 0) {  // frees the writer and removes its temp file on failure
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        goto done;
    }
    // A record of what was prepared (not needed by the other commands; for people and for reproducing).
    json_t *info = json_object(), *ins = json_array();
    for (int i = 0; i < n_inputs; i++) json_array_append_new(ins, json_string(inputs[i]));
    json_object_set_new(info, "inputs", ins);
    json_object_set_new(info, "tokenizer", json_string(tok_path));
    json_object_set_new(info, "vocab_size", json_integer(tokenizer_vocab_size(pp->tk)));
    json_object_set_new(info, "eod_id", json_integer(tokenizer_eod_id(pp->tk)));
    json_object_set_new(info, "val_fraction", json_real(val_fraction));
    json_object_set_new(info, "files", json_integer(c.files));
    json_object_set_new(info, "documents", json_integer((json_int_t)n_docs));
    json_object_set_new(info, "val_documents", json_integer((json_int_t)pp->n_val));
    json_object_set_new(info, "tokens", json_integer(pp->tokens));
    json_object_set_new(info, "bytes", json_integer(c.bytes));
    json_object_set_new(info, "empty_skipped", json_integer(c.empty_skipped));
    json_object_set_new(info, "invalid_skipped", json_integer(c.invalid_skipped));
    json_object_set_new(info, "invalid_replaced", json_integer(c.invalid_replaced));
    json_object_set_new(info, "seconds", json_real(secs));
    char *s = json_dumps(info, JSON_INDENT(2));
    json_decref(info);
    pm_write_file_atomic(info_path, s, strlen(s));
    free(s);
    printf("prepared %s: %llu documents (%llu val), %lld tokens, %s tokenizer (vocab %d)\n", out,
           (unsigned long long)n_docs, (unsigned long long)pp->n_val, (long long)pp->tokens, tokenizer_kind(pp->tk),
           tokenizer_vocab_size(pp->tk));
    printf("read %lld files, %.1f MB in %.2f s (%.1f MB/s)", (long long)c.files, c.bytes / 1e6, secs,
           secs > 0 ? c.bytes / 1e6 / secs : 0.0);
    if (c.empty_skipped) printf("; skipped %lld empty documents", (long long)c.empty_skipped);
    if (c.invalid_skipped) printf("; skipped %lld documents with invalid UTF-8", (long long)c.invalid_skipped);
    if (c.invalid_replaced) printf("; replaced %lld invalid bytes", (long long)c.invalid_replaced);
    printf("\n");
    rc = 0;
done:
    tokenizer_free(pp->tk);
    prep_free(pp);
    free(pp), free(opt.ext), free(ext_copy), free(inputs);
    return rc;
}

// ---------------------------------------------------------------------------------------------------------------
// stats

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void stats_usage(void) {
    printf("usage: packmamba stats DIR[,DIR...] [options]\n"
           "Documents, tokens, length percentiles and histogram, and the fill (real tokens / tokens computed) of\n"
           "each batching policy over one epoch.\n"
           "  --seq-len T     row length (default 2048)\n"
           "  --batch B       rows per batch (default 8)\n"
           "  --window W      pack best-fit window in pieces (default %d; greedy-in-order is also reported)\n"
           "  --split S       all | train | val (default all)\n"
           "  --seed S        shuffle seed (default 0)\n"
           "  --json          one JSON object instead of text\n",
           PM_PACK_WINDOW_DEFAULT);
}

int cmd_stats(int argc, char **argv) {
    const char *dir = NULL;
    int T = 2048, B = 8, window = PM_PACK_WINDOW_DEFAULT, split = PM_SPLIT_ALL, as_json = 0;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            stats_usage();
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--seq-len") || !strcmp(a, "--batch") || !strcmp(a, "--window") ||
                   !strcmp(a, "--seed") || !strcmp(a, "--split")) {
            if (!need_value(i, argc, argv)) return 2;
            const char *v = argv[++i];
            if (!strcmp(a, "--split")) {
                split = !strcmp(v, "all") ? 0 : !strcmp(v, "train") ? 1 : !strcmp(v, "val") ? 2 : -1;
                if (split < 0) {
                    fprintf(stderr, "packmamba stats: --split must be all, train or val\n");
                    return 2;
                }
                continue;
            }
            char *end;
            long long x = strtoll(v, &end, 10);
            if (*end || x < (strcmp(a, "--seed") ? 1 : 0) || x > (1ll << 30)) {
                fprintf(stderr, "packmamba stats: bad value for %s: \"%s\"\n", a, v);
                return 2;
            }
            if (!strcmp(a, "--seq-len")) T = (int)x;
            else if (!strcmp(a, "--batch")) B = (int)x;
            else if (!strcmp(a, "--window")) window = (int)x;
            else seed = (uint64_t)x;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "packmamba stats: unknown flag %s (see --help)\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "packmamba stats: more than one DIR given\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "packmamba stats: DIR is required (see --help)\n");
        return 2;
    }
    // Several directories ("a,b") count as one data set, as train reads them.
    int nd;
    char **dirs = data_dirs(dir, &nd);
    if (!dirs) {
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        return 1;
    }
    char path[4096];
    int64_t *len = NULL, cap = 0;
    int64_t n = 0, tokens = 0, n_train = 0, n_val = 0, empty = 0;
    uint32_t vocab = 0;
    for (int i = 0; i < nd; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], PM_SHARD_FILE);
        Shard s;
        if (shard_open(&s, path) != 0) {
            fprintf(stderr, "packmamba: %s\n", pm_last_error());
            data_dirs_free(dirs, nd);
            free(len);
            return 1;
        }
        if (n + (int64_t)s.n_docs > cap) {
            cap = n + (int64_t)s.n_docs;
            len = pm_realloc(len, (cap ? cap : 1) * sizeof(int64_t));
        }
        for (uint64_t d = 0; d < s.n_docs; d++) {
            if (split && s.split[d] != split) continue;
            int64_t l = (int64_t)shard_doc_len(&s, d);
            if (l == 0) {
                empty++;
                continue;
            }
            len[n++] = l;
            tokens += l;
            n_train += s.split[d] == 1, n_val += s.split[d] == 2;
        }
        vocab = s.vocab_size;
        shard_close(&s);
    }
    data_dirs_free(dirs, nd);
    if (n == 0) {
        fprintf(stderr, "packmamba: %s: no documents in this split\n", nd == 1 ? path : dir);
        free(len);
        return 1;
    }
    qsort(len, n, sizeof(int64_t), cmp_i64);
    static const double qs[] = {0.1, 0.25, 0.5, 0.75, 0.9, 0.99};
    static const char *qn[] = {"p10", "p25", "p50", "p75", "p90", "p99"};
    int64_t qv[6];
    for (int i = 0; i < 6; i++) qv[i] = len[(int64_t)floor(qs[i] * (double)(n - 1) + 0.5)];  // nearest rank
    // Histogram in powers of two: bucket k counts lengths in [2^k, 2^(k+1)).
    int64_t hist[64] = {0};
    int kmax = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = 63 - __builtin_clzll((uint64_t)len[i]);
        hist[k]++;
        if (k > kmax) kmax = k;
    }
    int64_t longer = 0;
    for (int64_t i = 0; i < n; i++) longer += len[i] > T;
    PolicyStats ps[4];
    const char *names[4] = {"single", "pad", "pack", "pack_greedy"};
    for (int p = 0; p < 4; p++) {
        int policy = p < 3 ? p : PM_POLICY_PACK, w = p == 3 ? 1 : window;
        if (batcher_policy_stats(dir, split, policy, B, T, seed, w, &ps[p]) != 0) {
            fprintf(stderr, "packmamba: %s\n", pm_last_error());
            free(len);
            return 1;
        }
    }
    if (as_json) {
        json_t *o = json_object(), *l = json_object(), *h = json_array(), *pol = json_object();
        json_object_set_new(o, "documents", json_integer(n));
        json_object_set_new(o, "tokens", json_integer(tokens));
        json_object_set_new(o, "train_documents", json_integer(n_train));
        json_object_set_new(o, "val_documents", json_integer(n_val));
        json_object_set_new(o, "vocab_size", json_integer(vocab));
        json_object_set_new(o, "seq_len", json_integer(T));
        json_object_set_new(o, "batch", json_integer(B));
        json_object_set_new(o, "window", json_integer(window));
        json_object_set_new(o, "longer_than_seq_len", json_integer(longer));
        json_object_set_new(l, "min", json_integer(len[0]));
        json_object_set_new(l, "mean", json_real((double)tokens / n));
        for (int i = 0; i < 6; i++) json_object_set_new(l, qn[i], json_integer(qv[i]));
        json_object_set_new(l, "max", json_integer(len[n - 1]));
        json_object_set_new(o, "length", l);
        for (int k = 0; k <= kmax; k++) {
            json_t *b = json_object();
            json_object_set_new(b, "min", json_integer(1ll << k));
            json_object_set_new(b, "max", json_integer((1ll << (k + 1)) - 1));
            json_object_set_new(b, "count", json_integer(hist[k]));
            json_array_append_new(h, b);
        }
        json_object_set_new(o, "histogram", h);
        for (int p = 0; p < 4; p++) {
            json_t *x = json_object();
            json_object_set_new(x, "fill", json_real(ps[p].fill));
            json_object_set_new(x, "padding", json_real(1 - ps[p].fill));
            json_object_set_new(x, "rows", json_integer(ps[p].rows));
            json_object_set_new(x, "batches", json_integer(ps[p].batches));
            json_object_set_new(x, "tokens_computed", json_integer(ps[p].computed_tokens));
            json_object_set_new(pol, names[p], x);
        }
        json_object_set_new(o, "policies", pol);
        char *str = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("%s\n", str);
        free(str);
        json_decref(o);
    } else {
        printf("%s: %lld documents (%lld train, %lld val), %lld tokens, vocab %u\n", dir, (long long)n,
               (long long)n_train, (long long)n_val, (long long)tokens, vocab);
        printf("length: min %lld  mean %.1f", (long long)len[0], (double)tokens / n);
        for (int i = 0; i < 6; i++) printf("  %s %lld", qn[i], (long long)qv[i]);
        printf("  max %lld\n", (long long)len[n - 1]);
        printf("documents longer than T=%d: %lld (cut into pieces of at most T)\n", T, (long long)longer);
        printf("histogram (tokens per document):\n");
        int64_t hmax = 1;
        for (int k = 0; k <= kmax; k++) hmax = hist[k] > hmax ? hist[k] : hmax;
        for (int k = 0; k <= kmax; k++) {
            char range[64];
            snprintf(range, sizeof range, "%lld-%lld", 1ll << k, (1ll << (k + 1)) - 1);
            printf("  %15s %8lld ", range, (long long)hist[k]);
            for (int j = 0; j < (int)(40 * hist[k] / hmax); j++) putchar('#');
            putchar('\n');
        }
        printf("policies at T=%d, B=%d (fill = real tokens / tokens computed, one epoch):\n", T, B);
        for (int p = 0; p < 4; p++)
            printf("  %-12s fill %6.2f%%  padding %6.2f%%  rows %9lld  steps %8lld%s\n", names[p], 100 * ps[p].fill,
                   100 * (1 - ps[p].fill), (long long)ps[p].rows, (long long)ps[p].batches,
                   p == 2 ? "  (best fit)" : p == 3 ? "  (greedy in order, baseline)" : "");
    }
    free(len);
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// tokenize

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path = "byte";
    int special = 1;
    char *text = NULL;
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: packmamba tokenize [--tokenizer byte|PATH] [--no-special] [TEXT]\n"
                   "Prints the token ids of TEXT (or of stdin when TEXT is omitted) on one line.\n"
                   "  --tokenizer T   byte | tokenizer.json | directory | vocab.json | encoder.json (default byte)\n"
                   "  --no-special    treat special tokens written in the text (<|endoftext|>) as plain text\n");
            free(text);
            return 0;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!need_value(i, argc, argv)) return free(text), 2;
            tok_path = argv[++i];
        } else if (!strcmp(a, "--no-special")) {
            special = 0;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "packmamba tokenize: unknown flag %s (see --help)\n", a);
            return free(text), 2;
        } else if (!text) {
            text = pm_strdup(a);
            n = strlen(a);
        } else {
            fprintf(stderr, "packmamba tokenize: give TEXT as one argument (quote it)\n");
            return free(text), 2;
        }
    }
    if (!text) {
        size_t cap = 1 << 16;
        text = pm_malloc(cap);
        size_t r;
        while ((r = fread(text + n, 1, cap - n, stdin)) > 0)
            if ((n += r) == cap) text = pm_realloc(text, cap *= 2);
    }
    Tokenizer *tk = tokenizer_load(tok_path);
    if (!tk) {
        fprintf(stderr, "packmamba: %s\n", pm_last_error());
        free(text);
        return 1;
    }
    int32_t *ids = NULL;
    size_t cap = 0;
    int64_t k = tokenizer_encode(tk, text, n, special, &ids, &cap);
    int rc = 0;
    if (k < 0) {
        fprintf(stderr, "packmamba: tokenize: %s\n", pm_last_error());
        rc = 1;
    } else {
        for (int64_t i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids), free(text);
    tokenizer_free(tk);
    return rc;
}
