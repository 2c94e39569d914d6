// test_shard.c — shard round trip (uint16 and uint32 ids) and rejection of corrupt shards: truncation, wrong magic,
// wrong version, flipped payload bytes (checksum), and structurally bad offsets / splits / ids that were given a
// matching checksum so the structural checks themselves are exercised. A failed or aborted write leaves nothing.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard.h"
#include "util.h"

static char dir[] = "/tmp/pm_test_shard_XXXXXX";
static char path[256];

static int setup(void **state) {
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    return 0;
}
static int teardown(void **state) { return pm_remove_tree(dir); }

// Writes n_docs random documents (ids < vocab) and returns them, concatenated, with their lengths.
static int32_t *write_random(uint32_t vocab, int n_docs, int64_t *lens, uint8_t *splits, uint64_t seed) {
    PmRng r;
    pm_rng_seed(&r, seed);
    int64_t total = 0;
    for (int d = 0; d < n_docs; d++) lens[d] = (d % 9 == 4) ? 0 : (int64_t)(pm_rng_u64(&r) % 700), total += lens[d];
    int32_t *all = pm_malloc((total ? total : 1) * sizeof(int32_t));
    ShardWriter *w = shard_writer_open(path, vocab, vocab - 1);
    assert_non_null(w);
    int64_t at = 0;
    for (int d = 0; d < n_docs; d++) {
        for (int64_t i = 0; i < lens[d]; i++) all[at + i] = (int32_t)(pm_rng_u64(&r) % vocab);
        splits[d] = 1 + (pm_rng_u64(&r) % 4 == 0);
        assert_int_equal(shard_writer_add(w, all + at, (size_t)lens[d], splits[d]), 0);
        at += lens[d];
    }
    assert_int_equal(shard_writer_docs(w), (uint64_t)n_docs);
    assert_int_equal(shard_writer_tokens(w), (uint64_t)total);
    assert_int_equal(shard_writer_finish(w), 0);
    return all;
}

static void test_round_trip(void **state) {
    uint32_t vocabs[] = {257, 65536, 65537, 100000};
    for (int v = 0; v < 4; v++) {
        int n_docs = 211;
        int64_t lens[211];
        uint8_t splits[211];
        int32_t *all = write_random(vocabs[v], n_docs, lens, splits, 7 + v);
        Shard s;
        assert_int_equal(shard_open(&s, path), 0);
        assert_int_equal(s.token_bytes, vocabs[v] <= 65536 ? 2 : 4);
        assert_int_equal(s.vocab_size, vocabs[v]);
        assert_int_equal(s.eod_id, vocabs[v] - 1);
        assert_int_equal(s.n_docs, (uint64_t)n_docs);
        int64_t at = 0;
        for (int d = 0; d < n_docs; d++) {
            assert_int_equal(shard_doc_len(&s, d), (uint64_t)lens[d]);
            assert_int_equal(s.split[d], splits[d]);
            for (int64_t i = 0; i < lens[d]; i++) assert_int_equal(shard_token(&s, s.offsets[d] + i), all[at + i]);
            at += lens[d];
        }
        assert_int_equal(s.n_tokens, (uint64_t)at);
        shard_close(&s);
        free(all);
    }
    // No temp file left behind.
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
    assert_int_not_equal(system(cmd), 0);
}

static uint8_t *read_bytes(size_t *n) {
    uint8_t *b = pm_read_file(path, n);
    assert_non_null(b);
    return b;
}
static void write_bytes(const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}
// After editing the payload, store a matching checksum so only the structural checks can catch the damage.
static void fix_checksum(uint8_t *b, size_t n) {
    uint64_t h = shard_checksum(b + 64, n - 64);
    memcpy(b + 56, &h, 8);
}

static void expect_reject(const char *what) {
    Shard s;
    assert_int_equal(shard_open(&s, path), -1);
    const char *e = pm_last_error();
    if (!strstr(e, what) || !strstr(e, path)) fail_msg("expected error naming the file and \"%s\", got: %s", what, e);
    assert_null(s.map);
}

static void test_corrupt_rejected(void **state) {
    int64_t lens[40];
    uint8_t splits[40];
    free(write_random(257, 40, lens, splits, 3));
    size_t n;
    uint8_t *good = read_bytes(&n), *b = pm_malloc(n);
    uint64_t n_docs, n_tokens, offsets_at, split_at;
    memcpy(&n_docs, good + 24, 8), memcpy(&n_tokens, good + 32, 8);
    memcpy(&offsets_at, good + 40, 8), memcpy(&split_at, good + 48, 8);
    Shard s;
    assert_int_equal(shard_open(&s, path), 0);
    shard_close(&s);

    write_bytes(good, 30);  // shorter than the header
    expect_reject("truncated");
    write_bytes(good, n - 1);  // one byte short
    expect_reject("truncated");
    write_bytes(good, n / 2);
    expect_reject("truncated");
    write_bytes(good, 0);
    expect_reject("truncated");

    memcpy(b, good, n), b[0] = 'X';
    write_bytes(b, n);
    expect_reject("magic");
    memcpy(b, good, n), b[8] = 9;
    write_bytes(b, n);
    expect_reject("version");
    memcpy(b, good, n), b[12] = 3;
    write_bytes(b, n);
    expect_reject("token width");

    // A flipped token byte: structure intact, checksum catches it.
    memcpy(b, good, n), b[64 + 10] ^= 0x01;
    write_bytes(b, n);
    expect_reject("checksum");

    // Offsets out of order (checksum made to match).
    memcpy(b, good, n);
    uint64_t big = n_tokens + 5;
    memcpy(b + offsets_at + 8 * 3, &big, 8);
    fix_checksum(b, n);
    write_bytes(b, n);
    expect_reject("negative length");
    // Last offset not equal to the token count.
    memcpy(b, good, n);
    uint64_t short_end = n_tokens - 1;
    memcpy(b + offsets_at + 8 * n_docs, &short_end, 8);
    fix_checksum(b, n);
    write_bytes(b, n);
    expect_reject("offsets");
    // A bad split value.
    memcpy(b, good, n), b[split_at + 2] = 7;
    fix_checksum(b, n);
    write_bytes(b, n);
    expect_reject("split");
    // A token id >= vocab size.
    memcpy(b, good, n);
    uint16_t bad_id = 300;
    memcpy(b + 64 + 2 * 5, &bad_id, 2);
    fix_checksum(b, n);
    write_bytes(b, n);
    expect_reject("vocab");
    // Counts in the header that do not match the file.
    memcpy(b, good, n);
    uint64_t more = n_docs + 1;
    memcpy(b + 24, &more, 8);
    write_bytes(b, n);
    expect_reject("corrupt header");

    // Missing file.
    unlink(path);
    expect_reject("cannot open");
    free(good), free(b);
}

static void test_writer_abort_and_bad_ids(void **state) {
    unlink(path);
    ShardWriter *w = shard_writer_open(path, 100, 99);
    assert_non_null(w);
    int32_t ok[3] = {1, 2, 3}, bad[2] = {5, 100}, neg[1] = {-1};
    assert_int_equal(shard_writer_add(w, ok, 3, 1), 0);
    assert_int_equal(shard_writer_add(w, bad, 2, 1), -1);
    assert_non_null(strstr(pm_last_error(), "outside vocab"));
    assert_int_equal(shard_writer_add(w, neg, 1, 1), -1);
    assert_int_equal(shard_writer_add(w, ok, 3, 0), -1);  // split must be 1 or 2
    shard_writer_abort(w);
    assert_int_equal(access(path, F_OK), -1);  // nothing under the final name
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q .", dir);
    assert_int_not_equal(system(cmd), 0);  // and no temp file either
    // An unwritable location fails cleanly at open.
    assert_null(shard_writer_open("/nonexistent-dir/x.pms", 100, 99));
    assert_non_null(strstr(pm_last_error(), "/nonexistent-dir/x.pms"));
    // An empty shard (no documents) is valid.
    w = shard_writer_open(path, 100, 99);
    assert_int_equal(shard_writer_finish(w), 0);
    Shard s;
    assert_int_equal(shard_open(&s, path), 0);
    assert_int_equal(s.n_docs, 0);
    assert_int_equal(s.n_tokens, 0);
    shard_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_corrupt_rejected),
        cmocka_unit_test(test_writer_abort_and_bad_ids),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
