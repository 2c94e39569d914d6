// torch_bin.c — see torch_bin.h. A torch.save archive holds `<prefix>/data.pkl` (the pickled object, protocol 2,
// whose tensors name their storages by persistent ids), `<prefix>/data/<key>` (each storage's raw little-endian
// bytes) and `<prefix>/byteorder`. The pickle machine below keeps every value it makes on one list and frees them
// together; memo entries and the stack hold pointers into that list (pickle's memo shares objects, so does this).
#define _GNU_SOURCE
#include "torch_bin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "util.h"

typedef enum { V_MARK, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR }
    VKind;

typedef struct Value Value;
struct Value {
    VKind kind;
    int64_t i;      // INT, BOOL; STORAGE: its element count
    char *s;        // STR; GLOBAL: "module.name"; STORAGE: its key (the archive's data/<key>)
    Value **items;  // TUPLE, LIST; DICT: keys at even, values at odd indices
    int n, cap;
    const char *dtype;  // STORAGE: a safetensors dtype name
    size_t esize;       // STORAGE: bytes an element
    Value *storage;     // TENSOR
    int64_t offset;     // TENSOR: first element in its storage
    int ndim;
    int64_t shape[ST_MAX_DIMS], stride[ST_MAX_DIMS];
    Value *next;  // every value made, for freeing
};

typedef struct {
    const char *path;
    const uint8_t *base, *p, *end;
    Value **stack;
    int sp, scap;
    Value **memo;
    size_t nmemo;
    Value *all;
} Pickle;

static Value *mk(Pickle *k, VKind kind) {
    Value *v = pm_calloc(1, sizeof *v);
    v->kind = kind;
    v->next = k->all;
    k->all = v;
    return v;
}

static void add_item(Value *c, Value *x) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->items = pm_realloc(c->items, (size_t)c->cap * sizeof *c->items);
    }
    c->items[c->n++] = x;
}

static void push(Pickle *k, Value *v) {
    if (k->sp == k->scap) {
        k->scap = k->scap ? 2 * k->scap : 64;
        k->stack = pm_realloc(k->stack, (size_t)k->scap * sizeof *k->stack);
    }
    k->stack[k->sp++] = v;
}

static void free_values(Pickle *k) {
    for (Value *v = k->all, *nx; v; v = nx) {
        nx = v->next;
        free(v->s);
        free(v->items);
        free(v);
    }
    free(k->stack);
    free(k->memo);
}

#define FAIL(...) return (pm_error(__VA_ARGS__), (Value *)NULL)

static const char *kind_name(VKind kd) {
    static const char *names[] = {"mark", "None", "bool", "int", "float", "str", "tuple", "list", "dict", "class",
                                  "storage", "tensor"};
    return names[kd];
}

// The storage types a state dict's tensors use, as safetensors dtypes.
static int storage_dtype(const char *global, const char **dtype, size_t *esize) {
    static const struct {
        const char *torch, *st;
        size_t size;
    } map[] = {{"torch.FloatStorage", "F32", 4}, {"torch.DoubleStorage", "F64", 8}, {"torch.HalfStorage", "F16", 2},
               {"torch.BFloat16Storage", "BF16", 2}, {"torch.LongStorage", "I64", 8}, {"torch.IntStorage", "I32", 4},
               {"torch.ShortStorage", "I16", 2}, {"torch.CharStorage", "I8", 1}, {"torch.ByteStorage", "U8", 1},
               {"torch.BoolStorage", "BOOL", 1}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(global, map[i].torch) == 0) return *dtype = map[i].st, *esize = map[i].size, 0;
    return -1;
}

static int int_tuple(const Value *t, int64_t *out, int max) {
    if (!t || t->kind != V_TUPLE || t->n > max) return -1;
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != V_INT) return -1;
        out[i] = t->items[i]->i;
    }
    return t->n;
}

// REDUCE: the few callables a state dict needs.
static Value *reduce(Pickle *k, const Value *fn, const Value *args, size_t at) {
    if (fn->kind != V_GLOBAL || args->kind != V_TUPLE)
        FAIL("%s: pickle byte %zu: REDUCE of a %s", k->path, at, kind_name(fn->kind));
    if (strcmp(fn->s, "collections.OrderedDict") == 0 && args->n == 0) return mk(k, V_DICT);
    if (strcmp(fn->s, "torch._utils._rebuild_parameter") == 0 ||
        strcmp(fn->s, "torch._utils._rebuild_parameter_with_state") == 0) {
        if (args->n < 1 || args->items[0]->kind != V_TENSOR)
            FAIL("%s: pickle byte %zu: %s without a tensor", k->path, at, fn->s);
        return args->items[0];
    }
    if (strcmp(fn->s, "torch._utils._rebuild_tensor_v2") == 0) {
        Value *t = mk(k, V_TENSOR);
        int64_t st[ST_MAX_DIMS];
        if (args->n < 4 || args->items[0]->kind != V_STORAGE || args->items[1]->kind != V_INT ||
            (t->ndim = int_tuple(args->items[2], t->shape, ST_MAX_DIMS)) < 0 ||
            int_tuple(args->items[3], st, ST_MAX_DIMS) != t->ndim)
            FAIL("%s: pickle byte %zu: _rebuild_tensor_v2 with arguments it does not take", k->path, at);
        memcpy(t->stride, st, sizeof st);
        t->storage = args->items[0];
        t->offset = args->items[1]->i;
        return t;
    }
    FAIL("%s: pickle byte %zu: %s is not part of a state dict of tensors (not loaded)", k->path, at, fn->s);
}

static int need(Pickle *k, size_t n) { return (size_t)(k->end - k->p) >= n; }

static uint64_t le(const uint8_t *p, int n) {
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

// A text line of GLOBAL's operand (up to the newline).
static char *line(Pickle *k) {
    const uint8_t *nl = memchr(k->p, '\n', (size_t)(k->end - k->p));
    if (!nl) return NULL;
    char *s = pm_malloc((size_t)(nl - k->p) + 1);
    memcpy(s, k->p, (size_t)(nl - k->p));
    s[nl - k->p] = 0;
    k->p = nl + 1;
    return s;
}

static Value *unpickle(Pickle *k) {
#define POP() (k->sp > 0 ? k->stack[--k->sp] : NULL)
#define NEED(n)                                                                                 \
    if (!need(k, (n))) FAIL("%s: pickle byte %zu: truncated (opcode 0x%02x)", k->path, at, op)
    while (k->p < k->end) {
        const size_t at = (size_t)(k->p - k->base);
        const uint8_t op = *k->p++;
        Value *v = NULL, *a, *b;
        switch (op) {
        case 0x80: NEED(1); k->p += 1; continue;  // PROTO
        case 0x95: NEED(8); k->p += 8; continue;  // FRAME
        case '}': v = mk(k, V_DICT); break;
        case ']': v = mk(k, V_LIST); break;
        case ')': v = mk(k, V_TUPLE); break;
        case '(': v = mk(k, V_MARK); break;
        case 'N': v = mk(k, V_NONE); break;
        case 0x88: case 0x89: v = mk(k, V_BOOL), v->i = op == 0x88; break;
        case 'K': NEED(1); v = mk(k, V_INT), v->i = k->p[0], k->p += 1; break;
        case 'M': NEED(2); v = mk(k, V_INT), v->i = (int64_t)le(k->p, 2), k->p += 2; break;
        case 'J': NEED(4); v = mk(k, V_INT), v->i = (int32_t)le(k->p, 4), k->p += 4; break;
        case 0x8a: {  // LONG1: n bytes of two's complement, little-endian
            NEED(1);
            const int n = k->p[0];
            if (n > 8) FAIL("%s: pickle byte %zu: an integer of %d bytes", k->path, at, n);
            NEED(1 + (size_t)n);
            uint64_t x = le(k->p + 1, n);
            if (n > 0 && n < 8 && (k->p[n] & 0x80)) x |= ~0ull << (8 * n);
            v = mk(k, V_INT), v->i = (int64_t)x, k->p += 1 + n;
            break;
        }
        case 'G': NEED(8); v = mk(k, V_FLOAT), k->p += 8; break;  // BINFLOAT (its value is never needed)
        case 'X': case 0x8c: case 0x8d: case 'T': case 'U': {  // strings: 4-, 1-, 8-, 4-, 1-byte lengths
            const int w = op == 'X' || op == 'T' ? 4 : op == 0x8d ? 8 : 1;
            NEED((size_t)w);
            const uint64_t n = le(k->p, w);
            k->p += w;
            NEED(n);
            v = mk(k, V_STR);
            v->s = pm_malloc(n + 1);
            memcpy(v->s, k->p, n);
            v->s[n] = 0;
            k->p += n;
            break;
        }
        case 'c': {  // GLOBAL "module\nname\n"
            char *mod = line(k), *name = mod ? line(k) : NULL;
            if (!name) {
                free(mod);
                FAIL("%s: pickle byte %zu: truncated GLOBAL", k->path, at);
            }
            v = mk(k, V_GLOBAL);
            if (asprintf(&v->s, "%s.%s", mod, name) < 0) v->s = NULL;
            free(mod), free(name);
            if (!v->s) FAIL("%s: out of memory", k->path);
            break;
        }
        case 0x93:  // STACK_GLOBAL
            b = POP(), a = POP();
            if (!a || !b || a->kind != V_STR || b->kind != V_STR) FAIL("%s: pickle byte %zu: bad STACK_GLOBAL", k->path, at);
            v = mk(k, V_GLOBAL);
            if (asprintf(&v->s, "%s.%s", a->s, b->s) < 0) FAIL("%s: out of memory", k->path);
            break;
        case 'q': case 'r': case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
            size_t idx = k->nmemo;
            if (op != 0x94) {
                NEED(op == 'q' ? 1 : 4);
                idx = le(k->p, op == 'q' ? 1 : 4), k->p += op == 'q' ? 1 : 4;
            }
            if (k->sp == 0 || idx > (1u << 22)) FAIL("%s: pickle byte %zu: bad memo store", k->path, at);
            if (idx >= k->nmemo) {
                k->memo = pm_realloc(k->memo, (idx + 1) * sizeof *k->memo);
                memset(k->memo + k->nmemo, 0, (idx + 1 - k->nmemo) * sizeof *k->memo);
                k->nmemo = idx + 1;
            }
            k->memo[idx] = k->stack[k->sp - 1];
            continue;
        }
        case 'h': case 'j': {  // BINGET, LONG_BINGET
            NEED(op == 'h' ? 1 : 4);
            const size_t idx = le(k->p, op == 'h' ? 1 : 4);
            k->p += op == 'h' ? 1 : 4;
            if (idx >= k->nmemo || !k->memo[idx]) FAIL("%s: pickle byte %zu: memo %zu unset", k->path, at, idx);
            v = k->memo[idx];
            break;
        }
        case 't': case 0x85: case 0x86: case 0x87: {  // TUPLE (from the mark), TUPLE1-3
            v = mk(k, V_TUPLE);
            int from;
            if (op == 't') {
                from = k->sp - 1;
                while (from >= 0 && k->stack[from]->kind != V_MARK) from--;
                if (from < 0) FAIL("%s: pickle byte %zu: TUPLE without a mark", k->path, at);
            } else {
                from = k->sp - (op - 0x84) - 1;
                if (from < -1) FAIL("%s: pickle byte %zu: stack underflow", k->path, at);
            }
            for (int i = from + 1; i < k->sp; i++) add_item(v, k->stack[i]);
            k->sp = op == 't' ? from : from + 1;
            break;
        }
        case 'Q': {  // BINPERSID: ("storage", storage type, key, location, numel)
            a = POP();
            v = mk(k, V_STORAGE);
            if (!a || a->kind != V_TUPLE || a->n < 5 || a->items[0]->kind != V_STR ||
                strcmp(a->items[0]->s, "storage") || a->items[1]->kind != V_GLOBAL || a->items[2]->kind != V_STR ||
                a->items[4]->kind != V_INT || a->items[4]->i < 0)
                FAIL("%s: pickle byte %zu: a persistent id that is not a storage", k->path, at);
            if (storage_dtype(a->items[1]->s, &v->dtype, &v->esize) != 0)
                FAIL("%s: pickle byte %zu: storage type %s is not read", k->path, at, a->items[1]->s);
            v->s = pm_strdup(a->items[2]->s);
            v->i = a->items[4]->i;
            break;
        }
        case 'R':
            a = POP(), b = POP();
            if (!a || !b) FAIL("%s: pickle byte %zu: stack underflow", k->path, at);
            if (!(v = reduce(k, b, a, at))) return NULL;
            break;
        case 's': case 'a': {  // SETITEM (key, value) / APPEND (value) onto the container below them
            const int m = op == 's' ? 2 : 1;
            Value *c = k->sp > m ? k->stack[k->sp - m - 1] : NULL;
            if (!c || c->kind != (op == 's' ? V_DICT : V_LIST))
                FAIL("%s: pickle byte %zu: %s onto a %s", k->path, at, op == 's' ? "SETITEM" : "APPEND",
                     c ? kind_name(c->kind) : "nothing");
            for (int i = k->sp - m; i < k->sp; i++) add_item(c, k->stack[i]);
            k->sp -= m;
            continue;
        }
        case 'u': case 'e': {  // SETITEMS / APPENDS: the values above the mark onto the container below it
            int mark = k->sp - 1;
            while (mark >= 0 && k->stack[mark]->kind != V_MARK) mark--;
            Value *c = mark >= 1 ? k->stack[mark - 1] : NULL;
            if (!c || c->kind != (op == 'u' ? V_DICT : V_LIST) || (op == 'u' && (k->sp - mark - 1) % 2))
                FAIL("%s: pickle byte %zu: %s onto a %s", k->path, at, op == 'u' ? "SETITEMS" : "APPENDS",
                     c ? kind_name(c->kind) : "nothing");
            for (int i = mark + 1; i < k->sp; i++) add_item(c, k->stack[i]);
            k->sp = mark;
            continue;
        }
        case 'b':  // BUILD: an object's state (a state dict's _metadata); nothing of it is needed
            if (k->sp < 2) FAIL("%s: pickle byte %zu: stack underflow", k->path, at);
            k->sp--;
            continue;
        case '.':
            if (k->sp != 1) FAIL("%s: pickle byte %zu: STOP with %d values on the stack", k->path, at, k->sp);
            return k->stack[0];
        default:
            FAIL("%s: pickle byte %zu: opcode 0x%02x is not read (only what torch.save writes for a state dict)",
                 k->path, at, op);
        }
        push(k, v);
    }
    FAIL("%s: the pickle ends without STOP", k->path);
#undef POP
#undef NEED
}

// ---------------------------------------------------------------------------------------------------------------
// the archive

static char *read_entry(zip_t *z, zip_int64_t i, size_t *n, const char *path) {
    zip_stat_t st;
    if (zip_stat_index(z, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return pm_error("%s: entry %lld: cannot stat", path, (long long)i), NULL;
    zip_file_t *f = zip_fopen_index(z, (zip_uint64_t)i, 0);
    if (!f) return pm_error("%s: %s: cannot open: %s", path, st.name, zip_strerror(z)), NULL;
    char *buf = pm_malloc(st.size ? st.size : 1);
    zip_int64_t got = zip_fread(f, buf, st.size);
    zip_fclose(f);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(buf);
        return pm_error("%s: %s: truncated (%lld of %llu bytes)", path, st.name, (long long)got,
                        (unsigned long long)st.size), NULL;
    }
    *n = st.size;
    return buf;
}

// The archive's entry "<prefix>/<name>", or -1.
static zip_int64_t entry(zip_t *z, const char *prefix, const char *name) {
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", prefix, name);
    return zip_name_locate(z, full, 0);
}

// The archive's entry of storage key, "<prefix>/data/<key>", or -1.
static zip_int64_t storage_entry(zip_t *z, const char *prefix, const char *key) {
    char name[600];
    snprintf(name, sizeof name, "data/%s", key);
    return entry(z, prefix, name);
}

// Copy tensor t to out in row-major order from data, its storage's bytes (as many as the storage declares:
// torch_bin_open has checked the entry's size).
static int gather(const char *path, const char *name, const Value *t, const char *data, char *out) {
    const Value *s = t->storage;
    int64_t count = 1, last = t->offset, span;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->stride[d] < 0)
            return pm_error("%s: tensor \"%s\": negative size or stride", path, name);
        count *= t->shape[d];  // (at most the storage's elements: checked by the caller)
        if (t->shape[d] > 0 && (__builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &span) ||
                                __builtin_add_overflow(last, span, &last)))
            return pm_error("%s: tensor \"%s\": strides reach past any storage", path, name);
    }
    if (count > 0 && (t->offset < 0 || last >= s->i))
        return pm_error("%s: tensor \"%s\" reaches element %lld of its storage's %lld", path, name, (long long)last,
                        (long long)s->i);
    int contiguous = 1;  // row-major strides (as nearly every saved tensor has): one copy
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) contiguous = 0;
        want *= t->shape[d];
    }
    if (contiguous) {
        if (count > 0) memcpy(out, data + (size_t)t->offset * s->esize, (size_t)count * s->esize);
        return 0;
    }
    int64_t idx[ST_MAX_DIMS] = {0};
    for (int64_t e = 0; e < count; e++) {
        int64_t off = t->offset;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        memcpy(out + (size_t)e * s->esize, data + (size_t)off * s->esize, s->esize);
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--) idx[d] = 0;
    }
    return 0;
}

int torch_bin_open(const char *path, StFile *f) {
    memset(f, 0, sizeof *f);
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &zerr);
    if (!z) {
        FILE *fp = fopen(path, "rb");
        int c = fp ? fgetc(fp) : EOF;
        if (fp) fclose(fp);
        if (!fp) return pm_error("%s: cannot open", path);
        if (c == 0x80)
            return pm_error("%s: torch.save's format before PyTorch 1.6 (a bare pickle) is not read; save it again "
                            "with a newer PyTorch, or convert it with dev/reference/interop.py", path);
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        pm_error("%s: not a torch.save archive: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return -1;
    }
    // <prefix>/data.pkl: the one entry of that name one level down
    char prefix[512] = "";
    const zip_int64_t ne = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < ne && !prefix[0]; i++) {
        const char *nm = zip_get_name(z, (zip_uint64_t)i, 0), *sl = nm ? strchr(nm, '/') : NULL;
        if (sl && strcmp(sl + 1, "data.pkl") == 0 && (size_t)(sl - nm) < sizeof prefix)
            memcpy(prefix, nm, (size_t)(sl - nm)), prefix[sl - nm] = 0;
    }
    int rc = 0;
    Pickle k = {.path = path};
    size_t npk = 0, nbo = 0;
    char *pkl = NULL, *bo = NULL;
    if (!prefix[0]) rc = pm_error("%s: no <name>/data.pkl inside (not a torch.save archive)", path);
    if (rc == 0 && !(pkl = read_entry(z, entry(z, prefix, "data.pkl"), &npk, path))) rc = -1;
    const zip_int64_t ibo = rc == 0 ? entry(z, prefix, "byteorder") : -1;
    if (ibo >= 0 && !(bo = read_entry(z, ibo, &nbo, path))) rc = -1;
    if (rc == 0 && bo && !(nbo == 6 && memcmp(bo, "little", 6) == 0))
        rc = pm_error("%s: byteorder is \"%.*s\"; only little-endian archives are read", path, (int)(nbo < 16 ? nbo : 16),
                      bo);
    Value *top = NULL;
    if (rc == 0) {
        k.base = k.p = (const uint8_t *)pkl, k.end = k.base + npk;
        if (!(top = unpickle(&k))) rc = -1;
        else if (top->kind != V_DICT)
            rc = pm_error("%s: holds a %s, not a state dict", path, kind_name(top->kind));
    }
    // The tensors, each copied out in row-major order; a storage is read again unless the tensor before used it
    // too (a tied head re-reads the embedding's). First every name, dtype and shape: every value a tensor of at
    // most its storage's elements (a saved state dict has no broadcast views), every storage an entry of exactly
    // its declared size; so the copies fit in memory that the archive's own size bounds.
    const int nt = rc == 0 ? top->n / 2 : 0;
    if (rc == 0) f->tensors = pm_calloc(nt ? (size_t)nt : 1, sizeof *f->tensors);
    size_t total = 0;
    for (int i = 0; i < nt && rc == 0; i++) {
        const Value *key = top->items[2 * i], *t = top->items[2 * i + 1];
        StTensor *o = &f->tensors[i];
        if (key->kind != V_STR) rc = pm_error("%s: a state dict key that is a %s", path, kind_name(key->kind));
        else if (t->kind != V_TENSOR) rc = pm_error("%s: \"%s\" is a %s, not a tensor", path, key->s, kind_name(t->kind));
        else if (strlen(key->s) >= sizeof o->name) rc = pm_error("%s: name too long: \"%.60s...\"", path, key->s);
        for (int j = 0; j < i && rc == 0; j++)
            if (strcmp(f->tensors[j].name, key->s) == 0) rc = pm_error("%s: tensor \"%s\" twice", path, key->s);
        if (rc) break;
        int64_t c = 1;
        for (int d = 0; d < t->ndim && c >= 0; d++)
            c = t->shape[d] < 0 || (t->shape[d] > 0 && c > t->storage->i / t->shape[d]) ? -1 : c * t->shape[d];
        const zip_int64_t is = storage_entry(z, prefix, t->storage->s);
        zip_stat_t zs;
        if (c < 0) rc = pm_error("%s: tensor \"%s\" has more elements than its storage's %lld", path, key->s,
                                 (long long)t->storage->i);
        else if (is < 0) rc = pm_error("%s: storage %s of \"%s\" is missing (%s/data/%s)", path, t->storage->s,
                                       key->s, prefix, t->storage->s);
        else if (zip_stat_index(z, (zip_uint64_t)is, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE) ||
                 (uint64_t)t->storage->i > zs.size / t->storage->esize ||
                 (uint64_t)t->storage->i * t->storage->esize != zs.size)
            rc = pm_error("%s: storage %s of \"%s\" is not %lld elements of %zu bytes", path, t->storage->s,
                          key->s, (long long)t->storage->i, t->storage->esize);
        if (rc) break;
        snprintf(o->name, sizeof o->name, "%s", key->s);
        snprintf(o->dtype, sizeof o->dtype, "%s", t->storage->dtype);
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        o->nbytes = (size_t)c * t->storage->esize;
        total += o->nbytes;
    }
    // Then the data.
    char *buf = rc == 0 ? pm_malloc(total ? total : 1) : NULL;
    char *sdata = NULL;  // the last storage read, of key skey
    const char *skey = NULL;
    size_t sn = 0, at = 0;
    for (int i = 0; i < nt && rc == 0; i++) {
        const Value *key = top->items[2 * i], *t = top->items[2 * i + 1];
        if (!skey || strcmp(skey, t->storage->s) != 0) {
            free(sdata), skey = NULL;
            if (!(sdata = read_entry(z, storage_entry(z, prefix, t->storage->s), &sn, path))) rc = -1;
            else skey = t->storage->s;
        }
        if (rc == 0) rc = gather(path, key->s, t, sdata, buf + at);
        f->tensors[i].data = buf + at;
        at += f->tensors[i].nbytes;
    }
    free(sdata);
    free(pkl), free(bo);
    free_values(&k);
    zip_close(z);
    if (rc != 0) {
        free(buf);
        free(f->tensors);
        memset(f, 0, sizeof *f);
        return -1;
    }
    f->map = buf, f->size = total, f->owned = 1, f->n = nt, f->path = pm_strdup(path);
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// writing

typedef struct {
    char *b;
    size_t n, cap;
} Buf;

static void put(Buf *o, const void *p, size_t n) {
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2 + 256;
        o->b = pm_realloc(o->b, o->cap);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_op(Buf *o, int op) { put(o, &(unsigned char){(unsigned char)op}, 1); }
static void put_str(Buf *o, const char *s) {  // BINUNICODE
    const uint32_t n = (uint32_t)strlen(s);
    unsigned char h[5] = {'X', (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    put(o, h, 5);
    put(o, s, n);
}
static void put_int(Buf *o, int64_t v) {  // BININT (4 bytes) where it fits, else LONG1 of 8
    unsigned char h[9];
    const int small = v >= INT32_MIN && v <= INT32_MAX;
    h[0] = small ? 'J' : 0x8a;
    if (!small) {
        put(o, h, 1);
        h[0] = 8;
    }
    for (int i = 0; i < (small ? 4 : 8); i++) h[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
    put(o, h, small ? 5 : 9);
}
static void put_global(Buf *o, const char *module, const char *name) {
    put_op(o, 'c');
    put(o, module, strlen(module));
    put_op(o, '\n');
    put(o, name, strlen(name));
    put_op(o, '\n');
}
static void put_ints(Buf *o, const int64_t *v, int n) {  // a tuple of ints
    put_op(o, '(');
    for (int i = 0; i < n; i++) put_int(o, v[i]);
    put_op(o, 't');
}

static const char *storage_class(const char *dtype) {
    static const char *map[][2] = {{"F32", "FloatStorage"}, {"F64", "DoubleStorage"}, {"F16", "HalfStorage"},
                                   {"BF16", "BFloat16Storage"}, {"I64", "LongStorage"}, {"I32", "IntStorage"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(dtype, map[i][0]) == 0) return map[i][1];
    return NULL;
}

// Add data (n bytes, which must outlive the archive's zip_close) to z as an uncompressed entry, as torch.save
// stores every entry. 0, or -1 with pm_error.
static int add_stored(zip_t *z, const char *path, const char *name, const void *data, size_t n) {
    zip_source_t *src = zip_source_buffer(z, data, n, 0);
    zip_int64_t at = src ? zip_file_add(z, name, src, ZIP_FL_OVERWRITE) : -1;
    if (at < 0 && src) zip_source_free(src);
    if (at < 0 || zip_set_file_compression(z, (zip_uint64_t)at, ZIP_CM_STORE, 0) != 0)
        return pm_error("%s: %s: %s", path, name, zip_strerror(z));
    return 0;
}

int torch_bin_write(const char *path, const StWrite *t, int n, const int *storage_of) {
    // data.pkl: {name: _rebuild_tensor_v2(storage, 0, shape, contiguous strides, False, OrderedDict())}
    Buf pk = {0};
    put(&pk, "\x80\x02}(", 4);  // PROTO 2, EMPTY_DICT, MARK
    for (int i = 0; i < n; i++) {
        const int s = storage_of ? storage_of[i] : i;
        const char *cls = storage_class(t[s].dtype);
        if (!cls || strcmp(t[s].dtype, t[i].dtype) != 0 || t[s].nbytes != t[i].nbytes) {
            free(pk.b);
            return pm_error("%s: tensor \"%s\": dtype %s cannot be written", path, t[i].name, t[i].dtype);
        }
        int64_t stride[ST_MAX_DIMS], numel = 1;
        for (int d = t[i].ndim - 1; d >= 0; d--) stride[d] = numel, numel *= t[i].shape[d];
        char key[32];
        snprintf(key, sizeof key, "%d", s);
        put_str(&pk, t[i].name);
        put_global(&pk, "torch._utils", "_rebuild_tensor_v2");
        put(&pk, "((", 2);
        put_str(&pk, "storage");
        put_global(&pk, "torch", cls);
        put_str(&pk, key);
        put_str(&pk, "cpu");
        put_int(&pk, numel);
        put(&pk, "tQ", 2);  // TUPLE: the persistent id; BINPERSID
        put_int(&pk, 0);
        put_ints(&pk, t[i].shape, t[i].ndim);
        put_ints(&pk, stride, t[i].ndim);
        put_op(&pk, 0x89);  // requires_grad False
        put_global(&pk, "collections", "OrderedDict");
        put(&pk, ")Rt", 3);  // OrderedDict() (backward hooks), then the argument tuple
        put_op(&pk, 'R');
    }
    put(&pk, "u.", 2);  // SETITEMS, STOP
    // The archive: as torch.save lays it out (entries stored, not compressed), under the prefix "archive".
    int zerr;
    unlink(path);
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_EXCL, &zerr);
    if (!z) {
        free(pk.b);
        return pm_error("%s: cannot create", path);
    }
    int rc = add_stored(z, path, "archive/data.pkl", pk.b, pk.n);
    if (rc == 0) rc = add_stored(z, path, "archive/byteorder", "little", 6);
    if (rc == 0) rc = add_stored(z, path, "archive/version", "3\n", 2);
    for (int i = 0; i < n && rc == 0; i++) {
        if (storage_of && storage_of[i] != i) continue;  // written once, with the tensor that owns it
        char name[64];
        snprintf(name, sizeof name, "archive/data/%d", i);
        rc = add_stored(z, path, name, t[i].data, t[i].nbytes);
    }
    if (rc == 0 && zip_close(z) != 0) rc = pm_error("%s: cannot write: %s", path, zip_strerror(z));
    if (rc != 0) {
        zip_discard(z);
        unlink(path);
    }
    free(pk.b);
    return rc;
}
