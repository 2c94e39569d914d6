// dist.c — see dist.h. Three layers, each compiled only when its library was found at build time:
//   always        the single-process path (world 1: no MPI calls at all) and the pure helpers (shard ranges,
//                 segment clipping, batcher-position translation)
//   PM_HAVE_MPI   launch detection, MPI_Init, rank/world, scalar allreduces, the exit handler that aborts the
//                 job when a rank fails, and the CPU backend's gradient/parameter collectives (host buffers)
//   PM_HAVE_NCCL  the CUDA backend's collectives on device buffers (needs MPI for the unique-id exchange)
#define _GNU_SOURCE
#include "dist.h"

#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"  // checkpoint_carry_host
#include "util.h"

#ifdef PM_HAVE_MPI
#include <mpi.h>
#endif
#ifdef PM_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef PM_HAVE_NCCL
#include <nccl.h>
#endif

static int g_rank = 0, g_world = 1;
static int g_mpi = 0;        // MPI_Init was called
static int g_finalized = 0;  // dist_finalize ran (a clean end)
static int g_dying = 0;      // dist_die is already bringing the job down
static double g_comm_s = 0;  // seconds in collectives

int dist_rank(void) { return g_rank; }
int dist_world(void) { return g_world; }
double dist_comm_seconds(void) { return g_comm_s; }

// ---------------------------------------------------------------------------------------------------------------
// pure helpers (no communication)

void dist_shard_range(size_t n, int rank, int world, size_t *lo, size_t *hi) {
    // rank r owns [floor(r*n/w), floor((r+1)*n/w)): contiguous, covering, sizes within one of each other.
    *lo = (size_t)((unsigned __int128)n * (unsigned)rank / (unsigned)world);
    *hi = (size_t)((unsigned __int128)n * (unsigned)(rank + 1) / (unsigned)world);
}

int dist_clip_segments(const ParamSegment *segs, int nsegs, size_t lo, size_t hi, ParamSegment *out) {
    int k = 0;
    for (int i = 0; i < nsegs; i++) {
        size_t a = segs[i].offset, b = segs[i].offset + segs[i].size;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        out[k++] = (ParamSegment){a, b - a, segs[i].decay};
    }
    return k;
}

// Position words as batcher.h writes them: [5] = policy << 56 | B << 32 | T, [6] = rank << 32 | world.
int dist_adapt_position(uint64_t pos[8], int B, int rank, int world) {
    int policy = (int)(pos[5] >> 56), B0 = (int)((pos[5] >> 32) & 0xffffff), T = (int)(uint32_t)pos[5];
    int W0 = (int)(uint32_t)pos[6];
    if (W0 < 1) return 0;  // not a position batcher.h wrote: batcher_set_position rejects it with its own message
    if (W0 != world) {
        // A position counts global batches: it means the same data only if a global batch holds the same rows
        // (pack) or pieces (pad); `single` takes one piece per rank per step, so its global batch is the world.
        int single = policy == 0;
        int64_t g0 = single ? W0 : (int64_t)B0 * W0, g = single ? world : (int64_t)B * world;
        if (g0 != g) {
            if (single)
                return pm_error("resume with %d ranks: the checkpoint was written by %d ranks with --packing single, "
                                "whose global batch is one document per rank; resume it with %d ranks",
                                world, W0, W0);
            if (g0 % world == 0)
                return pm_error("resume with %d ranks: the checkpoint was written by %d ranks x --batch %d (global "
                                "batch %lld rows); use --batch %lld to keep the global batch",
                                world, W0, B0, (long long)g0, (long long)(g0 / world));
            return pm_error("resume with %d ranks: the checkpoint was written by %d ranks x --batch %d (global batch "
                            "%lld rows), which %d ranks cannot split evenly",
                            world, W0, B0, (long long)g0, world);
        }
        pos[5] = (uint64_t)policy << 56 | (uint64_t)B << 32 | (uint32_t)T;
    }
    pos[6] = (uint64_t)rank << 32 | (uint32_t)world;
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// failure

static void vreport(const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pm_error("%s", msg);  // (one line: control characters escaped)
    if (g_world > 1) fprintf(stderr, "packmamba: rank %d: %s\n", g_rank, pm_last_error());
    else fprintf(stderr, "packmamba: %s\n", pm_last_error());
    fflush(stderr);
}

void dist_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    g_dying = 1;
    if (g_mpi && !g_finalized) {
#ifdef PM_HAVE_MPI
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    }
    exit(1);
}

// ---------------------------------------------------------------------------------------------------------------
// MPI: launch, scalars, exit handling

#ifdef PM_HAVE_MPI
static void mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    dist_die("MPI %s failed: %s", what, s);
}

// Any exit before dist_finalize would leave the other ranks blocked in their next collective: abort them all,
// naming this rank. pm_die has just printed its message and left it in pm_last_error().
static void on_process_exit(int status, void *arg) {
    (void)arg;
    if (!g_mpi || g_finalized || g_dying) return;
    if (status == 0) {  // a clean exit that skipped dist_finalize (--help, ...): every rank takes the same path
        dist_finalize();
        return;
    }
    const char *why = pm_last_error();
    fprintf(stderr, "packmamba: rank %d: exited with status %d%s%s%s before the run ended: aborting all %d ranks\n",
            g_rank, status, why[0] ? " (last error: " : "", why, why[0] ? ")" : "", g_world);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status ? status : 1);
}
#endif

static int launched_world(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};  // OpenMPI; MPICH / Slurm (PMI)
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        if (s && *s) return atoi(s);
    }
    return 1;
}

int dist_init(int *argc, char ***argv) {
    static int done = 0;
    if (done) return g_world;
    done = 1;
    int n = launched_world();
    if (n <= 1) return 1;  // no mpirun, or one rank: exactly the single-process program
#ifdef PM_HAVE_MPI
    int provided;
    mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "init");
    g_mpi = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &g_world), "comm_size");
    on_exit(on_process_exit, NULL);
    return g_world;
#else
    (void)argc, (void)argv;
    pm_die("started by mpirun with %d ranks, but this packmamba was built without MPI (install libopenmpi-dev and "
           "rebuild)", n);
#endif
}

static void drain_and_free(void);

void dist_finalize(void) {
    if (g_finalized) return;
    drain_and_free();  // reductions of a backward whose step was then abandoned (NaN loss); the moment ranges
    g_finalized = 1;
#ifdef PM_HAVE_MPI
    if (g_mpi) MPI_Finalize();
#endif
}

void dist_allreduce_i64_sum(int64_t *x, int n) {
    if (g_world == 1) return;
#ifdef PM_HAVE_MPI
    double t0 = pm_now();
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "allreduce (int64)");
    g_comm_s += pm_now() - t0;
#endif
}

void dist_allreduce_f64_sum(double *x, int n) {
    if (g_world == 1) return;
#ifdef PM_HAVE_MPI
    double t0 = pm_now();
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "allreduce (double)");
    g_comm_s += pm_now() - t0;
#endif
}

int dist_any(int flag) {
    if (g_world == 1) return flag != 0;
    int64_t v = flag != 0;
    dist_allreduce_i64_sum(&v, 1);
    return v > 0;
}

void dist_select_device(const char *device) {
    if (g_world == 1 || strcmp(device, "cuda") != 0) return;
#if defined(PM_HAVE_MPI) && defined(PM_HAVE_CUDA)
    // Ranks on the same host share its GPUs: local rank i takes GPU i (mod the count).
    MPI_Comm local;
    int lrank = 0, lsize = 1, ngpu = 0;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local), "split");
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    MPI_Comm_free(&local);
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        cudaGetLastError();
        return;  // backend_get reports the missing GPU
    }
    // NCCL refuses two ranks on one GPU ("invalid usage" at communicator init, after the model is built): say so
    // at once, naming the counts.
    if (lsize > ngpu)
        dist_die("%d ranks on this host but %d GPU%s: each rank needs a GPU of its own (NCCL); start at most %d "
                 "rank%s per host",
                 lsize, ngpu, ngpu == 1 ? "" : "s", ngpu, ngpu == 1 ? "" : "s");
    if (cudaSetDevice(lrank % ngpu) != cudaSuccess) dist_die("cannot select GPU %d", lrank % ngpu);
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Buffer collectives over the flat parameter-sized buffers. `reduce`: sum every rank's buffer onto each range's
// owner (reduce-scatter; other ranges are left as they were); otherwise copy each owner's range to every rank
// (all-gather).

#ifdef PM_HAVE_MPI
static void *g_scratch;  // CPU reduce-scatter receive buffer (one shard)
static size_t g_scratch_bytes;

static void mpi_shards(const Model *m, void *buf, int reduce) {
    const size_t es = m->bk->f32_bytes;
    MPI_Datatype t = es == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
    int *counts = pm_malloc(g_world * sizeof(int)), *displs = pm_malloc(g_world * sizeof(int));
    for (int r = 0; r < g_world; r++) {
        size_t lo, hi;
        dist_shard_range(m->n_params, r, g_world, &lo, &hi);
        if (hi > 0x7fffffff) dist_die("%zu parameters are too many for the MPI path (int counts)", m->n_params);
        counts[r] = (int)(hi - lo), displs[r] = (int)lo;
    }
    char *base = buf;
    if (reduce) {
        size_t need = (size_t)counts[g_rank] * es;
        if (need > g_scratch_bytes) g_scratch = pm_realloc(g_scratch, need), g_scratch_bytes = need;
        mpi_check(MPI_Reduce_scatter(buf, g_scratch, counts, t, MPI_SUM, MPI_COMM_WORLD), "reduce-scatter");
        memcpy(base + (size_t)displs[g_rank] * es, g_scratch, need);
    } else {
        mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, t, buf, counts, displs, t, MPI_COMM_WORLD), "all-gather");
    }
    free(counts);
    free(displs);
}
#endif

#ifdef PM_HAVE_NCCL
static ncclComm_t g_nccl;
static cudaStream_t g_nstream;
static int g_nccl_ready;

static void nccl_check(ncclResult_t rc, const char *what) {
    if (rc != ncclSuccess && rc != ncclInProgress) dist_die("NCCL %s failed: %s", what, ncclGetErrorString(rc));
}

static void nccl_setup(void) {
    if (g_nccl_ready) return;
    ncclUniqueId id;
    if (g_rank == 0) nccl_check(ncclGetUniqueId(&id), "get unique id");
    mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast of the NCCL id");
    if (cudaStreamCreateWithFlags(&g_nstream, cudaStreamNonBlocking) != cudaSuccess)
        dist_die("cannot create the NCCL stream");
    nccl_check(ncclCommInitRank(&g_nccl, g_world, id, g_rank), "communicator init");
    g_nccl_ready = 1;
}

// Wait for the queued collectives, polling NCCL's asynchronous error state, with a timeout, so that a failed or
// vanished peer ends the job with a message instead of a hang.
static void nccl_wait(const char *what) {
    static double timeout = -1;
    if (timeout < 0) {
        const char *s = getenv("PM_NCCL_TIMEOUT");
        timeout = s && atof(s) > 0 ? atof(s) : 600;
    }
    double t0 = pm_now();
    for (long spins = 0;; spins++) {
        cudaError_t e = cudaStreamQuery(g_nstream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) dist_die("CUDA error during NCCL %s: %s", what, cudaGetErrorString(e));
        ncclResult_t ae = ncclSuccess;
        ncclCommGetAsyncError(g_nccl, &ae);
        if (ae != ncclSuccess && ae != ncclInProgress) {
            ncclCommAbort(g_nccl);
            dist_die("NCCL %s failed: %s", what, ncclGetErrorString(ae));
        }
        if (pm_now() - t0 > timeout) {
            ncclCommAbort(g_nccl);
            dist_die("NCCL %s did not finish within %.0f s (PM_NCCL_TIMEOUT): a peer rank is stuck or gone", what,
                     timeout);
        }
        if (spins > 1000) sched_yield();
    }
}

// Ranges of unequal size (n need not divide by world): one NCCL reduce (or broadcast) per owner, in one group,
// in place. With two ranks this moves what ncclReduceScatter / ncclAllGather would.
static void nccl_shards(const Model *m, void *buf, int reduce) {
    nccl_setup();
    nccl_check(ncclGroupStart(), "group start");
    for (int r = 0; r < g_world; r++) {
        size_t lo, hi;
        dist_shard_range(m->n_params, r, g_world, &lo, &hi);
        if (hi == lo) continue;
        float *p = (float *)buf + lo;
        if (reduce) nccl_check(ncclReduce(p, p, hi - lo, ncclFloat32, ncclSum, r, g_nccl, g_nstream), "reduce");
        else nccl_check(ncclBroadcast(p, p, hi - lo, ncclFloat32, r, g_nccl, g_nstream), "broadcast");
    }
    nccl_check(ncclGroupEnd(), "group end");
    nccl_wait(reduce ? "reduce-scatter" : "all-gather");
}
#endif

static void buffer_shards(const Model *m, void *buf, int reduce) {
    m->bk->synchronize();  // the backend's queued work (backward, AdamW) has produced buf
    double t0 = pm_now();
    if (strcmp(m->bk->name, "cpu") == 0) {
#ifdef PM_HAVE_MPI
        mpi_shards(m, buf, reduce);
#endif
    } else {
#ifdef PM_HAVE_NCCL
        nccl_shards(m, buf, reduce);
#else
        dist_die("data parallel on --device %s needs NCCL, and this packmamba was built without it (nccl.h and "
                 "libnccl were not found at build time)", m->bk->name);
#endif
    }
    g_comm_s += pm_now() - t0;
}

// ---------------------------------------------------------------------------------------------------------------
// Sharded Adam moments. With several ranks each rank keeps only its range [g_lo, g_hi) of m and v (g_mom). Full
// buffers in m->adam_m / adam_v appear only transiently: fresh ones from model_alloc_optimizer, ones a resume
// loads from trainer.safetensors, and (rank 0) the ones gathered for a checkpoint. The next optimizer step takes
// its range from them and frees them.

static void *g_mom[2];       // (g_hi - g_lo) F32 each, backend memory: element k is parameter g_lo + k
static void *g_mom_base[2];  // their allocations: g_mom starts g_lo % 4 elements in, so that element k lies at
                             // the same 16-byte phase as params + g_lo + k (a backend's vectorized AdamW needs
                             // params, grads and moments in step; every backend allocation starts 16-aligned)
static size_t g_lo, g_hi;
static const Backend *g_bk;

static void absorb_moments(Model *m) {
    const Backend *bk = m->bk;
    const size_t es = bk->f32_bytes, n = g_hi - g_lo, pad = g_lo % 4;
    if (!g_mom[0]) {
        g_bk = bk;
        for (int k = 0; k < 2; k++) {
            g_mom_base[k] = bk->alloc((pad + (n ? n : 1)) * es);
            g_mom[k] = (char *)g_mom_base[k] + pad * es;
        }
    }
    if (!m->adam_m) return;
    void *host = pm_malloc(n ? n * es : 1);  // through the host: the interface has no device-to-device copy
    for (int k = 0; k < 2; k++) {
        bk->download(host, (char *)(k ? m->adam_v : m->adam_m) + g_lo * es, n * es);
        bk->upload(g_mom[k], host, n * es);
    }
    free(host);
    bk->free(m->adam_m);
    bk->free(m->adam_v);
    m->adam_m = m->adam_v = NULL;
}

// Every rank's range of a moment buffer into `full` (n_params) on rank 0.
static void gather_moment_to_root(const Model *m, const void *mine, void *full) {
    const size_t es = m->bk->f32_bytes;
    (void)es;
    double t0 = pm_now();
    if (strcmp(m->bk->name, "cpu") == 0) {
#ifdef PM_HAVE_MPI
        MPI_Datatype t = es == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
        int *counts = pm_malloc(g_world * sizeof(int)), *displs = pm_malloc(g_world * sizeof(int));
        for (int r = 0; r < g_world; r++) {
            size_t lo, hi;
            dist_shard_range(m->n_params, r, g_world, &lo, &hi);
            counts[r] = (int)(hi - lo), displs[r] = (int)lo;
        }
        mpi_check(MPI_Gatherv(mine, counts[g_rank], t, full, counts, displs, t, 0, MPI_COMM_WORLD), "gather");
        free(counts);
        free(displs);
#endif
    } else {
#ifdef PM_HAVE_NCCL
        m->bk->synchronize();
        nccl_setup();
        if (g_rank == 0 && g_hi > g_lo &&
            cudaMemcpy((char *)full + g_lo * es, mine, (g_hi - g_lo) * es, cudaMemcpyDeviceToDevice) != cudaSuccess)
            dist_die("cannot copy the Adam moments");
        nccl_check(ncclGroupStart(), "group start");
        for (int r = 1; r < g_world; r++) {
            size_t lo, hi;
            dist_shard_range(m->n_params, r, g_world, &lo, &hi);
            if (hi == lo) continue;
            if (g_rank == 0)
                nccl_check(ncclRecv((char *)full + lo * es, hi - lo, ncclFloat32, r, g_nccl, g_nstream), "recv");
            else if (g_rank == r) nccl_check(ncclSend(mine, hi - lo, ncclFloat32, 0, g_nccl, g_nstream), "send");
        }
        nccl_check(ncclGroupEnd(), "group end");
        nccl_wait("gather of the Adam moments");
#else
        (void)mine, (void)full;
        dist_die("data parallel on --device %s needs NCCL", m->bk->name);
#endif
    }
    g_comm_s += pm_now() - t0;
}

// ---------------------------------------------------------------------------------------------------------------
// Overlap: bucketed reductions launched from the backward. Buckets follow the flat layout: layer l's tensors are
// one contiguous range, finished when the backward leaves layer l's norm ("bwd.norm", the layer's last op; the
// first "bwd.norm" of a backward is norm_f's); the embedding (written by the classifier first and by
// "bwd.embedding" last) and norm_f go together at the very end. A micro-batch's backward starts at
// "fwdbwd.classifier". Each bucket is cut by the owners' ranges and each piece summed onto its owner.

static struct {
    Model *m;
    int on, accum;
    int micro;     // backward passes seen since the last optimizer step
    int norms;     // "bwd.norm" regions finished in the current backward
    int launched;  // buckets launched this step (n_layer + 1 when complete)
    size_t *layer_lo;  // (n_layer + 1): layer l is [layer_lo[l], layer_lo[l+1]); layer_lo[n_layer] = norm_f
    void (*prev)(void *, const char *, int);
    void *prev_ctx;
#ifdef PM_HAVE_MPI
    MPI_Request *req;
    int nreq, capreq;
#endif
} g_ov;

static void launch_bucket(size_t lo, size_t hi, int last) {
    const Model *m = g_ov.m;
    const size_t es = m->bk->f32_bytes;
    int cpu = strcmp(m->bk->name, "cpu") == 0;
    // the bucket's gradients are written by work queued on the backend's own streams: the reductions' stream waits
    // for it on the device (Backend.fence_stream), or the host for all of it
    if (!cpu && !m->bk->fence_stream) m->bk->synchronize();
    double t0 = pm_now();
#ifdef PM_HAVE_NCCL
    if (!cpu) {
        nccl_setup();
        if (m->bk->fence_stream) m->bk->fence_stream(g_nstream);
        nccl_check(ncclGroupStart(), "group start");
    }
#endif
    for (int r = 0; r < g_world; r++) {
        size_t a, b;
        dist_shard_range(m->n_params, r, g_world, &a, &b);
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        char *p = (char *)m->grads + a * es;
        (void)p;
        if (cpu) {
#ifdef PM_HAVE_MPI
            if (g_ov.nreq == g_ov.capreq)
                g_ov.capreq = g_ov.capreq ? 2 * g_ov.capreq : 64,
                g_ov.req = pm_realloc(g_ov.req, g_ov.capreq * sizeof(MPI_Request));
            MPI_Datatype t = es == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
            mpi_check(MPI_Ireduce(r == g_rank ? MPI_IN_PLACE : p, p, (int)(b - a), t, MPI_SUM, r, MPI_COMM_WORLD,
                                  &g_ov.req[g_ov.nreq++]),
                      "reduce (bucket)");
#endif
        } else {
#ifdef PM_HAVE_NCCL
            nccl_check(ncclReduce(p, p, b - a, ncclFloat32, ncclSum, r, g_nccl, g_nstream), "reduce (bucket)");
#endif
        }
    }
#ifdef PM_HAVE_NCCL
    if (!cpu) nccl_check(ncclGroupEnd(), "group end");
#endif
    if (last) g_ov.launched++;
    g_comm_s += pm_now() - t0;
}

static void overlap_hook(void *ctx, const char *region, int begin) {
    if (g_ov.prev) g_ov.prev(g_ov.prev_ctx, region, begin);
    if (begin) {
        if (strcmp(region, "fwdbwd.classifier") == 0) g_ov.micro++, g_ov.norms = 0;
        return;
    }
    if (g_ov.micro != g_ov.accum) return;  // gradients are final only after the step's last micro-batch
    const int L = g_ov.m->cfg.n_layer;
    if (strcmp(region, "bwd.norm") == 0) {
        int k = g_ov.norms++;  // 0: norm_f (sent with the embedding); k: layer L - k
        if (k >= 1 && k <= L) launch_bucket(g_ov.layer_lo[L - k], g_ov.layer_lo[L - k + 1], 1);
    } else if (strcmp(region, "bwd.embedding") == 0) {
        launch_bucket(0, g_ov.layer_lo[0], 0);                        // embedding
        launch_bucket(g_ov.layer_lo[L], g_ov.m->n_params, 1);          // norm_f
    }
}

void dist_attach(Model *m, int grad_accum) {
    if (g_world == 1) return;
    dist_shard_range(m->n_params, g_rank, g_world, &g_lo, &g_hi);
    absorb_moments(m);  // from here on this rank holds only its range of the Adam moments
    // The overlap is off unless PM_DIST_OVERLAP=1: on two H200s the one reduce-scatter after the backward measured
    // 0.5-1.2% faster at 130m, 370m and 1.4b (docs/dist.md, fifteenth session): the overlapped NCCL kernels slow
    // the backward beside them by more than they save (also when held to a few CTAs).
    const char *e = getenv("PM_DIST_OVERLAP");
    if (!(e && strcmp(e, "1") == 0)) return;
#ifndef PM_HAVE_NCCL
    if (strcmp(m->bk->name, "cpu") != 0) return;  // no device collectives: the one-shot path says so and stops
#endif
    const int L = m->cfg.n_layer;
    g_ov.m = m, g_ov.accum = grad_accum;
    g_ov.layer_lo = pm_malloc((L + 1) * sizeof(size_t));
    for (int l = 0; l < L; l++) g_ov.layer_lo[l] = m->tensors[model_tensor_index(&m->cfg, l, 0)].offset;
    g_ov.layer_lo[L] = m->tensors[model_tensor_index(&m->cfg, -1, 1)].offset;
    // The buckets must tile the buffer in this order (embedding, layers, norm_f); otherwise reduce at the end.
    int ok = m->tensors[model_tensor_index(&m->cfg, -1, 0)].offset == 0 &&
             g_ov.layer_lo[0] == m->tensors[0].size && g_ov.layer_lo[L] + m->cfg.d_model == m->n_params;
    for (int l = 0; l < L; l++) ok = ok && g_ov.layer_lo[l] < g_ov.layer_lo[l + 1];
    if (!ok) {
        if (g_rank == 0) fprintf(stderr, "packmamba: warning: unexpected parameter layout: no reduction overlap\n");
        return;
    }
    g_ov.prev = m->hook, g_ov.prev_ctx = m->hook_ctx;
    m->hook = overlap_hook, m->hook_ctx = NULL;
    // with a fence the backward keeps its side queue and deferred reductions (a hook before this one, if any, must
    // have ordered itself too)
    m->hook_orders_itself = m->bk->fence_stream && (!g_ov.prev || m->hook_orders_itself);
    // a layer's gradients must be complete when its last region ends: no weight gradients of several layers at
    // once (Model.dw_group), and so no copies for them (the caller attaches before planning the activations)
    if (m->layers) dist_die("internal error: dist_attach after model_alloc_activations (the groups are planned)");
    model_limit_dw_group(1);
    g_ov.on = 1;
}

// Wait for the bucket reductions of this step; returns 1 if they covered every bucket, 0 if none was launched
// (the caller reduces in one go).
static int overlap_finish(const Model *m) {
    if (!g_ov.on) return 0;
    int full = g_ov.launched == m->cfg.n_layer + 1, any = g_ov.launched > 0;
    double t0 = pm_now();
#ifdef PM_HAVE_MPI
    if (g_ov.nreq) mpi_check(MPI_Waitall(g_ov.nreq, g_ov.req, MPI_STATUSES_IGNORE), "wait (bucket reductions)");
    g_ov.nreq = 0;
#endif
#ifdef PM_HAVE_NCCL
    if (any && strcmp(m->bk->name, "cpu") != 0) nccl_wait("reduce-scatter (buckets)");
#endif
    g_comm_s += pm_now() - t0;
    if (any && !full)
        dist_die("internal error: %d of %d gradient buckets were reduced during the backward", g_ov.launched,
                 m->cfg.n_layer + 1);
    g_ov.micro = 0, g_ov.launched = 0;
    return full;
}

static void drain_and_free(void) {
#ifdef PM_HAVE_MPI
    if (g_ov.nreq) MPI_Waitall(g_ov.nreq, g_ov.req, MPI_STATUSES_IGNORE);
    g_ov.nreq = 0;
#endif
#ifdef PM_HAVE_NCCL
    if (g_nccl_ready) {
        nccl_wait("final wait");
        ncclCommDestroy(g_nccl);
        g_nccl_ready = 0;
    }
#endif
    if (g_mom[0]) {
        g_bk->free(g_mom_base[0]);
        g_bk->free(g_mom_base[1]);
        g_mom[0] = g_mom[1] = g_mom_base[0] = g_mom_base[1] = NULL;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// the sharded optimizer step

static ParamSegment *g_segs;  // this rank's clipped segments
static int g_masters_stale;   // F32 masters outside this rank's range are behind its compute copy

int dist_is_f32_operand(const Model *m, int t) {
    if (t == model_tensor_index(&m->cfg, -1, 0)) return 0;
    if (t == model_tensor_index(&m->cfg, -1, 1)) return 1;
    int w = (t - 1) % P_PER_LAYER;
    return !(w == P_IN_PROJ || w == P_X_PROJ || w == P_DT_W || w == P_OUT_PROJ);
}

// All-gather of the compute copy (ACT) and of the F32 operands' masters, from each owner's range. Runs of adjacent
// F32-operand tensors are merged (norm, A_log, D | conv weight, bias | dt bias per layer), then cut by owner.
static void gather_compute_copy(Model *m) {
#ifdef PM_HAVE_NCCL
    m->bk->synchronize();
    double t0 = pm_now();
    nccl_setup();
    size_t *own = pm_malloc((g_world + 1) * sizeof(size_t));
    for (int r = 0; r < g_world; r++) dist_shard_range(m->n_params, r, g_world, &own[r], &own[r + 1]);
    int ops = 0;
    nccl_check(ncclGroupStart(), "group start");
    for (int r = 0; r < g_world; r++) {
        if (own[r + 1] == own[r]) continue;
        void *p = (char *)m->params_act + own[r] * m->bk->act_bytes;
        nccl_check(ncclBroadcast(p, p, own[r + 1] - own[r], ncclBfloat16, r, g_nccl, g_nstream), "broadcast (act)");
        ops++;
    }
    for (int t = 0; t < m->n_tensors;) {
        if (!dist_is_f32_operand(m, t)) {
            t++;
            continue;
        }
        size_t lo = m->tensors[t].offset, hi = lo + m->tensors[t].size;
        for (t++; t < m->n_tensors && dist_is_f32_operand(m, t) && m->tensors[t].offset == hi; t++)
            hi += m->tensors[t].size;
        for (int r = 0; r < g_world; r++) {
            size_t a = lo > own[r] ? lo : own[r], b = hi < own[r + 1] ? hi : own[r + 1];
            if (a >= b) continue;
            float *p = (float *)m->params + a;
            nccl_check(ncclBroadcast(p, p, b - a, ncclFloat32, r, g_nccl, g_nstream), "broadcast (f32)");
            if (++ops % 64 == 0) {  // keep groups small
                nccl_check(ncclGroupEnd(), "group end");
                nccl_check(ncclGroupStart(), "group start");
            }
        }
    }
    nccl_check(ncclGroupEnd(), "group end");
    free(own);
    nccl_wait("all-gather (compute copy)");
    g_comm_s += pm_now() - t0;
#else
    (void)m;
    dist_die("internal error: compute-copy all-gather without NCCL");
#endif
}

double dist_optimizer_step(Model *m, const OptimConfig *o, float lr) {
    if (g_world == 1) return model_optimizer_step(m, o, lr);
    const Backend *bk = m->bk;
    dist_shard_range(m->n_params, g_rank, g_world, &g_lo, &g_hi);
    const size_t lo = g_lo, hi = g_hi, es = bk->f32_bytes;
    absorb_moments(m);
    // 1. Sum the gradients onto their owners (already launched bucket by bucket during the backward when the
    //    overlap is on).
    if (!overlap_finish(m)) buffer_shards(m, m->grads, 1);
    // 2. Global norm from the per-range sums of squares (each element counted once, by its owner).
    double ss = hi > lo ? bk->sumsq((char *)m->grads + lo * bk->f32_bytes, hi - lo) : 0.0;
    dist_allreduce_f64_sum(&ss, 1);
    double norm = sqrt(ss);
    float scale = clip_scale(norm, o->grad_clip);  // the same clipping as model_optimizer_step
    // 3. AdamW on the owned range only. AdamW is elementwise, so the owned values come out exactly as in a
    //    single-process step given the same summed gradient.
    m->step++;
    AdamWArgs a = {lr, o->beta1, o->beta2, o->eps, o->weight_decay, scale, m->step, 0, 0};
    if (!g_segs) g_segs = pm_malloc((m->n_tensors ? m->n_tensors : 1) * sizeof(ParamSegment));
    int ns = dist_clip_segments(m->segments, m->n_tensors, lo, hi, g_segs);
    for (int i = 0; i < ns; i++) g_segs[i].offset -= lo;  // relative to the range: the moments hold only it
    // 4. Every rank gets every updated weight. With a separate compute copy (CUDA: bf16) what the other ranks
    //    need is that copy plus the F32 masters of the small per-channel tensors (the ops read those as F32,
    //    backend.h): half the bytes of the F32 masters, and no conversion pass. The other F32 masters stay stale
    //    until dist_gather_optimizer (before a checkpoint). PM_DIST_FP32_GATHER=1: gather all F32 masters instead.
    const char *e = getenv("PM_DIST_FP32_GATHER");
    int act_gather = m->params_act != m->params && !m->weights_cast && !(e && strcmp(e, "1") == 0);
    bk->adamw((char *)m->params + lo * es, act_gather ? (char *)m->params_act + lo * bk->act_bytes : NULL,
              (char *)m->grads + lo * es, g_mom[0], g_mom[1], g_segs, ns, &a);
    if (act_gather) {
        gather_compute_copy(m);
        g_masters_stale = 1;
    } else {
        buffer_shards(m, m->params, 0);
        model_sync_compute_weights(m);
    }
    return norm;
}

// Every rank's carried state into m->carry_all on rank 0, in the global batch's rows (rank k's row b is row k B + b
// of each layer: batcher.h deals the slots so), through MPI on host copies whatever the backend.
static void gather_carry_to_root(Model *m) {
    size_t nh, nx;
    float *mine = checkpoint_carry_host(m, &nh, &nx);
    const size_t per = nh + nx;
    if ((double)per * g_world > 2147483647.0) dist_die("carried state of %zu floats a rank: too large to gather", per);
    float *all = g_rank == 0 ? pm_malloc(per * g_world * sizeof(float)) : NULL;
    const double t0 = pm_now();
#ifdef PM_HAVE_MPI
    mpi_check(MPI_Gather(mine, (int)per, MPI_FLOAT, all, (int)per, MPI_FLOAT, 0, MPI_COMM_WORLD), "gather of the carried state");
#endif
    g_comm_s += pm_now() - t0;
    free(mine);
    if (g_rank != 0) return;
    const ModelConfig *c = &m->cfg;
    const size_t L = c->n_layer, B = m->B, R = (size_t)B * g_world;
    const size_t hrow = (size_t)c->d_inner * c->d_state, xrow = (size_t)(c->d_conv - 1) * c->d_inner;
    free(m->carry_all);
    m->carry_all = pm_malloc(per * g_world * sizeof(float));
    float *h = m->carry_all, *x = m->carry_all + L * R * hrow;
    for (int k = 0; k < g_world; k++) {
        const float *kh = all + (size_t)k * per, *kx = kh + nh;
        for (size_t l = 0; l < L; l++) {
            memcpy(h + (l * R + k * B) * hrow, kh + l * B * hrow, B * hrow * sizeof(float));
            memcpy(x + (l * R + k * B) * xrow, kx + l * B * xrow, B * xrow * sizeof(float));
        }
    }
    free(all);
}

void dist_gather_optimizer(Model *m) {
    if (g_world == 1) return;
    if (m->carry_on) gather_carry_to_root(m);
    if (g_masters_stale) buffer_shards(m, m->params, 0);  // the checkpoint writes every F32 master
    g_masters_stale = 0;
    // Full moments on every rank (untouched since they were loaded or created) are already complete; otherwise
    // rank 0 gathers every range into full buffers, which the next step frees again.
    if (!dist_any(m->adam_m == NULL)) return;
    if (g_rank == 0 && !m->adam_m) model_alloc_optimizer(m);
    gather_moment_to_root(m, g_mom[0], m->adam_m);
    gather_moment_to_root(m, g_mom[1], m->adam_v);
}
