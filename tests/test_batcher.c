// test_batcher.c — batching invariants under every policy, checked against the shard's own tokens (the independent
// truth): every token of every document appears exactly once per epoch, positions restart at each document/piece,
// targets are the next token of the same piece (EOD after a document's last token, ignore at a cut), padding is
// inert; pack beats greedy-in-order and reaches >= 98% fill at T=2048 on the default corpus; resume replays
// exactly; rank/world splits cover the data once with balanced tokens; eval iteration sees each document once.
// Carried state (test_carry_*): documents reassembled across batches equal the shard's, chains run through one row of
// consecutive batches with exact carry flags, fill stays close to plain pack, resume replays, bad uses are refused.
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "batch.h"
#include "batcher.h"
#include "cmd_data.h"
#include "shard.h"
#include "tokenizer.h"
#include "util.h"

#define VOCAB 1000
#define EOD 999

static char *make_tmpdir(void) {
    char *d = pm_strdup("/tmp/pm_test_batcher_XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_rf(const char *d) { assert_int_equal(pm_remove_tree(d), 0); }

// A long-tailed synthetic corpus: lengths exp(N(mu, sigma)) (a few zero-length documents too, which the batcher
// must skip), random token ids below EOD, every 7th document in the val split. corpus_range writes documents
// [first, last) of the stream a seed makes (the same documents whatever the range) with vocabulary `vocab`.
static void corpus_range(const char *dir, int first, int last, double mu, double sigma, int max_len, int vocab,
                         uint64_t seed) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    ShardWriter *w = shard_writer_open(path, (uint32_t)vocab, EOD);
    assert_non_null(w);
    PmRng r;
    pm_rng_seed(&r, seed);
    int32_t *ids = pm_malloc((size_t)max_len * sizeof(int32_t));
    for (int d = 0; d < last; d++) {
        int len = (int)exp(mu + sigma * pm_rng_normal(&r));
        if (len > max_len) len = max_len;
        if (d % 53 == 5) len = 0;
        for (int i = 0; i < len; i++) ids[i] = (int32_t)(pm_rng_u64(&r) % EOD);
        if (d >= first) assert_int_equal(shard_writer_add(w, ids, (size_t)len, d % 7 == 3 ? 2 : 1), 0);
    }
    free(ids);
    assert_int_equal(shard_writer_finish(w), 0);
}

static void make_corpus(const char *dir, int n_docs, double mu, double sigma, int max_len, uint64_t seed) {
    corpus_range(dir, 0, n_docs, mu, sigma, max_len, VOCAB, seed);
}

// Coverage of one epoch: seen[d][k] counts how often piece k of document d was served.
typedef struct {
    Shard s;
    int T;
    uint8_t **seen;
    int64_t real;      // real tokens served
    int64_t computed;  // b->B * b->T summed
} Check;

static void check_init(Check *c, const char *dir, int T) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    assert_int_equal(shard_open(&c->s, path), 0);
    c->T = T;
    c->seen = pm_calloc(c->s.n_docs, sizeof(uint8_t *));
    for (uint64_t d = 0; d < c->s.n_docs; d++) c->seen[d] = pm_calloc(shard_doc_len(&c->s, d) / T + 1, 1);
    c->real = c->computed = 0;
}

static void check_free(Check *c) {
    for (uint64_t d = 0; d < c->s.n_docs; d++) free(c->seen[d]);
    free(c->seen);
    shard_close(&c->s);
}

// Verifies one batch against the shard and records which pieces it held.
static void check_batch(Check *c, const Batch *b, int allocB, int allocT, int policy) {
    assert_true(b->B >= 1 && b->B <= allocB && b->T >= 1 && b->T <= allocT);
    if (policy == PM_POLICY_SINGLE) assert_int_equal(b->B, 1);
    int64_t valid = 0;
    for (int r = 0; r < b->B; r++) {
        const int32_t *tok = b->tokens + (size_t)r * b->T, *pos = b->pos + (size_t)r * b->T;
        const int32_t *tgt = b->targets + (size_t)r * b->T, *doc = b->doc + (size_t)r * b->T;
        int col = 0, row_real = 0;
        while (col < b->T) {
            if (doc[col] < 0) {  // padding: inert
                assert_int_equal(pos[col], 0);
                assert_int_equal(tgt[col], PM_IGNORE);
                assert_true(tok[col] >= 0 && (uint32_t)tok[col] < c->s.vocab_size);
                col++;
                continue;
            }
            // A run: one piece of one document, positions 0, 1, 2, ...
            int d = doc[col], L = 0;
            assert_int_equal(pos[col], 0);
            while (col + L < b->T && doc[col + L] == d && pos[col + L] == L) L++;
            uint64_t len = shard_doc_len(&c->s, d);
            // Which piece: the only k whose tokens match (pieces start at multiples of T).
            int found = -1;
            for (uint64_t k = 0; k * c->T < len && found < 0; k++) {
                uint64_t start = k * c->T, plen = len - start < (uint64_t)c->T ? len - start : (uint64_t)c->T;
                if (plen != (uint64_t)L) continue;
                int same = 1;
                for (int i = 0; i < L && same; i++)
                    same = (uint32_t)tok[col + i] == shard_token(&c->s, c->s.offsets[d] + start + i);
                if (same) found = (int)k;
            }
            assert_true(found >= 0);
            c->seen[d][found]++;
            uint64_t start = (uint64_t)found * c->T;
            int is_last = start + L == len;
            for (int i = 0; i < L; i++) {
                int32_t want = i + 1 < L ? (int32_t)shard_token(&c->s, c->s.offsets[d] + start + i + 1)
                                         : is_last ? (int32_t)c->s.eod_id : PM_IGNORE;
                assert_int_equal(tgt[col + i], want);  // never crosses a piece or document
                valid += tgt[col + i] != PM_IGNORE;
            }
            row_real += L;
            col += L;
        }
        c->real += row_real;
        // single: no padding, except the all-padding 1x1 batch a rank gets when the epoch has run out for it
        if (policy == PM_POLICY_SINGLE) assert_true(row_real == b->T || (row_real == 0 && b->T == 1));
    }
    int padding_only = valid == 0 && b->B == 1 && b->T == 1;  // a rank's filler batch at the end of an epoch
    if (policy == PM_POLICY_PACK && !padding_only) assert_int_equal(b->T, allocT);
    c->computed += (int64_t)b->B * b->T;
    assert_int_equal(b->n_valid, valid);
}

// Every piece of every document of `split` seen exactly once (others never).
static void check_complete(const Check *c, int split) {
    for (uint64_t d = 0; d < c->s.n_docs; d++) {
        uint64_t len = shard_doc_len(&c->s, d), pieces = (len + c->T - 1) / c->T;
        int in = split == PM_SPLIT_ALL || c->s.split[d] == split;
        for (uint64_t k = 0; k < pieces; k++) assert_int_equal(c->seen[d][k], in ? 1 : 0);
    }
}

// Runs one epoch of (policy, window) and checks it; returns the fill.
static double run_epoch(const char *dir, int split, int policy, int B, int T, int window, uint64_t seed) {
    Batcher *bt = batcher_open(dir, split, policy, B, T, seed, 0, 1, window);
    assert_non_null(bt);
    Check c;
    check_init(&c, dir, T);
    Batch b = batch_alloc(B, T);
    int n = 0, end;
    do {
        end = batcher_next(bt, &b);
        check_batch(&c, &b, B, T, policy);
        n++;
    } while (!end);
    assert_int_equal(n, batcher_epoch_batches(bt));
    assert_int_equal(batcher_epoch(bt), 1);
    check_complete(&c, split);
    assert_int_equal(c.real, batcher_tokens(bt));
    // The stats function reports the same fill as the served batches.
    PolicyStats ps;
    assert_int_equal(batcher_policy_stats(dir, split, policy, B, T, seed, window, &ps), 0);
    assert_int_equal(ps.real_tokens, c.real);
    assert_int_equal(ps.computed_tokens, c.computed);
    double fill = (double)c.real / (double)c.computed;
    batch_free(&b);
    check_free(&c);
    batcher_close(bt);
    return fill;
}

static void test_invariants_each_policy(void **state) {
    char *dir = make_tmpdir();
    make_corpus(dir, 600, 4.0, 1.3, 3000, 11);
    for (int split = 0; split <= 2; split++)
        for (int T = 64; T <= 1024; T *= 4) {
            double fs = run_epoch(dir, split, PM_POLICY_SINGLE, 4, T, 0, 3);
            double fp = run_epoch(dir, split, PM_POLICY_PAD, 4, T, 0, 3);
            double fk = run_epoch(dir, split, PM_POLICY_PACK, 4, T, 0, 3);
            double fg = run_epoch(dir, split, PM_POLICY_PACK, 4, T, 1, 3);
            assert_true(fs == 1.0);
            assert_true(fp > 0 && fp <= 1);
            assert_true(fk >= fg);  // best fit never below greedy in order
            assert_true(fk > fp);
        }
    rm_rf(dir);
    free(dir);
}

// Best fit beats greedy-in-order over several corpora, seeds and row lengths.
static void test_pack_beats_greedy(void **state) {
    char *dir = make_tmpdir();
    for (int c = 0; c < 3; c++) {
        rm_rf(dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        make_corpus(dir, 3000, 3.0 + c, 1.0 + 0.4 * c, 20000, 100 + c);
        for (uint64_t seed = 0; seed < 3; seed++)
            for (int T = 128; T <= 4096; T *= 4) {
                PolicyStats best, greedy;
                assert_int_equal(batcher_policy_stats(dir, PM_SPLIT_TRAIN, PM_POLICY_PACK, 8, T, seed, 0, &best), 0);
                assert_int_equal(batcher_policy_stats(dir, PM_SPLIT_TRAIN, PM_POLICY_PACK, 8, T, seed, 1, &greedy), 0);
                assert_true(best.fill >= greedy.fill);
                assert_int_equal(best.real_tokens, greedy.real_tokens);
            }
    }
    rm_rf(dir);
    free(dir);
}

// Pack fill >= 98% at T=2048 on the default corpus (Debian's linux-doc-6.1 .rst files + fortunes) when installed,
// with full invariant checks on that real data; otherwise on a synthetic long-tailed corpus (said on stderr).
static void test_pack_fill_default_corpus(void **state) {
    const char *docs = "/usr/share/doc/linux-doc-6.1/Documentation", *fortunes = "/usr/share/games/fortunes";
    char *dir = make_tmpdir();
    char out[600];
    snprintf(out, sizeof out, "%s/data", dir);
    struct stat st;
    if (stat(docs, &st) == 0 && stat(fortunes, &st) == 0) {
        char *argv[] = {"prepare", "--out", out, "--ext", "rst", (char *)docs, (char *)fortunes};
        fprintf(stderr, "test_batcher: default corpus installed; preparing it\n");
        assert_int_equal(cmd_prepare(7, argv), 0);
    } else {
        fprintf(stderr, "test_batcher: default corpus NOT installed; using a synthetic long-tailed corpus\n");
        assert_int_equal(mkdir(out, 0755), 0);
        make_corpus(out, 20000, 4.8, 1.6, 300000, 7);
    }
    double fk = run_epoch(out, PM_SPLIT_ALL, PM_POLICY_PACK, 8, 2048, 0, 1);
    double fg = run_epoch(out, PM_SPLIT_ALL, PM_POLICY_PACK, 8, 2048, 1, 1);
    fprintf(stderr, "test_batcher: T=2048 pack fill %.4f, greedy in order %.4f\n", fk, fg);
    assert_true(fk >= 0.98);
    assert_true(fk >= fg);
    rm_rf(dir);
    free(dir);
}

static uint64_t batch_hash(const Batch *b) {
    uint64_t h = 1469598103934665603ull;
    size_t n = (size_t)b->B * b->T;
    const int32_t *arr[4] = {b->tokens, b->pos, b->targets, b->doc};
    h = (h ^ (uint64_t)b->B) * 1099511628211ull;
    h = (h ^ (uint64_t)b->T) * 1099511628211ull;
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; i < n; i++) h = (h ^ (uint32_t)arr[a][i]) * 1099511628211ull;
    return h;
}

// Saving the position after k batches and restoring it in a fresh batcher replays exactly the same batches,
// across epoch boundaries; epochs are reshuffled; wrong positions are refused.
static void test_resume(void **state) {
    char *dir = make_tmpdir();
    make_corpus(dir, 300, 4.0, 1.2, 2000, 5);
    for (int policy = 0; policy < 3; policy++) {
        int B = 4, T = 256;
        Batcher *a = batcher_open(dir, PM_SPLIT_TRAIN, policy, B, T, 42, 0, 1, 0);
        assert_non_null(a);
        int per_epoch = batcher_epoch_batches(a);
        int k = per_epoch / 2 + 1, total = 2 * per_epoch + 3;
        Batch b = batch_alloc(B, T);
        uint64_t pos[8], *h = pm_malloc(total * sizeof(uint64_t));
        int *ends = pm_malloc(total * sizeof(int));
        for (int i = 0; i < k; i++) batcher_next(a, &b);
        batcher_get_position(a, pos);
        for (int i = 0; i < total; i++) ends[i] = batcher_next(a, &b), h[i] = batch_hash(&b);
        Batcher *c = batcher_open(dir, PM_SPLIT_TRAIN, policy, B, T, 42, 0, 1, 0);
        assert_int_equal(batcher_set_position(c, pos), 0);
        for (int i = 0; i < total; i++) {
            int e = batcher_next(c, &b);
            assert_int_equal(e, ends[i]);
            assert_true(batch_hash(&b) == h[i]);
        }
        // Epoch 1 is a different order from epoch 0 (reshuffled), for the same seed.
        Batcher *e0 = batcher_open(dir, PM_SPLIT_TRAIN, policy, B, T, 42, 0, 1, 0);
        batcher_next(e0, &b);
        uint64_t first0 = batch_hash(&b);
        uint64_t p1[8];
        batcher_get_position(e0, p1);
        p1[1] = 1, p1[2] = 0;
        assert_int_equal(batcher_set_position(e0, p1), 0);
        batcher_next(e0, &b);
        assert_true(batch_hash(&b) != first0);
        // Positions from other settings are refused.
        Batcher *other = batcher_open(dir, PM_SPLIT_TRAIN, policy, B, T, 43, 0, 1, 0);
        assert_int_equal(batcher_set_position(other, pos), -1);
        assert_non_null(strstr(pm_last_error(), "seed"));
        uint64_t bad[8];
        memcpy(bad, pos, sizeof bad);
        bad[4] ^= 1;
        assert_int_equal(batcher_set_position(c, bad), -1);
        assert_non_null(strstr(pm_last_error(), "different data"));
        batcher_close(a), batcher_close(c), batcher_close(e0), batcher_close(other);
        batch_free(&b);
        free(h), free(ends);
    }
    rm_rf(dir);
    free(dir);
}

// world = 3: the ranks together see every token once per epoch, run the same number of batches, and get
// balanced real-token counts (pack and pad).
static void test_rank_world(void **state) {
    char *dir = make_tmpdir();
    make_corpus(dir, 1500, 4.2, 1.2, 4000, 9);
    int world = 3, B = 4, T = 512;
    for (int policy = 0; policy < 3; policy++) {
        Check c;
        check_init(&c, dir, T);
        int64_t tokens[3];
        int n_batches = -1;
        for (int r = 0; r < world; r++) {
            Batcher *bt = batcher_open(dir, PM_SPLIT_TRAIN, policy, B, T, 5, r, world, 0);
            assert_non_null(bt);
            if (n_batches < 0) n_batches = batcher_epoch_batches(bt);
            assert_int_equal(batcher_epoch_batches(bt), n_batches);
            Batch b = batch_alloc(B, T);
            int64_t before = c.real, n = 0;
            int end;
            do {
                end = batcher_next(bt, &b);
                check_batch(&c, &b, B, T, policy);
                n++;
            } while (!end);
            assert_int_equal(n, n_batches);
            tokens[r] = c.real - before;
            batch_free(&b);
            batcher_close(bt);
        }
        check_complete(&c, PM_SPLIT_TRAIN);
        int64_t mx = tokens[0], mn = tokens[0];
        for (int r = 1; r < world; r++) mx = tokens[r] > mx ? tokens[r] : mx, mn = tokens[r] < mn ? tokens[r] : mn;
        double mean = (double)c.real / world;
        fprintf(stderr, "test_batcher: world=3 %s tokens per rank %lld %lld %lld\n", policy_name(policy),
                (long long)tokens[0], (long long)tokens[1], (long long)tokens[2]);
        if (policy != PM_POLICY_SINGLE) assert_true((double)(mx - mn) <= 0.03 * mean + (double)B * T);
        check_free(&c);
    }
    rm_rf(dir);
    free(dir);
}

// Eval: iterate a split until batcher_next returns 1 — each val document exactly once, nothing from train.
static void test_eval_iteration(void **state) {
    char *dir = make_tmpdir();
    make_corpus(dir, 400, 4.0, 1.5, 5000, 21);
    for (int policy = 0; policy < 3; policy++) run_epoch(dir, PM_SPLIT_VAL, policy, 2, 300, 0, 0);
    rm_rf(dir);
    free(dir);
}

// Several data directories ("a,b") are one data set: their documents in order, as if prepared together. One
// stream of documents is written as two shards (A: the first 170, B: the rest) and as one (U: all 300); for every
// policy, split and rank of two, "A,B" serves exactly U's batches (tokens, positions, targets, document indices)
// over an epoch and a half. Positions tell the data sets apart; directories prepared with another vocabulary, and
// tokenizer files that differ, are refused by name.
static void test_several_directories(void **state) {
    char *root = make_tmpdir(), a[300], b[300], u[300], c[300], ab[700], ba[700], abc[1000];
    snprintf(a, sizeof a, "%s/a", root), snprintf(b, sizeof b, "%s/b", root), snprintf(u, sizeof u, "%s/u", root);
    snprintf(c, sizeof c, "%s/c", root);
    const char *made[] = {a, b, u, c};
    for (int i = 0; i < 4; i++) assert_int_equal(pm_mkdir_p(made[i]), 0);
    corpus_range(a, 0, 170, 4.5, 1.0, 1500, VOCAB, 9);
    corpus_range(b, 170, 300, 4.5, 1.0, 1500, VOCAB, 9);
    corpus_range(u, 0, 300, 4.5, 1.0, 1500, VOCAB, 9);
    corpus_range(c, 0, 20, 4.5, 1.0, 1500, VOCAB + 1, 9);
    snprintf(ab, sizeof ab, "%s,%s", a, b), snprintf(ba, sizeof ba, "%s,%s", b, a);
    snprintf(abc, sizeof abc, "%s,%s", ab, c);
    Batch x = batch_alloc(4, 256), y = batch_alloc(4, 256);
    int compared = 0;
    for (int policy = 0; policy < 3; policy++)
        for (int split = 0; split < 3; split++)
            for (int rank = 0; rank < 2; rank++) {
                Batcher *p = batcher_open(ab, split, policy, 4, 256, 11, rank, 2, 0);
                Batcher *q = batcher_open(u, split, policy, 4, 256, 11, rank, 2, 0);
                assert_non_null(p);
                assert_non_null(q);
                assert_int_equal(batcher_epoch_batches(p), batcher_epoch_batches(q));
                assert_int_equal(batcher_documents(p), batcher_documents(q));
                assert_true(batcher_tokens(p) == batcher_tokens(q));
                const int n = batcher_epoch_batches(p) * 3 / 2;
                for (int i = 0; i < n; i++) {
                    assert_int_equal(batcher_next(p, &x), batcher_next(q, &y));
                    assert_true(batch_hash(&x) == batch_hash(&y));
                    compared++;
                }
                batcher_close(p), batcher_close(q);
            }
    printf("%d batches of \"a,b\" equal to the single shard's\n", compared);
    // a position belongs to its data: "a,b" is not "b,a", nor the single shard of the same documents
    uint64_t pos[8];
    Batcher *p = batcher_open(ab, PM_SPLIT_TRAIN, PM_POLICY_PACK, 4, 256, 11, 0, 1, 0);
    batcher_next(p, &x);
    batcher_get_position(p, pos);
    const char *others[] = {ba, u};
    for (int i = 0; i < 2; i++) {
        Batcher *q = batcher_open(others[i], PM_SPLIT_TRAIN, PM_POLICY_PACK, 4, 256, 11, 0, 1, 0);
        assert_int_equal(batcher_set_position(q, pos), -1);
        batcher_close(q);
    }
    batcher_close(p);
    // another vocabulary; an empty name
    assert_null(batcher_open(abc, PM_SPLIT_ALL, PM_POLICY_PACK, 4, 256, 0, 0, 1, 0));
    printf("refused: %s\n", pm_last_error());
    assert_non_null(strstr(pm_last_error(), c));
    snprintf(abc, sizeof abc, "%s,,%s", a, b);
    assert_null(batcher_open(abc, PM_SPLIT_ALL, PM_POLICY_PACK, 4, 256, 0, 0, 1, 0));
    assert_non_null(strstr(pm_last_error(), "empty"));
    // tokenizers: the same file in both directories loads; a different one is refused, naming both
    char tk[400];
    const char *byte_tok = "{\"type\": \"packmamba-byte\", \"vocab_size\": 257, \"eod_id\": 256}\n";
    snprintf(tk, sizeof tk, "%s/tokenizer.json", a);
    assert_int_equal(pm_write_file_atomic(tk, byte_tok, strlen(byte_tok)), 0);
    snprintf(tk, sizeof tk, "%s/tokenizer.json", b);
    assert_int_equal(pm_write_file_atomic(tk, byte_tok, strlen(byte_tok)), 0);
    Tokenizer *t = tokenizer_load_from_data(ab);
    if (!t) fail_msg("%s", pm_last_error());
    assert_int_equal(tokenizer_vocab_size(t), 257);
    tokenizer_free(t);
    assert_int_equal(pm_write_file_atomic(tk, byte_tok, strlen(byte_tok) - 1), 0);  // the newline dropped
    assert_null(tokenizer_load_from_data(ab));
    printf("refused: %s\n", pm_last_error());
    assert_non_null(strstr(pm_last_error(), "different tokenizers"));
    batch_free(&x), batch_free(&y);
    rm_rf(root);
    free(root);
}

// ---------------------------------------------------------------------------------------------------------------
// Carried state (batcher_set_carry). The truth is the shard read on its own: every document reassembled from the
// batches in batch order must be exactly its tokens, with positions 0..L-1 and L targets (its next tokens, then EOD),
// each document once per epoch; a document longer than T must run as one piece per batch through one row of
// consecutive batches, and the carry flags must say exactly where a row continues from or into the next batch.

// Writes documents of the given lengths (ids below EOD from `seed`; every 7th document in the val split).
static void corpus_lengths(const char *dir, const int *lens, int n, uint64_t seed) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    ShardWriter *w = shard_writer_open(path, VOCAB, EOD);
    assert_non_null(w);
    PmRng r;
    pm_rng_seed(&r, seed);
    int mx = 1;
    for (int d = 0; d < n; d++) mx = lens[d] > mx ? lens[d] : mx;
    int32_t *ids = pm_malloc((size_t)mx * sizeof(int32_t));
    for (int d = 0; d < n; d++) {
        for (int i = 0; i < lens[d]; i++) ids[i] = (int32_t)(pm_rng_u64(&r) % EOD);
        assert_int_equal(shard_writer_add(w, ids, (size_t)lens[d], d % 7 == 3 ? 2 : 1), 0);
    }
    free(ids);
    assert_int_equal(shard_writer_finish(w), 0);
}

// n_short short documents (long-tailed lengths up to T, a few empty) with documents longer than T spread among
// them: exactly 2T and 3T+1 (each in both splits), T+1, 2T-1, 4T, 5T-3, 17.5T, and one of exactly T. *n: the count.
static int *carry_lengths(int T, int n_short, uint64_t seed, int *n) {
    const int n_long = 12;
    int longs[12] = {2 * T, 3 * T + 1, T + 1, 2 * T - 1, 4 * T, 5 * T - 3, 17 * T + T / 2, T, 2 * T, 3 * T + 1,
                     T + 2, 6 * T};
    int *lens = pm_malloc((size_t)(n_short + n_long) * sizeof(int));
    PmRng r;
    pm_rng_seed(&r, seed);
    int k = 0, j = 0;
    for (int i = 0; i < n_short; i++) {
        if (j < n_long && i % (n_short / n_long + 1) == 2) lens[k++] = longs[j++];  // (consecutive ones split)
        int len = (int)exp(log(T / 6.0) + 1.0 * pm_rng_normal(&r));
        lens[k++] = i % 41 == 7 ? 0 : len < 1 ? 1 : len > T ? T : len;
    }
    while (j < n_long) lens[k++] = longs[j++];
    *n = k;
    return lens;
}

typedef struct {
    Shard s;
    int B, T;
    int64_t *got;         // (docs) tokens of the document served so far this epoch
    int64_t *chain_from;  // (docs) batch of the document's first piece, -1: not seen
    int32_t *chain_row;   // (docs) its row
    Batch prev;           // the batch before, for the placement checks
    int have_prev;
    int64_t real, computed, targets, batches, rows;
    int64_t carried;                // rows with carry_in
    int64_t ends_full, ends_short;  // chains whose final piece has T tokens (L = kT) / 1 token (L = kT + 1)
} CarryCheck;

static void carry_check_init(CarryCheck *c, const char *dir, int B, int T) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    assert_int_equal(shard_open(&c->s, path), 0);
    c->B = B, c->T = T;
    c->got = pm_calloc(c->s.n_docs, sizeof(int64_t));
    c->chain_from = pm_malloc(c->s.n_docs * sizeof(int64_t));
    c->chain_row = pm_malloc(c->s.n_docs * sizeof(int32_t));
    c->prev = batch_alloc(B, T);
}

static void carry_check_epoch_start(CarryCheck *c) {
    for (uint64_t d = 0; d < c->s.n_docs; d++) c->got[d] = 0, c->chain_from[d] = -1;
    c->have_prev = 0;
    c->real = c->computed = c->targets = c->batches = c->rows = 0;
    c->carried = c->ends_full = c->ends_short = 0;
}

static void carry_check_free(CarryCheck *c) {
    free(c->got), free(c->chain_from), free(c->chain_row);
    batch_free(&c->prev);
    shard_close(&c->s);
}

// Checks batch g of the epoch (is_last: the epoch's last) against the shard and against the batch before it.
static void carry_check_batch(CarryCheck *c, const Batch *b, int64_t g, int is_last) {
    const int T = c->T;
    assert_int_equal(b->T, T);
    assert_true(b->B >= 1 && b->B <= c->B);
    if (!is_last) assert_int_equal(b->B, c->B);  // only the epoch's last batch may drop (empty) rows
    for (int r = b->B; r < c->B; r++) assert_true(b->carry_in[r] == 0 && b->carry_out[r] == 0);
    int64_t valid = 0;
    for (int r = 0; r < b->B; r++) {
        const int32_t *tok = b->tokens + (size_t)r * T, *pos = b->pos + (size_t)r * T;
        const int32_t *tgt = b->targets + (size_t)r * T, *doc = b->doc + (size_t)r * T;
        int col = 0, row_in = 0, row_out = 0, real = 0;
        while (col < T) {
            if (doc[col] < 0) {  // padding: inert
                assert_int_equal(pos[col], 0);
                assert_int_equal(tgt[col], PM_IGNORE);
                col++;
                continue;
            }
            int d = doc[col], p0 = pos[col], L = 0;
            while (col + L < T && doc[col + L] == d && pos[col + L] == p0 + L) L++;
            int64_t len = (int64_t)shard_doc_len(&c->s, d);
            assert_int_equal(p0, c->got[d]);  // the document goes on exactly where it stopped: nothing twice or lost
            for (int i = 0; i < L; i++) {
                uint64_t at = c->s.offsets[d] + (uint64_t)(p0 + i);
                assert_int_equal(tok[col + i], (int32_t)shard_token(&c->s, at));
                int32_t want = p0 + i + 1 < len ? (int32_t)shard_token(&c->s, at + 1) : (int32_t)c->s.eod_id;
                assert_int_equal(tgt[col + i], want);  // the next token of the document, across the cut too
                valid++;
            }
            if (len > T) {  // a chain: piece k = p0 / T in batch chain_from + k, the same row, at column 0
                assert_int_equal(col, 0);
                assert_int_equal(p0 % T, 0);
                assert_int_equal(L, len - p0 < T ? len - p0 : T);
                if (p0 == 0) c->chain_from[d] = g, c->chain_row[d] = r;
                assert_true(c->chain_from[d] >= 0);
                assert_int_equal(g, c->chain_from[d] + p0 / T);
                assert_int_equal(r, c->chain_row[d]);
                if (p0 > 0 && p0 + L == len) c->ends_full += L == T, c->ends_short += L == 1;
            } else {
                assert_int_equal(L, len);  // whole
            }
            if (col == 0) row_in = p0 > 0;
            row_out = p0 + L < len;
            if (row_out) assert_int_equal(col + L, T);  // a piece that goes on fills through column T-1
            c->got[d] += L;
            col += L;
            real += L;
        }
        assert_int_equal(b->carry_in[r], row_in);
        assert_int_equal(b->carry_out[r], row_out);
        c->carried += row_in;
        if (row_in) {  // continues row r of the batch before: its carry_out, its doc at the end, positions on
            assert_true(c->have_prev && r < c->prev.B);
            assert_int_equal(c->prev.carry_out[r], 1);
            assert_int_equal(c->prev.doc[(size_t)r * T + T - 1], doc[0]);
            assert_int_equal(c->prev.pos[(size_t)r * T + T - 1] + 1, pos[0]);
        }
        c->real += real;
    }
    if (c->have_prev)  // conversely every row carried out of the batch before is carried into this one
        for (int r = 0; r < c->prev.B; r++)
            if (c->prev.carry_out[r]) assert_true(r < b->B && b->carry_in[r] == 1);
    if (is_last)
        for (int r = 0; r < b->B; r++) assert_int_equal(b->carry_out[r], 0);  // every chain ends in the epoch
    assert_int_equal(b->n_valid, valid);
    c->targets += valid;
    c->computed += (int64_t)b->B * T;
    c->batches++, c->rows += b->B;
    // keep this batch for the next one's checks
    c->prev.B = b->B, c->prev.T = b->T;
    size_t n = (size_t)b->B * T;
    memcpy(c->prev.tokens, b->tokens, n * sizeof(int32_t));
    memcpy(c->prev.pos, b->pos, n * sizeof(int32_t));
    memcpy(c->prev.targets, b->targets, n * sizeof(int32_t));
    memcpy(c->prev.doc, b->doc, n * sizeof(int32_t));
    memcpy(c->prev.carry_in, b->carry_in, (size_t)c->B * sizeof(int32_t));
    memcpy(c->prev.carry_out, b->carry_out, (size_t)c->B * sizeof(int32_t));
    c->have_prev = 1;
}

// Every document of `split` reassembled completely, the others never touched; every token a target.
static void carry_check_complete(const CarryCheck *c, int split, int64_t tokens) {
    for (uint64_t d = 0; d < c->s.n_docs; d++) {
        int in = split == PM_SPLIT_ALL || c->s.split[d] == split;
        assert_int_equal(c->got[d], in ? (int64_t)shard_doc_len(&c->s, d) : 0);
    }
    assert_int_equal(c->real, tokens);
    assert_int_equal(c->targets, tokens);  // L targets for a document of L tokens: none lost at a cut
}

static Batcher *open_carry(const char *dir, int split, int B, int T, uint64_t seed, int window) {
    Batcher *bt = batcher_open(dir, split, PM_POLICY_PACK, B, T, seed, 0, 1, window);
    assert_non_null(bt);
    if (batcher_set_carry(bt, 1) != 0) fail_msg("%s", pm_last_error());
    return bt;
}

// Runs `epochs` carry epochs of a fresh batcher, checking each; returns the last epoch's check totals in *out.
static void run_carry(const char *dir, int split, int B, int T, uint64_t seed, int window, int epochs,
                      CarryCheck *out) {
    Batcher *bt = open_carry(dir, split, B, T, seed, window);
    CarryCheck c;
    carry_check_init(&c, dir, B, T);
    Batch b = batch_alloc(B, T);
    for (int e = 0; e < epochs; e++) {
        carry_check_epoch_start(&c);
        assert_int_equal(batcher_epoch(bt), e);
        int end;
        int64_t g = 0;
        do {
            end = batcher_next(bt, &b);
            carry_check_batch(&c, &b, g, end);
            g++;
        } while (!end);
        assert_int_equal(g, batcher_epoch_batches(bt));  // (the count of the epoch planned last: this one)
        carry_check_complete(&c, split, batcher_tokens(bt));
    }
    if (out) *out = c;
    carry_check_free(&c);
    batch_free(&b);
    batcher_close(bt);
}

// From the shard: continuation pieces of the split's documents longer than T, and how many of those documents end
// in a piece of T tokens / of 1 token.
static void expected_chains(const char *dir, int split, int T, int64_t *carried, int64_t *full, int64_t *one) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, PM_SHARD_FILE);
    Shard s;
    assert_int_equal(shard_open(&s, path), 0);
    *carried = *full = *one = 0;
    for (uint64_t d = 0; d < s.n_docs; d++) {
        int64_t len = (int64_t)shard_doc_len(&s, d);
        if ((split != PM_SPLIT_ALL && s.split[d] != split) || len <= T) continue;
        *carried += (len + T - 1) / T - 1;
        *full += len % T == 0, *one += len % T == 1;
    }
    shard_close(&s);
}

// Reassembly and chain placement over two epochs, for several B, T, windows (best fit, next fit) and splits,
// on a corpus holding documents of exactly T, 2T and 3T+1 among others longer than T.
static void test_carry_epoch(void **state) {
    char *dir = make_tmpdir();
    const int Ts[] = {16, 64, 100};
    for (int t = 0; t < 3; t++) {
        int T = Ts[t], n;
        int *lens = carry_lengths(T, 400, 7 + t, &n);
        rm_rf(dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        corpus_lengths(dir, lens, n, 3 + t);
        free(lens);
        const int Bs[] = {1, 3, 8};
        for (int bi = 0; bi < 3; bi++)
            for (int split = 0; split <= 2; split++)
                for (int window = 0; window <= 1; window++) {
                    CarryCheck c;
                    run_carry(dir, split, Bs[bi], T, 5 + bi, window, 2, &c);
                    // every continuation carried in (pieces - 1 per long document of the split), among them the
                    // final pieces of T tokens (2T, 4T...) and of 1 token (3T+1)
                    int64_t carried, full, one;
                    expected_chains(dir, split, T, &carried, &full, &one);
                    assert_int_equal(c.carried, carried);
                    assert_int_equal(c.ends_full, full);
                    assert_int_equal(c.ends_short, one);
                    if (split == PM_SPLIT_ALL) assert_true(full >= 2 && one >= 2);
                }
    }
    rm_rf(dir);
    free(dir);
}

// Fill with carried state against without, same corpus, B, T, window and seed: one carry epoch fully checked
// (carry_check_*) and counted from its batches, the pack plan's numbers from batcher_policy_stats. On the default
// corpus when installed (as test_pack_fill_default_corpus), and on synthetic long-tailed corpora.
static void carry_fill(const char *dir, const char *what, int B, int T, int window, double min_fill, double max_loss) {
    CarryCheck c;
    run_carry(dir, PM_SPLIT_ALL, B, T, 1, window, 1, &c);
    PolicyStats off;
    assert_int_equal(batcher_policy_stats(dir, PM_SPLIT_ALL, PM_POLICY_PACK, B, T, 1, window, &off), 0);
    double fill = (double)c.real / (double)c.computed;
    fprintf(stderr,
            "test_batcher: %s B=%d T=%d window %d: carry fill %.4f (%lld rows, %lld batches), "
            "off %.4f (%lld rows, %lld batches)\n",
            what, B, T, window, fill, (long long)c.rows, (long long)c.batches, off.fill, (long long)off.rows,
            (long long)off.batches);
    assert_int_equal(c.real, off.real_tokens);
    assert_true(fill >= min_fill);
    assert_true(fill >= off.fill - max_loss);
}

static void test_carry_fill(void **state) {
    const char *docs = "/usr/share/doc/linux-doc-6.1/Documentation", *fortunes = "/usr/share/games/fortunes";
    char *dir = make_tmpdir();
    char out[600];
    snprintf(out, sizeof out, "%s/data", dir);
    struct stat st;
    if (stat(docs, &st) == 0 && stat(fortunes, &st) == 0) {
        char *argv[] = {"prepare", "--out", out, "--ext", "rst", (char *)docs, (char *)fortunes};
        assert_int_equal(cmd_prepare(7, argv), 0);
        carry_fill(out, "default corpus", 8, 2048, 0, 0.98, 0.01);
        carry_fill(out, "default corpus", 8, 2048, 1, 0.0, 0.03);  // next fit
        carry_fill(out, "default corpus", 8, 512, 0, 0.98, 0.01);
        carry_fill(out, "default corpus", 32, 2048, 0, 0.98, 0.01);
        rm_rf(out);
    } else {
        fprintf(stderr, "test_batcher: default corpus NOT installed; carry fill on synthetic corpora only\n");
    }
    assert_int_equal(mkdir(out, 0755), 0);
    make_corpus(out, 20000, 4.8, 1.6, 300000, 7);
    carry_fill(out, "synthetic", 8, 2048, 0, 0.98, 0.01);
    carry_fill(out, "synthetic", 8, 2048, 1, 0.0, 0.03);
    carry_fill(out, "synthetic", 16, 1024, 0, 0.98, 0.01);
    for (int k = 0; k < 3; k++) {  // the corpora of test_pack_beats_greedy; the last is mostly long documents
        rm_rf(out);
        assert_int_equal(mkdir(out, 0755), 0);
        make_corpus(out, 3000, 3.0 + k, 1.0 + 0.4 * k, 20000, 100 + k);
        carry_fill(out, "synthetic small", 8, 256, 0, 0.98, 0.01);
        carry_fill(out, "synthetic small", 8, 1024, 0, 0.98, 0.01);
    }
    rm_rf(dir);
    free(dir);
}

static uint64_t carry_hash(const Batch *b, int B) {  // batch_hash and the carry flags of all B rows
    uint64_t h = batch_hash(b);
    for (int r = 0; r < B; r++) h = (h ^ (uint64_t)(b->carry_in[r] + 2 * b->carry_out[r])) * 1099511628211ull;
    return h;
}

// The same seed gives the same batches; a position saved at batch k (within an epoch, at its start, after an
// epoch boundary) restored in a fresh carry batcher replays exactly what the original run served from there, across
// epochs; carry-mode positions and plain ones are not interchangeable; the setting is fixed once batches are served.
static void test_carry_resume(void **state) {
    char *dir = make_tmpdir();
    int T = 64, B = 4, n;
    int *lens = carry_lengths(T, 300, 17, &n);
    corpus_lengths(dir, lens, n, 19);
    free(lens);
    for (int window = 0; window <= 1; window++) {
        Batcher *a = open_carry(dir, PM_SPLIT_TRAIN, B, T, 42, window);
        int per_epoch = batcher_epoch_batches(a);
        int total = 3 * per_epoch, ks[] = {0, 1, per_epoch / 2, per_epoch - 1, per_epoch, per_epoch + 5};
        Batch b = batch_alloc(B, T);
        uint64_t *h = pm_malloc(total * sizeof(uint64_t)), (*pos)[8] = pm_malloc(total * sizeof *pos);
        int *ends = pm_malloc(total * sizeof(int)), carried = 0;
        for (int i = 0; i < total; i++) {
            batcher_get_position(a, pos[i]);
            ends[i] = batcher_next(a, &b), h[i] = carry_hash(&b, B);
            for (int r = 0; r < B; r++) carried += b.carry_in[r];
        }
        assert_true(carried > 0);
        assert_int_equal(ends[per_epoch - 1], 1);
        Batcher *same = open_carry(dir, PM_SPLIT_TRAIN, B, T, 42, window);  // determinism from the start
        for (int i = 0; i < total; i++) {
            assert_int_equal(batcher_next(same, &b), ends[i]);
            assert_true(carry_hash(&b, B) == h[i]);
        }
        for (int j = 0; j < 6; j++) {
            int k = ks[j];
            Batcher *c = open_carry(dir, PM_SPLIT_TRAIN, B, T, 42, window);
            if (batcher_set_position(c, pos[k]) != 0) fail_msg("%s", pm_last_error());
            for (int i = k; i < total; i++) {
                assert_int_equal(batcher_next(c, &b), ends[i]);
                assert_true(carry_hash(&b, B) == h[i]);
            }
            batcher_close(c);
        }
        // Epoch 1 is reshuffled: its first batch differs from epoch 0's.
        assert_true(h[per_epoch] != h[0]);
        // A carry position on a plain batcher, a plain position on a carry batcher: refused, saying why.
        Batcher *plain = batcher_open(dir, PM_SPLIT_TRAIN, PM_POLICY_PACK, B, T, 42, 0, 1, window);
        assert_int_equal(batcher_set_position(plain, pos[ks[2]]), -1);
        printf("refused: %s\n", pm_last_error());
        assert_non_null(strstr(pm_last_error(), "carried state on"));
        uint64_t plain_pos[8];
        batcher_get_position(plain, plain_pos);
        Batcher *c = open_carry(dir, PM_SPLIT_TRAIN, B, T, 42, window);
        assert_int_equal(batcher_set_position(c, plain_pos), -1);
        assert_non_null(strstr(pm_last_error(), "carried state off"));
        // The setting cannot change once a batch was served or a position restored; asking for it again is fine.
        assert_int_equal(batcher_set_position(plain, plain_pos), 0);
        assert_int_equal(batcher_set_carry(plain, 1), -1);
        assert_non_null(strstr(pm_last_error(), "before the first batch"));
        batcher_next(c, &b);
        assert_int_equal(batcher_set_carry(c, 0), -1);
        assert_int_equal(batcher_set_carry(c, 1), 0);
        batcher_close(a), batcher_close(same), batcher_close(plain), batcher_close(c);
        batch_free(&b);
        free(h), free(pos), free(ends);
    }
    rm_rf(dir);
    free(dir);
}

// batcher_set_carry needs pack; single and pad are refused with the reason. Turning it off is a no-op.
static void test_carry_errors(void **state) {
    char *dir = make_tmpdir();
    make_corpus(dir, 50, 4.0, 1.0, 500, 2);
    for (int policy = PM_POLICY_SINGLE; policy <= PM_POLICY_PAD; policy++) {
        Batcher *bt = batcher_open(dir, PM_SPLIT_ALL, policy, 2, 64, 0, 0, 1, 0);
        assert_non_null(bt);
        assert_int_equal(batcher_set_carry(bt, 1), -1);
        printf("refused: %s\n", pm_last_error());
        assert_non_null(strstr(pm_last_error(), "carried state needs the pack policy"));
        assert_int_equal(batcher_set_carry(bt, 0), 0);
        batcher_close(bt);
    }
    rm_rf(dir);
    free(dir);
}

// Carried state with two ranks of B rows: rank k's row r of every batch is row k B + r of one rank's batch of 2B
// rows, carry flags included, over two epochs (so each rank's model carries the same chains as one process would,
// and a run can move between the two: the plan is the global batch's).
static void test_carry_two_ranks(void **state) {
    char *dir = make_tmpdir();
    const int T = 32, B = 3;
    int n;
    int *lens = carry_lengths(T, 200, 31, &n);
    corpus_lengths(dir, lens, n, 37);
    free(lens);
    Batcher *one = batcher_open(dir, PM_SPLIT_ALL, PM_POLICY_PACK, 2 * B, T, 5, 0, 1, 4), *rk[2];
    assert_non_null(one);
    assert_int_equal(batcher_set_carry(one, 1), 0);
    for (int k = 0; k < 2; k++) {
        rk[k] = batcher_open(dir, PM_SPLIT_ALL, PM_POLICY_PACK, B, T, 5, k, 2, 4);
        assert_non_null(rk[k]);
        assert_int_equal(batcher_set_carry(rk[k], 1), 0);
    }
    Batch g = batch_alloc(2 * B, T), b[2] = {batch_alloc(B, T), batch_alloc(B, T)};
    int batches = 0, carried = 0, epochs = 0;
    while (epochs < 2) {
        const int end = batcher_next(one, &g);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(batcher_next(rk[k], &b[k]), end);
            const int rows = g.B - k * B < 0 ? 0 : g.B - k * B < B ? g.B - k * B : B;
            if (rows == 0) continue;  // (the epoch's last batch: nothing for this rank; it serves padding)
            assert_int_equal(b[k].B, rows);
            const size_t o = (size_t)k * B * T, nt = (size_t)rows * T;
            assert_memory_equal(b[k].tokens, g.tokens + o, nt * sizeof(int32_t));
            assert_memory_equal(b[k].pos, g.pos + o, nt * sizeof(int32_t));
            assert_memory_equal(b[k].targets, g.targets + o, nt * sizeof(int32_t));
            assert_memory_equal(b[k].carry_in, g.carry_in + k * B, rows * sizeof(int32_t));
            assert_memory_equal(b[k].carry_out, g.carry_out + k * B, rows * sizeof(int32_t));
            for (int r = 0; r < rows; r++) carried += b[k].carry_in[r];
        }
        batches++;
        epochs += end;
    }
    printf("two ranks: %d batches, %d rows carried in\n", batches, carried);
    assert_true(carried > 20);  // (the corpus's long documents: the comparison covers carried rows)
    batch_free(&g), batch_free(&b[0]), batch_free(&b[1]);
    batcher_close(one), batcher_close(rk[0]), batcher_close(rk[1]);
    rm_rf(dir);
    free(dir);
}

// Without carry every batch clears the carry flags of all B rows, also in a Batch a carry batcher filled before
// (pack and pad), and a batcher told batcher_set_carry(bt, 0) serves exactly the batches of one never told.
static void test_carry_off_clears_flags(void **state) {
    char *dir = make_tmpdir();
    int T = 32, B = 4, n;
    int *lens = carry_lengths(T, 200, 23, &n);
    corpus_lengths(dir, lens, n, 29);
    free(lens);
    Batch b = batch_alloc(B, T), ref = batch_alloc(B, T);
    for (int policy = PM_POLICY_PAD; policy <= PM_POLICY_PACK; policy++) {
        Batcher *carry = open_carry(dir, PM_SPLIT_ALL, B, T, 3, 0);
        Batcher *plain = batcher_open(dir, PM_SPLIT_ALL, policy, B, T, 3, 0, 1, 0);
        Batcher *told = batcher_open(dir, PM_SPLIT_ALL, policy, B, T, 3, 0, 1, 0);
        assert_int_equal(batcher_set_carry(told, 0), 0);
        int end = 0, flagged = 0;
        while (!end) {
            batcher_next(carry, &b);  // leaves flags set in some rows
            int set = 0;
            for (int r = 0; r < B; r++) set += b.carry_in[r] + b.carry_out[r];
            flagged += set > 0;
            end = batcher_next(plain, &b);
            for (int r = 0; r < B; r++) assert_true(b.carry_in[r] == 0 && b.carry_out[r] == 0);
            assert_int_equal(batcher_next(told, &ref), end);
            assert_true(carry_hash(&ref, B) == carry_hash(&b, B));
        }
        assert_true(flagged > 0);
        batcher_close(carry), batcher_close(plain), batcher_close(told);
    }
    batch_free(&b), batch_free(&ref);
    rm_rf(dir);
    free(dir);
}

static void test_bad_arguments(void **state) {
    char *dir = make_tmpdir();
    assert_null(batcher_open(dir, 0, PM_POLICY_PACK, 2, 64, 0, 0, 1, 0));  // no shard
    assert_non_null(strstr(pm_last_error(), PM_SHARD_FILE));
    make_corpus(dir, 20, 3.0, 0.5, 100, 1);
    assert_null(batcher_open(dir, 0, 7, 2, 64, 0, 0, 1, 0));
    assert_null(batcher_open(dir, 0, PM_POLICY_PACK, 0, 64, 0, 0, 1, 0));
    assert_null(batcher_open(dir, 0, PM_POLICY_PACK, 2, 64, 0, 3, 3, 0));
    assert_int_equal(policy_parse("pack"), PM_POLICY_PACK);
    assert_int_equal(policy_parse("pad"), PM_POLICY_PAD);
    assert_int_equal(policy_parse("single"), PM_POLICY_SINGLE);
    assert_int_equal(policy_parse("packed"), -1);
    assert_string_equal(policy_name(PM_POLICY_PACK), "pack");
    rm_rf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants_each_policy), cmocka_unit_test(test_pack_beats_greedy),
        cmocka_unit_test(test_pack_fill_default_corpus), cmocka_unit_test(test_resume),
        cmocka_unit_test(test_rank_world), cmocka_unit_test(test_eval_iteration),
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_several_directories),
        cmocka_unit_test(test_carry_epoch), cmocka_unit_test(test_carry_fill), cmocka_unit_test(test_carry_resume),
        cmocka_unit_test(test_carry_two_ranks), cmocka_unit_test(test_carry_errors), cmocka_unit_test(test_carry_off_clears_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
