// tokenizer.c — see tokenizer.h. Byte tokenizer, and byte-level BPE read from Hugging Face / GPT-2 files.
#define _GNU_SOURCE
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "shard.h"
#include "util.h"

// ---------------------------------------------------------------------------------------------------------------
// Small hash tables: byte string -> id, and (left id, right id) -> (merge rank, merged id). Open addressing with
// linear probing, sized to a power of two at least twice the entry count.

static uint64_t hash_str(const uint8_t *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

typedef struct {
    size_t cap;       // power of two
    int32_t *slot;    // (cap) id or -1
} StrMap;             // keys are the tokenizer's token byte strings (tok->bytes[id])

typedef struct {
    size_t cap;
    uint64_t *key;    // (cap) left<<32 | right, UINT64_MAX empty
    int32_t *rank;    // (cap)
    int32_t *merged;  // (cap)
} PairMap;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

// ---------------------------------------------------------------------------------------------------------------

typedef struct {
    char *text;  // raw bytes, NUL-terminated
    size_t len;
    int32_t id;
    int special;
} AddedToken;

enum { TK_BYTE = 0, TK_BPE = 1 };

struct Tokenizer {
    int kind;
    int vocab_size, eod_id;
    // BPE
    uint8_t **bytes;   // (vocab_size) raw bytes of each id (NULL for unused ids)
    uint32_t *nbytes;  // (vocab_size)
    StrMap ids;        // raw bytes -> id (model vocabulary only)
    PairMap merges;
    int32_t byte_id[256];  // id of each single byte, -1 if the vocabulary lacks it
    AddedToken *added;     // sorted by length, longest first
    int n_added;
    uint8_t added_first[256];  // 1 if some added token starts with this byte
    int nfc, add_prefix_space;
    pcre2_code *re;           // pre-tokenizer split pattern (matches are the pieces)
    json_t *json;             // tokenizer.json content, written back by tokenizer_save
    uint64_t serial;          // unique per loaded tokenizer: tags the per-thread word cache
};

// Per-thread cache of short pre-tokens -> ids. Text repeats words constantly, and a cache hit skips the merge
// loop; it is per thread (no locks under OpenMP) and direct-mapped (a collision just recomputes). It belongs to
// one tokenizer at a time (by serial number) and is cleared when another one is used on the same thread.
#define WCACHE_KEY 24
#define WCACHE_SLOTS 16384
typedef struct {
    uint64_t h;
    uint8_t len, n_ids;
    uint8_t key[WCACHE_KEY];
    int32_t ids[WCACHE_KEY];
} WSlot;
static __thread uint64_t wcache_serial;
static __thread WSlot *wcache;
static uint64_t tokenizer_serials;

static int strmap_find(const Tokenizer *t, const uint8_t *s, size_t n) {
    const StrMap *m = &t->ids;
    size_t mask = m->cap - 1;
    for (size_t i = hash_str(s, n) & mask;; i = (i + 1) & mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (t->nbytes[id] == n && memcmp(t->bytes[id], s, n) == 0) return id;
    }
}

static void strmap_build(Tokenizer *t) {
    StrMap *m = &t->ids;
    m->cap = 16;
    while (m->cap < 2 * (size_t)t->vocab_size) m->cap *= 2;
    m->slot = pm_malloc(m->cap * sizeof(int32_t));
    for (size_t i = 0; i < m->cap; i++) m->slot[i] = -1;
    size_t mask = m->cap - 1;
    for (int id = 0; id < t->vocab_size; id++) {
        if (!t->bytes[id]) continue;
        if (strmap_find(t, t->bytes[id], t->nbytes[id]) >= 0) continue;  // duplicate string: keep the first id
        size_t i = hash_str(t->bytes[id], t->nbytes[id]) & mask;
        while (m->slot[i] >= 0) i = (i + 1) & mask;
        m->slot[i] = id;
    }
}

static void pairmap_init(PairMap *m, size_t n) {
    m->cap = 16;
    while (m->cap < 2 * n) m->cap *= 2;
    m->key = pm_malloc(m->cap * sizeof(uint64_t));
    m->rank = pm_malloc(m->cap * sizeof(int32_t));
    m->merged = pm_malloc(m->cap * sizeof(int32_t));
    for (size_t i = 0; i < m->cap; i++) m->key[i] = UINT64_MAX;
}

static int pairmap_find(const PairMap *m, int32_t a, int32_t b, int32_t *merged) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = m->cap - 1;
    for (size_t i = mix64(k) & mask;; i = (i + 1) & mask) {
        if (m->key[i] == UINT64_MAX) return -1;
        if (m->key[i] == k) {
            *merged = m->merged[i];
            return m->rank[i];
        }
    }
}

static void pairmap_put(PairMap *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = m->cap - 1;
    size_t i = mix64(k) & mask;
    while (m->key[i] != UINT64_MAX) {
        if (m->key[i] == k) return;  // a repeated merge keeps its first (lowest) rank
        i = (i + 1) & mask;
    }
    m->key[i] = k, m->rank[i] = rank, m->merged[i] = merged;
}

// ---------------------------------------------------------------------------------------------------------------
// GPT-2's byte <-> printable code point map: bytes that are printable Latin-1 map to themselves, the other 68
// (controls, space, 0x7f-0xa0, 0xad) to 256, 257, ... in byte order. Vocabulary strings are written in these code
// points, so a token's raw bytes are found by mapping each code point back.

static int byte_to_cp[256];
static int cp_to_byte[512];  // -1 where the code point is not a byte's image

static void byte_map_init(void) {
    static int done = 0;
    if (done) return;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        byte_to_cp[b] = printable ? b : 256 + n++;
    }
    for (int c = 0; c < 512; c++) cp_to_byte[c] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp[b]] = b;
    done = 1;
}

// Vocabulary string (UTF-8 of mapped code points) -> raw bytes. Returns the byte count, or -1 if a code point is
// outside the map (then the string is kept verbatim by the caller).
static int64_t unmap_token(const char *s, uint8_t *out) {
    size_t n = strlen(s), o = 0;
    utf8proc_ssize_t i = 0;
    while ((size_t)i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const uint8_t *)s + i, n - i, &cp);
        if (k <= 0 || cp < 0 || cp >= 512 || cp_to_byte[cp] < 0) return -1;
        out[o++] = (uint8_t)cp_to_byte[cp];
        i += k;
    }
    return (int64_t)o;
}

// ---------------------------------------------------------------------------------------------------------------

// Returns the byte offset of the first invalid UTF-8 sequence, or -1 if all of s is valid.
int64_t pm_utf8_invalid_offset(const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        // Fast path over ASCII, 8 bytes at a time.
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
        else return (int64_t)i;
        if (i + len > n) return (int64_t)i;
        for (int k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return (int64_t)i;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        // Overlong forms, surrogates and code points above U+10FFFF are invalid.
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return (int64_t)i;
        i += len;
    }
    return -1;
}

// ---------------------------------------------------------------------------------------------------------------
// Loading

// GPT-2's pre-tokenizer: contractions, letters, numbers, other symbols (each with an optional leading space),
// whitespace not followed by a non-space (so a space stays attached to the next word), other whitespace.
static const char *GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static pcre2_code *compile_pattern(const char *pat, const char *path) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        pm_error("%s: cannot compile pre-tokenizer pattern at %zu: %s", path, (size_t)off, (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // optional speed-up; matching works without it
    return re;
}

static Tokenizer *byte_tokenizer(void) {
    Tokenizer *t = pm_calloc(1, sizeof *t);
    t->kind = TK_BYTE;
    t->vocab_size = 257;
    t->eod_id = 256;
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    if (t->bytes)
        for (int i = 0; i < t->vocab_size; i++) free(t->bytes[i]);
    free(t->bytes), free(t->nbytes), free(t->ids.slot);
    free(t->merges.key), free(t->merges.rank), free(t->merges.merged);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].text);
    free(t->added);
    if (t->re) pcre2_code_free(t->re);
    if (t->json) json_decref(t->json);
    free(t);
}

static int cmp_added(const void *a, const void *b) {
    const AddedToken *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id - y->id;
}

static int has_type(json_t *o, const char *type) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) && strcmp(json_string_value(t), type) == 0;
}

// Reads normalizer and pre_tokenizer settings from a tokenizer.json; only what byte-level BPE models use.
static int read_pipeline(Tokenizer *t, json_t *root, const char *path) {
    json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm)) {
        json_t *list = has_type(norm, "Sequence") ? json_object_get(norm, "normalizers") : NULL;
        size_t n = list ? json_array_size(list) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *x = list ? json_array_get(list, i) : norm;
            if (has_type(x, "NFC")) t->nfc = 1;
            else return pm_error("%s: unsupported normalizer type %s", path,
                                 json_string_value(json_object_get(x, "type")) ?: "?");
        }
    }
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (!pre || json_is_null(pre)) return pm_error("%s: no pre_tokenizer (byte-level BPE expected)", path);
    json_t *list = has_type(pre, "Sequence") ? json_object_get(pre, "pretokenizers") : NULL;
    size_t n = list ? json_array_size(list) : 1;
    const char *pattern = NULL;
    int byte_level = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *x = list ? json_array_get(list, i) : pre;
        if (has_type(x, "ByteLevel")) {
            byte_level = 1;
            t->add_prefix_space = json_is_true(json_object_get(x, "add_prefix_space"));
            json_t *ur = json_object_get(x, "use_regex");
            if (!ur || json_is_true(ur)) {
                if (pattern) return pm_error("%s: two split patterns in pre_tokenizer (unsupported)", path);
                pattern = GPT2_PATTERN;
            }
        } else if (has_type(x, "Split")) {
            json_t *p = json_object_get(x, "pattern");
            const char *rx = json_string_value(json_object_get(p, "Regex"));
            const char *beh = json_string_value(json_object_get(x, "behavior"));
            if (!rx || !beh || strcmp(beh, "Isolated") != 0 || json_is_true(json_object_get(x, "invert")))
                return pm_error("%s: unsupported Split pre-tokenizer (only Regex + Isolated)", path);
            if (pattern) return pm_error("%s: two split patterns in pre_tokenizer (unsupported)", path);
            pattern = rx;
        } else {
            return pm_error("%s: unsupported pre_tokenizer type %s", path,
                            json_string_value(json_object_get(x, "type")) ?: "?");
        }
    }
    if (!byte_level) return pm_error("%s: pre_tokenizer is not byte-level (unsupported)", path);
    if (pattern && !(t->re = compile_pattern(pattern, path))) return -1;
    return 0;
}

// Builds a BPE tokenizer from a vocabulary object {token string: id}, a merges array (strings "a b" or pairs
// ["a", "b"]) and added tokens [{id, content, special}]. `root` (a tokenizer.json) is kept for saving.
static Tokenizer *bpe_build(json_t *root, const char *path) {
    byte_map_init();
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        pm_error("%s: no \"model\" object", path);
        return NULL;
    }
    json_t *type = json_object_get(model, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0)) {
        pm_error("%s: model type %s is not supported (only BPE)", path, json_string_value(type) ?: "?");
        return NULL;
    }
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        pm_error("%s: model needs a \"vocab\" object and a \"merges\" array", path);
        return NULL;
    }
    Tokenizer *t = pm_calloc(1, sizeof *t);
    t->kind = TK_BPE;
    t->serial = __atomic_add_fetch(&tokenizer_serials, 1, __ATOMIC_RELAXED);
    t->json = root;
    json_incref(root);
    // Vocabulary size = 1 + the largest id among vocab and added tokens.
    int max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > (1 << 24)) {
            pm_error("%s: vocab entry \"%s\" has a bad id", path, key);
            goto fail;
        }
        if (json_integer_value(val) > max_id) max_id = (int)json_integer_value(val);
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *id = json_object_get(json_array_get(added, i), "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > (1 << 24)) {
            pm_error("%s: added token %zu has a bad id", path, i);
            goto fail;
        }
        if (json_integer_value(id) > max_id) max_id = (int)json_integer_value(id);
    }
    if (max_id < 0) {
        pm_error("%s: empty vocabulary", path);
        goto fail;
    }
    t->vocab_size = max_id + 1;
    t->bytes = pm_calloc(t->vocab_size, sizeof(uint8_t *));
    t->nbytes = pm_calloc(t->vocab_size, sizeof(uint32_t));
    json_object_foreach(vocab, key, val) {
        int id = (int)json_integer_value(val);
        size_t n = strlen(key);
        uint8_t *b = pm_malloc(n + 1);
        int64_t k = unmap_token(key, b);
        if (k < 0) memcpy(b, key, n), k = (int64_t)n;  // not byte-mapped: keep the string's own bytes
        b[k] = 0;
        free(t->bytes[id]);
        t->bytes[id] = b;
        t->nbytes[id] = (uint32_t)k;
    }
    strmap_build(t);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = strmap_find(t, &c, 1);
    }
    // Merges: rank = index in the list; each names two tokens whose concatenation is also a token.
    pairmap_init(&t->merges, json_array_size(merges));
    uint8_t *buf = pm_malloc(4096);
    size_t buf_cap = 4096;
    for (size_t r = 0; r < json_array_size(merges); r++) {
        json_t *m = json_array_get(merges, r);
        const char *a, *b;
        char *tmp = NULL;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            const char *sp = strchr(s, ' ');
            if (!sp || sp == s || !sp[1]) {
                pm_error("%s: merge %zu (\"%s\") is not two tokens separated by a space", path, r, s);
                free(buf);
                goto fail;
            }
            tmp = pm_strdup(s);
            tmp[sp - s] = 0;
            a = tmp, b = tmp + (sp - s) + 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
        } else {
            pm_error("%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", path, r);
            free(buf);
            goto fail;
        }
        size_t need = 2 * (strlen(a) + strlen(b)) + 2;
        if (need > buf_cap) buf = pm_realloc(buf, buf_cap = need);
        int64_t na = unmap_token(a, buf), nb = na >= 0 ? unmap_token(b, buf + na) : -1;
        int ia = -1, ib = -1, im = -1;
        if (na >= 0 && nb >= 0) {
            ia = strmap_find(t, buf, na);
            ib = strmap_find(t, buf + na, nb);
            im = strmap_find(t, buf, na + nb);
        }
        free(tmp);
        if (ia < 0 || ib < 0 || im < 0) continue;  // a merge whose parts are not tokens can never apply
        pairmap_put(&t->merges, ia, ib, (int32_t)r, im);
    }
    free(buf);
    // Added tokens, matched literally in the text (longest first).
    t->n_added = (int)json_array_size(added);
    t->added = pm_calloc(t->n_added ? t->n_added : 1, sizeof(AddedToken));
    for (int i = 0; i < t->n_added; i++) {
        json_t *x = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(x, "content"));
        if (!content || !*content) {
            pm_error("%s: added token %d has no content", path, i);
            goto fail;
        }
        AddedToken *a = &t->added[i];
        a->text = pm_strdup(content);
        a->len = strlen(content);
        a->id = (int32_t)json_integer_value(json_object_get(x, "id"));
        a->special = json_is_true(json_object_get(x, "special"));
        t->added_first[(uint8_t)content[0]] = 1;
        if (!t->bytes[a->id]) {  // added token outside the model vocab: decodes to its content
            t->bytes[a->id] = (uint8_t *)pm_strdup(content);
            t->nbytes[a->id] = (uint32_t)a->len;
        }
    }
    qsort(t->added, t->n_added, sizeof(AddedToken), cmp_added);
    // End of document: <|endoftext|> if present, else the first special added token.
    t->eod_id = -1;
    for (int i = 0; i < t->n_added; i++)
        if (strcmp(t->added[i].text, "<|endoftext|>") == 0) t->eod_id = t->added[i].id;
    if (t->eod_id < 0) {
        uint8_t e[] = "<|endoftext|>";
        t->eod_id = strmap_find(t, e, 13);
    }
    if (t->eod_id < 0) {
        int best = -1;
        for (int i = 0; i < t->n_added; i++)
            if (t->added[i].special && (best < 0 || t->added[i].id < best)) best = t->added[i].id;
        t->eod_id = best;
    }
    if (t->eod_id < 0) {
        pm_error("%s: no end-of-document token (<|endoftext|> or a special added token)", path);
        goto fail;
    }
    if (read_pipeline(t, root, path) != 0) goto fail;
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) pm_error("%s: bad JSON at line %d: %s", path, e.line, e.text);
    return j;
}

// GPT-2 style pair: vocab.json/encoder.json + merges.txt/vocab.bpe. Builds the equivalent tokenizer.json object
// (the form Hugging Face converts these files to), so that everything after this point has one path.
static Tokenizer *load_vocab_merges(const char *vocab_path, const char *merges_path) {
    json_t *vocab = load_json(vocab_path);
    if (!vocab) return NULL;
    if (!json_is_object(vocab)) {
        pm_error("%s: expected a JSON object {token: id}", vocab_path);
        json_decref(vocab);
        return NULL;
    }
    size_t n;
    char *text = pm_read_file(merges_path, &n);
    if (!text) {
        json_decref(vocab);
        return NULL;
    }
    json_t *merges = json_array();
    char *line = text, *end = text + n;
    int lineno = 0;
    while (line < end) {
        char *nl = memchr(line, '\n', end - line);
        if (!nl) nl = end;
        *nl = 0;
        if (nl > line && nl[-1] == '\r') nl[-1] = 0;
        lineno++;
        // The first line may be a "#version: ..." comment; blank lines are skipped.
        if (!(lineno == 1 && line[0] == '#') && line[0]) json_array_append_new(merges, json_string(line));
        line = nl + 1;
    }
    free(text);
    json_t *root = json_object();
    json_t *model = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_string(""));
    json_object_set_new(model, "end_of_word_suffix", json_string(""));
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    json_t *added = json_array();
    json_t *eot = json_object_get(vocab, "<|endoftext|>");
    if (json_is_integer(eot)) {
        json_t *a = json_object();
        json_object_set_new(a, "id", json_integer(json_integer_value(eot)));
        json_object_set_new(a, "content", json_string("<|endoftext|>"));
        json_object_set_new(a, "single_word", json_false());
        json_object_set_new(a, "lstrip", json_false());
        json_object_set_new(a, "rstrip", json_false());
        json_object_set_new(a, "normalized", json_true());
        json_object_set_new(a, "special", json_true());
        json_array_append_new(added, a);
    }
    json_t *pre = json_object();
    json_object_set_new(pre, "type", json_string("ByteLevel"));
    json_object_set_new(pre, "add_prefix_space", json_false());
    json_object_set_new(pre, "trim_offsets", json_true());
    json_object_set_new(pre, "use_regex", json_true());
    json_t *dec = json_deep_copy(pre);
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", pre);
    json_object_set_new(root, "post_processor", json_null());
    json_object_set_new(root, "decoder", dec);
    json_object_set_new(root, "model", model);
    Tokenizer *t = bpe_build(root, vocab_path);
    json_decref(root);
    return t;
}

static Tokenizer *load_json_file(const char *path) {
    json_t *root = load_json(path);
    if (!root) return NULL;
    Tokenizer *t = NULL;
    json_t *type = json_object_get(root, "type");
    if (json_is_string(type) && strcmp(json_string_value(type), "packmamba-byte") == 0) {
        t = byte_tokenizer();
    } else if (json_object_get(root, "model")) {
        t = bpe_build(root, path);
    } else {
        pm_error("%s: not a tokenizer.json (no \"model\")", path);
    }
    json_decref(root);
    return t;
}

Tokenizer *tokenizer_load(const char *path) {
    if (!path || strcmp(path, "byte") == 0) return byte_tokenizer();
    char a[4096], b[4096];
    if (is_dir(path)) {
        snprintf(a, sizeof a, "%s/tokenizer.json", path);
        if (is_file(a)) return load_json_file(a);
        snprintf(a, sizeof a, "%s/vocab.json", path), snprintf(b, sizeof b, "%s/merges.txt", path);
        if (is_file(a) && is_file(b)) return load_vocab_merges(a, b);
        snprintf(a, sizeof a, "%s/encoder.json", path), snprintf(b, sizeof b, "%s/vocab.bpe", path);
        if (is_file(a) && is_file(b)) return load_vocab_merges(a, b);
        pm_error("%s: no tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe in this directory",
                 path);
        return NULL;
    }
    if (!is_file(path)) {
        pm_error("%s: no such tokenizer file (use \"byte\", a tokenizer.json, or a directory)", path);
        return NULL;
    }
    // vocab.json / encoder.json named directly: the merges file sits beside it.
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t dirlen = base - path;
    const char *pair = strcmp(base, "vocab.json") == 0 ? "merges.txt" : strcmp(base, "encoder.json") == 0 ? "vocab.bpe" : NULL;
    if (pair) {
        snprintf(b, sizeof b, "%.*s%s", (int)dirlen, path, pair);
        if (!is_file(b)) {
            pm_error("%s: %s needs %s beside it", path, base, pair);
            return NULL;
        }
        return load_vocab_merges(path, b);
    }
    return load_json_file(path);
}

Tokenizer *tokenizer_load_from_data(const char *data) {
    int n;
    char **dirs = data_dirs(data, &n);
    if (!dirs) return NULL;
    char first[4096], p[4096];
    Tokenizer *t = NULL;
    char *text0 = NULL;  // the first directory's file, which the others must equal byte for byte
    size_t n0 = 0;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        snprintf(p, sizeof p, "%s/tokenizer.json", dirs[i]);
        if (!is_file(p)) {
            ok = 0, pm_error("%s: missing (not a directory made by `packmamba prepare`?)", p);
        } else if (i == 0) {
            snprintf(first, sizeof first, "%s", p);
            ok = (t = load_json_file(p)) != NULL && (n == 1 || (text0 = pm_read_file(p, &n0)) != NULL);
        } else {
            size_t nb;
            char *text = pm_read_file(p, &nb);
            if (!text) ok = 0;
            else if (nb != n0 || memcmp(text, text0, n0) != 0)
                ok = 0, pm_error("%s differs from %s: the data directories were prepared with different tokenizers",
                                 p, first);
            free(text);
        }
    }
    free(text0);
    data_dirs_free(dirs, n);
    if (!ok) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

int tokenizer_save(const Tokenizer *t, const char *path) {
    char *s;
    if (t->kind == TK_BYTE) {
        json_t *o = json_object();
        json_object_set_new(o, "type", json_string("packmamba-byte"));
        json_object_set_new(o, "vocab_size", json_integer(t->vocab_size));
        json_object_set_new(o, "eod_id", json_integer(t->eod_id));
        s = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
    } else {
        s = json_dumps(t->json, JSON_COMPACT | JSON_ENSURE_ASCII);
    }
    if (!s) return pm_error("%s: cannot serialize tokenizer", path);
    int r = pm_write_file_atomic(path, s, strlen(s));
    free(s);
    return r;
}

int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }
int tokenizer_eod_id(const Tokenizer *t) { return t->eod_id; }
const char *tokenizer_kind(const Tokenizer *t) { return t->kind == TK_BYTE ? "byte" : "bpe"; }

// ---------------------------------------------------------------------------------------------------------------
// Encoding

typedef struct {
    int32_t **ids;
    size_t *cap;
    int64_t n;
} Out;

static void out_push(Out *o, int32_t id) {
    if ((size_t)o->n == *o->cap) {
        *o->cap = *o->cap ? 2 * *o->cap : 1024;
        *o->ids = pm_realloc(*o->ids, *o->cap * sizeof(int32_t));
    }
    (*o->ids)[o->n++] = id;
}

// Scratch for merging one pre-token: a doubly linked list of symbols and a binary min-heap of candidate merges
// ordered by (rank, position). Stale heap entries (a side already merged away) are skipped when popped; this keeps
// the merge O(n log n) even for a 10 MB pre-token.
typedef struct {
    int32_t rank, pos, left, right;
} Cand;
typedef struct {
    int32_t *id, *prev, *next;
    Cand *heap;
    size_t cap, heap_cap, heap_n;
} Work;

static int cand_less(Cand a, Cand b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }
static void heap_push(Work *w, Cand c) {
    if (w->heap_n == w->heap_cap) {
        w->heap_cap = w->heap_cap ? 2 * w->heap_cap : 256;
        w->heap = pm_realloc(w->heap, w->heap_cap * sizeof(Cand));
    }
    size_t i = w->heap_n++;
    while (i > 0 && cand_less(c, w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = c;
}
static Cand heap_pop(Work *w) {
    Cand top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(w->heap[c + 1], w->heap[c])) c++;
        if (!cand_less(w->heap[c], last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void try_pair(const Tokenizer *t, Work *w, int32_t pos) {
    if (pos < 0) return;
    int32_t nx = w->next[pos];
    if (nx < 0) return;
    int32_t merged;
    int rank = pairmap_find(&t->merges, w->id[pos], w->id[nx], &merged);
    if (rank >= 0) heap_push(w, (Cand){rank, pos, w->id[pos], w->id[nx]});
}

static int bpe_merge(const Tokenizer *t, Work *w, const uint8_t *s, size_t n, Out *o);

static int bpe_word(const Tokenizer *t, Work *w, const uint8_t *s, size_t n, Out *o) {
    if (n == 0) return 0;
    if (n > WCACHE_KEY) return bpe_merge(t, w, s, n, o);
    if (wcache_serial != t->serial) {
        if (!wcache) wcache = pm_malloc(WCACHE_SLOTS * sizeof(WSlot));
        memset(wcache, 0, WCACHE_SLOTS * sizeof(WSlot));
        wcache_serial = t->serial;
    }
    uint64_t h = hash_str(s, n);
    WSlot *slot = &wcache[h & (WCACHE_SLOTS - 1)];
    if (slot->h == h && slot->len == n && memcmp(slot->key, s, n) == 0) {
        for (int i = 0; i < slot->n_ids; i++) out_push(o, slot->ids[i]);
        return 0;
    }
    int64_t before = o->n;
    int rc = bpe_merge(t, w, s, n, o);
    if (rc == 0 && o->n - before <= WCACHE_KEY) {
        slot->h = h, slot->len = (uint8_t)n, slot->n_ids = (uint8_t)(o->n - before);
        memcpy(slot->key, s, n);
        memcpy(slot->ids, *o->ids + before, (o->n - before) * sizeof(int32_t));
    }
    return rc;
}

// Byte-level BPE of one pre-token: start from single bytes, apply the lowest-ranked mergeable pair (leftmost
// first among equal ranks) until no adjacent pair has a merge.
static int bpe_merge(const Tokenizer *t, Work *w, const uint8_t *s, size_t n, Out *o) {
    if (n > w->cap) {
        w->cap = n;
        w->id = pm_realloc(w->id, n * sizeof(int32_t));
        w->prev = pm_realloc(w->prev, n * sizeof(int32_t));
        w->next = pm_realloc(w->next, n * sizeof(int32_t));
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0) return pm_error("byte 0x%02x has no token in this vocabulary", s[i]);
        w->id[i] = id;
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, w, (int32_t)i);
    while (w->heap_n) {
        Cand c = heap_pop(w);
        int32_t nx = w->next[c.pos];
        if (w->id[c.pos] != c.left || nx < 0 || w->id[nx] != c.right) continue;  // stale
        if (w->prev[c.pos] == -2) continue;                                      // merged away
        int32_t merged;
        pairmap_find(&t->merges, c.left, c.right, &merged);
        w->id[c.pos] = merged;
        w->next[c.pos] = w->next[nx];
        if (w->next[nx] >= 0) w->prev[w->next[nx]] = c.pos;
        w->prev[nx] = -2, w->next[nx] = -1, w->id[nx] = -1;
        if (w->prev[c.pos] >= 0) try_pair(t, w, w->prev[c.pos]);
        try_pair(t, w, c.pos);
    }
    for (int32_t i = 0; i >= 0; i = w->next[i]) out_push(o, w->id[i]);
    return 0;
}

// Pre-tokenizes one stretch of text (no added tokens inside) and merges each piece.
static int bpe_segment(const Tokenizer *t, Work *w, pcre2_match_data *md, const char *s, size_t n, Out *o) {
    char *pref = NULL;
    if (t->add_prefix_space && n > 0 && s[0] != ' ') {
        pref = pm_malloc(n + 1);
        pref[0] = ' ';
        memcpy(pref + 1, s, n);
        s = pref, n = n + 1;
    }
    int rc = 0;
    if (!t->re) {
        rc = bpe_word(t, w, (const uint8_t *)s, n, o);
    } else {
        size_t at = 0;
        while (at < n) {
            int m = pcre2_match(t->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);  // validated once up front
            if (m < 0) {  // no further match: the rest is one piece
                rc = bpe_word(t, w, (const uint8_t *)s + at, n - at, o);
                break;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            if (ov[0] > at && (rc = bpe_word(t, w, (const uint8_t *)s + at, ov[0] - at, o))) break;  // gap
            if (ov[1] == ov[0]) {  // empty match: take one code point to make progress
                size_t k = ov[0] + 1;
                while (k < n && ((uint8_t)s[k] & 0xc0) == 0x80) k++;
                if ((rc = bpe_word(t, w, (const uint8_t *)s + ov[0], k - ov[0], o))) break;
                at = k;
                continue;
            }
            if ((rc = bpe_word(t, w, (const uint8_t *)s + ov[0], ov[1] - ov[0], o))) break;
            at = ov[1];
        }
    }
    free(pref);
    return rc;
}

int64_t tokenizer_encode(const Tokenizer *t, const char *text, size_t n, int special, int32_t **ids, size_t *cap) {
    Out o = {ids, cap, 0};
    if (t->kind == TK_BYTE) {
        if (*cap < n) {
            *cap = n;
            *ids = pm_realloc(*ids, (n ? n : 1) * sizeof(int32_t));
        }
        for (size_t i = 0; i < n; i++) (*ids)[i] = (uint8_t)text[i];
        return (int64_t)n;
    }
    int64_t bad = pm_utf8_invalid_offset(text, n);
    if (bad >= 0) return pm_error("invalid UTF-8 at byte offset %lld", (long long)bad);
    char *norm = NULL;
    if (t->nfc && n > 0) {
        // utf8proc needs a NUL-free, NUL-terminated buffer only for its *_STABLE interface; use the length form.
        utf8proc_uint8_t *res = NULL;
        utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &res,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (k < 0) return pm_error("NFC normalization failed: %s", utf8proc_errmsg(k));
        norm = (char *)res;
        text = norm, n = (size_t)k;
    }
    Work w = {0};
    pcre2_match_data *md = t->re ? pcre2_match_data_create_from_pattern(t->re, NULL) : NULL;
    int rc = 0;
    size_t start = 0, i = 0;
    while (i < n && rc == 0) {
        const AddedToken *hit = NULL;
        if (t->added_first[(uint8_t)text[i]])
            for (int k = 0; k < t->n_added; k++) {
                const AddedToken *a = &t->added[k];
                if (!special && a->special) continue;
                if (a->len <= n - i && memcmp(text + i, a->text, a->len) == 0) {
                    hit = a;
                    break;
                }
            }
        if (!hit) {
            i++;
            continue;
        }
        rc = bpe_segment(t, &w, md, text + start, i - start, &o);
        out_push(&o, hit->id);
        i += hit->len;
        start = i;
    }
    if (rc == 0) rc = bpe_segment(t, &w, md, text + start, n - start, &o);
    if (md) pcre2_match_data_free(md);
    free(w.id), free(w.prev), free(w.next), free(w.heap), free(norm);
    return rc ? -1 : o.n;
}

char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (t->kind == TK_BYTE) total += id >= 0 && id < 256;
        else if (id >= 0 && id < t->vocab_size && t->bytes[id]) total += t->nbytes[id];
    }
    char *s = pm_malloc(total + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (t->kind == TK_BYTE) {
            if (id >= 0 && id < 256) s[o++] = (char)id;
        } else if (id >= 0 && id < t->vocab_size && t->bytes[id]) {
            memcpy(s + o, t->bytes[id], t->nbytes[id]);
            o += t->nbytes[id];
        }
    }
    s[o] = 0;
    if (len) *len = o;
    return s;
}
