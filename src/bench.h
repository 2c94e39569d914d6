// bench.h — `packmamba bench`: the characterization harness. Sweeps model shape x sequence length x batch x
// batching policy on one device and measures, per configuration: tokens/s, step time (median and spread), time
// per op (forward and backward) with each op's FLOP/s and bytes/s against ceilings measured at start, memory by
// category and peak, GPU clocks and power (NVML), MFU. Writes results.csv, results.json, ops.csv, trace.json
// (Chrome trace of one step per configuration), gnuplot plots and report.html into --out (report.h).
#pragma once
#include <stdint.h>

#include "batch.h"
#include "util.h"

// Batching policies: the batcher's (batcher.h: single 0, pad 1, pack 2) plus `fixed`, synthetic rows of T tokens
// holding one document each (the fixed-length training of most benchmarks).
enum { BENCH_POLICY_FIXED = 3 };
const char *bench_policy_name(int policy);
int bench_policy_parse(const char *name);  // -1 if unknown

typedef struct {
    char preset[32];  // preset the shape came from ("" for fully explicit shapes)
    int n_layer, d_model, d_state;
    int T, B, policy;
    int tokens;       // > 0: B was derived from this many tokens per step (bench_expand's tokens)
    char data[512];   // prepared data directory of this configuration; "" = the run's --data (or synthetic)
} BenchConfig;

// A sweep: the cross product of the lists, in this order (outermost first): preset, n_layer, d_model, d_state,
// seq_len, batch, policy. Empty n_layer/d_model/d_state lists keep the preset's value. Lists are
// comma-separated ("512,1024"); integers accept a K suffix (16K = 16384). tokens > 0 replaces the batch list:
// B = max(1, tokens / T), so every T gets the same tokens per step. Returns the number of configurations
// appended to *out (realloc'd, *n updated), or -1 with pm_error set.
int bench_expand(const char *presets, const char *n_layers, const char *d_models, const char *d_states,
                 const char *seq_lens, const char *batches, int tokens, const char *policies, BenchConfig **out,
                 int *n);
// A JSON sweep file: {"steps": 10, ..., "sweeps": [{"preset": "130m", "seq_len": [512, 1024], "batch": 8,
// "policy": ["pack", "pad"]}, ...]} — each entry of "sweeps" (or the top level when there is none) is expanded as
// above; values are numbers, strings or arrays of them; an entry may also give "tokens" (tokens per step, instead
// of "batch") and "data" (a prepared data directory for its configurations). Top-level "steps", "warmup",
// "profile_steps", "vocab", "device" and "data" override the command line's. Returns 0 or -1 with pm_error naming
// the file and the problem.
typedef struct {
    int steps, warmup, profile_steps, vocab;
    char device[16];
    char data[1024];
} BenchFileOptions;  // fields the file did not set are left as they were
int bench_parse_sweep_file(const char *path, BenchConfig **out, int *n, BenchFileOptions *opt);

// Synthetic documents: lengths from a lognormal with median 398 and mean 640 (DESIGN §3), at least 2 and at most
// 4096 tokens.
int bench_synth_doc_len(PmRng *r);
// Fills b (from batch_alloc(B, T)) with one synthetic batch of `policy` using random tokens in [0, vocab).
// State (the stream of documents still to place) lives in *s; zero it before the first call.
typedef struct {
    PmRng rng;
    int next_doc;
    int *pool, *pool_doc, *pool_last, pool_n;  // pending pieces: length, document, is-final-piece
    int carry_len, carry_doc;  // rest of a document longer than T still to cut into pieces
} BenchSynth;
void bench_synth_batch(BenchSynth *s, Batch *b, int policy, int B, int T, int vocab);
void bench_synth_free(BenchSynth *s);

// The subcommand: argv[0] = "bench". Returns the exit code.
int cmd_bench(int argc, char **argv);
