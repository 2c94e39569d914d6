// test_plot.c — `packmamba plot` (PM_BIN, set by ctest) on synthetic metrics.jsonl files: PNG and SVG images that
// are what they claim to be, no temporary files left behind, malformed lines reported by file and line number with
// earlier images left untouched, and a clear error without gnuplot. Skipped without PM_BIN; the drawing tests are
// skipped when gnuplot is not installed.
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static const char *bin;
static char dir[256];
static char *out_s, *err_s;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    if (len) *len = got;
    return s;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

// Runs "ENV PM_BIN plot ARGS" in dir with TMPDIR=dir/tmp; returns the exit status; stdout/stderr in out_s/err_s.
static int plot(const char *env, const char *fmt, ...) {
    char args[1024], cmd[2600], o[320], e[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(o, sizeof o, "%s/stdout.txt", dir);
    snprintf(e, sizeof e, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && TMPDIR='%s/tmp' %s '%s' plot %s >'%s' 2>'%s'", dir, dir, env, bin, args, o,
             e);
    int st = system(cmd);
    free(out_s);
    free(err_s);
    out_s = slurp(o, NULL);
    err_s = slurp(e, NULL);
    if (!out_s) out_s = strdup("");
    if (!err_s) err_s = strdup("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void write_file(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int entries(const char *rel, const char *containing) {  // directory entries whose name contains a string
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && strstr(e->d_name, containing)) n++;
    closedir(d);
    return n;
}

static int have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

// A run of 60 steps as `train` writes it: loss decaying, val_loss every 10 steps, throughput with noise.
static void synthetic_run(const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/metrics.jsonl", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    for (int s = 1; s <= 60; s++) {
        double loss = 1.5 + 4.0 * exp(-s / 15.0), tps = 20000 + 1500 * sin(s * 0.7);
        fprintf(f, "{\"step\":%d,\"loss\":%.9g,\"lr\":0.003,\"grad_norm\":0.8,\"tokens\":%d,\"tok_per_s\":%.6g,"
                   "\"fill\":0.97,\"step_s\":0.05",
                s, loss, 2048 * s, tps);
        if (s % 10 == 0) fprintf(f, ",\"val_loss\":%.9g", loss + 0.1);
        fprintf(f, "}\n");
    }
    fclose(f);
}

static int group_setup(void **state) {
    (void)state;
    bin = getenv("PM_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "test_plot: PM_BIN unset or not executable: skipping\n");
        bin = NULL;
        return 0;
    }
    snprintf(dir, sizeof dir, "%s/pm_plot_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return -1;
    char p[300];
    snprintf(p, sizeof p, "%s/tmp", dir);
    mkdir(p, 0755);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (dir[0] && !getenv("PM_KEEP") && pm_remove_tree(dir) != 0) fprintf(stderr, "test_plot: %s\n", pm_last_error());
    free(out_s);
    free(err_s);
    return 0;
}

static void check_images(const char *rel) {
    static const char *png[] = {"loss.png", "throughput.png"}, *svg[] = {"loss.svg", "throughput.svg"};
    char p[512];
    for (int i = 0; i < 2; i++) {
        size_t n;
        snprintf(p, sizeof p, "%s/%s/%s", dir, rel, png[i]);
        char *s = slurp(p, &n);
        assert_non_null(s);
        assert_true(n > 1000);
        assert_memory_equal(s, "\x89PNG\r\n\x1a\n", 8);
        free(s);
        snprintf(p, sizeof p, "%s/%s/%s", dir, rel, svg[i]);
        s = slurp(p, &n);
        assert_non_null(s);
        assert_non_null(strstr(s, "<svg"));
        assert_non_null(strstr(s, "</svg>"));
        free(s);
    }
}

// Images from a synthetic run, in the run directory and in --out DIR; the val_loss curve is drawn when present;
// nothing temporary is left in the run directory or in TMPDIR.
static void test_plot_draws_png_and_svg(void **state) {
    (void)state;
    if (!bin || !have_gnuplot()) skip();
    synthetic_run("run");
    assert_int_equal(plot("", "run"), 0);
    check_images("run");
    char p[512];
    snprintf(p, sizeof p, "%s/run/loss.svg", dir);
    char *svg = slurp(p, NULL);
    assert_non_null(strstr(svg, "val loss"));  // the legend entry of the validation curve
    free(svg);
    assert_int_equal(entries("run", ".tmp"), 0);
    assert_int_equal(entries("tmp", ""), 0);

    snprintf(p, sizeof p, "%s/figs", dir);
    mkdir(p, 0755);
    assert_int_equal(plot("", "run --out figs"), 0);
    check_images("figs");
    assert_int_equal(entries("figs", ".tmp"), 0);

    // Without any val_loss the loss figure has no validation curve (and plotting still works).
    write_file("run/metrics.jsonl", "{\"step\":1,\"loss\":3.5,\"tok_per_s\":1000}\n"
                                    "{\"step\":2,\"loss\":3.1,\"tok_per_s\":1100}\n");
    assert_int_equal(plot("", "run"), 0);
    check_images("run");
    snprintf(p, sizeof p, "%s/run/loss.svg", dir);
    svg = slurp(p, NULL);
    assert_null(strstr(svg, "val loss"));
    free(svg);
}

// Malformed metrics: one error line naming the file and the line; images from before are left as they were.
static void test_plot_malformed_line(void **state) {
    (void)state;
    if (!bin) skip();
    char p[512];
    snprintf(p, sizeof p, "%s/bad", dir);
    mkdir(p, 0755);
    write_file("bad/loss.png", "previous image");
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"{\"step\":1,\"loss\":2.0,\"tok_per_s\":10}\n{\"step\":2,\"loss\":1.9,\"tok_per_s\":10}\n{\"step\":3,\"lo",
         "metrics.jsonl:3"},
        {"{\"step\":1,\"loss\":2.0,\"tok_per_s\":10}\n\n{\"step\":3,\"loss\":\"x\",\"tok_per_s\":10}\n",
         "metrics.jsonl:3"},  // the blank line still counts
        {"{\"step\":1,\"loss\":2.0,\"tok_per_s\":10}\n{\"step\":2,\"tok_per_s\":10}\n", "metrics.jsonl:2"},
        {"[1, 2]\n", "metrics.jsonl:1"},
        {"{\"step\":1,\"loss\":2.0,\"tok_per_s\":10,\"val_loss\":null}\n", "metrics.jsonl:1"},
        {"", "metrics.jsonl"},  // empty: nothing to plot
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file("bad/metrics.jsonl", cases[i].text);
        int rc = plot("", "bad");
        if (rc == 0 || count_lines(err_s) != 1 || !strstr(err_s, cases[i].expect))
            fail_msg("case %zu: exit %d, stderr: %s", i, rc, err_s);
    }
    snprintf(p, sizeof p, "%s/bad/loss.png", dir);
    char *s = slurp(p, NULL);
    assert_string_equal(s, "previous image");
    free(s);
    assert_int_equal(entries("bad", ".tmp"), 0);
    assert_int_not_equal(plot("", "nosuchrun"), 0);
    assert_non_null(strstr(err_s, "nosuchrun/metrics.jsonl"));
    assert_int_not_equal(plot("", ""), 0);  // no RUN
    assert_int_equal(count_lines(err_s), 1);
}

// Without gnuplot on PATH: one clear line saying so.
static void test_plot_without_gnuplot(void **state) {
    (void)state;
    if (!bin) skip();
    synthetic_run("run2");
    int rc = plot("PATH=/nonexistent", "run2");
    assert_int_not_equal(rc, 0);
    assert_int_equal(count_lines(err_s), 1);
    assert_non_null(strstr(err_s, "gnuplot not found"));
    assert_int_equal(entries("run2", ".png"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plot_draws_png_and_svg),
        cmocka_unit_test(test_plot_malformed_line),
        cmocka_unit_test(test_plot_without_gnuplot),
    };
    return cmocka_run_group_tests_name("packmamba plot", tests, group_setup, group_teardown);
}
