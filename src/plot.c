// plot.c — `packmamba plot RUN`: training curves from RUN/metrics.jsonl, drawn by gnuplot (Debian's gnuplot-nox)
// into DIR/loss.{png,svg} (loss and, where present, val_loss vs step) and DIR/throughput.{png,svg} (tok/s vs step).
// gnuplot is run as a separate process on a temporary script and data file; each image is drawn under a temporary
// name and renamed only after gnuplot succeeded, so a failed plot never leaves a half-written image behind.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "util.h"

extern char **environ;

typedef struct {
    double step, loss, tok_s, val;  // val: NAN when the line has no val_loss
} Point;

// A required numeric key of one metrics line; 0, or -1 with pm_error naming the file and line.
static int get_number(json_t *o, const char *key, const char *path, int line, double *out) {
    json_t *v = json_object_get(o, key);
    if (!v) return pm_error("%s:%d: missing \"%s\"", path, line, key);
    if (!json_is_number(v)) return pm_error("%s:%d: \"%s\" is not a number", path, line, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return pm_error("%s:%d: \"%s\" is not finite", path, line, key);
    return 0;
}

// Reads every line of metrics.jsonl. Blank lines are skipped; anything else must be a JSON object with numeric
// step, loss and tok_per_s (val_loss optional). Returns the number of points, or -1 with pm_error.
static int read_metrics(const char *path, Point **out) {
    FILE *f = fopen(path, "r");
    if (!f) return pm_error("%s: cannot open: %s", path, strerror(errno));
    Point *pts = NULL;
    int n = 0, cap = 0, lineno = 0, rc = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t len;
    while ((len = getline(&buf, &bufcap, f)) >= 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)len && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r')) k++;
        if (k == (size_t)len) continue;
        json_error_t err;
        json_t *o = json_loadb(buf, (size_t)len, 0, &err);
        if (!o || !json_is_object(o)) {
            rc = pm_error("%s:%d: not a JSON object%s%s", path, lineno, o ? "" : ": ", o ? "" : err.text);
            json_decref(o);
            break;
        }
        Point p = {.val = NAN};
        if (get_number(o, "step", path, lineno, &p.step) || get_number(o, "loss", path, lineno, &p.loss) ||
            get_number(o, "tok_per_s", path, lineno, &p.tok_s)) {
            json_decref(o);
            rc = -1;
            break;
        }
        if (json_object_get(o, "val_loss") && get_number(o, "val_loss", path, lineno, &p.val)) {
            json_decref(o);
            rc = -1;
            break;
        }
        json_decref(o);
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            pts = pm_realloc(pts, sizeof(Point) * cap);
        }
        pts[n++] = p;
    }
    free(buf);
    if (rc == 0 && ferror(f)) rc = pm_error("%s: read error", path);
    fclose(f);
    if (rc == 0 && n == 0) rc = pm_error("%s: no metrics yet (the file is empty)", path);
    if (rc != 0) {
        free(pts);
        return -1;
    }
    *out = pts;
    return n;
}

// Finds an executable on PATH; 0 or -1.
static int find_in_path(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path) return -1;
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)len, len ? path : ".", name);
        if (access(out, X_OK) == 0) return 0;
        path += len;
        if (*path == ':') path++;
    }
    return -1;
}

// Writes a string as a gnuplot single-quoted literal (inside '...' a quote is written twice).
static void put_quoted(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

// The first line of a text file (gnuplot's error output), or "" — for a one-line error message.
static void first_line(const char *path, char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(out, (int)n, f)) {
        out[strcspn(out, "\n")] = 0;
        if (out[0]) break;  // gnuplot's messages often start with a blank line
    }
    fclose(f);
}

int cmd_plot(int argc, char **argv) {
    const char *out_dir = NULL, *pos[1];
    int npos = 0;
    ArgSpec specs[] = {
        {"--out", ARG_STR, &out_dir, "directory for loss.{png,svg} and throughput.{png,svg} (default: RUN)"},
    };
    args_parse(argc, argv, "packmamba plot RUN [--out DIR]", specs, sizeof specs / sizeof specs[0], pos, 1, &npos);
    if (npos != 1) pm_die("plot: expected one run directory (packmamba plot RUN)");
    const char *run = pos[0];
    if (!out_dir) out_dir = run;
    if (strlen(run) > 4000 || strlen(out_dir) > 4000) pm_die("plot: path too long");

    char gnuplot[4096];
    if (find_in_path("gnuplot", gnuplot, sizeof gnuplot) != 0)
        pm_die("plot: gnuplot not found on PATH (install it: apt-get install gnuplot-nox)");
    char metrics[4096];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run);
    Point *pts = NULL;
    int n = read_metrics(metrics, &pts);
    if (n < 0) pm_die("%s", pm_last_error());
    struct stat st;
    if (stat(out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) pm_die("%s: output directory does not exist", out_dir);

    // Temporary data, script and log files; the data file holds two blocks that gnuplot reads with `index`:
    // 0 = every step (step, loss, tok/s), 1 = the steps that have a validation loss (step, val_loss).
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char dat[4096], gp[4096], log[4096];
    snprintf(dat, sizeof dat, "%s/packmamba-plot-XXXXXX.dat", tmp);
    snprintf(gp, sizeof gp, "%s/packmamba-plot-XXXXXX.gp", tmp);
    snprintf(log, sizeof log, "%s/packmamba-plot-XXXXXX.log", tmp);
    int fd_dat = mkstemps(dat, 4), fd_gp = mkstemps(gp, 3), fd_log = mkstemps(log, 4);
    if (fd_dat < 0 || fd_gp < 0 || fd_log < 0) pm_die("%s: cannot create temporary files: %s", tmp, strerror(errno));
    FILE *fd = fdopen(fd_dat, "w");
    int n_val = 0;
    for (int i = 0; i < n; i++) fprintf(fd, "%.17g %.9g %.9g\n", pts[i].step, pts[i].loss, pts[i].tok_s);
    fprintf(fd, "\n\n");
    for (int i = 0; i < n; i++)
        if (!isnan(pts[i].val)) fprintf(fd, "%.17g %.9g\n", pts[i].step, pts[i].val), n_val++;
    int werr = ferror(fd);
    werr |= fclose(fd) != 0;

    // Images go to "<name>.tmp.<pid>" first; renamed after gnuplot exits 0.
    const char *names[4] = {"loss.png", "loss.svg", "throughput.png", "throughput.svg"};
    char final[4][4200], temp[4][4200];
    for (int i = 0; i < 4; i++) {
        snprintf(final[i], sizeof final[i], "%s/%s", out_dir, names[i]);
        snprintf(temp[i], sizeof temp[i], "%s/%s.tmp.%d", out_dir, names[i], (int)getpid());
    }
    FILE *g = fdopen(fd_gp, "w");
    fprintf(g, "set grid\nset key top right\nset xlabel 'step'\n");
    for (int fig = 0; fig < 2; fig++) {
        for (int fmt = 0; fmt < 2; fmt++) {
            fprintf(g, fmt == 0 ? "set terminal pngcairo size 1000,600 noenhanced\n"
                                : "set terminal svg size 1000,600 dynamic noenhanced\n");
            fprintf(g, "set output ");
            put_quoted(g, temp[2 * fig + fmt]);
            fprintf(g, "\n");
            if (fig == 0) {
                fprintf(g, "set ylabel 'loss (nats/token)'\nset title 'loss'\nplot ");
                put_quoted(g, dat);
                fprintf(g, " index 0 using 1:2 with lines lw 1.5 title 'train loss'");
                if (n_val > 0) {
                    fprintf(g, ", ");
                    put_quoted(g, dat);
                    fprintf(g, " index 1 using 1:2 with linespoints lw 1.5 pt 7 title 'val loss'");
                }
                fprintf(g, "\n");
            } else {
                fprintf(g, "set ylabel 'tokens / s'\nset title 'throughput'\nplot ");
                put_quoted(g, dat);
                fprintf(g, " index 0 using 1:3 with lines lw 1.5 title 'tok/s'\n");
            }
            fprintf(g, "set output\n");  // closes (flushes) the file before the next terminal
        }
    }
    werr |= ferror(g);
    werr |= fclose(g) != 0;
    close(fd_log);
    if (werr) pm_die("%s: cannot write temporary files", tmp);

    // gnuplot SCRIPT, its stdout and stderr to the log file.
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_TRUNC, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *gargv[] = {gnuplot, gp, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, gnuplot, &fa, NULL, gargv, environ), status = 0;
    posix_spawn_file_actions_destroy(&fa);
    if (err == 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    char msg[512];
    first_line(log, msg, sizeof msg);
    unlink(dat);
    unlink(gp);
    unlink(log);
    int ok = err == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    for (int i = 0; ok && i < 4; i++)
        if (stat(temp[i], &st) != 0 || st.st_size == 0) ok = 0;
    if (!ok) {
        for (int i = 0; i < 4; i++) unlink(temp[i]);
        if (err) pm_die("plot: cannot run %s: %s", gnuplot, strerror(err));
        pm_die("plot: gnuplot failed%s%s", msg[0] ? ": " : "", msg);
    }
    for (int i = 0; i < 4; i++)
        if (rename(temp[i], final[i]) != 0) pm_die("%s: cannot rename into place: %s", final[i], strerror(errno));
    printf("%s\n%s\n%s\n%s\n", final[0], final[1], final[2], final[3]);
    fprintf(stderr, "packmamba: plotted %d steps (%d with val_loss) from %s\n", n, n_val, metrics);
    free(pts);
    return 0;
}
