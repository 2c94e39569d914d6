// train.c — `packmamba train` and `packmamba eval`: the training loop (gradient accumulation, AdamW with warmup +
// cosine, clipping, checkpoints, exact resume, signals, NaN stop, validation) and evaluation (mean and
// per-document loss) over prepared data.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "batcher.h"
#include "checkpoint.h"
#include "commands.h"
#include "config_file.h"
#include "dist.h"
#include "memory_flags.h"
#include "model.h"
#include "nvml_probe.h"
#include "tokenizer.h"
#include "util.h"

static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) { stop_requested = sig; }


// Keep only the metrics lines of steps <= last_step (after a resume the steps past the checkpoint are redone).
// Returns the "tokens" count of the last line kept, so the resumed run's count continues from it.
static int64_t truncate_metrics(const char *path, int64_t last_step) {
    size_t n;
    int64_t tokens = 0;
    char *text = pm_read_file(path, &n);
    if (!text) return 0;
    char *out = pm_malloc(n + 1);
    size_t o = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        json_error_t err;
        json_t *j = json_loadb(line, len, 0, &err);
        json_t *s = j ? json_object_get(j, "step") : NULL;
        if (s && json_is_integer(s) && json_integer_value(s) <= last_step) {
            memcpy(out + o, line, len);
            o += len;
            json_t *t = json_object_get(j, "tokens");
            if (t && json_is_integer(t)) tokens = json_integer_value(t);
        }
        json_decref(j);
        line += len;
    }
    if (pm_write_file_atomic(path, out, o) != 0) pm_die("%s", pm_last_error());
    free(out);
    free(text);
    return tokens;
}


typedef struct {
    const char *data, *preset, *out, *device, *packing, *config, *init_from;
    int seq_len, batch, steps, seed, resume, warmup, grad_accum, save_every, keep, log_every, window,
        deterministic, val_every, val_batches, fp32_logits, carry_state;
    float lr, min_lr_frac, weight_decay, grad_clip, beta1, beta2;
    MemoryFlags mem;
} TrainArgs;

static char *train_args_json(const TrainArgs *a) {
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:f, s:f, s:f, "
                          "s:f, s:f, s:i, s:i, s:b, s:i, s:b, s:i, s:b, s:i, s:b, s:f, s:b}",
                          "data", a->data, "preset", a->preset ? a->preset : "", "device", a->device, "packing", a->packing,
                          "seq_len", a->seq_len, "batch", a->batch, "steps", a->steps, "seed", a->seed, "warmup",
                          a->warmup, "grad_accum", a->grad_accum, "save_every", a->save_every, "window", a->window,
                          "deterministic", a->deterministic, "lr", (double)a->lr, "min_lr_frac",
                          (double)a->min_lr_frac, "weight_decay", (double)a->weight_decay, "grad_clip",
                          (double)a->grad_clip, "beta1", (double)a->beta1, "beta2", (double)a->beta2, "val_every",
                          a->val_every, "val_batches", a->val_batches, "recompute_scan", a->mem.recompute_scan,
                          "scan_states_layers", a->mem.scan_states_layers, "keep_activations", a->mem.keep_activations,
                          "activations_layers", a->mem.activations_layers,
                          "recompute_in_proj", a->mem.recompute_in_proj, "in_proj_layers", a->mem.in_proj_layers,
                          "cast_weights", a->mem.cast_weights,
                          "memory_budget", (double)a->mem.memory_budget, "fp32_logits", a->fp32_logits);
    if (a->carry_state) json_object_set_new(j, "carry_state", json_true());
    if (a->init_from) {  // the checkpoint fixes the model: no preset (a --config of this file must not name both)
        json_object_del(j, "preset");
        json_object_set_new(j, "init_from", json_string(a->init_from));
    }
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}

// Mean loss over up to max_batches batches of the validation split (all of it if max_batches <= 0).
static double validation_loss(Model *m, Batcher *val, Batch *b, int max_batches) {
    double sum = 0;
    int64_t n = 0;
    for (int i = 0; max_batches <= 0 || i < max_batches; i++) {
        int end = batcher_next(val, b);
        double mean = model_forward(m, b, NULL);
        sum += mean * (double)b->n_valid;
        n += b->n_valid;
        if (end) break;
    }
    dist_allreduce_f64_sum(&sum, 1);  // every rank evaluated its share of the same global batches
    dist_allreduce_i64_sum(&n, 1);
    return n ? sum / (double)n : NAN;
}

static void save_checkpoint(const char *run, Model *m, Batcher *bt, const char *run_json, char *out_path, size_t n) {
    TrainerState ts = {.step = m->step, .rng = 0, .run_config_json = (char *)run_json};
    batcher_get_position(bt, ts.data_pos);
    snprintf(out_path, n, "%s/checkpoints/step_%08d", run, m->step);
    dist_gather_optimizer(m);  // all ranks: each owns a range of the Adam moments; rank 0 writes them all
    if (dist_rank() == 0 && checkpoint_save(out_path, m, &ts) != 0) pm_die("%s", pm_last_error());
}

// On a terminal: one line redrawn in place after every step, e.g.
//   [##########..........]  50%  100/200 | loss 2.3456 | 12345 tok/s | eta 0:01:23
static void progress_bar(int step, int total, double loss, double tok_s, double eta) {
    char bar[21];
    int filled = total > 0 ? (int)(20.0 * step / total) : 20;
    for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '.';
    bar[20] = 0;
    long e = isfinite(eta) && eta > 0 ? (long)(eta + 0.5) : 0;
    fprintf(stderr, "\r[%s] %3d%%  %d/%d | loss %.4f | %.0f tok/s | eta %ld:%02ld:%02ld\033[K", bar,
            total > 0 ? (int)(100.0 * step / total) : 100, step, total, loss, tok_s, e / 3600, e / 60 % 60, e % 60);
    fflush(stderr);
}

// The run's energy for train's report: this rank's card through NVML and, with several ranks, the sum over the
// distinct cards. Every function here is a collective when world > 1 (every rank calls it at the same points).
typedef struct {
    NvmlProbe *nv;  // this rank's card (NULL when off)
    int on;         // the report is on: every rank has a card with an energy counter
    int counted;    // this rank's card counts (no lower rank has the same card)
    int cards;      // distinct cards over all ranks
} EnergyMeter;

static int64_t card_id(const NvmlProbe *nv) {  // FNV-1a of the card's UUID (or host and name without one); != 0
    char host[256] = "", key[512];
    if (nvml_device_uuid(nv)[0]) snprintf(key, sizeof key, "%s", nvml_device_uuid(nv));
    else gethostname(host, sizeof host - 1), snprintf(key, sizeof key, "%s/%s", host, nvml_device_name(nv));
    uint64_t h = 1469598103934665603ull;
    for (const char *c = key; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h ? (int64_t)h : 1;
}

// try: this process computes on a GPU (cuda) or PM_NVML_LIB names a library; a rank that cannot report says why.
static EnergyMeter energy_open(int cuda, int try_nvml) {
    EnergyMeter em = {0};
    const int world = dist_world(), rank = dist_rank();
    if (!dist_any(try_nvml)) return em;
    char why[512] = "";
    em.nv = nvml_open_cuda_device(cuda, why, sizeof why);
    if (em.nv && isnan(nvml_energy_j(em.nv))) {
        snprintf(why, sizeof why, "%s does not report its energy", nvml_device_name(em.nv));
        nvml_close(em.nv), em.nv = NULL;
    }
    int64_t *id = pm_calloc((size_t)world, sizeof *id);  // each rank's card (0: none), gathered by a sum
    id[rank] = em.nv ? card_id(em.nv) : 0;
    dist_allreduce_i64_sum(id, world);
    int first_without = -1;
    for (int r = world - 1; r >= 0; r--)
        if (!id[r]) first_without = r;
    if (first_without == rank) {
        if (world > 1) fprintf(stderr, "packmamba: note: no energy report: rank %d: %s\n", rank, why);
        else fprintf(stderr, "packmamba: note: no energy report: %s\n", why);
    }
    em.on = first_without < 0;
    em.counted = 1;
    for (int r = 0; r < world; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= id[q] == id[r];
        em.cards += !seen;
        if (r == rank) em.counted = !seen;
    }
    free(id);
    if (!em.on) nvml_close(em.nv), em.nv = NULL;
    return em;
}

// Joules on the counted cards' counters now (NaN when off); the sum over ranks where world > 1.
static double energy_read(const EnergyMeter *em) {
    if (!em->on) return NAN;
    double e = em->counted ? nvml_energy_j(em->nv) : 0.0;
    if (dist_world() > 1) dist_allreduce_f64_sum(&e, 1);
    return e;
}

static void energy_close(EnergyMeter *em) {
    nvml_close(em->nv);
    em->nv = NULL, em->on = 0;
}

int cmd_train(int argc, char **argv) {
    TrainArgs a = {.data = NULL, .preset = NULL, .init_from = NULL, .out = NULL, .device = "cpu", .packing = "pack", .config = NULL,
                   .seq_len = 256, .batch = 8, .steps = 200, .seed = 1337, .warmup = 20, .grad_accum = 1,
                   .save_every = 0, .keep = 3, .log_every = 10, .window = 0, .val_every = 0, .val_batches = 16,
                   .lr = 3e-3f, .min_lr_frac = 0.1f, .weight_decay = 0.1f, .grad_clip = 1.0f, .beta1 = 0.9f,
                   .beta2 = 0.95f, .mem = MEMORY_FLAGS_DEFAULT};
    ArgSpec specs[] = {
        {"--data", ARG_STR, &a.data, "prepared data directory (packmamba prepare), or several joined by commas (a,b: one data set)"},
        {"--preset", ARG_STR, &a.preset, "model size: tiny (default), 130m, 370m, 790m, 1.4b, 2.8b"},
        {"--init-from", ARG_STR, &a.init_from,
         "start from this checkpoint's weights and config (ours, mamba_ssm's or transformers' layout; a run "
         "directory means its newest checkpoint) with fresh optimizer state, in place of --preset"},
        {"--out", ARG_STR, &a.out, "run directory (metrics.jsonl, checkpoints/)"},
        {"--device", ARG_STR, &a.device, "cpu or cuda"},
        {"--packing", ARG_STR, &a.packing, "batching policy: single, pad, pack"},
        {"--seq-len", ARG_INT, &a.seq_len, "tokens per row (T)"},
        {"--batch", ARG_INT, &a.batch, "rows per micro-batch (B)"},
        {"--grad-accum", ARG_INT, &a.grad_accum, "micro-batches per optimizer step"},
        {"--steps", ARG_INT, &a.steps, "optimizer steps in total (a resumed run continues up to this)"},
        {"--seed", ARG_INT, &a.seed, "seed for initialization and data order"},
        {"--lr", ARG_FLOAT, &a.lr, "peak learning rate"},
        {"--warmup", ARG_INT, &a.warmup, "linear warmup steps"},
        {"--min-lr-frac", ARG_FLOAT, &a.min_lr_frac, "cosine decays to this fraction of --lr"},
        {"--weight-decay", ARG_FLOAT, &a.weight_decay, "AdamW decoupled weight decay (matrices and embedding)"},
        {"--beta1", ARG_FLOAT, &a.beta1, "AdamW beta1"},
        {"--beta2", ARG_FLOAT, &a.beta2, "AdamW beta2"},
        {"--grad-clip", ARG_FLOAT, &a.grad_clip, "global gradient-norm clip (0: off)"},
        {"--window", ARG_INT, &a.window, "pack: best-fit window in document pieces (0: default 512, 1: greedy in order)"},
        {"--carry-state", ARG_BOOL, &a.carry_state,
         "pack: a document longer than --seq-len goes on in the same row of the next batch from the state its last "
         "piece left (the forward as if unbroken; the backward stops at the cut), and no target is lost at a cut"},
        {"--save-every", ARG_INT, &a.save_every, "checkpoint every N steps (0: only at the end)"},
        {"--keep", ARG_INT, &a.keep, "keep the newest K step checkpoints (plus the best by validation loss)"},
        {"--log-every", ARG_INT, &a.log_every, "print a progress line every N steps"},
        {"--val-every", ARG_INT, &a.val_every, "validation loss on the held-out split every N steps (0: off)"},
        {"--val-batches", ARG_INT, &a.val_batches, "batches per validation (0: the whole split)"},
        {"--deterministic", ARG_BOOL, &a.deterministic, "bit-identical runs on the GPU (no float atomics)"},
        {"--fp32-logits", ARG_BOOL, &a.fp32_logits,
         "GPU: the training step's logits in fp32 (default: bf16, as PyTorch autocast; evaluation is always fp32)"},
        MEMORY_FLAG_SPECS(a.mem),
        {"--resume", ARG_BOOL, &a.resume, "continue from the newest checkpoint in --out"},
        {"--config", ARG_STR, &a.config, "JSON file of options, keys = flag names (seq_len); flags here override it"},
    };
    const int nspecs = sizeof specs / sizeof specs[0];
    const char *usage = "packmamba train --data DIR --out RUN [--config FILE] [options]";
    args_parse(argc, argv, usage, specs, nspecs, NULL, 0, NULL);
    int cargc = 0;
    char **cargv = NULL;  // (a config file's command line: a.* point into it until the end)
    if (a.config) {  // parse again with the file's options first, so that the command line's come later and win
        if (train_config_load(a.config, specs, nspecs, argc, argv, &cargc, &cargv) != 0)
            pm_die("%s", pm_last_error());
        args_parse(cargc, cargv, usage, specs, nspecs, NULL, 0, NULL);
    }
    if (train_flags_check(specs, nspecs) != 0) pm_die("%s", pm_last_error());  // (the command line's too)
    if (!a.data) pm_die("train: --data DIR is required (make one with packmamba prepare)");
    if (!a.out) pm_die("train: --out RUN is required");
    if (a.init_from && a.preset)
        pm_die("train: --preset %s and --init-from %s exclude each other (the checkpoint fixes the model)", a.preset,
               a.init_from);
    if (!a.init_from && !a.preset) a.preset = "tiny";
    int policy = policy_parse(a.packing);
    if (policy < 0) pm_die("train: --packing %s: expected single, pad or pack", a.packing);
    if (a.seq_len < 1 || a.batch < 1 || a.grad_accum < 1 || a.steps < 0)
        pm_die("train: --seq-len, --batch and --grad-accum must be >= 1 and --steps >= 0");
    if (a.carry_state && policy != PM_POLICY_PACK) pm_die("train: --carry-state needs --packing pack");
    memory_flags_check(&a.mem, "train");

    // Data parallel (dist.h): MPI only under mpirun with several ranks; rank 0 alone writes files and logs.
    dist_init(&argc, &argv);
    const int rank = dist_rank(), world = dist_world(), lead = rank == 0;
    dist_select_device(a.device);
    const Backend *bk = backend_get(a.device, a.deterministic);
    Tokenizer *tok = tokenizer_load_from_data(a.data);
    if (!tok) pm_die("%s", pm_last_error());

    char ckpt[4096] = "";
    int resuming = a.resume && checkpoint_find_latest(a.out, ckpt, sizeof ckpt) == 0;
    if (a.resume && !resuming && lead) fprintf(stderr, "packmamba: --resume: no checkpoint in %s yet, starting fresh\n", a.out);
    // (--init-from only starts a run: a resumed one continues from its own checkpoint, as its run.json may name it)
    char init_ckpt[4096] = "";
    if (!resuming && a.init_from && checkpoint_resolve(a.init_from, init_ckpt, sizeof init_ckpt) != 0)
        pm_die("train: --init-from: %s", pm_last_error());
    ModelConfig cfg;
    if (resuming || init_ckpt[0]) {
        if (checkpoint_load_config(resuming ? ckpt : init_ckpt, &cfg) != 0) pm_die("%s", pm_last_error());
    } else if (config_preset(a.preset, tokenizer_vocab_size(tok), &cfg) != 0) {
        pm_die("train: --preset: %s", pm_last_error());
    }
    if (cfg.vocab_size < tokenizer_vocab_size(tok))
        pm_die("%s: model vocab_size %d is smaller than the data's tokenizer (%d)", resuming ? ckpt : init_ckpt,
               cfg.vocab_size, tokenizer_vocab_size(tok));

    Model m;
    model_create(&m, &cfg, bk, (uint64_t)a.seed);
    m.fp32_logits = a.fp32_logits;
    model_alloc_optimizer(&m);
    // with several ranks: shard the Adam moments, and with PM_DIST_OVERLAP=1 reduce each layer's gradients during
    // the backward (before the activations are planned: the overlap limits Model.dw_group)
    dist_attach(&m, a.grad_accum);
    MemorySettings ms;
    size_t ms_bytes;
    a.mem.carry_state = a.carry_state;
    if (memory_flags_settings(&a.mem, &cfg, bk, a.batch, a.seq_len, &ms, &ms_bytes) != 0)
        pm_die("train: --memory-budget %.2f GiB: even with every activation recomputed a step needs %.2f GiB "
               "(estimated): lower --batch or --seq-len",
               (double)a.mem.memory_budget, ms_bytes / 1073741824.0);
    model_set_memory_settings(&m, &ms);
    if (lead) memory_flags_note_rounding(&a.mem, &cfg, bk, "train");
    if (a.mem.memory_budget > 0 && lead) {
        char line[320];
        memory_flags_describe(line, sizeof line, &a.mem, &cfg, bk, &ms, ms_bytes);
        fprintf(stderr, "packmamba: %s\n", line);
    }
    model_alloc_activations(&m, a.batch, a.seq_len);
    if (a.carry_state) {
        model_alloc_carry(&m);
        m.carry_row0 = rank * a.batch, m.carry_rows = world * a.batch;  // (the checkpoint's rows: the global batch's)
    }
    Batcher *bt = batcher_open(a.data, PM_SPLIT_TRAIN, policy, a.batch, a.seq_len, (uint64_t)a.seed, rank, world,
                               a.window);
    if (!bt) pm_die("%s", pm_last_error());
    if (a.carry_state && batcher_set_carry(bt, 1) != 0) pm_die("train: --carry-state: %s", pm_last_error());
    Batcher *val = NULL;
    if (a.val_every > 0) {
        val = batcher_open(a.data, PM_SPLIT_VAL, PM_POLICY_PACK, a.batch, a.seq_len, 0, rank, world, 0);
        if (!val) pm_die("%s (needed by --val-every)", pm_last_error());
    }

    if (pm_mkdir_p(a.out) != 0) pm_die("%s", pm_last_error());
    char path[4352], metrics_path[4352];
    // One trainer a run directory: two at once would interleave their metrics and overwrite each other's
    // checkpoints. The lock belongs to the process (flock), so a run that crashed leaves nothing to clear; it is
    // taken before anything here is read for a resume or written.
    snprintf(path, sizeof path, "%s/.lock", a.out);
    const int lock_fd = lead ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (lead && lock_fd < 0) pm_die("%s: cannot create: %s", path, strerror(errno));
    if (lead && flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
        pm_die("%s: another packmamba train is using this run directory (it holds %s)", a.out, path);
    snprintf(metrics_path, sizeof metrics_path, "%s/metrics.jsonl", a.out);
    char *run_json = train_args_json(&a);
    int64_t tokens_seen = 0;
    if (resuming) {
        TrainerState ts = {0};
        if (checkpoint_load_model(ckpt, &m) != 0 || checkpoint_load_trainer(ckpt, &m, &ts) != 0)
            pm_die("%s", pm_last_error());
        if (dist_adapt_position(ts.data_pos, a.batch, rank, world) != 0 || batcher_set_position(bt, ts.data_pos) != 0)
            pm_die("%s: %s", ckpt, pm_last_error());
        trainer_state_free(&ts);
        if (lead) tokens_seen = truncate_metrics(metrics_path, m.step);
        if (lead) fprintf(stderr, "packmamba: resuming from %s at step %d\n", ckpt, m.step);
    } else {
        if (init_ckpt[0] && checkpoint_load_model(init_ckpt, &m) != 0) pm_die("%s", pm_last_error());
        if (init_ckpt[0] && lead) fprintf(stderr, "packmamba: starting from the weights of %s\n", init_ckpt);
    }
    if (!resuming && lead) {
        FILE *f = fopen(metrics_path, "w");
        if (!f) pm_die("%s: cannot create: %s", metrics_path, strerror(errno));
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", a.out);  // so generate finds it beside the checkpoints
    if (lead && tokenizer_save(tok, path) != 0) pm_die("%s", pm_last_error());
    snprintf(path, sizeof path, "%s/run.json", a.out);
    if (lead && pm_write_file_atomic(path, run_json, strlen(run_json)) != 0) pm_die("%s", pm_last_error());
    FILE *metrics = lead ? fopen(metrics_path, "a") : NULL;
    if (lead && !metrics) pm_die("%s: cannot open: %s", metrics_path, strerror(errno));

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (lead)
        fprintf(stderr, "packmamba: training %s (%zu parameters, %d layers x %d) on %s, %s B=%d T=%d, %d steps%s\n",
                resuming ? "(resumed)" : init_ckpt[0] ? "(from --init-from)" : a.preset, m.n_params, cfg.n_layer, cfg.d_model, bk->name, a.packing, a.batch,
                a.seq_len, a.steps, world > 1 ? " (per rank)" : "");
    if (lead && world > 1)
        fprintf(stderr, "packmamba: data parallel over %d ranks: global batch %d rows, sharded AdamW\n", world,
                a.batch * world);
    OptimConfig oc = {a.lr, a.beta1, a.beta2, 1e-8f, a.weight_decay, a.grad_clip};
    Batch *mb = pm_malloc(sizeof(Batch) * a.grad_accum);
    for (int i = 0; i < a.grad_accum; i++) mb[i] = batch_alloc(a.batch, a.seq_len);
    Batch vb = batch_alloc(a.batch, a.seq_len);
    char last_ckpt[4352] = "", best_ckpt[4352] = "";
    double best_val = INFINITY, t_start = pm_now();
    // The GPUs' energy (NVML's counter; a CUDA run, or any run where PM_NVML_LIB names the library to load): the
    // joules since training began in this process with each step's metrics, the mean power and tokens a joule over
    // each log line's interval once it spans 2 s (the H200's driver moves the counter every 100 ms, so an
    // interval's joules are uncertain by ~0.1 s of power at each end: ~5% over 2 s; over 1 s, 370m's read up to
    // 720 W against a 700 W limit, call316), and over the whole run when it is done. At the board's power limit
    // these, not the clock, say what a run costs. With several ranks each reads its own card and the figures are
    // the sum over the distinct cards (ranks sharing a card, told apart by UUID, count it once); the report is on
    // only where every rank has a counter.
    EnergyMeter em = energy_open(!strcmp(bk->name, "cuda"), !strcmp(bk->name, "cuda") || getenv("PM_NVML_LIB"));
    const double e_start = energy_read(&em), t_e0 = pm_now();  // (the joules' own start: energy_open may wait)
    double e_log = e_start, t_log = t_e0;
    int64_t tokens_log = tokens_seen, tokens_start = tokens_seen;
    int exit_code = 0, start_step = m.step, tty = lead && isatty(STDERR_FILENO);
    while (m.step < a.steps && !dist_any(stop_requested)) {  // every rank stops at the same step
        double t0 = pm_now(), comm0 = dist_comm_seconds();
        int64_t n_valid = 0, real = 0, computed = 0;
        for (int i = 0; i < a.grad_accum; i++) {
            batcher_next(bt, &mb[i]);
            n_valid += mb[i].n_valid;
            computed += (int64_t)mb[i].B * mb[i].T;
            for (int k = 0; k < mb[i].B * mb[i].T; k++) real += mb[i].doc[k] >= 0;
        }
        int64_t counts[3] = {n_valid, real, computed};
        dist_allreduce_i64_sum(counts, 3);  // global: the loss scale is 1 / the whole global batch's targets
        n_valid = counts[0], real = counts[1], computed = counts[2];
        model_zero_grad(&m);
        double loss_sum = 0;
        for (int i = 0; i < a.grad_accum; i++) {
            double mean = model_forward_backward(&m, &mb[i], n_valid ? 1.0f / (float)n_valid : 0.0f, NULL);
            loss_sum += mean * (double)mb[i].n_valid;
        }
        dist_allreduce_f64_sum(&loss_sum, 1);
        double loss = n_valid ? loss_sum / (double)n_valid : 0.0;
        int step = m.step;
        if (!isfinite(loss)) {
            if (tty) fputs("\r\033[K", stderr);
            if (lead) fprintf(stderr, "packmamba: loss is %s at step %d: stopping; the last good checkpoint is %s\n",
                    isnan(loss) ? "NaN" : "infinite", step + 1, last_ckpt[0] ? last_ckpt : "(none saved yet)");
            exit_code = 1;
            break;
        }
        float lr = lr_schedule(step, a.warmup, a.steps, a.lr, a.min_lr_frac);
        double gnorm = dist_optimizer_step(&m, &oc, lr);  // model_optimizer_step with one rank
        bk->synchronize();
        double dt = pm_now() - t0;
        tokens_seen += real;
        double val_loss = NAN;
        if (val && (m.step % a.val_every == 0 || m.step == a.steps)) val_loss = validation_loss(&m, val, &vb, a.val_batches);
        json_t *j = json_pack("{s:i, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "step", m.step, "loss", loss, "lr",
                              (double)lr, "grad_norm", gnorm, "tokens", (json_int_t)tokens_seen, "tok_per_s",
                              real / dt, "fill", computed ? (double)real / computed : 0.0, "step_s", dt);
        if (!isnan(val_loss)) json_object_set_new(j, "val_loss", json_real(val_loss));
        if (world > 1) json_object_set_new(j, "comm_s", json_real(dist_comm_seconds() - comm0));
        const double e_now = energy_read(&em), t_now = pm_now();
        if (em.on) json_object_set_new(j, "energy_j", json_real(e_now - e_start));
        char *line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        if (lead) fprintf(metrics, "%s\n", line), fflush(metrics);
        free(line);
        json_decref(j);
        // ETA from this process's own steps: a resumed run did only m.step - start_step of them here.
        double eta = (pm_now() - t_start) / (m.step - start_step) * (a.steps - m.step);
        if (lead && a.log_every > 0 && (m.step % a.log_every == 0 || m.step == a.steps || m.step == 1)) {
            if (tty) fputs("\r\033[K", stderr);  // the line replaces the bar, which is redrawn below it
            fprintf(stderr, "step %6d/%d | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | fill %.1f%%", m.step,
                    a.steps, loss, lr, gnorm, real / dt, computed ? 100.0 * real / computed : 0.0);
            if (!isnan(val_loss)) fprintf(stderr, " | val %.4f", val_loss);
            if (em.on && t_now - t_log >= 2.0 && e_now > e_log) {  // (shorter intervals run on into the next line's)
                fprintf(stderr, " | %.0f W, %.1f tok/J", (e_now - e_log) / (t_now - t_log),
                        (double)(tokens_seen - tokens_log) / (e_now - e_log));
                e_log = e_now, t_log = t_now, tokens_log = tokens_seen;
            }
            fprintf(stderr, " | eta %.0fs\n", eta);
        }
        if (tty) progress_bar(m.step, a.steps, loss, real / dt, eta);
        int save = (a.save_every > 0 && m.step % a.save_every == 0);
        if (!isnan(val_loss) && val_loss < best_val) {
            best_val = val_loss;
            snprintf(best_ckpt, sizeof best_ckpt, "%s/checkpoints/best", a.out);
            TrainerState ts = {.step = m.step, .run_config_json = run_json};
            batcher_get_position(bt, ts.data_pos);
            dist_gather_optimizer(&m);
            if (lead && checkpoint_save(best_ckpt, &m, &ts) != 0) pm_die("%s", pm_last_error());
        }
        if (save && m.step < a.steps) {
            save_checkpoint(a.out, &m, bt, run_json, last_ckpt, sizeof last_ckpt);
            if (lead && checkpoint_prune(a.out, a.keep) != 0)
                fprintf(stderr, "packmamba: warning: %s\n", pm_last_error());
        }
    }
    if (tty) fputs("\r\033[K", stderr);  // clear the progress bar
    if (exit_code == 0) {
        save_checkpoint(a.out, &m, bt, run_json, last_ckpt, sizeof last_ckpt);
        if (lead && checkpoint_prune(a.out, a.keep) != 0)
            fprintf(stderr, "packmamba: warning: %s\n", pm_last_error());
        if (lead && stop_requested)
            fprintf(stderr, "packmamba: %s received: saved %s at step %d; continue with --resume\n",
                    stop_requested == SIGINT ? "SIGINT" : "SIGTERM", last_ckpt, m.step);
        else if (lead)
            fprintf(stderr, "packmamba: done: %d steps, %.1f s; checkpoint %s\n", m.step, pm_now() - t_start,
                    last_ckpt);
    }
    if (em.on) {
        const double e = energy_read(&em) - e_start, t = pm_now() - t_e0;
        char who[160];
        if (em.cards == 1) snprintf(who, sizeof who, "the GPU (%s)", nvml_device_name(em.nv));
        else snprintf(who, sizeof who, "the %d GPUs (rank 0's: %s)", em.cards, nvml_device_name(em.nv));
        if (lead && e > 0)
            fprintf(stderr, "packmamba: %s used %.0f J over %.1f s of training here: %.0f W, %.1f tokens a joule\n",
                    who, e, t, e / t, (double)(tokens_seen - tokens_start) / e);
    }
    energy_close(&em);
    if (metrics) fclose(metrics);
    for (int i = 0; i < a.grad_accum; i++) batch_free(&mb[i]);
    free(mb);
    batch_free(&vb);
    batcher_close(bt);
    if (val) batcher_close(val);
    free(run_json);
    tokenizer_free(tok);
    model_destroy(&m);
    train_config_free(cargc, cargv, argc);
    if (lock_fd >= 0) close(lock_fd);  // (the lock goes with it)
    dist_finalize();
    return exit_code;
}

int cmd_eval(int argc, char **argv) {
    const char *checkpoint = NULL, *data = NULL, *packing = "pack", *device = "cpu", *split = "all";
    int seq_len = 256, batch = 8, per_doc = 0, as_json = 0, carry_state = 0;
    ArgSpec specs[] = {
        {"--checkpoint", ARG_STR, &checkpoint, "checkpoint directory, or a run directory (newest checkpoint)"},
        {"--data", ARG_STR, &data, "prepared data directory, or several joined by commas"},
        {"--split", ARG_STR, &split, "all, train or val"},
        {"--packing", ARG_STR, &packing, "batching policy: single, pad, pack"},
        {"--seq-len", ARG_INT, &seq_len, "tokens per row (T)"},
        {"--batch", ARG_INT, &batch, "rows per batch (B)"},
        {"--device", ARG_STR, &device, "cpu or cuda"},
        {"--per-doc", ARG_BOOL, &per_doc, "report the loss of every document"},
        {"--carry-state", ARG_BOOL, &carry_state,
         "pack: documents longer than --seq-len are evaluated as if unbroken (each piece from the state the one before left)"},
        {"--json", ARG_BOOL, &as_json, "print one JSON object"},
    };
    args_parse(argc, argv, "packmamba eval --checkpoint PATH --data DIR [options]", specs,
               sizeof specs / sizeof specs[0], NULL, 0, NULL);
    if (!checkpoint || !data) pm_die("eval: --checkpoint PATH and --data DIR are required");
    int policy = policy_parse(packing);
    if (policy < 0) pm_die("eval: --packing %s: expected single, pad or pack", packing);
    int sp = strcmp(split, "all") == 0 ? PM_SPLIT_ALL : strcmp(split, "train") == 0 ? PM_SPLIT_TRAIN
             : strcmp(split, "val") == 0 ? PM_SPLIT_VAL : -1;
    if (sp < 0) pm_die("eval: --split %s: expected all, train or val", split);
    if (seq_len < 1 || batch < 1) pm_die("eval: --seq-len and --batch must be >= 1");
    if (carry_state && policy != PM_POLICY_PACK) pm_die("eval: --carry-state needs --packing pack");

    char ckpt[4096];
    if (checkpoint_resolve(checkpoint, ckpt, sizeof ckpt) != 0) pm_die("%s", pm_last_error());
    ModelConfig cfg;
    if (checkpoint_load_config(ckpt, &cfg) != 0) pm_die("%s", pm_last_error());
    const Backend *bk = backend_get(device, 1);
    Model m;
    model_create(&m, &cfg, bk, 0);
    m.keep_scan_states = 0;  // evaluation has no backward: nothing to keep states for
    if (checkpoint_load_model(ckpt, &m) != 0) pm_die("%s", pm_last_error());
    model_alloc_activations(&m, batch, seq_len);
    if (carry_state) model_alloc_carry(&m);
    Batcher *bt = batcher_open(data, sp, policy, batch, seq_len, 0, 0, 1, 0);
    if (!bt) pm_die("%s", pm_last_error());
    if (carry_state && batcher_set_carry(bt, 1) != 0) pm_die("eval: --carry-state: %s", pm_last_error());

    Batch b = batch_alloc(batch, seq_len);
    double sum = 0;
    int64_t n = 0, cap = 0;
    double *doc_loss = NULL;
    int64_t *doc_tokens = NULL;
    double t0 = pm_now();
    int end;
    do {
        end = batcher_next(bt, &b);
        for (int k = 0; k < b.B * b.T; k++)
            if (b.tokens[k] >= cfg.vocab_size) pm_die("%s: token id %d is outside the model's vocabulary (%d)", data,
                                                      b.tokens[k], cfg.vocab_size);
        double mean = model_forward(&m, &b, NULL);
        sum += mean * (double)b.n_valid;
        n += b.n_valid;
        for (int k = 0; k < b.B * b.T; k++) {
            int d = b.doc[k];
            if (d < 0 || b.targets[k] == PM_IGNORE) continue;
            if (d >= cap) {
                int64_t nc = cap ? cap : 1024;
                while (nc <= d) nc *= 2;
                doc_loss = pm_realloc(doc_loss, nc * sizeof(double));
                doc_tokens = pm_realloc(doc_tokens, nc * sizeof(int64_t));
                for (int64_t i = cap; i < nc; i++) doc_loss[i] = 0, doc_tokens[i] = -1;
                cap = nc;
            }
            if (doc_tokens[d] < 0) doc_tokens[d] = 0;
            doc_loss[d] += m.host_losses[k];
            doc_tokens[d]++;
        }
    } while (!end);
    double mean = n ? sum / (double)n : NAN, secs = pm_now() - t0;
    int64_t ndocs = 0;
    for (int64_t d = 0; d < cap; d++) ndocs += doc_tokens[d] >= 0;
    if (as_json) {
        json_t *j = json_pack("{s:f, s:f, s:I, s:I}", "mean_loss", mean, "perplexity", exp(mean), "tokens",
                              (json_int_t)n, "documents", (json_int_t)ndocs);
        if (per_doc) {
            json_t *arr = json_array();
            for (int64_t d = 0; d < cap; d++)
                if (doc_tokens[d] > 0)
                    json_array_append_new(arr, json_pack("{s:I, s:I, s:f}", "doc", (json_int_t)d, "tokens",
                                                         (json_int_t)doc_tokens[d], "loss",
                                                         doc_loss[d] / (double)doc_tokens[d]));
            json_object_set_new(j, "per_doc", arr);
        }
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        if (per_doc)
            for (int64_t d = 0; d < cap; d++)
                if (doc_tokens[d] > 0)
                    printf("doc %7lld  tokens %7lld  loss %.5f\n", (long long)d, (long long)doc_tokens[d],
                           doc_loss[d] / (double)doc_tokens[d]);
        printf("mean loss %.5f  perplexity %.3f  over %lld tokens of %lld documents (%.1f s)\n", mean, exp(mean),
               (long long)n, (long long)ndocs, secs);
    }
    free(doc_loss);
    free(doc_tokens);
    batch_free(&b);
    batcher_close(bt);
    model_destroy(&m);
    return 0;
}

// export: a checkpoint (ours, mamba_ssm's or transformers') -> transformers' layout (MambaForCausalLM.from_pretrained
// and the tools built on it) or mamba_ssm's (MambaLMHeadModel.from_pretrained). A file conversion: the model lives
// on the CPU.
int cmd_export(int argc, char **argv) {
    const char *checkpoint = NULL, *out = NULL, *dtype = "f32", *tokpath = NULL, *layout = "hf";
    ArgSpec specs[] = {
        {"--checkpoint", ARG_STR, &checkpoint, "checkpoint directory, or a run directory (newest checkpoint)"},
        {"--out", ARG_STR, &out, "directory to write (must not exist)"},
        {"--layout", ARG_STR, &layout,
         "hf (transformers' MambaForCausalLM: safetensors) or mamba_ssm (MambaLMHeadModel: pytorch_model.bin)"},
        {"--dtype", ARG_STR, &dtype, "f32 or bf16 (rounded to nearest even)"},
        {"--tokenizer", ARG_STR, &tokpath,
         "tokenizer.json to copy in (default: the one beside the checkpoint or in its run directory, if any)"},
    };
    args_parse(argc, argv, "packmamba export --checkpoint PATH --out DIR [--layout hf|mamba_ssm] [--dtype f32|bf16]", specs,
               sizeof specs / sizeof specs[0], NULL, 0, NULL);
    if (!checkpoint || !out) pm_die("export: --checkpoint PATH and --out DIR are required");
    const int bf16 = strcmp(dtype, "bf16") == 0;
    if (!bf16 && strcmp(dtype, "f32") != 0) pm_die("export: --dtype %s: expected f32 or bf16", dtype);
    const int lay = strcmp(layout, "hf") == 0 ? PM_LAYOUT_HF : strcmp(layout, "mamba_ssm") == 0 ? PM_LAYOUT_MAMBA_SSM : 0;
    if (!lay) pm_die("export: --layout %s: expected hf or mamba_ssm", layout);
    struct stat st;
    if (lstat(out, &st) == 0) pm_die("%s: exists; not overwriting it (remove it or choose another --out)", out);
    char ckpt[4096], tk[4300] = "";
    if (checkpoint_resolve(checkpoint, ckpt, sizeof ckpt) != 0) pm_die("%s", pm_last_error());
    if (tokpath) {
        if (stat(tokpath, &st) != 0 || !S_ISREG(st.st_mode)) pm_die("%s: no such tokenizer file", tokpath);
        snprintf(tk, sizeof tk, "%s", tokpath);
    } else {
        checkpoint_tokenizer(ckpt, tk, sizeof tk);  // (none: tk stays empty and nothing is copied)
    }
    ModelConfig cfg;
    if (checkpoint_load_config(ckpt, &cfg) != 0) pm_die("%s", pm_last_error());
    Model m;
    model_create(&m, &cfg, backend_get("cpu", 0), 0);
    if (checkpoint_load_model(ckpt, &m) != 0) pm_die("%s", pm_last_error());
    if (checkpoint_export(out, &m, lay, bf16, tk[0] ? tk : NULL) != 0) pm_die("%s", pm_last_error());
    fprintf(stderr, "packmamba: wrote %s (%s layout, %s weights%s%s)\n", out,
            lay == PM_LAYOUT_HF ? "transformers' MambaForCausalLM" : "mamba_ssm's MambaLMHeadModel, pytorch_model.bin",
            bf16 ? "bf16" : "f32", tk[0] ? ", tokenizer from " : ", no tokenizer", tk[0] ? tk : "");
    model_destroy(&m);
    return 0;
}
