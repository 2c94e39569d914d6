// test_safetensors.c — st_write / st_open round trips for every dtype (bit-identical data, header layout checked
// by an independent jansson parse), float conversions against the compiler's own _Float16 and exact bf16
// truncations, and st_open rejecting each kind of corrupt file with an error naming the file.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "util.h"

static char tmpdir[256];

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pm_test_st_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state) {
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(tmpdir);
    return 0;
}

static void path_of(char *out, const char *name) { snprintf(out, 512, "%s/%s", tmpdir, name); }

static int count_entries(void) {
    int n = 0;
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void fill_random(void *p, size_t n, uint64_t seed) {
    PmRng r;
    pm_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(pm_rng_u64(&r) >> 56);
}

static const char *all_dtypes[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8",
                                   "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
#define N_DTYPES (int)(sizeof all_dtypes / sizeof all_dtypes[0])

// Every dtype with random bytes (so NaN patterns etc. must survive), plus a scalar and an empty tensor.
static void test_roundtrip_all_dtypes(void **state) {
    StWrite w[N_DTYPES + 2];
    char names[N_DTYPES + 2][32];
    void *bufs[N_DTYPES + 2];
    size_t esz[] = {8, 4, 2, 2, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1};
    for (int i = 0; i < N_DTYPES; i++) {
        snprintf(names[i], 32, "t.%s", all_dtypes[i]);
        int64_t a = 3 + i % 4, b = 5 + i % 3;  // shapes differ per tensor
        bufs[i] = malloc(a * b * esz[i]);
        fill_random(bufs[i], a * b * esz[i], 100 + i);
        w[i] = (StWrite){.name = names[i], .dtype = all_dtypes[i], .ndim = 2, .shape = {a, b}, .data = bufs[i],
                         .nbytes = a * b * esz[i]};
        assert_int_equal(st_dtype_size(all_dtypes[i]), esz[i]);
    }
    float scalar = 3.25f;
    w[N_DTYPES] = (StWrite){.name = "scalar", .dtype = "F32", .ndim = 0, .data = &scalar, .nbytes = 4};
    w[N_DTYPES + 1] = (StWrite){.name = "empty", .dtype = "F32", .ndim = 2, .shape = {0, 7}, .data = NULL,
                                .nbytes = 0};
    char path[512];
    path_of(path, "all.safetensors");
    assert_int_equal(st_write(path, w, N_DTYPES + 2, "{\"format\": \"pt\", \"note\": \"h\\u00e9\"}"), 0);
    assert_int_equal(count_entries(), 1);  // no temp file left behind

    StFile f;
    assert_int_equal(st_open(path, &f), 0);
    assert_int_equal(f.n, N_DTYPES + 2);
    for (int i = 0; i < N_DTYPES + 2; i++) {
        const StTensor *t = st_find(&f, w[i].name);
        assert_non_null(t);
        assert_string_equal(t->dtype, w[i].dtype);
        assert_int_equal(t->ndim, w[i].ndim);
        for (int d = 0; d < w[i].ndim; d++) assert_int_equal(t->shape[d], w[i].shape[d]);
        assert_int_equal(t->nbytes, w[i].nbytes);
        if (w[i].nbytes) assert_memory_equal(t->data, w[i].data, w[i].nbytes);
    }
    assert_null(st_find(&f, "nope"));
    float sv;
    assert_int_equal(st_read_f32(&f, st_find(&f, "scalar"), &sv, 1), 0);
    assert_true(sv == 3.25f);
    json_t *md = json_loads(f.metadata_json, 0, NULL);
    assert_non_null(md);
    assert_string_equal(json_string_value(json_object_get(md, "format")), "pt");
    assert_string_equal(json_string_value(json_object_get(md, "note")), "h\xc3\xa9");
    json_decref(md);
    st_close(&f);

    // Layout checked independently: header length a multiple of 8 padded with spaces, data_offsets relative to
    // the data start, tensors laid out in the given order, total size exact.
    size_t size;
    unsigned char *raw = pm_read_file(path, &size);
    assert_non_null(raw);
    uint64_t hlen = 0;
    memcpy(&hlen, raw, 8);
    assert_int_equal(hlen % 8, 0);
    json_error_t jerr;
    json_t *root = json_loadb((char *)raw + 8, hlen, 0, &jerr);
    assert_non_null(root);
    for (size_t k = 8 + hlen; k > 8 && raw[k - 1] != '}'; k--) assert_int_equal(raw[k - 1], ' ');
    uint64_t off = 0;
    for (int i = 0; i < N_DTYPES + 2; i++) {
        json_t *e = json_object_get(root, w[i].name);
        json_t *o = json_object_get(e, "data_offsets");
        assert_int_equal(json_integer_value(json_array_get(o, 0)), off);
        assert_int_equal(json_integer_value(json_array_get(o, 1)), off + w[i].nbytes);
        if (w[i].nbytes) assert_memory_equal(raw + 8 + hlen + off, w[i].data, w[i].nbytes);
        off += w[i].nbytes;
    }
    assert_int_equal(size, 8 + hlen + off);
    json_decref(root);
    free(raw);

    // No metadata given: no __metadata__ key at all.
    path_of(path, "nometa.safetensors");
    assert_int_equal(st_write(path, w, 2, NULL), 0);
    raw = pm_read_file(path, &size);
    assert_null(strstr((char *)raw + 8, "__metadata__"));
    free(raw);
    assert_int_equal(st_open(path, &f), 0);
    assert_null(f.metadata_json);
    st_close(&f);
    for (int i = 0; i < N_DTYPES; i++) free(bufs[i]);  // (after the last write that reads them: found by ASan)
}

static int fill_cb(void *ctx, int i, void *buf, size_t nbytes) {
    fill_random(buf, nbytes, 7000 + i);
    return 0;
}

static int fill_fail(void *ctx, int i, void *buf, size_t nbytes) {
    return i == 1 ? pm_error("fill failed on purpose") : fill_cb(ctx, i, buf, nbytes);
}

// Streaming writer: tensors without data come from the callback; a failing callback leaves nothing behind.
static void test_write_callback(void **state) {
    float a[6] = {1, 2, 3, 4, 5, 6};
    StWrite w[3] = {{.name = "a", .dtype = "F32", .ndim = 1, .shape = {6}, .data = a, .nbytes = 24},
                    {.name = "b", .dtype = "U16", .ndim = 2, .shape = {3, 3}, .data = NULL, .nbytes = 18},
                    {.name = "c", .dtype = "F64", .ndim = 1, .shape = {5}, .data = NULL, .nbytes = 40}};
    char path[512];
    path_of(path, "cb.safetensors");
    assert_int_equal(st_write_cb(path, w, 3, NULL, fill_cb, NULL), 0);
    StFile f;
    assert_int_equal(st_open(path, &f), 0);
    unsigned char want[40];
    fill_random(want, 18, 7001);
    assert_memory_equal(st_find(&f, "b")->data, want, 18);
    fill_random(want, 40, 7002);
    assert_memory_equal(st_find(&f, "c")->data, want, 40);
    assert_memory_equal(st_find(&f, "a")->data, a, 24);
    st_close(&f);
    unlink(path);
    assert_int_equal(st_write_cb(path, w, 3, NULL, fill_fail, NULL), -1);
    assert_int_equal(count_entries(), 0);
}

// F16 against the compiler's _Float16 for all 65536 bit patterns; BF16 against floats whose low 16 bits are zero
// (exactly representable); F64 against the C cast; st_read_f64 exact for F32.
static void test_float_conversions(void **state) {
    uint16_t *h = malloc(65536 * 2);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    char path[512];
    path_of(path, "f16.safetensors");
    StWrite w = {.name = "h", .dtype = "F16", .ndim = 1, .shape = {65536}, .data = h, .nbytes = 65536 * 2};
    assert_int_equal(st_write(path, &w, 1, NULL), 0);
    StFile f;
    assert_int_equal(st_open(path, &f), 0);
    float *out = malloc(65536 * 4);
    double *outd = malloc(65536 * 8);
    assert_int_equal(st_read_f32(&f, st_find(&f, "h"), out, 65536), 0);
    assert_int_equal(st_read_f64(&f, st_find(&f, "h"), outd, 65536), 0);
    for (int i = 0; i < 65536; i++) {
#ifdef __FLT16_MAX__
        _Float16 x;
        memcpy(&x, &h[i], 2);
        float want = (float)x;
#else
        // Fallback truth from the definition of binary16.
        int e = (i >> 10) & 31, mnt = i & 1023;
        float want = e == 31 ? (mnt ? NAN : INFINITY)
                             : (float)ldexp(e ? 1024 + mnt : mnt, (e ? e : 1) - 25);
        if (i & 0x8000) want = -want;
#endif
        if (isnan(want)) {
            assert_true(isnan(out[i]) && isnan(outd[i]));
        } else {
            assert_memory_equal(&out[i], &want, 4);  // bit-exact, including -0
            assert_true(outd[i] == (double)want);
        }
    }
    // A few hand-known values, so the test does not only trust the compiler.
    assert_true(out[0x3C00] == 1.0f && out[0xC000] == -2.0f && out[0x7BFF] == 65504.0f);
    assert_true(out[0x0001] == ldexpf(1, -24) && isinf(out[0x7C00]) && isnan(out[0x7E00]));
    st_close(&f);

    // BF16 / F32 / F64 from random floats.
    enum { N = 1000 };
    float src[N], bfv[N];
    uint16_t bf[N];
    double dv[N];
    PmRng r;
    pm_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        src[i] = pm_rng_normal(&r) * 1000.0f;
        uint32_t bits;
        memcpy(&bits, &src[i], 4);
        bf[i] = (uint16_t)(bits >> 16);
        bits &= 0xffff0000u;
        memcpy(&bfv[i], &bits, 4);
        dv[i] = (double)src[i] * 1.0000001;
    }
    StWrite ws[3] = {{.name = "bf", .dtype = "BF16", .ndim = 1, .shape = {N}, .data = bf, .nbytes = 2 * N},
                     {.name = "f", .dtype = "F32", .ndim = 2, .shape = {10, N / 10}, .data = src, .nbytes = 4 * N},
                     {.name = "d", .dtype = "F64", .ndim = 1, .shape = {N}, .data = dv, .nbytes = 8 * N}};
    path_of(path, "mix.safetensors");
    assert_int_equal(st_write(path, ws, 3, NULL), 0);
    assert_int_equal(st_open(path, &f), 0);
    assert_int_equal(st_read_f32(&f, st_find(&f, "bf"), out, N), 0);
    assert_memory_equal(out, bfv, 4 * N);
    assert_int_equal(st_read_f32(&f, st_find(&f, "f"), out, N), 0);
    assert_memory_equal(out, src, 4 * N);
    assert_int_equal(st_read_f64(&f, st_find(&f, "f"), outd, N), 0);
    for (int i = 0; i < N; i++) assert_true(outd[i] == (double)src[i]);
    assert_int_equal(st_read_f32(&f, st_find(&f, "d"), out, N), 0);
    for (int i = 0; i < N; i++) assert_true(out[i] == (float)dv[i]);
    assert_int_equal(st_read_f64(&f, st_find(&f, "d"), outd, N), 0);
    assert_memory_equal(outd, dv, 8 * N);
    // Wrong element count and non-float dtypes are refused.
    assert_int_equal(st_read_f32(&f, st_find(&f, "f"), out, N - 1), -1);
    assert_non_null(strstr(pm_last_error(), path));
    st_close(&f);
    int32_t iv[4] = {1, 2, 3, 4};
    StWrite wi = {.name = "i", .dtype = "I32", .ndim = 1, .shape = {4}, .data = iv, .nbytes = 16};
    assert_int_equal(st_write(path, &wi, 1, NULL), 0);
    assert_int_equal(st_open(path, &f), 0);
    assert_int_equal(st_read_f32(&f, st_find(&f, "i"), out, 4), -1);
    assert_non_null(strstr(pm_last_error(), "I32"));
    st_close(&f);
    free(h);
    free(out);
    free(outd);
}

// Write a file by hand: 8-byte length, the header text padded with spaces to 8, then `data`.
static void write_raw(const char *path, const char *header, const void *data, size_t nd, int64_t hlen_override) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    uint64_t L = hlen_override >= 0 ? (uint64_t)hlen_override : padded;
    fwrite(&L, 8, 1, fp);
    fwrite(header, 1, hl, fp);
    for (size_t i = hl; i < padded; i++) fputc(' ', fp);
    if (nd) fwrite(data, 1, nd, fp);
    fclose(fp);
}

static void expect_reject(const char *path, const char *what) {
    StFile f;
    memset(&f, 0x55, sizeof f);
    int rc = st_open(path, &f);
    if (rc == 0) {
        st_close(&f);
        fail_msg("st_open accepted a file with %s", what);
    }
    assert_null(f.map);  // st_open cleans up after itself
    const char *msg = pm_last_error();
    if (!strstr(msg, path)) fail_msg("error for %s does not name the file: %s", what, msg);
    if (strchr(msg, '\n')) fail_msg("error for %s is not one line: %s", what, msg);
    if (getenv("PM_TEST_VERBOSE")) printf("  %-32s -> %s\n", what, msg);
}

static void test_open_rejects(void **state) {
    char path[512];
    path_of(path, "bad.safetensors");
    unsigned char data[64];
    fill_random(data, sizeof data, 9);
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[16,24]}}";
    write_raw(path, good, data, 24, -1);
    StFile f;
    assert_int_equal(st_open(path, &f), 0);  // the control file is valid
    st_close(&f);

    // Truncated: the last bytes of the data are missing.
    write_raw(path, good, data, 21, -1);
    expect_reject(path, "truncated data");
    // Trailing garbage after the last tensor.
    write_raw(path, good, data, 30, -1);
    expect_reject(path, "trailing bytes");
    // Header length pointing past the end of the file.
    write_raw(path, good, data, 24, 1 << 20);
    expect_reject(path, "a header length past EOF");
    // A file shorter than the length field itself.
    FILE *fp = fopen(path, "wb");
    fwrite("\x10\0\0", 1, 3, fp);
    fclose(fp);
    expect_reject(path, "a 3-byte file");
    // Malformed JSON.
    write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]", data, 16, -1);
    expect_reject(path, "malformed header JSON");
    write_raw(path, "[1, 2]", data, 0, -1);
    expect_reject(path, "a header that is not an object");
    // Invalid UTF-8 in a tensor name.
    write_raw(path, "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 16, -1);
    expect_reject(path, "invalid UTF-8 in the header");
    // Overlapping offsets (sizes consistent, so only the overlap is wrong).
    write_raw(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              data, 12, -1);
    expect_reject(path, "overlapping offsets");
    // A gap between tensors.
    write_raw(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
              data, 20, -1);
    expect_reject(path, "a gap between tensors");
    // Unknown dtype.
    write_raw(path, "{\"a\":{\"dtype\":\"F33\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 16, -1);
    expect_reject(path, "an unknown dtype");
    // Size mismatch between shape x dtype and the offsets.
    write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", data, 16, -1);
    expect_reject(path, "a size mismatch");
    // Duplicate names.
    write_raw(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
              data, 16, -1);
    expect_reject(path, "duplicate names");
    // Negative and overflowing shapes.
    write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", data, 16, -1);
    expect_reject(path, "a negative shape");
    write_raw(path,
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904,16],"
              "\"data_offsets\":[0,0]}}",
              data, 0, -1);
    expect_reject(path, "an overflowing shape");
    // Offsets reversed, and metadata that is not string-valued.
    write_raw(path, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,0]}}", data, 8, -1);
    expect_reject(path, "reversed offsets");
    write_raw(path, "{\"__metadata__\":{\"x\":1},\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
              data, 8, -1);
    expect_reject(path, "a non-string metadata value");
    // A missing field.
    write_raw(path, "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,8]}}", data, 8, -1);
    expect_reject(path, "a tensor without a shape");
    // A file that does not exist.
    path_of(path, "does-not-exist.safetensors");
    expect_reject(path, "no file at all");
}

// st_write validates its input and creates nothing when it is bad.
static void test_write_rejects(void **state) {
    float a[4] = {0};
    char path[512];
    path_of(path, "w.safetensors");
    StWrite dup[2] = {{.name = "x", .dtype = "F32", .ndim = 1, .shape = {4}, .data = a, .nbytes = 16},
                      {.name = "x", .dtype = "F32", .ndim = 1, .shape = {4}, .data = a, .nbytes = 16}};
    assert_int_equal(st_write(path, dup, 2, NULL), -1);
    StWrite mism = {.name = "x", .dtype = "F32", .ndim = 1, .shape = {3}, .data = a, .nbytes = 16};
    assert_int_equal(st_write(path, &mism, 1, NULL), -1);
    StWrite unk = {.name = "x", .dtype = "F31", .ndim = 1, .shape = {4}, .data = a, .nbytes = 16};
    assert_int_equal(st_write(path, &unk, 1, NULL), -1);
    StWrite neg = {.name = "x", .dtype = "F32", .ndim = 2, .shape = {-2, -2}, .data = a, .nbytes = 16};
    assert_int_equal(st_write(path, &neg, 1, NULL), -1);
    StWrite ok = {.name = "x", .dtype = "F32", .ndim = 1, .shape = {4}, .data = a, .nbytes = 16};
    assert_int_equal(st_write(path, &ok, 1, "{\"k\": 5}"), -1);  // metadata values must be strings
    assert_non_null(strstr(pm_last_error(), "\"k\" is not a string"));
    assert_int_equal(st_write(path, &ok, 1, "not json"), -1);
    assert_non_null(strstr(pm_last_error(), path));
    assert_int_equal(count_entries(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_all_dtypes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_conversions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_rejects, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
