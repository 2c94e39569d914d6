// test_prepare.c — `packmamba prepare` / `stats` / `tokenize` in process, on inputs the test writes itself: every
// input kind ends up in the shard as exactly the documents it holds (checked by decoding the shard with the byte
// tokenizer and comparing with the source texts), and each kind of bad input gives a clear error, a non-zero exit
// and no shard (nor temp file) left behind, an existing shard untouched.
#define _GNU_SOURCE
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "cmd_data.h"
#include "shard.h"
#include "tokenizer.h"
#include "util.h"

static char root[] = "/tmp/pm_test_prepare_XXXXXX";

static int setup(void **state) { return mkdtemp(root) ? 0 : -1; }
static int teardown(void **state) { return pm_remove_tree(root); }

static char *P(const char *rel) {  // path under the test root (a few live at once: rotate buffers)
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
    return buf[k];
}

static void put(const char *rel, const char *data, size_t n) {
    char *p = P(rel), cmd[600];
    char *slash = strrchr(p, '/');
    *slash = 0;
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    *slash = '/';
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}
static void puts_(const char *rel, const char *s) { put(rel, s, strlen(s)); }
static void put_gz(const char *rel, const char *s) {
    gzFile f = gzopen(P(rel), "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, s, (unsigned)strlen(s)), (int)strlen(s));
    gzclose(f);
}

static int prepare(int argc, const char **argv) { return cmd_prepare(argc, (char **)argv); }

// Documents of DIR/data.pms, decoded with the byte tokenizer (ids are bytes).
static char **read_docs(const char *dir, int *n) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, PM_SHARD_FILE);
    Shard s;
    if (shard_open(&s, p) != 0) fail_msg("%s", pm_last_error());
    assert_int_equal(s.vocab_size, 257);
    assert_int_equal(s.eod_id, 256);
    char **docs = pm_calloc(s.n_docs + 1, sizeof(char *));
    for (uint64_t d = 0; d < s.n_docs; d++) {
        uint64_t len = shard_doc_len(&s, d);
        docs[d] = pm_malloc(len + 1);
        for (uint64_t i = 0; i < len; i++) docs[d][i] = (char)shard_token(&s, s.offsets[d] + i);
        docs[d][len] = 0;
    }
    *n = (int)s.n_docs;
    shard_close(&s);
    return docs;
}
static void free_docs(char **d, int n) {
    for (int i = 0; i < n; i++) free(d[i]);
    free(d);
}

// Nothing at DIR/data.pms and no temp file in DIR.
static void assert_no_shard(const char *dir) {
    char p[600], cmd[700];
    snprintf(p, sizeof p, "%s/%s", dir, PM_SHARD_FILE);
    assert_int_equal(access(p, F_OK), -1);
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | grep -q tmp", dir);
    assert_int_not_equal(system(cmd), 0);
}

static void test_input_kinds(void **state) {
    puts_("in/a.txt", "alpha document\n");
    put_gz("in/c.txt.gz", "gamma, gzip'd\n");
    puts_("in/docs.jsonl", "{\"text\": \"json one\"}\n\n{\"text\": \"json two \\u00e9\", \"id\": 2}\r\n   \n");
    put_gz("in/docs2.jsonl.gz", "{\"text\": \"gz json\"}\n");
    puts_("in/fort", "first fortune\n%\nsecond\nfortune\n%\n%\nthird\n%\n");
    put("in/fort.dat", "\x00\x00\x00\x02\xff\xfe", 6);  // strfile index: binary, must be skipped
    assert_int_equal(symlink("fort", P("in/fort.u8")), 0);  // links inside a walk are skipped
    puts_("in/.hidden", "never read");
    puts_("in/sub/b.md", "beta in a subdirectory");
    puts_("in/empty.txt", "");
    const char *argv[] = {"prepare", "--out", P("out1"), "--val-fraction", "0", P("in")};
    assert_int_equal(prepare(6, argv), 0);
    int n;
    char **d = read_docs(P("out1"), &n);
    const char *want[] = {"alpha document\n", "gamma, gzip'd\n", "json one", "json two \xc3\xa9", "gz json",
                          "first fortune\n", "second\nfortune\n", "third\n", "beta in a subdirectory"};
    assert_int_equal(n, 9);
    for (int i = 0; i < n; i++) assert_string_equal(d[i], want[i]);
    free_docs(d, n);
    // tokenizer.json written beside the shard.
    assert_int_equal(access(P("out1/tokenizer.json"), F_OK), 0);

    // --ext keeps matching files (and fortune files) only.
    const char *argv2[] = {"prepare", "--out", P("out2"), "--ext", "txt", P("in")};
    assert_int_equal(prepare(6, argv2), 0);
    d = read_docs(P("out2"), &n);
    assert_int_equal(n, 5);  // a.txt, c.txt.gz, 3 fortunes
    assert_string_equal(d[0], "alpha document\n");
    assert_string_equal(d[1], "gamma, gzip'd\n");
    assert_string_equal(d[4], "third\n");
    free_docs(d, n);

    // --split-on cuts a plain file at separator lines.
    puts_("split.txt", "one\n---\ntwo\r\n---\r\n\n---\nthree");
    const char *argv3[] = {"prepare", "--out", P("out3"), "--split-on", "---", P("split.txt")};
    assert_int_equal(prepare(6, argv3), 0);
    d = read_docs(P("out3"), &n);
    assert_int_equal(n, 4);
    assert_string_equal(d[0], "one\n");
    assert_string_equal(d[1], "two\r\n");
    assert_string_equal(d[2], "\n");
    assert_string_equal(d[3], "three");
    free_docs(d, n);
}

// The val split is a deterministic function of the document index; a rerun gives byte-identical output.
static void test_val_split_deterministic(void **state) {
    size_t cap = 200 * 40;
    char *s = pm_malloc(cap);
    size_t o = 0;
    for (int i = 0; i < 200; i++) o += snprintf(s + o, cap - o, "{\"text\": \"document number %d\"}\n", i);
    put("val.jsonl", s, o);
    free(s);
    const char *argv[] = {"prepare", "--out", P("val1"), "--val-fraction", "0.1", P("val.jsonl")};
    assert_int_equal(prepare(6, argv), 0);
    const char *argv2[] = {"prepare", "--out", P("val2"), "--val-fraction", "0.1", P("val.jsonl")};
    assert_int_equal(prepare(6, argv2), 0);
    size_t n1, n2;
    char *a = pm_read_file(P("val1/data.pms"), &n1), *b = pm_read_file(P("val2/data.pms"), &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a), free(b);
    Shard sh;
    assert_int_equal(shard_open(&sh, P("val1/data.pms")), 0);
    int val = 0;
    for (uint64_t d = 0; d < sh.n_docs; d++) val += sh.split[d] == 2;
    assert_true(val >= 5 && val <= 40);  // ~10% of 200
    shard_close(&sh);
    // Two documents and a positive fraction: one of them is held out even if the hash picks none.
    puts_("two.jsonl", "{\"text\": \"x\"}\n{\"text\": \"y\"}\n");
    const char *argv3[] = {"prepare", "--out", P("val3"), "--val-fraction", "0.001", P("two.jsonl")};
    assert_int_equal(prepare(6, argv3), 0);
    assert_int_equal(shard_open(&sh, P("val3/data.pms")), 0);
    assert_int_equal((sh.split[0] == 2) + (sh.split[1] == 2), 1);
    shard_close(&sh);
}

// Runs prepare on one bad input: non-zero exit, the error names the file and contains `what`, no shard left.
static void expect_fail(const char *input, const char *what, const char *extra_flag) {
    char out[512];
    snprintf(out, sizeof out, "%s", P("bad_out"));
    const char *argv[8] = {"prepare", "--out", out};
    int argc = 3;
    if (extra_flag) argv[argc++] = "--invalid", argv[argc++] = extra_flag;
    argv[argc++] = input;
    assert_int_not_equal(prepare(argc, argv), 0);
    const char *e = pm_last_error();
    if (!strstr(e, what)) fail_msg("expected \"%s\" in the error, got: %s", what, e);
    assert_no_shard(out);
}

static void test_bad_inputs(void **state) {
    puts_("bad/empty.txt", "");
    expect_fail(P("bad/empty.txt"), "no non-empty documents", NULL);
    puts_("bad/blank.jsonl", "\n\n   \n");
    expect_fail(P("bad/blank.jsonl"), "no non-empty documents", NULL);
    puts_("bad/notext.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text field\"}\n");
    expect_fail(P("bad/notext.jsonl"), "notext.jsonl:2: expected a JSON object with a \"text\" string", NULL);
    puts_("bad/nontext.jsonl", "{\"text\": 42}\n");
    expect_fail(P("bad/nontext.jsonl"), "nontext.jsonl:1", NULL);
    puts_("bad/broken.jsonl", "{\"text\": \"unterminated\n");
    expect_fail(P("bad/broken.jsonl"), "broken.jsonl:1: bad JSON", NULL);
    puts_("bad/array.jsonl", "[1, 2]\n");
    expect_fail(P("bad/array.jsonl"), "array.jsonl:1: expected a JSON object", NULL);
    put("bad/latin1.txt", "caf\xe9 ok", 8);
    expect_fail(P("bad/latin1.txt"), "latin1.txt: invalid UTF-8 at byte offset 3", NULL);
    put("bad/latin1.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"caf\xe9\"}\n", 31);
    expect_fail(P("bad/latin1.jsonl"), "latin1.jsonl:2: invalid UTF-8", NULL);
    assert_int_equal(symlink(P("bad/does-not-exist"), P("bad/dangling")), 0);
    expect_fail(P("bad/dangling"), "cannot open", NULL);
    expect_fail(P("bad/nothing-here"), "nothing-here: cannot open", NULL);
    assert_int_equal(mkdir(P("bad/emptydir"), 0755), 0);
    expect_fail(P("bad/emptydir"), "emptydir: no input files", NULL);
    if (geteuid() != 0) {  // root reads anything; the permission case only means something for other users
        puts_("bad/secret.txt", "hidden");
        chmod(P("bad/secret.txt"), 0);
        expect_fail(P("bad/secret.txt"), "secret.txt: cannot open", NULL);
    }
    // A failing input after good ones: the partial shard is discarded.
    puts_("bad/mixed/a.txt", "good");
    put("bad/mixed/b.txt", "bad \xff", 5);
    expect_fail(P("bad/mixed"), "b.txt: invalid UTF-8 at byte offset 4", NULL);

    // Replacement and skip modes.
    const char *argv[] = {"prepare", "--out", P("repl"), "--invalid", "replace", P("bad/latin1.txt")};
    assert_int_equal(prepare(6, argv), 0);
    int n;
    char **d = read_docs(P("repl"), &n);
    assert_int_equal(n, 1);
    assert_string_equal(d[0], "caf\xef\xbf\xbd ok");
    free_docs(d, n);
    const char *argv2[] = {"prepare", "--out", P("skip"), "--invalid", "skip", P("bad/mixed")};
    assert_int_equal(prepare(6, argv2), 0);
    d = read_docs(P("skip"), &n);
    assert_int_equal(n, 1);
    assert_string_equal(d[0], "good");
    free_docs(d, n);

    // Bad flags.
    const char *argv3[] = {"prepare", "--out", P("x"), "--val-fraction", "1.5", P("bad/mixed")};
    assert_int_not_equal(prepare(6, argv3), 0);
    const char *argv4[] = {"prepare", P("bad/mixed")};
    assert_int_not_equal(prepare(2, argv4), 0);
    const char *argv5[] = {"prepare", "--out", P("x"), "--tokenizer", P("no-such-tokenizer"), P("bad/mixed")};
    assert_int_not_equal(prepare(6, argv5), 0);
    assert_no_shard(P("x"));
}

// A single 10 MB line (JSONL) and a 10 MB text file are fine.
static void test_large_line(void **state) {
    size_t n = 10u << 20;
    char *s = pm_malloc(n + 32);
    size_t o = (size_t)sprintf(s, "{\"text\": \"");
    for (size_t i = 0; i < n; i++) s[o++] = i % 9 == 7 ? ' ' : (char)('a' + i % 26);
    o += (size_t)sprintf(s + o, "\"}\n");
    put("big.jsonl", s, o);
    free(s);
    const char *argv[] = {"prepare", "--out", P("big"), "--val-fraction", "0", P("big.jsonl")};
    assert_int_equal(prepare(6, argv), 0);
    Shard sh;
    assert_int_equal(shard_open(&sh, P("big/data.pms")), 0);
    assert_int_equal(sh.n_docs, 1);
    assert_true(sh.n_tokens > (9u << 20));
    shard_close(&sh);
}

// An existing shard is never replaced without --force, and never damaged by a failing --force run.
static void test_no_overwrite(void **state) {
    puts_("keep/in.txt", "original");
    const char *argv[] = {"prepare", "--out", P("keep/out"), P("keep/in.txt")};
    assert_int_equal(prepare(4, argv), 0);
    size_t n0, n1;
    char *before = pm_read_file(P("keep/out/data.pms"), &n0);
    puts_("keep/other.txt", "other");
    const char *argv2[] = {"prepare", "--out", P("keep/out"), P("keep/other.txt")};
    assert_int_not_equal(prepare(4, argv2), 0);
    put("keep/bad.txt", "\xff", 1);
    const char *argv3[] = {"prepare", "--out", P("keep/out"), "--force", P("keep/bad.txt")};
    assert_int_not_equal(prepare(5, argv3), 0);
    char *after = pm_read_file(P("keep/out/data.pms"), &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before), free(after);
    const char *argv4[] = {"prepare", "--out", P("keep/out"), "--force", P("keep/other.txt")};
    assert_int_equal(prepare(5, argv4), 0);
    int n;
    char **d = read_docs(P("keep/out"), &n);
    assert_string_equal(d[0], "other");
    free_docs(d, n);
}

// Runs fn with stdout captured into a string.
static char *capture(int (*fn)(int, char **), int argc, const char **argv, int *rc) {
    fflush(stdout);
    int saved = dup(1), fd = open(P("stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    *rc = fn(argc, (char **)argv);
    fflush(stdout);
    dup2(saved, 1);
    close(fd), close(saved);
    size_t n;
    return pm_read_file(P("stdout.txt"), &n);
}

static void test_stats_json_and_tokenize(void **state) {
    // Lengths 1..300 (one document each): fills follow from the lengths.
    size_t cap = 300 * 330;
    char *s = pm_malloc(cap);
    size_t o = 0;
    for (int i = 1; i <= 300; i++) {
        o += (size_t)snprintf(s + o, cap - o, "{\"text\": \"");
        for (int k = 0; k < i; k++) s[o++] = 'a' + (k % 26);
        o += (size_t)snprintf(s + o, cap - o, "\"}\n");
    }
    put("lens.jsonl", s, o);
    free(s);
    const char *argv[] = {"prepare", "--out", P("lens"), "--val-fraction", "0", P("lens.jsonl")};
    assert_int_equal(prepare(6, argv), 0);
    const char *sargv[] = {"stats", P("lens"), "--seq-len", "128", "--batch", "4", "--json"};
    int rc;
    char *out = capture(cmd_stats, 7, sargv, &rc);
    assert_int_equal(rc, 0);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    if (!j) fail_msg("stats --json is not JSON: %s", out);
    assert_int_equal(json_integer_value(json_object_get(j, "documents")), 300);
    assert_int_equal(json_integer_value(json_object_get(j, "tokens")), 300 * 301 / 2);
    json_t *pol = json_object_get(j, "policies");
    const char *names[] = {"single", "pad", "pack", "pack_greedy"};
    double fill[4];
    for (int i = 0; i < 4; i++) {
        json_t *p = json_object_get(pol, names[i]);
        assert_non_null(p);
        fill[i] = json_real_value(json_object_get(p, "fill"));
        assert_true(fill[i] > 0 && fill[i] <= 1);
        assert_true(json_integer_value(json_object_get(p, "rows")) > 0);
    }
    assert_true(fill[0] == 1.0);
    assert_true(fill[2] >= fill[3]);
    // single: one row per piece; pieces = documents <= 128 plus ceil(len/128) for longer ones.
    int pieces = 0;
    for (int i = 1; i <= 300; i++) pieces += (i + 127) / 128;
    assert_int_equal(json_integer_value(json_object_get(json_object_get(pol, "single"), "rows")), pieces);
    // pack: at least ceil(tokens / T) rows.
    assert_true(json_integer_value(json_object_get(json_object_get(pol, "pack"), "rows")) >= (300 * 301 / 2 + 127) / 128);
    json_decref(j);
    free(out);
    const char *bad[] = {"stats", P("nowhere")};
    assert_int_not_equal(cmd_stats(2, (char **)bad), 0);

    const char *targv[] = {"tokenize", "--tokenizer", "tests/fixtures/tokenizer/gpt2", "Hello world<|endoftext|>"};
    out = capture(cmd_tokenize, 4, targv, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "15496 995 50256\n");
    free(out);
    const char *bargv[] = {"tokenize", "hi"};
    out = capture(cmd_tokenize, 2, bargv, &rc);
    assert_string_equal(out, "104 105\n");
    free(out);
}

// prepare with the GPT-2 BPE: 16-bit ids, vocab and EOD from the tokenizer, and DIR/tokenizer.json (written from
// encoder.json + vocab.bpe) decodes every document back to its text and encodes it to the same ids.
static void test_bpe_prepare(void **state) {
    const char *texts[] = {"Hello world, it's 2024!", "  caf\\u00e9 \\ud83e\\udd17 <|endoftext|> end", "x"};
    const char *plain[] = {"Hello world, it's 2024!", "  caf\xc3\xa9 \xf0\x9f\xa4\x97 <|endoftext|> end", "x"};
    char buf[512];
    size_t o = 0;
    for (int i = 0; i < 3; i++) o += (size_t)snprintf(buf + o, sizeof buf - o, "{\"text\": \"%s\"}\n", texts[i]);
    put("bpe.jsonl", buf, o);
    const char *argv[] = {"prepare", "--out", P("bpe"), "--val-fraction", "0", "--tokenizer",
                          "tests/fixtures/tokenizer/gpt2", P("bpe.jsonl")};
    assert_int_equal(prepare(8, argv), 0);
    Shard sh;
    assert_int_equal(shard_open(&sh, P("bpe/data.pms")), 0);
    assert_int_equal(sh.token_bytes, 2);
    assert_int_equal(sh.vocab_size, 50257);
    assert_int_equal(sh.eod_id, 50256);
    assert_int_equal(sh.n_docs, 3);
    Tokenizer *t = tokenizer_load_from_data(P("bpe"));
    assert_non_null(t);
    assert_int_equal(tokenizer_vocab_size(t), 50257);
    int32_t *ids = NULL;
    size_t cap = 0;
    for (uint64_t d = 0; d < 3; d++) {
        uint64_t len = shard_doc_len(&sh, d);
        int32_t *doc = pm_malloc(len * sizeof(int32_t));
        for (uint64_t i = 0; i < len; i++) {
            doc[i] = (int32_t)shard_token(&sh, sh.offsets[d] + i);
            assert_int_not_equal(doc[i], 50256);  // corpus text never yields EOD, even when it spells it
        }
        char *back = tokenizer_decode(t, doc, len, NULL);
        assert_string_equal(back, plain[d]);
        int64_t k = tokenizer_encode(t, plain[d], strlen(plain[d]), 0, &ids, &cap);
        assert_int_equal(k, (int64_t)len);
        assert_memory_equal(ids, doc, len * sizeof(int32_t));
        free(back), free(doc);
    }
    free(ids);
    tokenizer_free(t);
    shard_close(&sh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input_kinds),   cmocka_unit_test(test_val_split_deterministic),
        cmocka_unit_test(test_bad_inputs),    cmocka_unit_test(test_large_line),
        cmocka_unit_test(test_no_overwrite),  cmocka_unit_test(test_stats_json_and_tokenize),
        cmocka_unit_test(test_bpe_prepare),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
