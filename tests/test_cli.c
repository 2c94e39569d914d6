// test_cli.c — the `packmamba` binary as a user runs it (PM_BIN, set by ctest): exact resume, SIGTERM mid-run,
// NaN weights and NaN losses, bad configs, --help, eval's per-document report, generate's determinism and the
// progress bar on a terminal. A small corpus of generated sentences is prepared in a temporary directory; without
// PM_BIN or a working `prepare` every test is skipped. Runs use the tiny preset at T=64, B=2 and a few steps.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static const char *bin;  // PM_BIN
static char dir[256];    // temporary working directory
static int ready;        // corpus prepared and the base run trained
// Every training run in these tests uses these model and batch settings.
#define TINY "--preset tiny --seq-len 64 --batch 2 --log-every 0"

// ------------------------------------------------------------------------------------------------ helpers

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

// Runs `PM_BIN <args>` through the shell with stdout and stderr captured (free them); returns the exit status
// (128 + signal if killed). PM_TEST_TIMES=1 prints each command's wall time; PM_KEEP=1 keeps the directory.
static char *out_s, *err_s;
static int pm(const char *fmt, ...) {
    char args[2048], cmd[4096], o[320], e[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(o, sizeof o, "%s/stdout.txt", dir);
    snprintf(e, sizeof e, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >'%s' 2>'%s'", dir, bin, args, o, e);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("PM_TEST_TIMES"))
        fprintf(stderr, "%6.2fs  %s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec), args);
    free(out_s);
    free(err_s);
    out_s = slurp(o);
    err_s = slurp(e);
    if (!out_s) out_s = strdup("");
    if (!err_s) err_s = strdup("");
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void write_text(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_rel(const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return slurp(p);
}

static int exists_rel(const char *rel) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return stat(p, &st) == 0;
}

// The value of `key` in every line of a metrics.jsonl, as the text written (so comparisons are bit for bit).
static int metric_strings(const char *metrics, const char *key, char vals[][64], int max) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    int n = 0;
    for (const char *line = metrics; line && *line && n < max;) {
        const char *nl = strchr(line, '\n');
        const char *p = strstr(line, pat);
        if (p && (!nl || p < nl)) {
            p += strlen(pat);
            size_t len = strcspn(p, ",}\n");
            snprintf(vals[n++], 64, "%.*s", (int)len, p);
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    return n;
}

// The newest RUN/checkpoints/step_* (relative to dir) into out; 0 or -1.
static int latest_checkpoint(const char *run, char *out, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/checkpoints", dir, run);
    DIR *d = opendir(p);
    if (!d) return -1;
    struct dirent *e;
    char best[256] = "";
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "step_", 5) == 0 && !strstr(e->d_name, ".tmp") && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    closedir(d);
    if (!best[0]) return -1;
    snprintf(out, n, "%s/checkpoints/%s", run, best);
    return 0;
}

// ------------------------------------------------------------------------------------------------ setup

// A corpus of generated sentences: 36 files of 1 to 12 sentences (about 30 to 400 bytes = tokens), so some documents
// are shorter than a 64-token row (several are packed to a row) and some longer (they are cut into pieces).
static void make_corpus(void) {
    static const char *subj[] = {"the cat", "a dog", "my old friend", "the river", "a small bird", "the teacher"};
    static const char *verb[] = {"sees", "follows", "remembers", "crosses", "paints", "finds"};
    static const char *obj[] = {"the hill", "a green stone", "the long road", "an open window", "the market"};
    char p[512];
    snprintf(p, sizeof p, "%s/corpus", dir);
    mkdir(p, 0755);
    uint64_t s = 12345;
    for (int i = 0; i < 36; i++) {
        snprintf(p, sizeof p, "%s/corpus/doc%02d.txt", dir, i);
        FILE *f = fopen(p, "w");
        int sentences = 1 + (i * 7) % 12;
        for (int k = 0; k < sentences; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            fprintf(f, "%s %s %s. ", subj[(s >> 33) % 6], verb[(s >> 40) % 6], obj[(s >> 50) % 5]);
        }
        fprintf(f, "\n");
        fclose(f);
    }
}

static int group_setup(void **state) {
    (void)state;
    bin = getenv("PM_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "test_cli: PM_BIN unset or not executable: skipping\n");
        return 0;
    }
    // One thread: these runs are tiny, threads only add contention with the other tests sharing the machine.
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    snprintf(dir, sizeof dir, "%s/pm_cli_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return -1;
    make_corpus();
    if (pm("prepare --out data --val-fraction 0.1 corpus") != 0) {
        fprintf(stderr, "test_cli: `prepare` not available yet (%s): skipping\n", err_s);
        return 0;
    }
    // The base run every later test reads: 6 uninterrupted steps.
    if (pm("train --data data --out base " TINY " --steps 6") != 0) {
        fprintf(stderr, "test_cli: base training run failed: %s\n", err_s);
        return -1;
    }
    ready = 1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (dir[0] && !getenv("PM_KEEP") && pm_remove_tree(dir) != 0) fprintf(stderr, "test_cli: %s\n", pm_last_error());
    free(out_s);
    free(err_s);
    return 0;
}

#define REQUIRE_READY() \
    do {                \
        if (!ready) skip(); \
    } while (0)

// ------------------------------------------------------------------------------------------------ tests

// 3 steps, then --resume up to 6, in another run directory: the same losses (as written, bit for bit) and the same
// cumulative token counts as the uninterrupted base run.
static void test_resume_is_exact(void **state) {
    (void)state;
    REQUIRE_READY();
    assert_int_equal(pm("train --data data --out split " TINY " --steps 3"), 0);
    assert_int_equal(pm("train --data data --out split " TINY " --steps 6 --resume"), 0);
    assert_non_null(strstr(err_s, "at step 3"));
    char *a = read_rel("base/metrics.jsonl"), *b = read_rel("split/metrics.jsonl");
    char la[16][64], lb[16][64], ta[16][64], tb[16][64], sa[16][64];
    int na = metric_strings(a, "loss", la, 16), nb = metric_strings(b, "loss", lb, 16);
    assert_int_equal(na, 6);
    assert_int_equal(nb, 6);
    assert_int_equal(metric_strings(a, "tokens", ta, 16), 6);
    assert_int_equal(metric_strings(b, "tokens", tb, 16), 6);
    metric_strings(b, "step", sa, 16);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(atoi(sa[i]), i + 1);
        assert_string_equal(la[i], lb[i]);
        assert_string_equal(ta[i], tb[i]);
    }
    // Training changes the loss: a resume that silently restarted from scratch could not match at steps 4..6.
    assert_string_not_equal(la[0], la[5]);
    free(a);
    free(b);
}

// SIGTERM while training: the step finishes, a complete checkpoint of exactly the steps logged is saved, the process
// exits 0, the checkpoint evaluates, and --resume continues from it.
static void test_sigterm_saves_and_resumes(void **state) {
    (void)state;
    REQUIRE_READY();
    char run[512], metrics[600], log[600];
    snprintf(run, sizeof run, "%s/sig", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run);
    snprintf(log, sizeof log, "%s/sig.log", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (chdir(dir) != 0) _exit(126);
        execl(bin, bin, "train", "--data", "data", "--out", "sig", "--preset", "tiny", "--seq-len", "64", "--batch",
              "2", "--log-every", "0", "--steps", "100000", (char *)NULL);
        _exit(127);
    }
    int lines = 0;
    for (int i = 0; i < 6000 && lines < 2; i++) {  // up to 60 s
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        char *m = slurp(metrics);
        lines = count_lines(m);
        free(m);
    }
    if (lines < 2) {  // never leave a 100000-step run behind
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("no 2 metrics lines within 60 s");
    }
    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    char *m = slurp(metrics);
    int steps = count_lines(m);
    free(m);
    char ck[256], expect[256];
    assert_int_equal(latest_checkpoint("sig", ck, sizeof ck), 0);
    snprintf(expect, sizeof expect, "sig/checkpoints/step_%08d", steps);
    assert_string_equal(ck, expect);  // the checkpoint holds exactly the steps that were logged
    assert_int_equal(pm("eval --checkpoint %s --data data --split val --seq-len 64 --batch 2 --json", ck), 0);
    json_error_t err;
    json_t *j = json_loads(out_s, 0, &err);
    assert_non_null(j);
    assert_true(isfinite(json_number_value(json_object_get(j, "mean_loss"))));
    json_decref(j);

    // The interrupted run trained exactly as the base run did (warmup: the lr does not depend on --steps yet).
    char *a = read_rel("base/metrics.jsonl"), *b = read_rel("sig/metrics.jsonl");
    char la[16][64], lb[16][64];
    int na = metric_strings(a, "loss", la, 16), nb = metric_strings(b, "loss", lb, 16);
    for (int i = 0; i < na && i < nb; i++) assert_string_equal(la[i], lb[i]);
    free(a);
    free(b);

    assert_int_equal(pm("train --data data --out sig " TINY " --steps %d --resume", steps + 2), 0);
    char want[64];
    snprintf(want, sizeof want, "at step %d", steps);
    assert_non_null(strstr(err_s, want));
    m = read_rel("sig/metrics.jsonl");
    char sv[64][64];
    int n = metric_strings(m, "step", sv, 64);
    assert_int_equal(n, steps + 2);
    for (int i = 0; i < n; i++) assert_int_equal(atoi(sv[i]), i + 1);
    free(m);
}

// Overwrites the first value of `tensor` in DIR/model.safetensors with a NaN (header: u64 length, then JSON with
// data_offsets relative to the end of the header).
static void poke_nan(const char *path, const char *tensor) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint64_t hlen = 0;
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    char *h = malloc(hlen + 1);
    assert_int_equal(fread(h, 1, hlen, f), hlen);
    h[hlen] = 0;
    json_error_t err;
    json_t *j = json_loads(h, 0, &err);
    assert_non_null(j);
    json_t *t = json_object_get(j, tensor);
    assert_non_null(t);
    assert_string_equal(json_string_value(json_object_get(t, "dtype")), "F32");
    long off = 8 + (long)hlen + (long)json_integer_value(json_array_get(json_object_get(t, "data_offsets"), 0));
    float nan = NAN;
    fseek(f, off + 4 * 5, SEEK_SET);  // the sixth value
    assert_int_equal(fwrite(&nan, 4, 1, f), 1);
    fclose(f);
    json_decref(j);
    free(h);
}

// A checkpoint with a NaN weight is refused on load, naming the file: by eval, and by a resumed run.
static void test_nan_weights_rejected(void **state) {
    (void)state;
    REQUIRE_READY();
    char ck[256], cmd[2400], path[600];
    assert_int_equal(latest_checkpoint("base", ck, sizeof ck), 0);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/nanrun/checkpoints' && cp -r '%s/%s' '%s/nanrun/checkpoints/' && "
             "cp '%s/base/tokenizer.json' '%s/base/metrics.jsonl' '%s/nanrun/'", dir, dir, ck, dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(latest_checkpoint("nanrun", ck, sizeof ck), 0);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, ck);
    // Before the poke the copy loads: the failure below is caused by the NaN, nothing else.
    assert_int_equal(pm("eval --checkpoint nanrun --data data --split val --seq-len 64 --batch 2"), 0);
    poke_nan(path, "backbone.layers.1.mixer.in_proj.weight");
    assert_int_not_equal(pm("eval --checkpoint nanrun --data data --seq-len 64 --batch 2"), 0);
    assert_int_equal(count_lines(err_s), 1);
    assert_non_null(strstr(err_s, "model.safetensors"));
    assert_string_equal(out_s, "");
    assert_int_not_equal(pm("train --data data --out nanrun " TINY " --steps 8 --resume"), 0);
    assert_non_null(strstr(err_s, "model.safetensors"));
    char *m = read_rel("nanrun/metrics.jsonl");  // nothing trained, nothing logged past the checkpoint
    assert_int_equal(count_lines(m), 6);
    free(m);
}

// A loss that becomes NaN (an absurd learning rate) stops the run with a message naming the step, exit != 0, and
// no checkpoint of the diverged model.
static void test_nan_loss_stops(void **state) {
    (void)state;
    REQUIRE_READY();
    int rc = pm("train --data data --out diverge " TINY " --steps 8 --lr 1e30 --warmup 0");
    assert_int_not_equal(rc, 0);
    char *m = read_rel("diverge/metrics.jsonl");
    int logged = count_lines(m);
    free(m);
    assert_true(logged < 8);
    char want[64];
    snprintf(want, sizeof want, "at step %d", logged + 1);  // the first step whose loss was not finite
    assert_non_null(strstr(err_s, want));
    assert_true(strstr(err_s, "NaN") || strstr(err_s, "infinite"));
    char ck[256];
    assert_int_equal(latest_checkpoint("diverge", ck, sizeof ck), -1);
}

// Bad options, from a config file or the command line: non-zero exit, exactly one line on stderr naming the problem,
// and no run directory created.
static void test_bad_configs(void **state) {
    (void)state;
    REQUIRE_READY();
    static const struct {
        const char *json, *expect;
    } files[] = {
        {"{\"data\": \"data\", \"sequence_length\": 64}", "sequence_length"},  // unknown key
        {"{\"seq_len\": \"64\"}", "seq_len"},                                 // string for a number
        {"{\"lr\": \"fast\"}", "lr"},
        {"{\"steps\": 2.5}", "steps"},                                        // not an integer
        {"{\"resume\": 1}", "resume"},                                        // number for a boolean
        {"{\"preset\": 130}", "preset"},                                      // number for a string
        {"{\"seq_len\": 0}", "seq_len"},                                      // impossible sizes
        {"{\"batch\": -1}", "batch"},
        {"{\"grad-accum\": 0}", "grad-accum"},
        {"{\"scan_states_layers\": -2}", "scan_states_layers"},
        {"{\"seq_len\": 1000000000000}", "seq_len"},
        {"{\"preset\": \"7b\"}", "7b"},                                       // unknown preset
        {"{\"packing\": \"zip\"}", "zip"},                                    // unknown packing
        {"{\"seq_len\": 64,}", "bad.json:1"},                                 // not JSON
        {"[\"--seq-len\", 64]", "bad.json"},                                  // not an object
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        write_text("bad.json", files[i].json);
        int rc = pm("train --config bad.json --data data --out badrun " TINY " --steps 2");
        if (rc == 0 || count_lines(err_s) != 1 || !strstr(err_s, files[i].expect) || !strstr(err_s, "bad.json"))
            fail_msg("config %s: exit %d, stderr: %s", files[i].json, rc, err_s);
        assert_false(exists_rel("badrun"));
    }
    static const struct {
        const char *args, *expect;
    } flags[] = {
        {"--preset 7b", "7b"},     {"--packing zip", "zip"},   {"--seq-len 0", "seq-len"},
        {"--batch -1", "batch"},   {"--batch x", "batch"},     {"--no-such-flag", "no-such-flag"},
        {"--config missing.json", "missing.json"}, {"--scan-states-layers -3", "scan-states-layers"},
        {"--memory-budget -1", "memory-budget"},
        {"--lr nan", "--lr"},  // (jansson cannot hold a NaN in run.json: this crashed before it was refused)
        {"--grad-clip inf", "--grad-clip"}, {"--lr -1", "--lr"}, {"--beta2 1", "--beta2"},
        {"--min-lr-frac 2", "--min-lr-frac"}, {"--warmup -3", "--warmup"},
        {"--in-proj-layers -2", "in-proj-layers"},
        {"--activations-layers -2", "activations-layers"},
        {"--activations-layers 1 --keep-activations", "activations-layers"},
        {"--in-proj-layers 1 --recompute-in-proj", "in-proj-layers"},  // one dial, two spellings
        {"--memory-budget 8 --keep-activations", "memory-budget"},  // the budget picks the settings itself
        {"--memory-budget 8 --in-proj-layers 1", "memory-budget"},
        {"--memory-budget 8 --cast-weights", "memory-budget"},
        {"--memory-budget 0.000001 " TINY, "memory-budget"},         // even the leanest settings do not fit
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int rc = pm("train --data data --out badrun --steps 2 %s", flags[i].args);
        if (rc == 0 || count_lines(err_s) != 1 || !strstr(err_s, flags[i].expect))
            fail_msg("%s: exit %d, stderr: %s", flags[i].args, rc, err_s);
        assert_false(exists_rel("badrun"));
    }
}

// --memory-budget with room for everything: the run goes ahead and says which settings it picked (the fastest:
// keep activations).
static void test_memory_budget_runs(void **state) {
    (void)state;
    REQUIRE_READY();
    assert_int_equal(pm("train --data data --out budrun " TINY " --steps 2 --memory-budget 64"), 0);
    if (!strstr(err_s, "--memory-budget 64.00 GiB: keep activations")) fail_msg("stderr: %s", err_s);
    char *r = read_rel("budrun/run.json");
    assert_non_null(strstr(r, "\"memory_budget\": 64"));
    free(r);
    // --activations-layers 3 of the tiny model's 4, whose weight gradients go in pairs on the CPU: 2, and it says so;
    // run.json records the flag as given
    assert_int_equal(pm("train --data data --out actrun " TINY " --steps 2 --activations-layers 3"), 0);
    if (!strstr(err_s, "--activations-layers 3: 2 layers keep activations")) fail_msg("stderr: %s", err_s);
    r = read_rel("actrun/run.json");
    assert_non_null(strstr(r, "\"activations_layers\": 3"));
    free(r);
}

// A good config file: its values are used, the command line overrides them, run.json records the result and can be
// used as a config file to repeat the run.
static void test_config_file_and_override(void **state) {
    (void)state;
    REQUIRE_READY();
    write_text("good.json", "{\"data\": \"data\", \"preset\": \"tiny\", \"seq_len\": 64, \"batch-size\": 1}");
    assert_int_not_equal(pm("train --config good.json --out cfgrun --steps 2"), 0);  // "batch-size" is unknown
    write_text("good.json", "{\"data\": \"data\", \"preset\": \"tiny\", \"seq_len\": 64, \"batch\": 3, "
                            "\"steps\": 50, \"log_every\": 0, \"lr\": 0.002, \"deterministic\": false}");
    assert_int_equal(pm("train --config good.json --out cfgrun --steps 2 --batch 2 --fp32-logits"), 0);
    char *m = read_rel("cfgrun/metrics.jsonl");
    assert_int_equal(count_lines(m), 2);  // --steps 2 beat the file's 50
    free(m);
    char *r = read_rel("cfgrun/run.json");
    json_error_t err;
    json_t *j = json_loads(r, 0, &err);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "seq_len")), 64);  // from the file
    assert_int_equal(json_integer_value(json_object_get(j, "batch")), 2);     // the command line's
    assert_int_equal(json_integer_value(json_object_get(j, "steps")), 2);
    assert_true(fabs(json_number_value(json_object_get(j, "lr")) - 0.002) < 1e-9);
    assert_true(json_is_true(json_object_get(j, "fp32_logits")));  // a flag of the command line's (GPU-only effect)
    json_decref(j);
    free(r);
    // run.json is itself a config file: training from it alone repeats the run exactly.
    assert_int_equal(pm("train --config cfgrun/run.json --out cfgrun2 --log-every 0"), 0);
    char *a = read_rel("cfgrun/metrics.jsonl"), *b = read_rel("cfgrun2/metrics.jsonl");
    char la[8][64], lb[8][64];
    assert_int_equal(metric_strings(a, "loss", la, 8), 2);
    assert_int_equal(metric_strings(b, "loss", lb, 8), 2);
    for (int i = 0; i < 2; i++) assert_string_equal(la[i], lb[i]);
    free(a);
    free(b);
}

// --help on every subcommand: exit 0, and the defaults are shown.
static void test_help_everywhere(void **state) {
    (void)state;
    REQUIRE_READY();
    static const char *cmds[] = {"train", "eval", "generate", "export", "plot", "prepare", "stats", "tokenize"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = pm("%s --help", cmds[i]);
        if (rc != 0) fail_msg("%s --help: exit %d: %s", cmds[i], rc, err_s);
        if (!strstr(out_s, "usage") || !strstr(out_s, "default"))
            fail_msg("%s --help shows no usage/defaults:\n%s", cmds[i], out_s);
    }
    assert_int_equal(pm("train --help"), 0);
    assert_non_null(strstr(out_s, "(default: 256)"));  // --seq-len's default, as declared in train.c
    assert_int_equal(pm("--help"), 0);
    assert_non_null(strstr(out_s, "plot"));
}

// eval --per-doc --json: one JSON object; the token-weighted mean of the per-document losses is the overall mean
// (each is accumulated separately inside eval), and every document of the split appears once.
static void test_eval_per_doc(void **state) {
    (void)state;
    REQUIRE_READY();
    assert_int_equal(pm("eval --checkpoint base --data data --seq-len 64 --batch 2 --per-doc --json"), 0);
    assert_int_equal(count_lines(out_s), 1);
    json_error_t err;
    json_t *j = json_loads(out_s, 0, &err);
    assert_non_null(j);
    double mean = json_number_value(json_object_get(j, "mean_loss"));
    json_int_t tokens = json_integer_value(json_object_get(j, "tokens"));
    json_t *docs = json_object_get(j, "per_doc");
    assert_true(json_is_array(docs));
    assert_int_equal(json_array_size(docs), 36);  // every file is one document; split "all"
    double sum = 0;
    json_int_t n = 0, prev = -1;
    size_t i;
    json_t *d;
    json_array_foreach(docs, i, d) {
        json_int_t id = json_integer_value(json_object_get(d, "doc"));
        json_int_t t = json_integer_value(json_object_get(d, "tokens"));
        double l = json_number_value(json_object_get(d, "loss"));
        assert_true(id > prev);  // each document once
        prev = id;
        assert_true(t > 0);
        assert_true(isfinite(l) && l > 0);
        sum += l * (double)t;
        n += t;
    }
    assert_int_equal(n, tokens);
    assert_true(fabs(sum / (double)n - mean) <= 1e-6 * fabs(mean));
    assert_true(fabs(json_number_value(json_object_get(j, "perplexity")) - exp(mean)) <= 1e-6 * exp(mean));
    json_decref(j);
}

// The per-document losses of `eval --per-doc --json` (its output in out_s) by document id: tokens and loss.
static int per_doc_losses(json_int_t *tokens, double *loss, int cap) {
    json_t *j = json_loads(out_s, 0, NULL);
    assert_non_null(j);
    json_t *docs = json_object_get(j, "per_doc"), *d;
    size_t i;
    int n = 0;
    json_array_foreach(docs, i, d) {
        const json_int_t id = json_integer_value(json_object_get(d, "doc"));
        assert_true(id >= 0 && id < cap);
        tokens[id] = json_integer_value(json_object_get(d, "tokens"));
        loss[id] = json_number_value(json_object_get(d, "loss"));
        n++;
    }
    json_decref(j);
    return n;
}

// eval --carry-state at T = 64 (the longer documents cut into pieces that carry their state from batch to batch)
// gives every document the loss and the token count it has unbroken, in rows long enough to hold it whole (T =
// 1024); without --carry-state the cut documents lose a target at every cut and their losses differ.
static void test_eval_carry_equals_unbroken(void **state) {
    (void)state;
    REQUIRE_READY();
    json_int_t tw[64] = {0}, tc[64] = {0}, tn[64] = {0};
    double lw[64] = {0}, lc[64] = {0}, ln[64] = {0};
    assert_int_equal(pm("eval --checkpoint base --data data --seq-len 1024 --batch 1 --per-doc --json"), 0);
    assert_int_equal(per_doc_losses(tw, lw, 64), 36);
    assert_int_equal(pm("eval --checkpoint base --data data --seq-len 64 --batch 2 --per-doc --json --carry-state"), 0);
    assert_int_equal(per_doc_losses(tc, lc, 64), 36);
    assert_int_equal(pm("eval --checkpoint base --data data --seq-len 64 --batch 2 --per-doc --json"), 0);
    assert_int_equal(per_doc_losses(tn, ln, 64), 36);
    int cut = 0;
    double worst = 0, apart = 0;
    for (int d = 0; d < 36; d++) {
        assert_true(tw[d] > 0);
        assert_int_equal(tc[d], tw[d]);
        worst = fmax(worst, fabs(lc[d] - lw[d]) / lw[d]);
        if (tw[d] > 64) {  // cut at T = 64
            cut++;
            assert_true(tn[d] < tw[d]);
            apart = fmax(apart, fabs(ln[d] - lw[d]) / lw[d]);
        }
    }
    fprintf(stderr, "eval: %d documents cut; carried vs unbroken %.2e relative, restarted pieces %.2e\n", cut, worst,
            apart);
    assert_true(cut >= 5);
    assert_true(worst < 1e-5);  // fp32 sums in another order
    assert_true(apart > 1e-3);
}

// train --carry-state: 3 steps, then --resume up to 6, against 6 uninterrupted: the same losses bit for bit (the
// carried state is saved with the checkpoint); a checkpoint with carried state refuses a resume without the flag, and
// the flag is refused with another policy, each with one line.
static void test_carry_resume_is_exact(void **state) {
    (void)state;
    REQUIRE_READY();
    assert_int_equal(pm("train --data data --out carry6 " TINY " --steps 6 --carry-state"), 0);
    assert_int_equal(pm("train --data data --out carry3 " TINY " --steps 3 --carry-state"), 0);
    assert_int_not_equal(pm("train --data data --out carry3 " TINY " --steps 6 --resume"), 0);
    assert_int_equal(count_lines(err_s), 1);
    assert_int_equal(pm("train --data data --out carry3 " TINY " --steps 6 --resume --carry-state"), 0);
    char *a = read_rel("carry6/metrics.jsonl"), *b = read_rel("carry3/metrics.jsonl"), *c = read_rel("base/metrics.jsonl");
    char la[16][64], lb[16][64], lc[16][64];
    assert_int_equal(metric_strings(a, "loss", la, 16), 6);
    assert_int_equal(metric_strings(b, "loss", lb, 16), 6);
    assert_int_equal(metric_strings(c, "loss", lc, 16), 6);
    int differ = 0;
    for (int i = 0; i < 6; i++) assert_string_equal(la[i], lb[i]), differ += strcmp(la[i], lc[i]) != 0;
    assert_true(differ > 0);  // the carried run's batches are not the base run's
    free(a), free(b), free(c);
    assert_int_not_equal(pm("train --data data --out carrypad " TINY " --steps 1 --packing pad --carry-state"), 0);
    assert_int_equal(count_lines(err_s), 1);
    assert_non_null(strstr(err_s, "--carry-state"));
}

// bench --carry-state: packed real documents with carried state, labelled and recorded as such; refused without
// --data or with another policy, in one line.
static void test_bench_carry_state(void **state) {
    (void)state;
    REQUIRE_READY();
    assert_int_equal(pm("bench --data data --preset tiny --seq-len 64 --batch 2 --policy pack --carry-state --steps 2 "
                        "--warmup 1 --profile-steps 1 --no-plots --out benchcarry"),
                     0);
    char *r = read_rel("benchcarry/results.json");
    assert_non_null(strstr(r, "\"carry_state\": true"));
    assert_non_null(strstr(r, "pack+carry data=data"));
    assert_non_null(strstr(r, "\"status\": \"ok\""));
    free(r);
    assert_int_not_equal(pm("bench --preset tiny --seq-len 64 --carry-state --steps 1 --out benchcarry2"), 0);
    assert_int_equal(count_lines(err_s), 1);
    assert_non_null(strstr(err_s, "--carry-state"));
    assert_int_not_equal(pm("bench --data data --preset tiny --seq-len 64 --policy pad --carry-state --steps 1 --out benchcarry3"), 0);
    assert_non_null(strstr(err_s, "--carry-state"));
}

// generate with a fixed seed is deterministic (greedy and sampled), and echoes the prompt; sampling settings
// outside their ranges are refused with one line naming the flag.
static void test_generate_deterministic(void **state) {
    (void)state;
    REQUIRE_READY();
    static const char *bad[] = {"--temperature -1", "--temperature nan", "--top-p 0", "--top-p 1.5", "--top-k -2",
                                "--tokens -5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int rc = pm("generate --checkpoint base --prompt 'The ' --tokens 3 %s", bad[i]);
        char flag[32];
        sscanf(bad[i], "%31s", flag);
        if (rc != 1 || count_lines(err_s) != 1 || !strstr(err_s, flag))
            fail_msg("generate %s: exit %d, stderr: %s", bad[i], rc, err_s);
    }
    const char *variants[] = {"--temperature 0", "--temperature 1 --top-k 20"};
    for (int v = 0; v < 2; v++) {
        assert_int_equal(pm("generate --checkpoint base --prompt 'The ' --tokens 20 --seed 1 %s", variants[v]), 0);
        char *first = strdup(out_s);
        assert_int_equal(strncmp(first, "The ", 4), 0);
        assert_int_equal(pm("generate --checkpoint base --prompt 'The ' --tokens 20 --seed 1 %s", variants[v]), 0);
        assert_string_equal(first, out_s);
        free(first);
    }
}

// --samples N: sample i is exactly what a run of one sample with seed + i writes (so each starts from the prompt's
// state, restored after the sample before it changed it), the samples differ, and --samples 0 is refused.
static void test_generate_samples(void **state) {
    (void)state;
    REQUIRE_READY();
    const char *args = "generate --checkpoint base --prompt 'The ' --tokens 24 --temperature 1 --top-k 20 --no-stop";
    assert_int_equal(pm("%s --seed 3 --samples 3", args), 0);
    char *all = strdup(out_s), *text[3];
    for (int i = 0; i < 3; i++) {
        char head[64], next[64];
        snprintf(head, sizeof head, "=== sample %d of 3 ===\n", i + 1);
        snprintf(next, sizeof next, "\n=== sample %d of 3 ===\n", i + 2);
        const char *from = strstr(all, head), *to = from ? strstr(from, next) : NULL;
        if (!from) fail_msg("no \"%s\" in:\n%s", head, all);
        from += strlen(head);
        text[i] = strndup(from, to ? (size_t)(to - from) : strlen(from));
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pm("%s --seed %d", args, 3 + i), 0);
        if (strcmp(out_s, text[i]) != 0) fail_msg("sample %d:\n%s\nalone:\n%s", i + 1, text[i], out_s);
    }
    assert_true(strcmp(text[0], text[1]) != 0 && strcmp(text[1], text[2]) != 0);
    assert_int_equal(pm("%s --samples 0", args), 1);
    assert_non_null(strstr(err_s, "--samples"));
    for (int i = 0; i < 3; i++) free(text[i]);
    free(all);
}

// train's energy report, against the stand-in NVML library tests/fakes/fake_nvml.c (PM_FAKE_NVML, loaded through
// PM_NVML_LIB), whose counter rises at exactly the W watts this test sets (FAKE_NVML_WATTS): every step's metrics
// carry the joules so far, which rise by at least W times the steps' own time between two steps (the steps are
// disjoint parts of that interval) and by not much more; the closing line gives W and the run's tokens a joule; a
// log line over an interval of at least 2 s gives W too.
static void test_train_reports_energy(void **state) {
    (void)state;
    REQUIRE_READY();
    const char *lib = getenv("PM_FAKE_NVML");
    if (!lib || access(lib, R_OK) != 0) skip();
    setenv("PM_NVML_LIB", lib, 1);
    const double W = 250;  // what the stand-in draws
    char wtxt[32];
    snprintf(wtxt, sizeof wtxt, "%g", W);
    setenv("FAKE_NVML_WATTS", wtxt, 1);
    int rc = pm("train --data data --out energy --preset tiny --seq-len 64 --batch 2 --log-every 50 --steps 500");
    unsetenv("PM_NVML_LIB");
    unsetenv("FAKE_NVML_WATTS");
    assert_int_equal(rc, 0);
    char *mtx = read_rel("energy/metrics.jsonl");
    assert_non_null(mtx);
    char e[500][64], dt[500][64], tk[500][64];
    const int n = metric_strings(mtx, "energy_j", e, 500);
    assert_int_equal(n, 500);
    assert_int_equal(metric_strings(mtx, "step_s", dt, 500), 500);
    assert_int_equal(metric_strings(mtx, "tokens", tk, 500), 500);
    double steps_s = 0;
    for (int i = 1; i < n; i++) {
        assert_true(atof(e[i]) >= atof(e[i - 1]));
        steps_s += atof(dt[i]);
    }
    const double rise = atof(e[n - 1]) - atof(e[0]);
    if (!(rise >= W * steps_s * 0.999 && rise <= W * steps_s * 1.5 + 2))
        fail_msg("energy rose %.3f J over steps taking %.4f s (at %g W: %.3f J)", rise, steps_s, W, W * steps_s);
    // packmamba: the GPU (fake GPU) used <J> J over <s> s of training here: <W> W, <t> tokens a joule
    const char *done = strstr(err_s, "the GPU (fake GPU) used ");
    assert_non_null(done);
    double joules, secs, watts, tpj;
    assert_int_equal(sscanf(done, "the GPU (fake GPU) used %lf J over %lf s of training here: %lf W, %lf tokens a "
                            "joule", &joules, &secs, &watts, &tpj), 4);
    if (fabs(watts - W) > 0.02 * W) fail_msg("closing line: %.1f W, the library draws %g", watts, W);
    const double tokens = atof(tk[n - 1]);
    if (fabs(tpj - tokens / joules) > 0.05 * tpj + 0.1)
        fail_msg("%.2f tokens a joule; %.0f tokens over %.1f J", tpj, tokens, joules);
    // the log lines: one at step 1 and every 50 steps; the power is given once an interval spans 2 s
    if (secs > 3) {
        const char *w = strstr(err_s, " W, ");
        assert_non_null(w);
        const char *bar = w;
        while (bar > err_s && bar[-1] != '|') bar--;
        double lw = atof(bar);
        if (fabs(lw - W) > 0.04 * W) fail_msg("log line: %.1f W, the library draws %g", lw, W);
    } else {
        printf("    (the run took %.2f s: no log interval of 2 s to check)\n", secs);
    }
    free(mtx);
}

// Two trainers on one run directory: the second stops at once with one line, writing nothing; the first goes on
// (and resumes normally afterwards: the lock went with its process).
static void test_run_directory_locked(void **state) {
    (void)state;
    REQUIRE_READY();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(dir) != 0 || !freopen("/dev/null", "w", stderr)) _exit(126);
        execl(bin, bin, "train", "--data", "data", "--out", "locked", "--preset", "tiny", "--seq-len", "64", "--batch",
              "2", "--steps", "1000000", "--log-every", "0", (char *)NULL);
        _exit(127);
    }
    char *m = NULL;  // the first is training once it has logged a step
    for (int i = 0; i < 600 && count_lines(m) < 1; i++) {
        free(m);
        usleep(50000);
        m = read_rel("locked/metrics.jsonl");
    }
    const int first_lines = count_lines(m);
    free(m);
    const int rc = pm("train --data data --out locked " TINY " --steps 5");
    kill(pid, SIGTERM);  // (it saves a checkpoint and exits 0)
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(first_lines >= 1);
    if (rc != 1 || count_lines(err_s) != 1 || !strstr(err_s, "another packmamba train is using this run directory"))
        fail_msg("second trainer: exit %d, stderr: %s", rc, err_s);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    // the lock is gone with its process: resuming works (one step past the checkpoint SIGTERM left)
    char ck[256];
    assert_int_equal(latest_checkpoint("locked", ck, sizeof ck), 0);
    const int step = atoi(strrchr(ck, '_') + 1);
    assert_int_equal(pm("train --data data --out locked " TINY " --steps %d --resume", step + 1), 0);
    assert_non_null(strstr(err_s, "resuming from"));
}

// On a terminal the run draws a progress bar with an ETA (carriage returns); redirected to a file it writes plain
// lines only.
static void test_progress_bar_on_tty(void **state) {
    (void)state;
    REQUIRE_READY();
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        execl(bin, bin, "train", "--data", "data", "--out", "tty", "--preset", "tiny", "--seq-len", "64", "--batch",
              "2", "--steps", "3", (char *)NULL);
        _exit(127);
    }
    char buf[65536];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(master, buf + n, sizeof buf - 1 - n);
        if (r > 0) n += (size_t)r;
        else if (r < 0 && errno == EINTR) continue;
        else break;  // EIO once the child has exited
        if (n == sizeof buf - 1) break;
    }
    buf[n] = 0;
    close(master);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(buf, "\r["));
    assert_non_null(strstr(buf, "3/3"));
    assert_non_null(strstr(buf, "eta "));
    // Not a terminal: no carriage returns at all (the base run's stderr went to a file; check a fresh one).
    assert_int_equal(pm("train --data data --out notty --preset tiny --seq-len 64 --batch 2 --steps 2"), 0);
    assert_null(strchr(err_s, '\r'));
    assert_non_null(strstr(err_s, "step      1/2"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_exact),
        cmocka_unit_test(test_sigterm_saves_and_resumes),
        cmocka_unit_test(test_nan_weights_rejected),
        cmocka_unit_test(test_nan_loss_stops),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_config_file_and_override),
        cmocka_unit_test(test_memory_budget_runs),
        cmocka_unit_test(test_help_everywhere),
        cmocka_unit_test(test_eval_per_doc),
        cmocka_unit_test(test_eval_carry_equals_unbroken),
        cmocka_unit_test(test_carry_resume_is_exact), cmocka_unit_test(test_bench_carry_state),
        cmocka_unit_test(test_generate_deterministic),
        cmocka_unit_test(test_generate_samples),
        cmocka_unit_test(test_train_reports_energy),
        cmocka_unit_test(test_progress_bar_on_tty),
        cmocka_unit_test(test_run_directory_locked),
    };
    return cmocka_run_group_tests_name("packmamba command line", tests, group_setup, group_teardown);
}
