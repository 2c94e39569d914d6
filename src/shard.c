// shard.c — see shard.h.
#define _GNU_SOURCE
#include "shard.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char SHARD_MAGIC[8] = {'P', 'M', 'S', 'H', 'A', 'R', 'D', 0};
#define SHARD_VERSION 1
#define SHARD_HEADER 64

// Checksum: a word-wise multiply-xor hash, fast enough to verify a shard at open (several GB/s) while catching
// flipped or truncated bytes that still leave the structure plausible. Tail bytes are folded in one by one.
typedef struct {
    uint64_t h;
} Hash;
static void hash_init(Hash *h) { h->h = 0x9e3779b97f4a7c15ull; }
static void hash_bytes(Hash *h, const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t x = h->h;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        x = (x ^ w) * 0x100000001b3ull;
        x ^= x >> 29;
    }
    for (; i < n; i++) x = (x ^ b[i]) * 0x100000001b3ull;
    h->h = x;
}

uint64_t shard_checksum(const void *p, size_t n) {
    Hash h;
    hash_init(&h);
    hash_bytes(&h, p, n);
    return h.h;
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

char **data_dirs(const char *list, int *n) {
    int cnt = 1;
    for (const char *c = list; *c; c++) cnt += *c == ',';
    char **dirs = pm_calloc((size_t)cnt, sizeof *dirs);
    const char *at = list;
    for (int i = 0; i < cnt; i++) {
        const char *end = strchr(at, ',');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        if (len == 0) {
            data_dirs_free(dirs, i);
            pm_error("\"%s\": an empty data directory name (several are joined by commas)", list);
            return NULL;
        }
        dirs[i] = pm_malloc(len + 1);
        memcpy(dirs[i], at, len);
        dirs[i][len] = 0;
        at = end ? end + 1 : at + len;
    }
    *n = cnt;
    return dirs;
}

void data_dirs_free(char **dirs, int n) {
    for (int i = 0; dirs && i < n; i++) free(dirs[i]);
    free(dirs);
}

int shard_open(Shard *s, const char *path) {
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pm_error("%s: cannot open shard: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return pm_error("%s: cannot stat: %s", path, strerror(errno));
    }
    size_t size = (size_t)st.st_size;
    if (size < SHARD_HEADER) {
        close(fd);
        return pm_error("%s: truncated shard (%zu bytes, header needs %d)", path, size, SHARD_HEADER);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return pm_error("%s: mmap failed: %s", path, strerror(errno));
    const uint8_t *p = map;
    s->map = map;
    s->map_bytes = size;
#define FAIL(...)               \
    do {                        \
        pm_error(__VA_ARGS__);  \
        shard_close(s);         \
        return -1;              \
    } while (0)
    if (memcmp(p, SHARD_MAGIC, 8) != 0) FAIL("%s: not a packmamba shard (wrong magic)", path);
    uint32_t version = get_u32(p + 8);
    if (version != SHARD_VERSION) FAIL("%s: unsupported shard version %u (expected %d)", path, version, SHARD_VERSION);
    s->token_bytes = get_u32(p + 12);
    s->vocab_size = get_u32(p + 16);
    s->eod_id = get_u32(p + 20);
    s->n_docs = get_u64(p + 24);
    s->n_tokens = get_u64(p + 32);
    uint64_t offsets_at = get_u64(p + 40), split_at = get_u64(p + 48);
    s->checksum = get_u64(p + 56);
    if (s->token_bytes != 2 && s->token_bytes != 4) FAIL("%s: bad token width %u", path, s->token_bytes);
    if (s->vocab_size == 0 || (s->token_bytes == 2 && s->vocab_size > 65536))
        FAIL("%s: bad vocab size %u for %u-byte tokens", path, s->vocab_size, s->token_bytes);
    if (s->eod_id >= s->vocab_size) FAIL("%s: eod id %u outside vocab %u", path, s->eod_id, s->vocab_size);
    // Section bounds, computed with overflow checks (a corrupt count must not wrap around).
    if (s->n_tokens > (UINT64_MAX - SHARD_HEADER) / s->token_bytes || s->n_docs > (UINT64_MAX / 8) - 2)
        FAIL("%s: corrupt header (counts too large)", path);
    uint64_t tokens_end = SHARD_HEADER + s->n_tokens * s->token_bytes;
    uint64_t expect_off = (tokens_end + 7) & ~7ull;
    if (offsets_at != expect_off) FAIL("%s: corrupt header (offsets section at %llu, expected %llu)", path,
                                       (unsigned long long)offsets_at, (unsigned long long)expect_off);
    if (split_at != offsets_at + 8 * (s->n_docs + 1))
        FAIL("%s: corrupt header (split section misplaced)", path);
    if ((uint64_t)size != split_at + s->n_docs)
        FAIL("%s: truncated or oversized shard (%zu bytes, header says %llu)", path, size,
             (unsigned long long)(split_at + s->n_docs));
    s->tokens = p + SHARD_HEADER;
    s->offsets = (const uint64_t *)(p + offsets_at);
    s->split = p + split_at;
    Hash h;
    hash_init(&h);
    hash_bytes(&h, p + SHARD_HEADER, size - SHARD_HEADER);
    if (h.h != s->checksum) FAIL("%s: checksum mismatch (shard corrupted)", path);
    if (s->offsets[0] != 0 || s->offsets[s->n_docs] != s->n_tokens)
        FAIL("%s: document offsets do not span the tokens", path);
    for (uint64_t d = 0; d < s->n_docs; d++) {
        if (s->offsets[d + 1] < s->offsets[d]) FAIL("%s: document %llu has negative length", path, (unsigned long long)d);
        if (s->split[d] != 1 && s->split[d] != 2)
            FAIL("%s: document %llu has bad split value %u", path, (unsigned long long)d, s->split[d]);
    }
    for (uint64_t i = 0; i < s->n_tokens; i++)
        if (shard_token(s, i) >= s->vocab_size)
            FAIL("%s: token %llu has id %u >= vocab size %u", path, (unsigned long long)i, shard_token(s, i),
                 s->vocab_size);
#undef FAIL
    return 0;
}

void shard_close(Shard *s) {
    if (s->map) munmap(s->map, s->map_bytes);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------------------------------------------------------
// Writer

struct ShardWriter {
    char *path, *tmp;
    FILE *f;
    uint32_t token_bytes, vocab_size, eod_id;
    uint64_t *offsets;  // (n_docs + 1), grows
    uint8_t *split;     // (n_docs)
    uint64_t n_docs, cap_docs, n_tokens;
    void *buf;          // conversion buffer for one document
    size_t buf_cap;
    int failed;
};

ShardWriter *shard_writer_open(const char *path, uint32_t vocab_size, uint32_t eod_id) {
    ShardWriter *w = pm_calloc(1, sizeof *w);
    w->path = pm_strdup(path);
    size_t n = strlen(path) + 32;
    w->tmp = pm_malloc(n);
    snprintf(w->tmp, n, "%s.tmp.%d", path, (int)getpid());
    w->f = fopen(w->tmp, "w+b");  // read too: finish maps it to checksum
    if (!w->f) {
        pm_error("%s: cannot create: %s", w->tmp, strerror(errno));
        free(w->path), free(w->tmp), free(w);
        return NULL;
    }
    w->vocab_size = vocab_size;
    w->eod_id = eod_id;
    w->token_bytes = vocab_size <= 65536 ? 2 : 4;
    w->cap_docs = 1024;
    w->offsets = pm_malloc((w->cap_docs + 1) * sizeof(uint64_t));
    w->split = pm_malloc(w->cap_docs);
    w->offsets[0] = 0;
    char zero[SHARD_HEADER] = {0};
    if (fwrite(zero, 1, SHARD_HEADER, w->f) != SHARD_HEADER) w->failed = 1;  // header written at finish
    return w;
}

void shard_writer_set_split(ShardWriter *w, uint64_t doc, int split) {
    if (doc < w->n_docs && (split == 1 || split == 2)) w->split[doc] = (uint8_t)split;
}

uint64_t shard_writer_docs(const ShardWriter *w) { return w->n_docs; }
uint64_t shard_writer_tokens(const ShardWriter *w) { return w->n_tokens; }

int shard_writer_add(ShardWriter *w, const int32_t *ids, size_t n, int split) {
    if (split != 1 && split != 2) return pm_error("%s: bad split %d", w->path, split);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= w->vocab_size)
            return pm_error("%s: token id %d outside vocab %u", w->path, ids[i], w->vocab_size);
    if (w->buf_cap < n * w->token_bytes) {
        w->buf_cap = n * w->token_bytes * 2;
        w->buf = pm_realloc(w->buf, w->buf_cap);
    }
    if (w->token_bytes == 2)
        for (size_t i = 0; i < n; i++) ((uint16_t *)w->buf)[i] = (uint16_t)ids[i];
    else
        for (size_t i = 0; i < n; i++) ((uint32_t *)w->buf)[i] = (uint32_t)ids[i];
    size_t bytes = n * w->token_bytes;
    if (bytes && fwrite(w->buf, 1, bytes, w->f) != bytes) {
        w->failed = 1;
        return pm_error("%s: write failed: %s", w->tmp, strerror(errno));
    }
    if (w->n_docs == w->cap_docs) {
        w->cap_docs *= 2;
        w->offsets = pm_realloc(w->offsets, (w->cap_docs + 1) * sizeof(uint64_t));
        w->split = pm_realloc(w->split, w->cap_docs);
    }
    w->n_tokens += n;
    w->split[w->n_docs] = (uint8_t)split;
    w->offsets[++w->n_docs] = w->n_tokens;
    return 0;
}

static void writer_free(ShardWriter *w) {
    free(w->path), free(w->tmp), free(w->offsets), free(w->split), free(w->buf);
    free(w);
}

void shard_writer_abort(ShardWriter *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    unlink(w->tmp);
    writer_free(w);
}

int shard_writer_finish(ShardWriter *w) {
    uint64_t tokens_end = SHARD_HEADER + w->n_tokens * w->token_bytes;
    uint64_t offsets_at = (tokens_end + 7) & ~7ull;
    uint64_t split_at = offsets_at + 8 * (w->n_docs + 1);
    char pad[8] = {0};
    int ok = !w->failed;
    ok = ok && fwrite(pad, 1, offsets_at - tokens_end, w->f) == offsets_at - tokens_end;
    ok = ok && fwrite(w->offsets, 8, w->n_docs + 1, w->f) == w->n_docs + 1;
    ok = ok && fwrite(w->split, 1, w->n_docs, w->f) == w->n_docs;
    ok = ok && fflush(w->f) == 0;
    if (!ok) {
        pm_error("%s: write failed: %s", w->tmp, strerror(errno));
        shard_writer_abort(w);
        return -1;
    }
    // Checksum over everything after the header, read back from the file in one pass (the hash is defined on
    // the byte stream, so it must see the same grouping as shard_open's single call).
    int fd = fileno(w->f);
    size_t payload = split_at + w->n_docs - SHARD_HEADER;
    Hash h;
    hash_init(&h);
    if (payload) {
        void *m = mmap(NULL, split_at + w->n_docs, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            pm_error("%s: mmap failed: %s", w->tmp, strerror(errno));
            shard_writer_abort(w);
            return -1;
        }
        hash_bytes(&h, (const uint8_t *)m + SHARD_HEADER, payload);
        munmap(m, split_at + w->n_docs);
    }
    uint8_t hdr[SHARD_HEADER] = {0};
    memcpy(hdr, SHARD_MAGIC, 8);
    uint32_t u32[4] = {SHARD_VERSION, w->token_bytes, w->vocab_size, w->eod_id};
    memcpy(hdr + 8, u32, 16);
    uint64_t u64[5] = {w->n_docs, w->n_tokens, offsets_at, split_at, h.h};
    memcpy(hdr + 24, u64, 40);
    ok = fseek(w->f, 0, SEEK_SET) == 0 && fwrite(hdr, 1, SHARD_HEADER, w->f) == SHARD_HEADER && fflush(w->f) == 0 &&
         fsync(fd) == 0;
    ok = fclose(w->f) == 0 && ok;
    w->f = NULL;
    if (!ok) {
        pm_error("%s: write failed: %s", w->tmp, strerror(errno));
        shard_writer_abort(w);
        return -1;
    }
    if (rename(w->tmp, w->path) != 0) {
        pm_error("%s: rename failed: %s", w->path, strerror(errno));
        shard_writer_abort(w);
        return -1;
    }
    writer_free(w);
    return 0;
}
