// corpus.c — see corpus.h.
#define _GNU_SOURCE
#include "corpus.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "tokenizer.h"
#include "util.h"

typedef struct {
    const CorpusOptions *opt;
    CorpusDocFn fn;
    void *ctx;
    CorpusCounts *c;
} Reader;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int path_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// Whole file, decompressed if gzip'd (zlib reads plain files through unchanged). NULL + pm_error on failure.
static char *read_all(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) {
        pm_error("%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
        return NULL;
    }
    gzbuffer(f, 1 << 17);
    size_t cap = 1 << 16, len = 0;
    char *buf = pm_malloc(cap + 1);
    for (;;) {
        if (len == cap) buf = pm_realloc(buf, (cap *= 2) + 1);
        size_t want = cap - len > (1u << 30) ? (1u << 30) : cap - len;
        int r = gzread(f, buf + len, (unsigned)want);
        if (r < 0) {
            int err;
            const char *msg = gzerror(f, &err);
            pm_error("%s: read failed: %s", path, err == Z_ERRNO ? strerror(errno) : msg);
            gzclose(f);
            free(buf);
            return NULL;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    gzclose(f);
    buf[len] = 0;
    *n = len;
    return buf;
}

// Validates (or repairs) one document's UTF-8 and hands it to the callback.
static int emit(Reader *rd, const char *text, size_t n, const char *source, size_t file_offset) {
    if (n == 0) {
        rd->c->empty_skipped++;
        return 0;
    }
    int64_t bad = pm_utf8_invalid_offset(text, n);
    char *fixed = NULL;
    if (bad >= 0) {
        if (rd->opt->invalid == PM_INVALID_SKIP) {
            rd->c->invalid_skipped++;
            return 0;
        }
        if (rd->opt->invalid == PM_INVALID_ERROR)
            return pm_error("%s: invalid UTF-8 at byte offset %lld (use --invalid replace or skip)", source,
                            (long long)(file_offset + (size_t)bad));
        // Replace each offending byte with U+FFFD (EF BF BD) and go on from the next byte.
        fixed = pm_malloc(3 * n + 1);
        size_t o = 0, i = 0;
        while (i < n) {
            int64_t b = pm_utf8_invalid_offset(text + i, n - i);
            size_t good = b < 0 ? n - i : (size_t)b;
            memcpy(fixed + o, text + i, good);
            o += good, i += good;
            if (b >= 0) {
                memcpy(fixed + o, "\xef\xbf\xbd", 3);
                o += 3, i++;
                rd->c->invalid_replaced++;
            }
        }
        text = fixed, n = o;
    }
    rd->c->documents++;
    rd->c->bytes += (int64_t)n;
    int r = rd->fn(rd->ctx, text, n, source);
    free(fixed);
    return r;
}

static int read_jsonl(Reader *rd, const char *path, const char *buf, size_t n) {
    size_t at = 0;
    int64_t lineno = 0;
    char source[4200];
    while (at < n) {
        const char *nl = memchr(buf + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - buf) : n;
        lineno++;
        size_t s = at, e = end;
        while (s < e && (buf[s] == ' ' || buf[s] == '\t' || buf[s] == '\r')) s++;
        while (e > s && (buf[e - 1] == ' ' || buf[e - 1] == '\t' || buf[e - 1] == '\r')) e--;
        snprintf(source, sizeof source, "%s:%lld", path, (long long)lineno);
        if (s == e) {
            rd->c->blank_lines++;
        } else {
            int64_t bad = pm_utf8_invalid_offset(buf + s, e - s);
            if (bad >= 0 && rd->opt->invalid == PM_INVALID_ERROR)
                return pm_error("%s: invalid UTF-8 at byte offset %lld", source, (long long)(s + (size_t)bad));
            if (bad >= 0 && rd->opt->invalid == PM_INVALID_SKIP) {
                rd->c->invalid_skipped++;
            } else {
                // With --invalid replace the raw line may hold invalid bytes that the JSON parser rejects; repair
                // the line first (escapes inside strings stay as they are).
                char *line = NULL;
                size_t ln = e - s;
                if (bad >= 0) {
                    line = pm_malloc(3 * ln + 1);
                    size_t o = 0;
                    for (size_t i = s; i < e;) {
                        int64_t b = pm_utf8_invalid_offset(buf + i, e - i);
                        size_t good = b < 0 ? e - i : (size_t)b;
                        memcpy(line + o, buf + i, good);
                        o += good, i += good;
                        if (b >= 0) memcpy(line + o, "\xef\xbf\xbd", 3), o += 3, i++, rd->c->invalid_replaced++;
                    }
                    ln = o;
                }
                json_error_t err;
                json_t *j = json_loadb(line ? line : buf + s, ln, JSON_ALLOW_NUL, &err);
                free(line);
                if (!j) return pm_error("%s: bad JSON: %s", source, err.text);
                json_t *t = json_is_object(j) ? json_object_get(j, "text") : NULL;
                if (!json_is_string(t)) {
                    json_decref(j);
                    return pm_error("%s: expected a JSON object with a \"text\" string", source);
                }
                int r = emit(rd, json_string_value(t), json_string_length(t), source, 0);
                json_decref(j);
                if (r) return r;
            }
        }
        at = end + 1;
    }
    return 0;
}

// Documents separated by lines equal to `sep` (a trailing '\r' on the line is ignored).
static int read_split(Reader *rd, const char *path, const char *buf, size_t n, const char *sep) {
    size_t k = strlen(sep), doc = 0, at = 0;
    while (at <= n) {
        const char *nl = at < n ? memchr(buf + at, '\n', n - at) : NULL;
        size_t end = nl ? (size_t)(nl - buf) : n;
        size_t len = end - at;
        if (len > 0 && buf[end - 1] == '\r') len--;
        int is_sep = len == k && memcmp(buf + at, sep, k) == 0;
        if (!nl && doc == n && doc > 0) break;  // nothing after the last separator
        if (is_sep || !nl) {
            size_t stop = is_sep ? at : n;
            int r = emit(rd, buf + doc, stop - doc, path, doc);
            if (r) return r;
            doc = nl ? end + 1 : n;
        }
        if (!nl) break;
        at = end + 1;
    }
    return 0;
}

static int is_fortune(const char *path) {
    char dat[4200];
    snprintf(dat, sizeof dat, "%s.dat", path);
    return !ends_with(path, ".dat") && path_exists(dat);
}

static int read_file(Reader *rd, const char *path) {
    size_t n;
    char *buf = read_all(path, &n);
    if (!buf) return -1;
    rd->c->files++;
    int r;
    if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz")) r = read_jsonl(rd, path, buf, n);
    else if (rd->opt->split_on) r = read_split(rd, path, buf, n, rd->opt->split_on);
    else if (is_fortune(path)) r = read_split(rd, path, buf, n, "%");
    else r = emit(rd, buf, n, path, 0);
    free(buf);
    return r;
}

static int ext_ok(const CorpusOptions *opt, const char *name) {
    if (!opt->ext) return 1;
    char base[4096];
    snprintf(base, sizeof base, "%s", name);
    if (ends_with(base, ".gz")) base[strlen(base) - 3] = 0;
    for (int i = 0; i < opt->n_ext; i++) {
        char suf[256];
        snprintf(suf, sizeof suf, ".%s", opt->ext[i]);
        if (ends_with(base, suf)) return 1;
    }
    return 0;
}

static int cmp_names(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int walk(Reader *rd, const char *dir, int64_t *found) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, cmp_names);
    if (n < 0) return pm_error("%s: cannot read directory: %s", dir, strerror(errno));
    int r = 0;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (r == 0 && name[0] != '.') {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            struct stat st;
            if (lstat(path, &st) != 0) {
                r = pm_error("%s: cannot stat: %s", path, strerror(errno));
            } else if (S_ISDIR(st.st_mode)) {
                r = walk(rd, path, found);
            } else if (S_ISREG(st.st_mode)) {
                // A strfile index (NAME.dat beside NAME) is not text; its fortune file NAME is taken whatever --ext.
                char base[4096];
                snprintf(base, sizeof base, "%s", path);
                int is_index = ends_with(base, ".dat") && (base[strlen(base) - 4] = 0, path_exists(base));
                if (!is_index && (is_fortune(path) || ext_ok(rd->opt, name))) {
                    (*found)++;
                    r = read_file(rd, path);
                }
            }
        }
        free(list[i]);
    }
    free(list);
    return r;
}

int corpus_read(char *const *inputs, int n_inputs, const CorpusOptions *opt, CorpusDocFn fn, void *ctx,
                CorpusCounts *counts) {
    memset(counts, 0, sizeof *counts);
    Reader rd = {opt, fn, ctx, counts};
    if (n_inputs == 0) return pm_error("prepare: no inputs given");
    for (int i = 0; i < n_inputs; i++) {
        const char *p = inputs[i];
        struct stat st;
        if (stat(p, &st) != 0) return pm_error("%s: cannot open: %s", p, strerror(errno));
        int r;
        if (S_ISDIR(st.st_mode)) {
            // Strip trailing slashes so file names in messages read cleanly.
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", p);
            for (size_t k = strlen(dir); k > 1 && dir[k - 1] == '/'; k--) dir[k - 1] = 0;
            int64_t found = 0;
            r = walk(&rd, dir, &found);
            if (r == 0 && found == 0)
                return pm_error("%s: no input files in this directory%s", p, opt->ext ? " (with the --ext filter)" : "");
        } else if (S_ISREG(st.st_mode)) {
            r = read_file(&rd, p);
        } else {
            return pm_error("%s: not a regular file or directory", p);
        }
        if (r) return r;
    }
    return 0;
}
