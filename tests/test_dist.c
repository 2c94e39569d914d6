// test_dist.c — data-parallel training (dist.h) on the CPU backend.
//   In process: shard ranges and clipped optimizer segments partition the parameters exactly; the tensors whose
//   F32 masters the sharded step leaves stale on non-owners are never read by the model; the batcher's rank
//   split (world 2) serves, between the two ranks, exactly the rows of the single-process global batch, covers every token of
//   every document once per epoch, and balances real tokens within 2%; a batcher position saved by 2 ranks
//   resumes on 1 rank at the same global batch.
//   Through mpirun ($PM_BIN, skipped when mpirun is absent): 2 ranks x --batch 2 (and 2 ranks x --batch 1 x
//   --grad-accum 2) give the same per-step losses as 1 process x --batch 4 (1e-6 relative, from metrics.jsonl);
//   a run checkpointed by 2 ranks continues on 1 rank with the same losses, and one checkpointed by 1 process
//   continues on 2 ranks; the same with --carry-state (the carried state kept per rank, gathered into the
//   checkpoint's global rows); a rank that fails brings the whole job down with a message naming it; train's energy
//   report sums the ranks' distinct cards (a stand-in NVML library); on a GPU machine, more ranks than GPUs on a
//   host are refused at once.
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend.h"
#include "batcher.h"
#include "dist.h"
#include "model.h"
#include "shard.h"
#include "shell.h"
#include "util.h"

static char g_dir[256];  // temp directory holding in/ (text) and data/ (prepared)
static char g_data[320];

// A corpus of varied documents (5..160 words; a few long ones are cut into pieces at T = 128), prepared with the
// byte tokenizer.
static int setup_corpus(void **state) {
    const char *bin = getenv("PM_BIN");
    snprintf(g_dir, sizeof g_dir, "/tmp/pm_test_dist_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/in", g_dir);
    if (sh("mkdir -p '%s'", path) != 0) return -1;
    static const char *words[] = {"state", "space", "model", "mamba", "packs", "rows", "the", "of", "scan",
                                  "conv", "gradient", "rank", "token", "document", "a", "loss"};
    PmRng rng;
    pm_rng_seed(&rng, 7);
    for (int d = 0; d < 150; d++) {
        snprintf(path, sizeof path, "%s/in/d%03d.txt", g_dir, d);
        FILE *f = fopen(path, "w");
        if (!f) return -1;
        int n = 5 + (int)(pm_rng_u64(&rng) % (d % 10 == 0 ? 160 : 60));
        for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? " " : "", words[pm_rng_u64(&rng) % 16]);
        fprintf(f, ".\n");
        fclose(f);
    }
    snprintf(g_data, sizeof g_data, "%s/data", g_dir);
    if (bin && sh("'%s' prepare --out '%s' '%s/in' > /dev/null 2>&1", bin, g_data, g_dir) == 0) return 0;
    fprintf(stderr, "test_dist: cannot prepare a corpus (PM_BIN=%s)\n", bin ? bin : "(unset)");
    return -1;
}

static int teardown_corpus(void **state) {
    if (g_dir[0] && !getenv("PM_KEEP_TMP")) pm_remove_tree(g_dir);
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// in process

static void test_shards_partition_parameters(void **state) {
    ModelConfig c;
    assert_int_equal(config_preset("tiny", 257, &c), 0);
    int nt = model_param_infos(&c, NULL);
    ParamInfo *pi = calloc(nt, sizeof *pi);
    model_param_infos(&c, pi);
    size_t n = model_num_params(&c);
    ParamSegment *segs = calloc(nt, sizeof *segs), *clip = calloc(nt, sizeof *clip);
    for (int i = 0; i < nt; i++) segs[i] = (ParamSegment){pi[i].offset, pi[i].size, pi[i].decay};
    int *owner = malloc(n * sizeof(int)), *decay = malloc(n * sizeof(int));
    for (int world = 1; world <= 7; world++) {
        for (size_t k = 0; k < n; k++) owner[k] = -1, decay[k] = -1;
        size_t prev_hi = 0, smin = n, smax = 0;
        for (int r = 0; r < world; r++) {
            size_t lo, hi;
            dist_shard_range(n, r, world, &lo, &hi);
            assert_int_equal(lo, prev_hi);  // contiguous, in rank order
            prev_hi = hi;
            if (hi - lo < smin) smin = hi - lo;
            if (hi - lo > smax) smax = hi - lo;
            int k = dist_clip_segments(segs, nt, lo, hi, clip);
            for (int s = 0; s < k; s++) {
                assert_true(clip[s].offset >= lo && clip[s].offset + clip[s].size <= hi);
                for (size_t e = clip[s].offset; e < clip[s].offset + clip[s].size; e++) {
                    assert_int_equal(owner[e], -1);  // never updated by two ranks
                    owner[e] = r, decay[e] = clip[s].decay;
                }
            }
        }
        assert_int_equal(prev_hi, n);
        assert_true(smax - smin <= 1);
        // Every parameter is updated by exactly one rank, with its tensor's decay flag.
        for (int i = 0; i < nt; i++)
            for (size_t e = pi[i].offset; e < pi[i].offset + pi[i].size; e++) {
                assert_true(owner[e] >= 0);
                assert_int_equal(decay[e], pi[i].decay);
            }
    }
    free(owner), free(decay), free(pi), free(segs), free(clip);
}

// With a separate compute copy, ranks other than a range's owner keep stale F32 masters of every tensor that
// dist_is_f32_operand calls 0 (they get only the compute copy). Check that claim against what the model actually
// reads: give the CPU model a separate compute copy, poison exactly those masters with NaN, and the forward and
// backward must give bit-identical loss and gradients.
static void test_f32_operands_are_what_the_model_reads(void **state) {
    ModelConfig c;
    assert_int_equal(config_preset("tiny", 257, &c), 0);
    const Backend *bk = backend_cpu();
    Model m;
    model_create(&m, &c, bk, 42);
    const int B = 2, T = 24;
    model_alloc_activations(&m, B, T);
    Batch b = batch_alloc(B, T);
    PmRng rng;
    pm_rng_seed(&rng, 9);
    for (int k = 0; k < B * T; k++) {
        b.tokens[k] = (int32_t)(pm_rng_u64(&rng) % 257);
        b.pos[k] = k % 12;  // two documents per row
        b.targets[k] = k % 12 == 11 ? PM_IGNORE : (int32_t)(pm_rng_u64(&rng) % 257);
        b.doc[k] = k / 12;
    }
    batch_count_valid(&b);
    size_t n = m.n_params;
    float *g_ref = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    model_zero_grad(&m);
    double ref = model_forward_backward(&m, &b, 1.0f / (float)b.n_valid, NULL);
    model_get_grads(&m, g_ref);
    // Separate compute copy, then NaN in the masters the ops should never read.
    void *act = bk->alloc(n * bk->act_bytes);
    bk->f32_to_act(act, m.params, n);
    m.params_act = act;
    int poisoned = 0, kept = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        if (dist_is_f32_operand(&m, t)) {
            kept++;
            continue;
        }
        real *p = (real *)m.params + m.tensors[t].offset;
        for (size_t i = 0; i < m.tensors[t].size; i++) p[i] = NAN;
        poisoned++;
    }
    assert_int_equal(poisoned, 1 + 4 * c.n_layer);  // embedding and 4 matrices per layer
    assert_int_equal(kept, 1 + 6 * c.n_layer);      // norm_f and 6 per-channel tensors per layer
    model_zero_grad(&m);
    double loss = model_forward_backward(&m, &b, 1.0f / (float)b.n_valid, NULL);
    model_get_grads(&m, g);
    assert_true(loss == ref);
    assert_memory_equal(g, g_ref, n * sizeof(float));
    free(g_ref), free(g);
    batch_free(&b);
    model_destroy(&m);
}

static int same_rows(const Batch *a, int row0, const Batch *b) {
    if (a->T != b->T) return 0;
    size_t off = (size_t)row0 * a->T, n = (size_t)b->B * b->T;
    return memcmp(a->tokens + off, b->tokens, n * 4) == 0 && memcmp(a->pos + off, b->pos, n * 4) == 0 &&
           memcmp(a->targets + off, b->targets, n * 4) == 0 && memcmp(a->doc + off, b->doc, n * 4) == 0;
}

// One epoch of `policy` on 2 ranks (B rows each) against 1 rank (2B rows). Returns the real tokens per rank.
static void split_epoch(int policy, int B, int T, int64_t real[2]) {
    Batcher *one = batcher_open(g_data, PM_SPLIT_TRAIN, policy, 2 * B, T, 11, 0, 1, 0);
    Batcher *r0 = batcher_open(g_data, PM_SPLIT_TRAIN, policy, B, T, 11, 0, 2, 0);
    Batcher *r1 = batcher_open(g_data, PM_SPLIT_TRAIN, policy, B, T, 11, 1, 2, 0);
    assert_non_null(one), assert_non_null(r0), assert_non_null(r1);
    assert_int_equal(batcher_epoch_batches(r0), batcher_epoch_batches(r1));
    Shard sh;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_data, PM_SHARD_FILE);
    assert_int_equal(shard_open(&sh, path), 0);
    int64_t *count = calloc(sh.n_docs, sizeof(int64_t));
    Batch b1 = batch_alloc(2 * B, T), b[2] = {batch_alloc(B, T), batch_alloc(B, T)};
    real[0] = real[1] = 0;
    int end0, end1, batches = 0;
    do {
        end0 = batcher_next(r0, &b[0]);
        end1 = batcher_next(r1, &b[1]);
        assert_int_equal(end0, end1);  // ranks stay in lock step
        int ones_rows = 0;
        if (policy == PM_POLICY_PACK) {
            batcher_next(one, &b1);
            ones_rows = b1.B;
        }
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < b[r].B * b[r].T; k++)
                if (b[r].doc[k] >= 0) real[r]++, count[b[r].doc[k]]++;
        }
        if (policy == PM_POLICY_PACK) {
            // The two ranks together serve exactly the rows of the single-process global batch (each row once,
            // dealt by tokens), at most B each, or padding when there is nothing left.
            int used[64] = {0}, served = 0;
            assert_true(ones_rows <= 64);
            for (int r = 0; r < 2; r++) {
                assert_true(b[r].B <= B);
                if (b[r].n_valid == 0 && b[r].B == 1 && b[r].T == 1) continue;
                for (int i = 0; i < b[r].B; i++) {
                    Batch row = b[r];
                    row.B = 1;
                    row.tokens += (size_t)i * row.T, row.pos += (size_t)i * row.T;
                    row.targets += (size_t)i * row.T, row.doc += (size_t)i * row.T;
                    int found = -1;
                    for (int k = 0; k < ones_rows && found < 0; k++)
                        if (!used[k] && same_rows(&b1, k, &row)) found = k;
                    assert_true(found >= 0);
                    used[found] = 1;
                    served++;
                }
            }
            assert_int_equal(served, ones_rows);
        }
        batches++;
    } while (!end0);
    assert_int_equal(batches, batcher_epoch_batches(r0));
    // Every token of every training document exactly once across the ranks.
    for (uint64_t d = 0; d < sh.n_docs; d++)
        assert_int_equal(count[d], sh.split[d] == 1 ? (int64_t)shard_doc_len(&sh, d) : 0);
    free(count);
    batch_free(&b1), batch_free(&b[0]), batch_free(&b[1]);
    shard_close(&sh);
    batcher_close(one), batcher_close(r0), batcher_close(r1);
}

static void test_rank_split_pack(void **state) {
    int64_t real[2];
    split_epoch(PM_POLICY_PACK, 2, 128, real);
    double mean = 0.5 * (double)(real[0] + real[1]);
    printf("pack, 2 ranks: real tokens %lld / %lld (%.2f%% apart)\n", (long long)real[0], (long long)real[1],
           100.0 * fabs((double)(real[0] - real[1])) / mean);
    assert_true(fabs((double)(real[0] - real[1])) <= 0.02 * mean);
}

static void test_rank_split_pad(void **state) {
    int64_t real[2];
    split_epoch(PM_POLICY_PAD, 4, 128, real);
    double mean = 0.5 * (double)(real[0] + real[1]);
    printf("pad, 2 ranks: real tokens %lld / %lld (%.2f%% apart)\n", (long long)real[0], (long long)real[1],
           100.0 * fabs((double)(real[0] - real[1])) / mean);
    assert_true(fabs((double)(real[0] - real[1])) <= 0.02 * mean);
}

// A position saved by rank 0 of 2 ranks x B=2 resumes a 1-rank x B=4 batcher at the same global batch; a
// different global batch is refused with the --batch that would work.
static void test_position_across_world_sizes(void **state) {
    Batcher *r0 = batcher_open(g_data, PM_SPLIT_TRAIN, PM_POLICY_PACK, 2, 128, 5, 0, 2, 0);
    Batch b2 = batch_alloc(2, 128), b4 = batch_alloc(4, 128), ref = batch_alloc(4, 128);
    for (int i = 0; i < 7; i++) batcher_next(r0, &b2);
    uint64_t pos[8], bad[8];
    batcher_get_position(r0, pos);
    memcpy(bad, pos, sizeof pos);
    Batcher *one = batcher_open(g_data, PM_SPLIT_TRAIN, PM_POLICY_PACK, 4, 128, 5, 0, 1, 0);
    Batcher *fresh = batcher_open(g_data, PM_SPLIT_TRAIN, PM_POLICY_PACK, 4, 128, 5, 0, 1, 0);
    assert_int_equal(dist_adapt_position(pos, 4, 0, 1), 0);
    assert_int_equal(batcher_set_position(one, pos), 0);
    for (int i = 0; i < 8; i++) batcher_next(fresh, &ref);  // the 8th global batch, counted from the start
    batcher_next(one, &b4);
    assert_int_equal(b4.B, ref.B);
    assert_true(same_rows(&ref, 0, &b4));
    assert_int_equal(dist_adapt_position(bad, 3, 0, 1), -1);
    assert_non_null(strstr(pm_last_error(), "--batch 4"));
    batch_free(&b2), batch_free(&b4), batch_free(&ref);
    batcher_close(r0), batcher_close(one), batcher_close(fresh);
}

// ---------------------------------------------------------------------------------------------------------------
// through mpirun

static int have_mpirun(void) {
    if (!getenv("PM_BIN") || sh("command -v mpirun > /dev/null 2>&1") != 0) return 0;
    // OpenMPI refuses to run as root without these; harmless otherwise.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);  // two ranks on a small machine; also the same threads for every run
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return 1;
}

// (Under `make test-sanitize` the ranks' leak check is off: Open MPI's own allocations, many from plugins it has
// unloaded by exit, cannot be told apart from ours; single-process runs keep it.)
#define MPIRUN "ASAN_OPTIONS=detect_leaks=0 timeout 300 mpirun --oversubscribe --bind-to none"
#define TRAIN_ARGS "train --data '%s' --seq-len 128 --warmup 2 --min-lr-frac 1 --log-every 0 --seed 3"

// Per-step losses of a run directory's metrics.jsonl (steps 1..n in order).
static int read_losses(const char *run, double *loss, int max) {
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "step")), n + 1);
        if (n < max) loss[n] = json_real_value(json_object_get(j, "loss"));
        n++;
        json_decref(j);
    }
    fclose(f);
    return n;
}

static void assert_same_losses(const double *a, const double *b, int first, int n) {
    for (int i = first; i < n; i++) {
        double rel = fabs(a[i] - b[i]) / fabs(a[i]);
        if (rel > 1e-6) fail_msg("step %d: loss %.9g vs %.9g (relative %.2e)", i + 1, a[i], b[i], rel);
    }
}

static void test_two_ranks_equal_one(void **state) {
    if (!have_mpirun()) skip();
    const char *bin = getenv("PM_BIN");
    char one[512], two[512];
    snprintf(one, sizeof one, "%s/one", g_dir);
    snprintf(two, sizeof two, "%s/two", g_dir);
    assert_int_equal(sh("'%s' " TRAIN_ARGS " --steps 10 --batch 4 --out '%s' > '%s.log' 2>&1", bin, g_data, one, one),
                     0);
    assert_int_equal(sh(MPIRUN " -np 2 '%s' " TRAIN_ARGS " --steps 10 --batch 2 --out '%s' > '%s.log' 2>&1", bin,
                        g_data, two, two),
                     0);
    double l1[10], l2[10], la[10];
    assert_int_equal(read_losses(one, l1, 10), 10);
    assert_int_equal(read_losses(two, l2, 10), 10);
    assert_true(l1[9] < l1[0] - 0.5);  // it trained (the comparison is not between two constant runs)
    assert_same_losses(l1, l2, 0, 10);
    printf("2 ranks x B2 vs 1 x B4: step 10 loss %.9f vs %.9f\n", l1[9], l2[9]);
    // The overlapped reduction (PM_DIST_OVERLAP=1: each layer's gradients reduced by bucket during the backward;
    // off by default since the fifteenth session) must give the same losses.
    double lo[10];
    snprintf(two, sizeof two, "%s/overlap", g_dir);
    assert_int_equal(sh("PM_DIST_OVERLAP=1 " MPIRUN " -np 2 '%s' " TRAIN_ARGS " --steps 10 --batch 2 --out '%s' "
                        "> '%s.log' 2>&1",
                        bin, g_data, two, two),
                     0);
    assert_int_equal(read_losses(two, lo, 10), 10);
    assert_same_losses(l1, lo, 0, 10);
    // Accumulation across ranks: 2 ranks x B1 x 2 micro-batches cover global batches 2s and 2s+1 of 2 rows each,
    // i.e. the same 4 rows per step as 1 x B4.
    snprintf(two, sizeof two, "%s/accum", g_dir);
    assert_int_equal(sh(MPIRUN " -np 2 '%s' " TRAIN_ARGS " --steps 10 --batch 1 --grad-accum 2 --out '%s' "
                        "> '%s.log' 2>&1",
                        bin, g_data, two, two),
                     0);
    assert_int_equal(read_losses(two, la, 10), 10);
    assert_same_losses(l1, la, 0, 10);
}

// A run of 5 steps started as `first` ("" or an mpirun prefix) with `flags1`, resumed as `second` with `flags2` up
// to step 10 (both after TRAIN_ARGS), in run directory `name`: its losses must be `want`'s.
static void check_resumed(const char *name, const char *first, const char *flags1, const char *second,
                          const char *flags2, const double *want) {
    const char *bin = getenv("PM_BIN");
    char run[512];
    double lr[10];
    snprintf(run, sizeof run, "%s/%s", g_dir, name);
    assert_int_equal(sh("%s '%s' " TRAIN_ARGS " %s --steps 5 --out '%s' > '%s.log' 2>&1", first, bin, g_data, flags1, run,
                        run),
                     0);
    assert_int_equal(sh("%s '%s' " TRAIN_ARGS " %s --steps 10 --resume --out '%s' >> '%s.log' 2>&1", second, bin, g_data,
                        flags2, run, run),
                     0);
    assert_int_equal(read_losses(run, lr, 10), 10);
    assert_same_losses(want, lr, 0, 10);
}

static void test_resume_two_ranks_on_one(void **state) {
    if (!have_mpirun()) skip();
    const char *bin = getenv("PM_BIN");
    char one[512], run[512];
    snprintf(one, sizeof one, "%s/one", g_dir);  // from test_two_ranks_equal_one (10 steps, 1 x B4)
    snprintf(run, sizeof run, "%s/resumed", g_dir);
    // (a 2-rank run with the overlap, whose checkpoint the single process resumes)
    assert_int_equal(sh("PM_DIST_OVERLAP=1 " MPIRUN " -np 2 '%s' " TRAIN_ARGS " --steps 5 --batch 2 --out '%s' "
                        "> '%s.log' 2>&1",
                        bin, g_data, run, run),
                     0);
    assert_int_equal(sh("'%s' " TRAIN_ARGS " --steps 10 --batch 4 --resume --out '%s' >> '%s.log' 2>&1", bin, g_data,
                        run, run),
                     0);
    double l1[10], lr[10];
    assert_int_equal(read_losses(one, l1, 10), 10);
    assert_int_equal(read_losses(run, lr, 10), 10);
    assert_same_losses(l1, lr, 0, 10);
    // And the other way: 1 process for 5 steps, then 2 ranks (saving checkpoints on the way, so that rank 0
    // gathers the moment ranges and every rank takes its range back, twice at step 8 with the best checkpoint).
    check_resumed("resumed12", "", "--batch 4", MPIRUN " -np 2", "--batch 2 --save-every 2 --val-every 4 --val-batches 1",
                  l1);
    // Resuming with a global batch that differs is refused, naming the --batch that fits.
    assert_int_not_equal(sh("'%s' " TRAIN_ARGS " --steps 12 --batch 2 --resume --out '%s' > '%s.bad' 2>&1", bin,
                            g_data, run, run),
                         0);
}

// Carried state across ranks: 2 ranks x B2 --carry-state give the losses of 1 process x B4 --carry-state (the
// batcher deals each global batch's row slots in order, so every chain of a long document stays in one row of one
// rank), also with the overlapped reduction; a run checkpointed by 2 ranks (every rank's carried state gathered
// into the global batch's rows) continues on 1 process with the same losses, and one checkpointed by 1 process on 2.
static void test_carry_two_ranks_equal_one(void **state) {
    if (!have_mpirun()) skip();
    const char *bin = getenv("PM_BIN");
    char one[512], run[512];
    snprintf(one, sizeof one, "%s/carry_one", g_dir);
    assert_int_equal(sh("'%s' " TRAIN_ARGS " --carry-state --steps 10 --batch 4 --out '%s' > '%s.log' 2>&1", bin,
                        g_data, one, one),
                     0);
    double l1[10], l2[10], lp[10];
    assert_int_equal(read_losses(one, l1, 10), 10);
    assert_true(l1[9] < l1[0] - 0.5);
    // (the control: without carrying, the same run's losses differ: the comparison below can tell)
    snprintf(run, sizeof run, "%s/carry_plain", g_dir);
    assert_int_equal(sh("'%s' " TRAIN_ARGS " --steps 10 --batch 4 --out '%s' > '%s.log' 2>&1", bin, g_data, run, run), 0);
    assert_int_equal(read_losses(run, lp, 10), 10);
    int differ = 0;
    for (int i = 0; i < 10; i++) differ += fabs(lp[i] - l1[i]) > 1e-4 * fabs(l1[i]);
    assert_true(differ > 0);
    for (int overlap = 0; overlap < 2; overlap++) {
        snprintf(run, sizeof run, "%s/carry_two%d", g_dir, overlap);
        assert_int_equal(sh("PM_DIST_OVERLAP=%d " MPIRUN " -np 2 '%s' " TRAIN_ARGS " --carry-state --steps 10 --batch 2 "
                            "--out '%s' > '%s.log' 2>&1",
                            overlap, bin, g_data, run, run),
                         0);
        assert_int_equal(read_losses(run, l2, 10), 10);
        assert_same_losses(l1, l2, 0, 10);
    }
    printf("carried state, 2 ranks x B2 vs 1 x B4: step 10 loss %.9f vs %.9f\n", l2[9], l1[9]);
    // 2 ranks for 5 steps, then 1 process; 1 process for 5 steps, then 2 ranks
    check_resumed("carry_resumed21", MPIRUN " -np 2", "--carry-state --batch 2", "", "--carry-state --batch 4", l1);
    check_resumed("carry_resumed12", "", "--carry-state --batch 4", MPIRUN " -np 2", "--carry-state --batch 2", l1);
}

static void test_failing_rank_aborts_job(void **state) {
    if (!have_mpirun()) skip();
    const char *bin = getenv("PM_BIN");
    char run[512], log[600];
    snprintf(run, sizeof run, "%s/fail", g_dir);
    snprintf(log, sizeof log, "%s.log", run);
    // Rank 1 is given a data directory that does not exist: it dies while rank 0 waits in its first collective.
    double t0 = pm_now();
    int rc = sh(MPIRUN " -np 1 '%s' " TRAIN_ARGS " --steps 50 --batch 2 --out '%s' : -np 1 '%s' " TRAIN_ARGS
                       " --steps 50 --batch 2 --out '%s' > '%s' 2>&1",
                bin, g_data, run, bin, "/nonexistent/pm_data", run, log);
    double secs = pm_now() - t0;
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, 124);  // not the timeout: the job went down by itself
    assert_true(secs < 120);
    size_t n;
    char *text = pm_read_file(log, &n);
    assert_non_null(text);
    if (!strstr(text, "packmamba: rank 1: ")) fail_msg("no message naming rank 1 in:\n%s", text);
    assert_non_null(strstr(text, "/nonexistent/pm_data"));
    free(text);
}

// On the GPU (skipped without one): more ranks on a host than it has GPUs is refused before any work, with one
// line that gives both counts (NCCL would fail later with "invalid usage").
static void test_more_ranks_than_gpus_refused(void **state) {
    if (!have_mpirun()) skip();
    FILE *p = popen("nvidia-smi -L 2>/dev/null | grep -c '^GPU '", "r");
    int ngpu = 0;
    if (!p || fscanf(p, "%d", &ngpu) != 1) ngpu = 0;
    if (p) pclose(p);
    if (ngpu < 1) skip();
    const char *bin = getenv("PM_BIN");
    char run[512], log[600];
    snprintf(run, sizeof run, "%s/shared_gpu", g_dir);
    snprintf(log, sizeof log, "%s.log", run);
    const int rc = sh(MPIRUN " -np %d '%s' " TRAIN_ARGS " --device cuda --steps 2 --batch 1 --out '%s' > '%s' 2>&1",
                      ngpu + 1, bin, g_data, run, log);
    size_t n;
    char *text = pm_read_file(log, &n);
    assert_non_null(text);
    char want[128];
    snprintf(want, sizeof want, "%d ranks on this host but %d GPU", ngpu + 1, ngpu);
    if (rc == 0 || !strstr(text, want)) fail_msg("rc %d, no \"%s\" in:\n%s", rc, want, text);
    free(text);
}

// train's energy report across ranks, against the stand-in NVML library tests/fakes/fake_nvml.c (PM_FAKE_NVML),
// each rank's card drawing exactly W watts: two ranks on two cards (different FAKE_NVML_CARD, so different UUIDs)
// report 2 W, in the metrics' energy_j (against the steps' own time) and the closing line; two ranks on one card
// count it once (W); a rank without a counter turns the report off for the job, saying which rank and why.
static double energy_run(const char *name, const char *card0, const char *lib0, const char *card1, double W,
                         double *steps_s, double *rise, char **log_text) {
    const char *bin = getenv("PM_BIN"), *lib = getenv("PM_FAKE_NVML");
    char run[512], log[600];
    snprintf(run, sizeof run, "%s/%s", g_dir, name);
    snprintf(log, sizeof log, "%s.log", run);
    assert_int_equal(sh(MPIRUN " -np 1 env PM_NVML_LIB='%s' FAKE_NVML_WATTS=%g FAKE_NVML_CARD=%s '%s' " TRAIN_ARGS
                               " --steps 40 --batch 2 --out '%s' : -np 1 env PM_NVML_LIB='%s' FAKE_NVML_WATTS=%g "
                               "FAKE_NVML_CARD=%s '%s' " TRAIN_ARGS " --steps 40 --batch 2 --out '%s' > '%s' 2>&1",
                        lib0 ? lib0 : lib, W, card0, bin, g_data, run, lib, W, card1, bin, g_data, run, log),
                     0);
    size_t n;
    *log_text = pm_read_file(log, &n);
    assert_non_null(*log_text);
    char path[600], line[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    double e_first = NAN, e_last = NAN;
    int steps = 0, with_energy = 0;
    *steps_s = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        assert_non_null(j);
        json_t *e = json_object_get(j, "energy_j");
        if (e) {
            with_energy++;
            if (steps == 0) e_first = json_real_value(e);
            else *steps_s += json_real_value(json_object_get(j, "step_s"));
            e_last = json_real_value(e);
        }
        steps++;
        json_decref(j);
    }
    fclose(f);
    assert_int_equal(steps, 40);
    *rise = e_last - e_first;
    return with_energy;
}

static void test_energy_over_ranks(void **state) {
    if (!have_mpirun()) skip();
    const char *lib = getenv("PM_FAKE_NVML");
    if (!lib || access(lib, R_OK) != 0) skip();
    const double W = 150;
    double steps_s, rise, watts, joules, secs, tpj;
    char *text;
    // two cards: every step's energy, summed over both, rises at 2 W
    assert_int_equal(energy_run("energy2", "a", NULL, "b", W, &steps_s, &rise, &text), 40);
    if (!(rise >= 2 * W * steps_s * 0.999 && rise <= 2 * W * steps_s * 1.5 + 2))
        fail_msg("energy rose %.3f J over steps taking %.4f s (2 cards at %g W: %.3f J)", rise, steps_s, W,
                 2 * W * steps_s);
    const char *done = strstr(text, "the 2 GPUs (rank 0's: fake GPU) used ");
    if (!done) fail_msg("no closing line for 2 GPUs in:\n%s", text);
    assert_int_equal(sscanf(done, "the 2 GPUs (rank 0's: fake GPU) used %lf J over %lf s of training here: %lf W, %lf",
                            &joules, &secs, &watts, &tpj),
                     4);
    if (fabs(watts - 2 * W) > 0.02 * 2 * W) fail_msg("closing line: %.1f W from 2 cards at %g W", watts, W);
    free(text);
    // one card shared by both ranks: counted once
    assert_int_equal(energy_run("energy1", "a", NULL, "a", W, &steps_s, &rise, &text), 40);
    if (!(rise >= W * steps_s * 0.999 && rise <= W * steps_s * 1.5 + 2))
        fail_msg("one shared card: energy rose %.3f J over steps taking %.4f s (at %g W)", rise, steps_s, W);
    done = strstr(text, "the GPU (fake GPU) used ");
    if (!done) fail_msg("no closing line for one GPU in:\n%s", text);
    assert_int_equal(sscanf(done, "the GPU (fake GPU) used %lf J over %lf s of training here: %lf W, %lf", &joules,
                            &secs, &watts, &tpj),
                     4);
    if (fabs(watts - W) > 0.02 * W) fail_msg("closing line: %.1f W from one card at %g W", watts, W);
    free(text);
    // rank 0 without a counter: no report from any rank, and one note naming rank 0 and its library
    assert_int_equal(energy_run("energy0", "a", "/nonexistent/libnvml.so", "b", W, &steps_s, &rise, &text), 0);
    if (!strstr(text, "no energy report: rank 0: /nonexistent/libnvml.so could not be loaded"))
        fail_msg("no note naming rank 0 in:\n%s", text);
    assert_null(strstr(text, " used "));
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_partition_parameters),
        cmocka_unit_test(test_f32_operands_are_what_the_model_reads),
        cmocka_unit_test(test_rank_split_pack),
        cmocka_unit_test(test_rank_split_pad),
        cmocka_unit_test(test_position_across_world_sizes),
        cmocka_unit_test(test_two_ranks_equal_one),
        cmocka_unit_test(test_resume_two_ranks_on_one),
        cmocka_unit_test(test_carry_two_ranks_equal_one),
        cmocka_unit_test(test_failing_rank_aborts_job),
        cmocka_unit_test(test_energy_over_ranks),
        cmocka_unit_test(test_more_ranks_than_gpus_refused),
    };
    return cmocka_run_group_tests(tests, setup_corpus, teardown_corpus);
}
