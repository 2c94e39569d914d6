// report.c — see report.h.
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cost.h"
#include "util.h"

// ---------------------------------------------------------------------------------------------------------------
// a growable string

typedef struct {
    char *s;
    size_t n, cap;
} Buf;

static void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->s && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->s = pm_realloc(b->s, b->cap);
    }
}

static void bputs(Buf *b, const char *s) { bprintf(b, "%s", s); }

static int bwrite(Buf *b, const char *dir, const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = pm_write_file_atomic(path, b->s ? b->s : "", b->n);
    free(b->s);
    memset(b, 0, sizeof *b);
    return rc;
}

// ---------------------------------------------------------------------------------------------------------------
// reading the document

// Number at a dotted path ("step_ms.median"); NAN when missing or not a number.
static double num(json_t *o, const char *path) {
    char key[128];
    const char *p = path;
    while (o) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        snprintf(key, sizeof key, "%.*s", (int)len, p);
        o = json_object_get(o, key);
        if (!dot) break;
        p = dot + 1;
    }
    return json_is_number(o) ? json_number_value(o) : NAN;
}

static const char *str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int is_ok(json_t *c) { return strcmp(str(c, "status"), "ok") == 0; }

// CSV field: numbers with 6 significant digits (empty for NaN), strings quoted.
static void csv_num(Buf *b, double v) {
    if (isnan(v)) bputs(b, ",");
    else bprintf(b, ",%.6g", v);
}
static void csv_str(Buf *b, const char *s, int first) {
    bputs(b, first ? "\"" : ",\"");
    for (; *s; s++) bprintf(b, *s == '"' ? "\"\"" : "%c", *s);
    bputs(b, "\"");
}

static const char *const mem_keys[] = {"parameters", "gradients", "optimizer", "activations", "activation_grads",
                                       "workspace", "peak", NULL};

int report_write_data(const char *dir, json_t *root) {
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", dir);
    int rc = pm_write_file_atomic(path, s, strlen(s));
    free(s);
    if (rc) return rc;

    json_t *cfgs = json_object_get(root, "configs");
    Buf b = {0};
    bputs(&b, "index,label,status,model,n_layer,d_model,d_state,n_params,policy,B,T,data,steps,tokens_per_step,"
              "computed_tokens_per_step,fill,tok_per_s,computed_tok_per_s,step_ms_median,step_ms_mean,step_ms_std,"
              "step_ms_min,step_ms_max,step_ms_p10,step_ms_p90,profiled_step_ms,ops_ms,other_ms");
    // per category: the step's total, and its forward and backward parts where they are apart (blank for the
    // fused classifier and for the optimizer)
    for (int k = 0; op_categories[k]; k++)
        bprintf(&b, ",%s_ms,%s_fwd_ms,%s_bwd_ms", op_categories[k], op_categories[k], op_categories[k]);
    bputs(&b, ",achieved_flops_per_s,model_flops_per_token,mfu");
    for (int k = 0; mem_keys[k]; k++) bprintf(&b, ",mem_%s_bytes", mem_keys[k]);
    bputs(&b, ",sm_mhz_mean,sm_mhz_min,mem_mhz_mean,power_w_mean,power_w_max,power_capped,temp_c_max,energy_j_per_step,"
              "tokens_per_j,loss_first,loss_last\n");
    size_t i;
    json_t *c;
    json_array_foreach(cfgs, i, c) {
        bprintf(&b, "%d", (int)num(c, "index"));
        csv_str(&b, str(c, "label"), 0);
        csv_str(&b, str(c, "status"), 0);
        csv_str(&b, str(c, "model_label"), 0);
        csv_num(&b, num(c, "model.n_layer"));
        csv_num(&b, num(c, "model.d_model"));
        csv_num(&b, num(c, "model.d_state"));
        csv_num(&b, num(c, "model.n_params"));
        csv_str(&b, str(c, "policy"), 0);
        csv_num(&b, num(c, "B"));
        csv_num(&b, num(c, "T"));
        csv_str(&b, str(c, "data"), 0);
        static const char *const f[] = {"steps", "tokens_per_step", "computed_tokens_per_step", "fill", "tok_per_s",
                                        "computed_tok_per_s", "step_ms.median", "step_ms.mean", "step_ms.std",
                                        "step_ms.min", "step_ms.max", "step_ms.p10", "step_ms.p90", "profiled_step_ms",
                                        "ops_ms", "other_ms", NULL};
        for (int k = 0; f[k]; k++) csv_num(&b, num(c, f[k]));
        json_t *cats = json_object_get(c, "categories");
        for (int k = 0; op_categories[k]; k++) {
            json_t *x = json_object_get(cats, op_categories[k]);
            csv_num(&b, num(x, "ms"));
            csv_num(&b, num(x, "fwd_ms"));
            csv_num(&b, num(x, "bwd_ms"));
        }
        csv_num(&b, num(c, "achieved_flops_per_s"));
        csv_num(&b, num(c, "model_flops_per_token"));
        csv_num(&b, num(c, "mfu"));
        json_t *mem = json_object_get(c, "memory");
        for (int k = 0; mem_keys[k]; k++) csv_num(&b, num(mem, mem_keys[k]));
        csv_num(&b, num(c, "nvml.sm_mhz.mean"));
        csv_num(&b, num(c, "nvml.sm_mhz.min"));
        csv_num(&b, num(c, "nvml.mem_mhz.mean"));
        csv_num(&b, num(c, "nvml.power_w.mean"));
        csv_num(&b, num(c, "nvml.power_w.max"));
        csv_num(&b, num(c, "nvml.power_capped"));
        csv_num(&b, num(c, "nvml.temp_c.max"));
        csv_num(&b, num(c, "energy.j_per_step"));
        csv_num(&b, num(c, "energy.tokens_per_j"));
        csv_num(&b, num(c, "loss_first"));
        csv_num(&b, num(c, "loss_last"));
        bputs(&b, "\n");
    }
    if (bwrite(&b, dir, "results.csv")) return -1;

    bputs(&b, "index,label,region,category,direction,calls,ms,flops,bytes,exps,intensity,flops_per_s,bytes_per_s,"
              "roof_flops_per_s,roof_fraction,gemm_flops,exps_per_s,floor_ms,bound\n");
    json_array_foreach(cfgs, i, c) {
        size_t j;
        json_t *o;
        json_array_foreach(json_object_get(c, "ops"), j, o) {
            bprintf(&b, "%d", (int)num(c, "index"));
            csv_str(&b, str(c, "label"), 0);
            csv_str(&b, str(o, "region"), 0);
            csv_str(&b, str(o, "category"), 0);
            csv_str(&b, str(o, "direction"), 0);
            static const char *const f[] = {"calls",           "ms",          "flops",          "bytes",
                                            "exps",            "intensity",   "flops_per_s",    "bytes_per_s",
                                            "roof_flops_per_s", "roof_fraction", "gemm_flops", "exps_per_s",
                                            "floor_ms",        NULL};
            for (int k = 0; f[k]; k++) csv_num(&b, num(o, f[k]));
            csv_str(&b, str(o, "bound"), 0);
            bputs(&b, "\n");
        }
    }
    return bwrite(&b, dir, "ops.csv");
}

// ---------------------------------------------------------------------------------------------------------------
// gnuplot

// A series of configurations sharing everything but T: (model, B, policy) for throughput, (model, B) for memory.
typedef struct {
    char key[160];
    int idx[512];
    int n;
} Series;

static int series_of(json_t *cfgs, int with_policy, Series **out) {
    int ns = 0;
    Series *s = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(cfgs, i, c) {
        if (!is_ok(c)) continue;
        // a sweep that holds tokens per step fixed is one series across T (B = tokens / T); otherwise B is fixed
        char key[160], shape[48], data[96] = "";
        double tt = num(c, "tokens_target");
        if (tt > 0) snprintf(shape, sizeof shape, "%gK tok/step", tt / 1024);
        else snprintf(shape, sizeof shape, "B=%d", (int)num(c, "B"));
        if (strcmp(str(c, "data_label"), "synthetic") && *str(c, "data_label"))
            snprintf(data, sizeof data, " data=%.80s", str(c, "data_label"));
        if (with_policy)
            snprintf(key, sizeof key, "%s %s %s%s", str(c, "model_label"), shape, str(c, "policy"), data);
        else
            snprintf(key, sizeof key, "%s %s", str(c, "model_label"), shape);
        int k = 0;
        while (k < ns && strcmp(s[k].key, key)) k++;
        if (k == ns) {
            s = pm_realloc(s, sizeof(Series) * (ns + 1));
            memset(&s[ns], 0, sizeof(Series));
            snprintf(s[ns].key, sizeof s[ns].key, "%s", key);
            ns++;
        }
        if (s[k].n < 512) s[k].idx[s[k].n++] = (int)i;
    }
    // each series in increasing T
    for (int k = 0; k < ns; k++)
        for (int a = 1; a < s[k].n; a++)
            for (int b = a; b > 0 && num(json_array_get(cfgs, s[k].idx[b - 1]), "T") >
                                          num(json_array_get(cfgs, s[k].idx[b]), "T");
                 b--) {
                int t = s[k].idx[b];
                s[k].idx[b] = s[k].idx[b - 1];
                s[k].idx[b - 1] = t;
            }
    *out = s;
    return ns;
}

// One colour per op category (op_categories order, then "other"), so every plot keys them alike. The array must
// have one entry more than op_categories in bench_cost.c (11 categories + other).
static const char *const cat_color[] = {"#d62728", "#ff7f0e", "#1f77b4", "#17becf", "#aec7e8", "#2ca02c", "#bcbd22",
                                        "#9467bd", "#8c564b", "#e377c2", "#c5b0d5", "#7f7f7f"};
_Static_assert(sizeof cat_color / sizeof cat_color[0] == 12, "one colour per op category plus 'other'");

// Emits the commands that draw the current plot to name.png and name.svg (the plot command is in `plot`).
static void gp_emit(Buf *g, const char *name, const char *plot) {
    bprintf(g, "set terminal pngcairo size 1100,650 noenhanced font ',10'\nset output '%s.png'\n%s\n", name, plot);
    bprintf(g, "set terminal svg size 1100,650 noenhanced font 'sans,11' background '#ffffff'\nset output '%s.svg'\n"
               "replot\nunset output\nreset\n\n",
            name);
}

static void gp_quote(Buf *b, const char *s) {
    bputs(b, "\"");
    for (; *s; s++) bprintf(b, (*s == '"' || *s == '\\') ? "\\%c" : "%c", *s);
    bputs(b, "\"");
}

// The configuration the single-config roofline shows: the most tokens per step (ties: the later).
static int focus_config(json_t *cfgs) {
    int best = -1;
    double bm = -1;
    size_t i;
    json_t *c;
    json_array_foreach(cfgs, i, c) {
        if (!is_ok(c)) continue;
        double m = num(c, "computed_tokens_per_step") * num(c, "model.n_params");
        if (m >= bm) bm = m, best = (int)i;
    }
    return best;
}

// Writes the .dat files and plots.gp; returns the number of plots (0 when no configuration succeeded).
static int write_gnuplot(const char *dir, json_t *root) {
    json_t *cfgs = json_object_get(root, "configs");
    double bw = num(root, "ceilings.copy_bytes_per_s"), peak = num(root, "ceilings.gemm_flops_per_s"),
           vec = num(root, "ceilings.vector_flops_per_s");
    Buf g = {0}, d = {0}, p = {0};
    bputs(&g, "# packmamba bench plots: run `gnuplot plots.gp` in this directory (PNG + SVG of each plot)\n\n");
    int nplots = 0;

    // throughput vs T
    Series *s;
    int ns = series_of(cfgs, 1, &s);
    if (ns == 0) {
        free(s);
        free(g.s);
        return 0;
    }
    for (int k = 0; k < ns; k++) {
        bprintf(&d, "# %s\n# T tok_per_s\n", s[k].key);
        for (int j = 0; j < s[k].n; j++) {
            json_t *c = json_array_get(cfgs, s[k].idx[j]);
            bprintf(&d, "%d %.6g\n", (int)num(c, "T"), num(c, "tok_per_s"));
        }
        bputs(&d, "\n\n");
        bprintf(&p, "%s'throughput.dat' index %d using 1:2 with linespoints lw 2 pt 7 title ", k ? ", " : "plot ", k);
        gp_quote(&p, s[k].key);
    }
    bwrite(&d, dir, "throughput.dat");
    bputs(&g, "set title 'Training throughput vs sequence length'\nset logscale x 2\nset xlabel 'T (tokens per row)'\n"
              "set ylabel 'tokens/s (real tokens)'\nset yrange [0:*]\nset grid\nset key outside right\n"
              "set format y '%.3s%c'\n");
    gp_emit(&g, "throughput", p.s);
    free(p.s), memset(&p, 0, sizeof p);
    nplots++;
    free(s);

    // per-op breakdown: share of the profiled step by category, stacked, one bar per configuration
    size_t i;
    json_t *c;
    bputs(&d, "# label, then % of the profiled step per category:");
    for (int k = 0; op_categories[k]; k++) bprintf(&d, " %s", op_categories[k]);
    bputs(&d, " other\n");
    json_array_foreach(cfgs, i, c) {
        if (!is_ok(c)) continue;
        double tot = num(c, "profiled_step_ms");
        if (!(tot > 0)) continue;
        gp_quote(&d, str(c, "label"));
        json_t *cats = json_object_get(c, "categories");
        for (int k = 0; op_categories[k]; k++) bprintf(&d, " %.4f", 100 * num(json_object_get(cats, op_categories[k]), "ms") / tot);
        bprintf(&d, " %.4f\n", 100 * num(json_object_get(cats, "other"), "ms") / tot);
    }
    bwrite(&d, dir, "breakdown.dat");
    bputs(&g, "set title 'Where the step goes (forward + backward per op category)'\nset style data histograms\n"
              "set style histogram rowstacked\nset style fill solid 0.85 border -1\nset boxwidth 0.75\n"
              "set ylabel '% of step time'\nset yrange [0:105]\nset xtics rotate by -40 left font ',8'\n"
              "set key outside right\nset grid ytics\n");
    int nc = 0;
    for (int k = 0; op_categories[k]; k++, nc++)
        bprintf(&p, "%s using %d%s title '%s' lc rgb '%s'", k ? ", ''" : "plot 'breakdown.dat'", k + 2,
                k ? "" : ":xtic(1)", op_categories[k], cat_color[k]);
    bprintf(&p, ", '' using %d title 'other' lc rgb '%s'", nc + 2, cat_color[nc]);
    gp_emit(&g, "breakdown", p.s);
    free(p.s), memset(&p, 0, sizeof p);
    nplots++;

    // memory: peak vs T per (model, B), and by category per configuration
    ns = series_of(cfgs, 0, &s);
    for (int k = 0; k < ns; k++) {
        bprintf(&d, "# %s\n# T peak_GiB\n", s[k].key);
        double lastT = -1;
        for (int j = 0; j < s[k].n; j++) {
            json_t *x = json_array_get(cfgs, s[k].idx[j]);
            if (num(x, "T") == lastT) continue;  // policies of one shape share the allocation
            lastT = num(x, "T");
            bprintf(&d, "%d %.6g\n", (int)lastT, num(x, "memory.peak") / 1073741824.0);
        }
        bputs(&d, "\n\n");
        bprintf(&p, "%s'memory.dat' index %d using 1:2 with linespoints lw 2 pt 7 title ", k ? ", " : "plot ", k);
        gp_quote(&p, s[k].key);
    }
    free(s);
    bwrite(&d, dir, "memory.dat");
    bputs(&g, "set title 'Peak memory vs sequence length, per model and batch'\nset logscale x 2\n"
              "set xlabel 'T (tokens per row)'\nset ylabel 'GiB'\nset yrange [0:*]\nset grid\nset key outside right\n");
    gp_emit(&g, "memory", p.s);
    free(p.s), memset(&p, 0, sizeof p);
    nplots++;

    static const char *const mcat[] = {"parameters", "gradients", "optimizer", "activations", "workspace"};
    bputs(&d, "# label parameters gradients optimizer activations workspace (GiB)\n");
    json_array_foreach(cfgs, i, c) {
        if (!is_ok(c)) continue;
        gp_quote(&d, str(c, "label"));
        for (int k = 0; k < 5; k++) bprintf(&d, " %.6g", num(json_object_get(c, "memory"), mcat[k]) / 1073741824.0);
        bputs(&d, "\n");
    }
    bwrite(&d, dir, "memory_breakdown.dat");
    bputs(&g, "set title 'Memory by category'\nset style data histograms\nset style histogram rowstacked\n"
              "set style fill solid 0.85 border -1\nset boxwidth 0.75\nset ylabel 'GiB'\n"
              "set xtics rotate by -40 left font ',8'\nset key outside right\nset grid ytics\n");
    bputs(&p, "plot 'memory_breakdown.dat' using 2:xtic(1) title 'parameters', '' using 3 title 'gradients', "
              "'' using 4 title 'optimizer', '' using 5 title 'activations', '' using 6 title 'workspace'");
    gp_emit(&g, "memory_breakdown", p.s);
    free(p.s), memset(&p, 0, sizeof p);
    nplots++;

    // rooflines: every op of one configuration, labelled; and every op of every configuration by category
    if (bw > 0 && peak > 0) {
        int f = focus_config(cfgs);
        Buf all = {0};
        bputs(&d, "# intensity (FLOP/byte), achieved GFLOP/s, label\n");
        bputs(&all, "# intensity, GFLOP/s, category index, config index\n");
        double xmin = 1e30, xmax = 0;
        json_array_foreach(cfgs, i, c) {
            if (!is_ok(c)) continue;
            size_t j;
            json_t *o;
            json_array_foreach(json_object_get(c, "ops"), j, o) {
                double ai = num(o, "intensity"), fl = num(o, "flops_per_s");
                if (!(ai > 0) || !(fl > 0)) continue;
                if (ai < xmin) xmin = ai;
                if (ai > xmax) xmax = ai;
                int ci = 0;
                while (op_categories[ci] && strcmp(op_categories[ci], str(o, "category"))) ci++;
                bprintf(&all, "%.6g %.6g %d %d\n", ai, fl * 1e-9, ci + 1, (int)i);
                if ((int)i == f) {
                    bprintf(&d, "%.6g %.6g ", ai, fl * 1e-9);
                    gp_quote(&d, str(o, "region"));
                    bputs(&d, "\n");
                }
            }
        }
        bwrite(&d, dir, "roofline.dat");
        bwrite(&all, dir, "roofline_all.dat");
        if (xmax > 0) {
            double lo = fmin(xmin / 4, 0.05), hi = fmax(xmax * 4, 4 * peak / bw);
            char set[1024];
            snprintf(set, sizeof set,
                     "set logscale xy\nset xlabel 'arithmetic intensity (FLOP/byte)'\nset ylabel 'GFLOP/s'\nset grid\n"
                     "set key outside right\nset samples 400\nBW = %.6g\nPEAK = %.6g\nVEC = %.6g\n"
                     "roof(x) = x*BW < PEAK ? x*BW : PEAK\nroofv(x) = x*BW < VEC ? x*BW : VEC\n"
                     "set xrange [%.6g:%.6g]\n",
                     bw * 1e-9, peak * 1e-9, vec > 0 ? vec * 1e-9 : peak * 1e-9, lo, hi);
            bprintf(&g, "set title ");
            gp_quote(&g, f >= 0 ? str(json_array_get(cfgs, f), "label") : "");
            bprintf(&g, "\n%s", set);
            gp_emit(&g, "roofline",
                    "plot roof(x) with lines lw 2 lc rgb '#444444' title 'roofline (measured copy, GEMM)', "
                    "roofv(x) with lines lw 1 dt 2 lc rgb '#444444' title 'vector FMA ceiling', "
                    "'roofline.dat' using 1:2 with points pt 7 ps 1.3 lc rgb '#d62728' title 'ops', "
                    "'' using 1:2:3 with labels offset 0.8,0.6 left font ',8' notitle");
            bprintf(&g, "set title 'Every op of every configuration'\n%s", set);
            bputs(&p, "plot roof(x) with lines lw 2 lc rgb '#444444' title 'roofline', "
                      "roofv(x) with lines lw 1 dt 2 lc rgb '#444444' title 'vector FMA'");
            for (int k = 0; op_categories[k]; k++)
                bprintf(&p, ", 'roofline_all.dat' using 1:($3==%d ? $2 : 1/0) with points pt 7 ps 0.9 lc rgb '%s' title '%s'",
                        k + 1, cat_color[k], op_categories[k]);
            gp_emit(&g, "roofline_all", p.s);
            free(p.s), memset(&p, 0, sizeof p);
            nplots += 2;
        }
    }
    // the card over the run (bench's nvml_samples.csv): what the clocks did while each configuration's steps ran
    json_t *nv = json_object_get(root, "nvml");
    char samples[4200];
    snprintf(samples, sizeof samples, "%s/nvml_samples.csv", dir);
    if (json_is_true(json_object_get(nv, "available")) && access(samples, R_OK) == 0) {
        const double maxsm = num(nv, "max_sm_mhz") > 0 ? num(nv, "max_sm_mhz") : 2000, lim = num(nv, "power_limit_w");
        bprintf(&g, "set title 'SM clock and board power over the run'\nset datafile separator ','\n"
                    "set xlabel 'seconds since sampling began'\nset ylabel 'SM clock (MHz)'\nset y2label 'board power (W)'\n"
                    "set ytics nomirror\nset y2tics\nset yrange [0:%.0f]\nset y2range [0:%.0f]\nset grid\n"
                    "set key below maxrows 3\n",
                maxsm * 1.12, (lim > 0 ? lim : 800) * 1.12);
        bprintf(&p, "plot 'nvml_samples.csv' skip 1 using 1:($2 >= 0 ? $3 : 1/0) with points pt 7 ps 0.5 "
                    "lc rgb '#1f77b4' title 'SM clock, timed steps', "
                    "'' skip 1 using 1:($2 < 0 ? $3 : 1/0) with points pt 7 ps 0.4 lc rgb '#aaaaaa' "
                    "title 'SM clock, other (ceilings, setup, warm-up, profiled steps)', "
                    "'' skip 1 using 1:5 axes x1y2 with lines lw 1.5 lc rgb '#ff7f0e' title 'board power (NVML)', "
                    "'' skip 1 using 1:($11 == 1 ? %.0f : 1/0) with points pt 5 ps 0.35 lc rgb '#d62728' "
                    "title 'power cap holding the clock', "
                    "%.0f with lines dt 2 lc rgb '#1f77b4' title 'max SM clock'",
                maxsm * 1.06, maxsm);
        if (lim > 0) bprintf(&p, ", %.1f axes x1y2 with lines dt 2 lc rgb '#ff7f0e' title 'power limit'", lim);
        gp_emit(&g, "clocks", p.s);
        free(p.s), memset(&p, 0, sizeof p);
        nplots++;
    }
    bwrite(&g, dir, "plots.gp");
    return nplots;
}

// Runs `gnuplot plots.gp` in dir with its output in gnuplot.log. 0 ok, 127 gnuplot missing, else its status.
static int run_gnuplot(const char *dir) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
        execlp("gnuplot", "gnuplot", "plots.gp", (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// ---------------------------------------------------------------------------------------------------------------
// HTML

static void html_esc(Buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
            case '<': bputs(b, "&lt;"); break;
            case '>': bputs(b, "&gt;"); break;
            case '&': bputs(b, "&amp;"); break;
            case '"': bputs(b, "&quot;"); break;
            default: bprintf(b, "%c", *s);
        }
    }
}

// The SVG file's <svg ...> element (without the XML prolog and doctype), or NULL.
static char *read_svg(const char *dir, const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.svg", dir, name);
    size_t n;
    char *s = pm_read_file(path, &n);
    if (!s) return NULL;
    char *start = strstr(s, "<svg");
    if (!start) {
        free(s);
        return NULL;
    }
    memmove(s, start, strlen(start) + 1);
    return s;
}

static const char *const html_css =
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f0f0f0;cursor:pointer}"
    "td.l,th.l{text-align:left}tr.skipped td{color:#999}.plot svg{max-width:100%;height:auto}"
    ".note{background:#fff6d5;border:1px solid #e0c060;padding:8px;margin:8px 0}"
    "code{background:#f4f4f4;padding:1px 4px}details{margin:4px 0}h2{margin-top:32px}";

// Builds the tables from the embedded results (sortable, one <tr data-config> per configuration).
static const char *const html_js =
    "const R=JSON.parse(document.getElementById('results').textContent);\n"
    "const f=(x,d)=>(x===null||x===undefined||Number.isNaN(x))?'':(typeof x==='number'?x.toFixed(d):x);\n"
    "const g=(o,p)=>p.split('.').reduce((a,k)=>a==null?undefined:a[k],o);\n"
    "const GiB=x=>x===undefined?undefined:x/1073741824;\n"
    "const cats=['scan','conv','in_proj','x_proj','dt_proj','out_proj','norm','classifier','embedding','optimizer','other'];\n"
    "const cols=[['#','index',0,1],['configuration','label',null,0],['status','status',null,0],\n"
    " ['params (M)',c=>g(c,'model.n_params')/1e6,1,1],['policy','policy',null,0],['B','B',0,1],['T','T',0,1],\n"
    " ['fill %',c=>100*c.fill,1,1],['tokens/s','tok_per_s',0,1],['step ms (median)','step_ms.median',3,1],\n"
    " ['p10','step_ms.p10',3,1],['p90','step_ms.p90',3,1],['MFU %',c=>100*c.mfu,2,1],\n"
    " ['scan %',c=>c.categories?100*c.categories.scan.ms/c.profiled_step_ms:undefined,1,1],\n"
    " ['top op',c=>{if(!c.categories)return '';let b='',m=-1;for(const k of cats){const v=c.categories[k].ms;if(v>m){m=v;b=k;}}return b;},null,0],\n"
    " ['peak GiB',c=>GiB(g(c,'memory.peak')),2,1],['act GiB',c=>GiB(g(c,'memory.activations')),2,1],\n"
    " ['SM MHz',c=>g(c,'nvml.sm_mhz.mean'),0,1],['power W',c=>g(c,'nvml.power_w.mean'),0,1],\n"
    " ['power-capped %',c=>{const v=g(c,'nvml.power_capped');return v==null?undefined:100*v;},0,1],\n"
    " ['tokens/J',c=>g(c,'energy.tokens_per_j'),0,1],['loss',c=>c.loss_last,3,1]];\n"
    "const val=(c,k)=>typeof k==='function'?k(c):g(c,k);\n"
    "function table(rows,el){const t=document.getElementById(el);t.innerHTML='';const h=t.createTHead().insertRow();\n"
    " cols.forEach((col,i)=>{const th=document.createElement('th');th.textContent=col[0];if(!col[3])th.className='l';\n"
    "  th.onclick=()=>{const dir=t.dataset.sort==i?-1:1;t.dataset.sort=dir>0?i:'';\n"
    "   table(rows.slice().sort((a,b)=>{const x=val(a,col[1]),y=val(b,col[1]);return (x>y?1:x<y?-1:0)*dir;}),el);};h.appendChild(th);});\n"
    " const b=t.createTBody();for(const c of rows){const r=b.insertRow();r.dataset.config=c.label;r.id='cfg-'+c.index;\n"
    "  if(c.status!=='ok')r.className='skipped';\n"
    "  for(const col of cols){const d=r.insertCell();const v=val(c,col[1]);d.textContent=col[2]===null?(v==null?'':v):f(v,col[2]);if(!col[3])d.className='l';}}}\n"
    "table(R.configs,'configs');\n"
    "const det=document.getElementById('details');\n"
    "for(const c of R.configs){if(c.status!=='ok')continue;const d=document.createElement('details');\n"
    " d.innerHTML='<summary></summary>';d.firstChild.textContent=c.label+': '+f(c.tok_per_s,0)+' tok/s, step '+f(c.step_ms.median,3)+' ms';\n"
    " const t=document.createElement('table');d.appendChild(t);\n"
    " const h=['op','calls','ms/step','% of step','GFLOP','MB','FLOP/byte','GFLOP/s','GB/s','Gexp/s','bound','floor ms','% of floor'];\n"
    " const hr=t.createTHead().insertRow();h.forEach((x,i)=>{const th=document.createElement('th');th.textContent=x;if(!i)th.className='l';hr.appendChild(th);});\n"
    " const b=t.createTBody();for(const o of c.ops){const r=b.insertRow();r.dataset.op=o.region;\n"
    "  [o.region,f(o.calls,0),f(o.ms,3),f(100*o.ms/c.profiled_step_ms,1),f(o.flops/1e9,3),f(o.bytes/1e6,2),f(o.intensity,2),\n"
    "   f(o.flops_per_s/1e9,1),f(o.bytes_per_s/1e9,1),f(o.exps_per_s/1e9,1),o.bound||'',f(o.floor_ms,3),f(100*o.roof_fraction,1)].forEach((x,i)=>{const e=r.insertCell();e.textContent=x;if(!i)e.className='l';});}\n"
    " const r=b.insertRow();['other (not in any op)','',f(c.other_ms,3),f(100*c.other_ms/c.profiled_step_ms,1)].forEach((x,i)=>{const e=r.insertCell();e.textContent=x;if(!i)e.className='l';});\n"
    " const m=document.createElement('p');const mm=c.memory;\n"
    " m.textContent='memory (GiB): parameters '+f(GiB(mm.parameters),3)+', gradients '+f(GiB(mm.gradients),3)+', optimizer '+f(GiB(mm.optimizer),3)+\n"
    "  ', activations '+f(GiB(mm.activations),3)+' (of which backward scratch '+f(GiB(mm.activation_grads),3)+'), workspace '+f(GiB(mm.workspace),3)+', peak '+f(GiB(mm.peak),3);\n"
    " d.appendChild(m);det.appendChild(d);}\n";

int report_write_html(const char *dir, json_t *root, int gnuplot) {
    int nplots = write_gnuplot(dir, root);
    int gp = nplots ? (gnuplot ? run_gnuplot(dir) : -2) : -3;
    Buf h = {0};
    bputs(&h, "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>packmamba bench</title><style>");
    bputs(&h, html_css);
    bputs(&h, "</style></head><body>\n<h1>packmamba bench</h1>\n<p>");
    json_t *dev = json_object_get(root, "device"), *ceil = json_object_get(root, "ceilings");
    bputs(&h, "Made ");
    html_esc(&h, str(root, "created"));
    bputs(&h, " by <code>");
    html_esc(&h, str(root, "command"));
    bputs(&h, "</code>.<br>Device: ");
    html_esc(&h, str(dev, "name"));
    bputs(&h, " (backend ");
    html_esc(&h, str(dev, "backend"));
    bprintf(&h, ", ACT %d bytes, F32 %d bytes", (int)num(dev, "act_bytes"), (int)num(dev, "f32_bytes"));
    if (num(dev, "threads") > 0) bprintf(&h, ", %d threads", (int)num(dev, "threads"));
    bputs(&h, "); op timing: ");
    html_esc(&h, str(dev, "timing"));
    bprintf(&h, ".<br>Ceilings measured at start: copy %.1f GB/s (", num(ceil, "copy_bytes_per_s") * 1e-9);
    html_esc(&h, str(ceil, "copy_method"));
    bprintf(&h, "), GEMM %.2f TFLOP/s (%s, %d&sup3;)", num(ceil, "gemm_flops_per_s") * 1e-12, str(ceil, "gemm_dtype"),
            (int)num(ceil, "gemm_mnk"));
    if (num(ceil, "exps_per_s") > 0) {
        bprintf(&h, ", vector %.2f TFLOP/s, exp %.1f G/s (", num(ceil, "vector_flops_per_s") * 1e-12,
                num(ceil, "exps_per_s") * 1e-9);
        html_esc(&h, str(ceil, "spin_method"));
        bputs(&h, ")");
    }
    bputs(&h, ".<br>");
    json_t *nv = json_object_get(root, "nvml");
    if (json_is_true(json_object_get(nv, "available"))) {
        bputs(&h, "NVML: ");
        html_esc(&h, str(nv, "device"));
        bprintf(&h, ", max SM clock %d MHz, max memory clock %d MHz", (int)num(nv, "max_sm_mhz"),
                (int)num(nv, "max_mem_mhz"));
        if (num(nv, "power_limit_w") > 0) bprintf(&h, ", power limit %.0f W", num(nv, "power_limit_w"));
        bprintf(&h, ", sampled every %d ms (nvml_samples.csv). A configuration that draws the power limit runs its "
                "SMs below the maximum clock (<i>power-capped %%</i>: the share of its samples in which NVML names the "
                "power cap as a clock event reason), and its GEMMs below the ceiling measured at the start.",
                (int)num(nv, "sample_ms"));
    } else {
        bputs(&h, "NVML: not available (");
        html_esc(&h, str(nv, "reason"));
        bputs(&h, "): no clocks or power.");
    }
    json_t *opt = json_object_get(root, "options");
    bprintf(&h, "<br>Per configuration: %d warm-up steps", (int)num(opt, "warmup"));
    if (num(opt, "warmup_s") > 0)
        bprintf(&h, " and at least %.1f s of them (each configuration's count is in results.json)", num(opt, "warmup_s"));
    bprintf(&h, ", then %d timed steps; data: ", (int)num(opt, "steps"));
    html_esc(&h, str(opt, "data"));
    bputs(&h, ".</p>\n<p>Data: <a href='results.csv'>results.csv</a>, <a href='results.json'>results.json</a>, "
              "<a href='ops.csv'>ops.csv</a> (every op of every configuration), <a href='trace.json'>trace.json</a> "
              "(one step per configuration as a Chrome trace: open it in <a href='https://ui.perfetto.dev'>Perfetto</a> "
              "or chrome://tracing)");
    if (json_is_true(json_object_get(nv, "available"))) bputs(&h, ", <a href='nvml_samples.csv'>nvml_samples.csv</a>");
    bputs(&h, ".</p>\n<p>Tokens/s counts real tokens (padding excluded). MFU = (6 &times; parameters + the selective "
              "scan's forward and backward FLOPs per token) &times; tokens/s / the measured GEMM rate. Per-op FLOPs and "
              "bytes are counted from the shapes (src/bench_cost.c). An op's floor is its busiest unit's time at that "
              "unit's measured ceiling: its GEMM FLOPs at the GEMM rate, its other FLOPs at the vector rate, its "
              "bytes at the copy bandwidth, its exps at the exp rate (the largest names its bound); % of floor is "
              "the floor over the op's time. Memory: parameters, gradients, optimizer and "
              "activations are what the model allocated; peak is the memory in use during a step beyond what was "
              "in use before the first model; workspace is the rest (backend buffers).</p>\n");

    bputs(&h, "<h2>Configurations</h2>\n<noscript><p class='note'>The tables are built by JavaScript from the "
              "embedded results; without it, read results.csv.</p></noscript>\n<table id='configs'></table>\n");
    bputs(&h, "<h2>Plots</h2>\n");
    if (gp == 0) {
        static const char *const names[] = {"throughput", "breakdown", "memory", "memory_breakdown", "roofline",
                                            "roofline_all", "clocks"};
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            char *svg = read_svg(dir, names[k]);
            if (!svg) continue;
            bprintf(&h, "<div class='plot' id='plot-%s'>%s<p><a href='%s.png'>%s.png</a> &middot; <a href='%s.svg'>%s.svg</a>"
                        "</p></div>\n",
                    names[k], svg, names[k], names[k], names[k], names[k]);
            free(svg);
        }
    } else if (gp == -3) {
        bputs(&h, "<p class='note'>No configuration completed: nothing to plot.</p>\n");
    } else {
        bputs(&h, "<p class='note'>");
        if (gp == 127) bputs(&h, "gnuplot was not found when this report was made, so there are no plots. ");
        else if (gp == -2) bputs(&h, "Plots were not made (--no-plots). ");
        else bprintf(&h, "gnuplot failed (exit status %d; see gnuplot.log). ", gp);
        bputs(&h, "The data (*.dat) and the script (plots.gp) are in this directory: run <code>gnuplot plots.gp</code> "
                  "there (Debian: <code>apt-get install gnuplot-nox</code>), or <code>packmamba bench --report DIR</code> "
                  "on a machine with gnuplot to remake this report with them.</p>\n");
    }
    bputs(&h, "<h2>Per-op detail</h2>\n<div id='details'></div>\n<script type='application/json' id='results'>");
    char *js = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
    for (const char *q = js; *q; q++) {
        if (q[0] == '<' && q[1] == '/') bputs(&h, "<\\/"), q++;  // "</script>" must not end the block early
        else bprintf(&h, "%c", *q);
    }
    free(js);
    bputs(&h, "</script>\n<script>\n");
    bputs(&h, html_js);
    bputs(&h, "</script>\n</body></html>\n");
    return bwrite(&h, dir, "report.html");
}
