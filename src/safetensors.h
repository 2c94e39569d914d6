// safetensors.h — reading and writing the safetensors format (8-byte little-endian header length, JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the raw little-endian data).
// Used for model checkpoints, optimizer state and test fixtures.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct {
    char name[160];
    char dtype[8];  // "F32", "F64", "BF16", "F16", "I32", "I64", "U8", ...
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;  // points into the mapped file (may be unaligned for its type: memcpy out)
} StTensor;

typedef struct {
    void *map;
    size_t size;
    int n;
    StTensor *tensors;
    char *metadata_json;  // the "__metadata__" object re-serialized as JSON, or NULL
    char *path;
    int owned;  // map is allocated memory that st_close frees (torch_bin.h builds such files), not a mapping
} StFile;

// Map and validate a file: header length within the file, header is a JSON object, every tensor has a known
// dtype, shape and data_offsets consistent with its dtype size, offsets in range and non-overlapping, the data
// region is exactly covered. Returns 0, or -1 with pm_error("<path>: <what is wrong>").
int st_open(const char *path, StFile *f);
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);
size_t st_dtype_size(const char *dtype);  // 0 if unknown
// Copy a tensor out as float (from F32, F64, BF16 or F16); n must equal its element count. 0 or -1.
int st_read_f32(const StFile *f, const StTensor *t, float *out, size_t n);
int st_read_f64(const StFile *f, const StTensor *t, double *out, size_t n);

typedef struct {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} StWrite;

// Write n tensors (in the given order) atomically: temp name, fsync, rename. metadata: a JSON object of
// string values, or NULL. Returns 0 or -1 with pm_error.
int st_write(const char *path, const StWrite *t, int n, const char *metadata_json);
// Same, but tensors whose data is NULL (and nbytes > 0) are produced while writing by fill(ctx, i, buf, nbytes),
// one at a time into a scratch buffer, so large tensors held elsewhere (e.g. on a GPU) need no full host copy.
// fill returns 0, or -1 with pm_error set (the write is then abandoned, nothing is left under path).
int st_write_cb(const char *path, const StWrite *t, int n, const char *metadata_json,
                int (*fill)(void *ctx, int i, void *buf, size_t nbytes), void *ctx);
