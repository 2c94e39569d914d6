// dist.h — data-parallel training: one process per device started by `mpirun -np N packmamba train ...`.
//
// Without mpirun (or with one rank) nothing here talks to MPI: dist_world() is 1, every collective returns at
// once, and dist_optimizer_step is model_optimizer_step, so a single-process run is exactly what it was.
//
// With N > 1 ranks each rank runs forward/backward on its share of the global batch (batcher.h splits it), then
// the optimizer step is sharded (ZeRO-1 style): the flat gradient buffer is cut into N contiguous ranges, each
// range is summed onto the rank that owns it (reduce-scatter), the global gradient norm is the allreduce of the
// per-range sums of squares, each rank runs AdamW on its range only (its Adam moments exist only for that range),
// and the updated weights are gathered back to every rank (all-gather): the F32 masters when F32 is the compute
// type (CPU), else the compute copy plus the F32 masters of the small tensors the ops read as F32 (CUDA).
// Collectives: MPI on the CPU backend (buffers are host memory); NCCL on the CUDA backend (device buffers; the
// NCCL id is exchanged through MPI). Before a checkpoint dist_gather_optimizer brings every F32 master up to date
// and gathers the moment ranges into full buffers on rank 0, so rank 0 writes the usual trainer.safetensors and
// a run resumes with any number of ranks.
//
// Failure: a rank that exits with an error (pm_die, a CUDA error, an early return) aborts the whole job with
// "packmamba: rank N: ..." (MPI_Abort from an exit handler), so the other ranks never wait forever in a
// collective. NCCL collectives are polled with ncclCommGetAsyncError and a timeout (PM_NCCL_TIMEOUT seconds,
// default 600) and abort the job naming the rank when they fail or hang.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model.h"

// Call first (before the backend is created). Initializes MPI only when this process was started by mpirun
// with more than one rank (OMPI_COMM_WORLD_SIZE or PMI_SIZE in the environment); returns the world size.
// Dies with a clear message when launched with several ranks by a binary built without MPI.
int dist_init(int *argc, char ***argv);
int dist_rank(void);   // 0 .. world-1 (0 without MPI)
int dist_world(void);  // number of ranks (1 without MPI)
// Before backend_get: with several ranks and device "cuda", binds this rank to GPU (local rank % GPUs).
void dist_select_device(const char *device);
// Normal end of a distributed run (all ranks call it); a no-op with one rank.
void dist_finalize(void);
// Print "packmamba: rank N: <message>" and bring every rank down (MPI_Abort); exit(1) with one rank.
__attribute__((noreturn, format(printf, 1, 2))) void dist_die(const char *fmt, ...);

// In-place sums over ranks (no-ops with one rank).
void dist_allreduce_i64_sum(int64_t *x, int n);
void dist_allreduce_f64_sum(double *x, int n);
int dist_any(int flag);  // 1 if flag is non-zero on any rank

// Contiguous range [*lo, *hi) of n elements owned by `rank` of `world` (sizes differ by at most one).
void dist_shard_range(size_t n, int rank, int world, size_t *lo, size_t *hi);
// The parameter segments clipped to [lo, hi), offsets unchanged (absolute in the flat buffer). Writes at most
// nsegs entries to out and returns how many.
int dist_clip_segments(const ParamSegment *segs, int nsegs, size_t lo, size_t hi, ParamSegment *out);

// Call once after the model and its optimizer are created, before its activations are allocated (all ranks):
// keeps only this rank's range of the Adam moments from then on, and sets up the overlap when it is asked for.
// Overlap (off unless PM_DIST_OVERLAP=1, measured slower on two H200s; a no-op with one rank): hooks the model's
// backward (Model.hook) so that each layer's gradients start their reduction onto their owners as soon as that
// layer's backward is done, while the backward of the layers below runs; only the step's last micro-batch (of
// grad_accum) launches reductions. dist_optimizer_step then only waits for them. Without it, dist_optimizer_step
// reduce-scatters all gradients at once.
void dist_attach(Model *m, int grad_accum);

// One optimizer step after every rank's backward: the sharded step described above; returns the global gradient
// norm before clipping. With one rank: model_optimizer_step.
double dist_optimizer_step(Model *m, const OptimConfig *o, float lr);
// Before a checkpoint (all ranks; rank 0 then writes): every F32 master current, complete Adam moments in
// m->adam_m / adam_v on rank 0 (freed again by the next step), and with carried state every rank's in
// m->carry_all on rank 0 (model.h). A no-op with one rank.
void dist_gather_optimizer(Model *m);

// Resume with a different number of ranks: a batcher position (batcher.h) saved by rank 0 of a run with W0 ranks
// of B0 rows is rewritten for this rank of `world` ranks with B rows, which is valid when the global batch is the
// same (pack, pad: B0*W0 == B*world; single: W0 == world), since the position counts global batches. Returns 0,
// or -1 with pm_error saying which --batch would keep the global batch.
int dist_adapt_position(uint64_t pos[8], int B, int rank, int world);

// 1 if the ops read tensor t (index into m->tensors) from the F32 master weights (backend.h: norm weights, conv
// weight/bias, dt bias, A_log, D), 0 if only through the compute copy (embedding, projection matrices). With a
// separate compute copy only the former's masters must be current on every rank.
int dist_is_f32_operand(const Model *m, int t);

// Seconds this rank has spent in collectives (including waiting for slower ranks), cumulative.
double dist_comm_seconds(void);
