// util.c — see util.h.
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char last_error[1024];

// An error is one line, whatever its pieces hold: a control character quoted from bad input (a parser's "near '...'"
// with a newline in a corrupt file's header, found by fuzzing) is written as an escape (\n, \xHH) into last_error.
static void set_last_error(const char *msg) {
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)msg; *c && o + 5 < sizeof last_error; c++) {
        if (*c == '\n') last_error[o++] = '\\', last_error[o++] = 'n';
        else if (*c < 0x20 || *c == 0x7f) o += (size_t)snprintf(last_error + o, 5, "\\x%02x", *c);
        else last_error[o++] = (char)*c;
    }
    last_error[o] = 0;
}

// Both format into a local buffer first: callers re-report with pm_die("%s", pm_last_error()), and formatting
// last_error into itself would be overlapping copies (undefined; glibc prints an empty or garbled message).
void pm_die(const char *fmt, ...) {
    char buf[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    set_last_error(buf);
    fprintf(stderr, "packmamba: %s\n", last_error);
    exit(1);
}

int pm_error(const char *fmt, ...) {
    char buf[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    set_last_error(buf);
    return -1;
}

const char *pm_last_error(void) { return last_error; }

void *pm_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) pm_die("out of memory allocating %zu bytes", bytes);
    return p;
}

void *pm_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) pm_die("out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *pm_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) pm_die("out of memory reallocating %zu bytes", bytes);
    return q;
}

char *pm_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = pm_malloc(n);
    memcpy(d, s, n);
    return d;
}

double pm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int pm_write_file_atomic(const char *path, const void *data, size_t bytes) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return pm_error("%s: cannot create: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = bytes;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return pm_error("%s: write failed: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(tmp);
        return pm_error("%s: fsync/close failed: %s", tmp, strerror(errno));
    }
    return pm_rename_durable(tmp, path);
}

int pm_mkdir_p(const char *path) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) return pm_error("%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char save = *p;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return pm_error("%s: cannot create: %s", buf, strerror(errno));
        struct stat st;
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return pm_error("%s: not a directory", buf);
        *p = save;
        if (save == 0) return 0;
    }
}

int pm_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : pm_error("%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return pm_error("%s: cannot open directory: %s", path, strerror(errno));
        struct dirent *e;
        int rc = 0;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[4096];
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub)
                rc = pm_error("%s/%s: path too long", path, e->d_name);
            else if (pm_remove_tree(sub) != 0)
                rc = -1;
        }
        closedir(d);
        if (rc == 0 && rmdir(path) != 0) rc = pm_error("%s: cannot remove: %s", path, strerror(errno));
        return rc;
    }
    if (unlink(path) != 0) return pm_error("%s: cannot remove: %s", path, strerror(errno));
    return 0;
}

int pm_rename_durable(const char *tmp, const char *path) {
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return pm_error("%s: rename failed: %s", path, strerror(e));
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void *pm_read_file(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        pm_error("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = pm_malloc(cap + 1);
    for (;;) {
        if (n == cap) buf = pm_realloc(buf, (cap *= 2) + 1);
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        pm_error("%s: read error", path);
        return NULL;
    }
    buf[n] = 0;  // convenient for text files; not counted in *bytes
    *bytes = n;
    return buf;
}

void pm_rng_seed(PmRng *r, uint64_t seed) {
    // splitmix64 of the seed, so nearby seeds give unrelated streams; never zero.
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

uint64_t pm_rng_u64(PmRng *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float pm_rng_uniform(PmRng *r) { return (float)((pm_rng_u64(r) >> 40) * (1.0 / 16777216.0)); }

float pm_rng_normal(PmRng *r) {
    double u1 = ((pm_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (pm_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
