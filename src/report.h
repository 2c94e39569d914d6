// report.h — bench's outputs from its results document (the JSON that results.json holds): CSV tables, gnuplot
// data and scripts (run when gnuplot is installed), and one self-contained report.html. Everything here works
// from the document alone, so `packmamba bench --report DIR` remakes them from a results.json measured elsewhere
// (e.g. on a GPU machine without gnuplot).
#pragma once
#include <jansson.h>

// results.json, results.csv (one row per configuration) and ops.csv (one row per configuration and op), each
// written atomically. 0 or -1 with pm_error.
int report_write_data(const char *dir, json_t *root);
// plots/*.dat + plots.gp, then `gnuplot plots.gp` in dir when run_gnuplot and gnuplot exists (PNG + SVG of:
// throughput vs T, per-op breakdown, memory vs T and B, memory by category, rooflines), then report.html with the
// SVGs inlined. 0 or -1 with pm_error (a missing or failing gnuplot is reported in the HTML, not an error).
int report_write_html(const char *dir, json_t *root, int run_gnuplot);
