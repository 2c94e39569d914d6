// safetensors.c — see safetensors.h. The file is mapped read-only and validated completely on open, so that
// every later access (st_find, st_read_*) can trust the offsets and sizes. Writing streams the tensors straight
// from the caller's buffers into a temp file (no second in-memory copy of a large model), then fsync + rename.
#define _GNU_SOURCE
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

// The reference implementation refuses headers above 100 MB; a header that large is a corrupt length field.
#define ST_MAX_HEADER (100u * 1000u * 1000u)

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
    {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

size_t st_dtype_size(const char *dtype) {
    if (!dtype) return 0;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dtype, st_dtypes[i].name) == 0) return st_dtypes[i].size;
    return 0;
}

// Product of the dims times the element size, with overflow and sign checks. 0 on success.
static int st_shape_bytes(const int64_t *shape, int ndim, size_t esize, size_t *bytes) {
    size_t b = esize;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if ((uint64_t)shape[i] > SIZE_MAX) return -1;
        if (__builtin_mul_overflow(b, (size_t)shape[i], &b)) return -1;
    }
    *bytes = b;
    return 0;
}

void st_close(StFile *f) {
    if (!f) return;
    if (f->owned) free(f->map);
    else if (f->map && f->size > 0) munmap(f->map, f->size);
    free(f->tensors);
    free(f->metadata_json);
    free(f->path);
    memset(f, 0, sizeof *f);
}

static int cmp_by_offset(const void *a, const void *b) {
    const StTensor *x = a, *y = b;
    if (x->data != y->data) return (const char *)x->data < (const char *)y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

// Parse one header entry `name: {dtype, shape, data_offsets}` into t (data = offset from the data start,
// stored as a pointer-sized integer until the whole header is known). Returns 0 or -1 with pm_error.
static int parse_entry(const char *path, const char *name, json_t *v, StTensor *t, uint64_t *begin,
                       uint64_t *end) {
    if (!json_is_object(v)) return pm_error("%s: header entry \"%s\" is not an object", path, name);
    if (strlen(name) >= sizeof t->name)
        return pm_error("%s: tensor name \"%.40s...\" is longer than %zu bytes", path, name, sizeof t->name - 1);
    if (name[0] == 0) return pm_error("%s: empty tensor name in header", path);
    snprintf(t->name, sizeof t->name, "%s", name);
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return pm_error("%s: tensor \"%s\": unknown header field \"%s\"", path, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return pm_error("%s: tensor \"%s\": missing or non-string dtype", path, name);
    size_t esize = st_dtype_size(json_string_value(dt));
    if (esize == 0)
        return pm_error("%s: tensor \"%s\": unknown dtype \"%.20s\"", path, name, json_string_value(dt));
    snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
    if (!json_is_array(sh)) return pm_error("%s: tensor \"%s\": missing or non-array shape", path, name);
    if (json_array_size(sh) > ST_MAX_DIMS)
        return pm_error("%s: tensor \"%s\": %zu dimensions (at most %d supported)", path, name,
                        json_array_size(sh), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return pm_error("%s: tensor \"%s\": shape[%d] is not a non-negative integer", path, name, i);
        t->shape[i] = json_integer_value(d);
    }
    if (st_shape_bytes(t->shape, t->ndim, esize, &t->nbytes) != 0)
        return pm_error("%s: tensor \"%s\": shape size overflows", path, name);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)))
        return pm_error("%s: tensor \"%s\": data_offsets must be [begin, end] integers", path, name);
    json_int_t b = json_integer_value(json_array_get(off, 0)), e = json_integer_value(json_array_get(off, 1));
    if (b < 0 || e < b)
        return pm_error("%s: tensor \"%s\": invalid data_offsets [%lld, %lld]", path, name, (long long)b,
                        (long long)e);
    if ((uint64_t)(e - b) != (uint64_t)t->nbytes)
        return pm_error("%s: tensor \"%s\": data_offsets span %lld bytes but dtype %s and its shape need %zu",
                        path, name, (long long)(e - b), t->dtype, t->nbytes);
    *begin = (uint64_t)b;
    *end = (uint64_t)e;
    return 0;
}

int st_open(const char *path, StFile *f) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pm_error("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pm_error("%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return pm_error("%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return pm_error("%s: file is %zu bytes, too short for a safetensors header", path, size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return pm_error("%s: mmap failed: %s", path, strerror(e));
    f->map = map;
    f->size = size;
    f->path = pm_strdup(path);

    const unsigned char *p = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];  // little-endian
    if (hlen > size - 8) {
        pm_error("%s: header length %llu runs past the end of the file (%zu bytes); truncated or not a "
                 "safetensors file", path, (unsigned long long)hlen, size);
        goto fail;
    }
    if (hlen > ST_MAX_HEADER) {
        pm_error("%s: header length %llu is implausibly large", path, (unsigned long long)hlen);
        goto fail;
    }
    if (hlen < 2 || p[8] != '{') {
        pm_error("%s: header is not a JSON object", path);
        goto fail;
    }
    // jansson rejects invalid UTF-8, embedded NULs, duplicate keys (with the flag) and anything but trailing
    // whitespace after the object (the format pads the header with spaces).
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        pm_error("%s: malformed header JSON at byte %d: %s", path, jerr.position, jerr.text);
        goto fail;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        pm_error("%s: header is not a JSON object", path);
        goto fail;
    }
    size_t nkeys = json_object_size(root);
    f->tensors = pm_calloc(nkeys ? nkeys : 1, sizeof(StTensor));
    uint64_t *ranges = pm_calloc(2 * (nkeys ? nkeys : 1), sizeof(uint64_t));
    const char *key;
    json_t *v;
    int bad = 0;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) {
                bad = pm_error("%s: __metadata__ is not an object", path);
                break;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    bad = pm_error("%s: __metadata__ value \"%s\" is not a string", path, mk);
                    break;
                }
            }
            if (bad) break;
            f->metadata_json = json_dumps(v, JSON_COMPACT);
            continue;
        }
        StTensor *t = &f->tensors[f->n];
        if ((bad = parse_entry(path, key, v, t, &ranges[2 * f->n], &ranges[2 * f->n + 1])) != 0) break;
        t->data = (const void *)(uintptr_t)ranges[2 * f->n];  // offset for now, for sorting
        f->n++;
    }
    json_decref(root);
    if (bad) {
        free(ranges);
        goto fail;
    }
    // The tensors, in offset order, must tile the data region exactly: no gaps, no overlaps, nothing after.
    uint64_t data_size = size - 8 - hlen;
    for (int i = 0; i < f->n; i++) {
        if (ranges[2 * i + 1] > data_size) {
            pm_error("%s: tensor \"%s\": data_offsets [%llu, %llu] run past the data region (%llu bytes); "
                     "file truncated?", path, f->tensors[i].name, (unsigned long long)ranges[2 * i],
                     (unsigned long long)ranges[2 * i + 1], (unsigned long long)data_size);
            free(ranges);
            goto fail;
        }
    }
    free(ranges);
    qsort(f->tensors, f->n, sizeof(StTensor), cmp_by_offset);
    uint64_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        StTensor *t = &f->tensors[i];
        uint64_t b = (uint64_t)(uintptr_t)t->data;
        if (b < pos) {
            pm_error("%s: tensor \"%s\" overlaps the tensor before it (offset %llu < %llu)", path, t->name,
                     (unsigned long long)b, (unsigned long long)pos);
            goto fail;
        }
        if (b > pos) {
            pm_error("%s: %llu unused bytes before tensor \"%s\" (offset %llu)", path,
                     (unsigned long long)(b - pos), t->name, (unsigned long long)b);
            goto fail;
        }
        pos = b + t->nbytes;
        t->data = p + 8 + hlen + b;
    }
    if (pos != data_size) {
        pm_error("%s: %llu bytes of trailing data after the last tensor", path,
                 (unsigned long long)(data_size - pos));
        goto fail;
    }
    return 0;
fail:
    st_close(f);
    return -1;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

static size_t st_numel(const StTensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];  // cannot overflow: checked on open
    return n;
}

// IEEE half -> float, including subnormals, infinities and NaN.
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        float v = ldexpf((float)man, -24);  // exact: subnormal halves are man * 2^-24
        return sign ? -v : v;
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);  // rebias 15 -> 127
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

// A float tensor of exactly n elements, or -1 with pm_error.
static int float_tensor_check(const StFile *f, const StTensor *t, size_t n) {
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F64") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16"))
        return pm_error("%s: tensor \"%s\" has dtype %s; expected F32, F64, BF16 or F16", f->path, t->name,
                        t->dtype);
    size_t ne = st_numel(t);
    if (ne != n)
        return pm_error("%s: tensor \"%s\" has %zu elements; expected %zu", f->path, t->name, ne, n);
    return 0;
}

int st_read_f32(const StFile *f, const StTensor *t, float *out, size_t n) {
    if (float_tensor_check(f, t, n) != 0) return -1;
    const unsigned char *src = t->data;
    if (strcmp(t->dtype, "F32") == 0) {
        memcpy(out, src, n * 4);
    } else if (strcmp(t->dtype, "F64") == 0) {
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            out[i] = (float)d;
        }
    } else if (strcmp(t->dtype, "BF16") == 0) {
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            memcpy(&out[i], &bits, 4);
        }
    } else {
        for (size_t i = 0; i < n; i++) out[i] = half_to_float((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
    }
    return 0;
}

int st_read_f64(const StFile *f, const StTensor *t, double *out, size_t n) {
    if (float_tensor_check(f, t, n) != 0) return -1;
    const unsigned char *src = t->data;
    if (strcmp(t->dtype, "F64") == 0) {
        memcpy(out, src, n * 8);
        return 0;
    }
    // Every other float type widens exactly through float; convert in chunks to avoid a full temp copy.
    float buf[1024];
    size_t esize = st_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i += 1024) {
        size_t c = n - i < 1024 ? n - i : 1024;
        StTensor sub = *t;
        sub.ndim = 1;
        sub.shape[0] = (int64_t)c;
        sub.nbytes = c * esize;
        sub.data = src + i * esize;
        st_read_f32(f, &sub, buf, c);
        for (size_t j = 0; j < c; j++) out[i + j] = buf[j];
    }
    return 0;
}

static int write_all(int fd, const void *data, size_t bytes) {
    const char *p = data;
    while (bytes > 0) {
        ssize_t w = write(fd, p, bytes > (1u << 30) ? (1u << 30) : bytes);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        bytes -= (size_t)w;
    }
    return 0;
}

int st_write(const char *path, const StWrite *t, int n, const char *metadata_json) {
    return st_write_cb(path, t, n, metadata_json, NULL, NULL);
}

int st_write_cb(const char *path, const StWrite *t, int n, const char *metadata_json,
                int (*fill)(void *ctx, int i, void *buf, size_t nbytes), void *ctx) {
    // Validate everything and build the header before touching the disk.
    json_t *root = json_object();
    if (metadata_json) {
        json_error_t jerr;
        json_t *md = json_loads(metadata_json, JSON_REJECT_DUPLICATES, &jerr);
        if (!md || !json_is_object(md)) {
            json_decref(md);
            json_decref(root);
            return pm_error("%s: metadata is not a JSON object", path);
        }
        const char *k;
        json_t *v;
        json_object_foreach(md, k, v) {
            if (!json_is_string(v)) {
                pm_error("%s: metadata value \"%s\" is not a string", path, k);  // (k belongs to md: before freeing it)
                json_decref(md);
                json_decref(root);
                return -1;
            }
        }
        json_object_set_new(root, "__metadata__", md);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *err = NULL;
        size_t esize = st_dtype_size(t[i].dtype), need = 0;
        if (!t[i].name || !t[i].name[0] || strlen(t[i].name) >= sizeof(((StTensor *)0)->name))
            err = "empty or too long tensor name";
        else if (strcmp(t[i].name, "__metadata__") == 0)
            err = "tensor name __metadata__ is reserved";
        else if (json_object_get(root, t[i].name))
            err = "duplicate tensor name";
        else if (esize == 0)
            err = "unknown dtype";
        else if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS)
            err = "bad number of dimensions";
        else if (st_shape_bytes(t[i].shape, t[i].ndim, esize, &need) != 0)
            err = "negative or overflowing shape";
        else if (need != t[i].nbytes)
            err = "nbytes does not match dtype and shape";
        else if (t[i].nbytes > 0 && !t[i].data && !fill)
            err = "no data";
        if (err) {
            json_decref(root);
            return pm_error("%s: tensor %d \"%s\": %s", path, i, t[i].name ? t[i].name : "(null)", err);
        }
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(t[i].dtype));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + t[i].nbytes)));
        json_object_set_new(root, t[i].name, e);
        off += t[i].nbytes;
    }
    char *hdr = json_dumps(root, JSON_COMPACT);  // jansson keeps insertion order
    json_decref(root);
    if (!hdr) return pm_error("%s: cannot serialize header", path);
    size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8;  // so the data starts 8-byte aligned
    unsigned char *head = pm_malloc(8 + padded);
    uint64_t hl = padded;
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)(hl >> (8 * i));
    memcpy(head + 8, hdr, hlen);
    memset(head + 8 + hlen, ' ', padded - hlen);
    free(hdr);

    // Stream into "<path>.tmp.<pid>", fsync, rename, fsync the directory.
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        free(head);
        return pm_error("%s: path too long", path);
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        free(head);
        return pm_error("%s: cannot create: %s", tmp, strerror(errno));
    }
    int rc = write_all(fd, head, 8 + padded);
    free(head);
    // Tensors without data come from the fill callback, one at a time through one scratch buffer.
    size_t scratch_bytes = 0;
    for (int i = 0; i < n; i++)
        if (!t[i].data && t[i].nbytes > scratch_bytes) scratch_bytes = t[i].nbytes;
    void *scratch = scratch_bytes ? pm_malloc(scratch_bytes) : NULL;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (t[i].data || t[i].nbytes == 0) {
            rc = write_all(fd, t[i].data, t[i].nbytes);
        } else if (fill(ctx, i, scratch, t[i].nbytes) != 0) {
            free(scratch);
            close(fd);
            unlink(tmp);
            return -1;  // the callback set the error
        } else {
            rc = write_all(fd, scratch, t[i].nbytes);
        }
    }
    free(scratch);
    if (rc != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return pm_error("%s: write failed: %s", tmp, strerror(e));
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return pm_error("%s: fsync failed: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return pm_error("%s: close failed: %s", tmp, strerror(e));
    }
    return pm_rename_durable(tmp, path);
}
