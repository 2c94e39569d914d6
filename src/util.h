// util.h — error reporting, checked allocation and small helpers shared by every part of packmamba.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// Print "packmamba: <message>" on one line to stderr and exit(1). Every user-facing error goes through here
// so that bad input always yields one clear line and a non-zero exit.
__attribute__((noreturn, format(printf, 1, 2))) void pm_die(const char *fmt, ...);

// Same message format, but returns -1 so library code can fail without exiting (loaders, parsers).
__attribute__((format(printf, 1, 2))) int pm_error(const char *fmt, ...);
// The last message passed to pm_error (for tests and for callers that re-report it).
const char *pm_last_error(void);

void *pm_malloc(size_t bytes);  // dies with the size on failure
void *pm_calloc(size_t n, size_t size);
void *pm_realloc(void *p, size_t bytes);
char *pm_strdup(const char *s);

double pm_now(void);  // monotonic wall clock, seconds

// Write `bytes` to `path` atomically: write to "<path>.tmp.<pid>", fsync, rename, fsync the directory.
// Returns 0 or -1 (with pm_error set); never leaves a partial file under `path`.
int pm_write_file_atomic(const char *path, const void *data, size_t bytes);
// mkdir -p: creates path and its missing parents (0755). 0, or -1 with pm_error naming the part that failed.
int pm_mkdir_p(const char *path);
// rm -r: removes path (a file, or a directory with everything under it; symlinks are removed, not followed).
// A path that does not exist is fine. 0, or -1 with pm_error naming what could not be removed.
int pm_remove_tree(const char *path);
// Rename a complete, fsync'd temp file into place and fsync the directory (the last step of an atomic write);
// on failure the temp file is removed. 0 or -1 with pm_error.
int pm_rename_durable(const char *tmp, const char *path);
// Read a whole file; returns NULL with pm_error set on failure. *bytes gets the size.
void *pm_read_file(const char *path, size_t *bytes);

// Deterministic RNG (xorshift64*), used for initialization, sampling and data order; its state is
// saved in checkpoints so that resume is bit-exact.
typedef struct {
    uint64_t s;
} PmRng;
void pm_rng_seed(PmRng *r, uint64_t seed);
uint64_t pm_rng_u64(PmRng *r);
float pm_rng_uniform(PmRng *r);  // [0, 1)
float pm_rng_normal(PmRng *r);   // N(0, 1), Box-Muller
