// batcher.h — turns the documents of a prepared data directory into Batches under one of the three policies
// of DESIGN §2 (single, pad, pack), deterministic given a seed, resumable, and split by rank/world.
//
// Token semantics (the same under every policy, so the three policies train on identical (token, pos, target)
// triples and differ only in how rows are formed; carried state, below, changes them for documents longer than T):
//   - A document of L tokens d[0..L-1] is cut into pieces of at most T tokens: [0,T), [T,2T), ...
//   - Inside a piece, token i has pos = i (positions restart at 0 at every piece: no state is carried) and
//     target = the next token of the piece. The last token of the document's final piece has target = EOD
//     (tokenizer_eod_id()): the end of a document is something the model learns to predict. The last token of a
//     non-final piece has target PM_IGNORE: a target never crosses a piece or document boundary.
//   - EOD itself is never an input token.
//   - Padding: token 0, pos 0, target PM_IGNORE, doc -1.
//   - b->doc holds the document's global index in the data (0 .. documents-1; over several directories, counted
//     on from the documents of those before).
// A document of L tokens therefore yields L - (number of pieces - 1) targets.
//
// Carried state (pack only; batcher_set_carry, docs/data.md "Carried state"): the model carries a row's
// recurrent state into the same row of the next batch, so a document longer than T is served as if unbroken:
//   - Its pieces [0,T), [T,2T), ..., [kT, L) form a chain in consecutive batches of the epoch, all in the same row
//     index r: piece i+1 starts row r (column 0) of the batch after the one whose row r ends with piece i. A
//     non-final piece fills its row; the final one (1..T tokens) is followed in its row by other documents.
//   - pos = the token's position in its document (piece i's first token has pos i*T), and the last token of a
//     non-final piece targets the document's next token: a document of L tokens yields exactly L targets.
//   - b->carry_in[r] = 1: row r starts with a continuing piece (not its document's first); b->carry_out[r] = 1:
//     row r ends with a piece that is not its document's last. Both 0 in every other row, and in every batch of a
//     batcher without carry.
//   - Documents of at most T tokens are packed as usual (best fit over the window; window 1: next fit). A chain
//     starts in an empty row, the longest waiting chain first, and long documents are moved earlier in the epoch's
//     shuffled order so that they end with it; every chain ends inside its epoch. Every batch has B rows (near the
//     end of an epoch, rows no chain needs may be all padding), except the epoch's last, which drops its trailing
//     empty rows.
//
// Policies and the shape of each batch (the Batch must come from batch_alloc(B, T); b->B and b->T are set to the
// used size, which is never larger than allocated):
//   single: one piece per batch: b->B = 1, b->T = the piece's length.
//   pad:    B pieces per batch, b->T = the longest of them, shorter rows padded at the end.
//   pack:   rows of exactly T tokens holding whole pieces, placed by best fit over a window of `window` pieces
//           (taken in the epoch's shuffled order); b->B = B, b->T = T (the last batch of an epoch may have fewer
//           rows). window <= 1 gives the paper's greedy-in-order packing (next fit).
//
// Epochs: document order is reshuffled at every epoch from (seed, epoch). batcher_next loops forever.
// Data parallel: all ranks compute the same epoch plan, then rank r takes its share of each global batch:
//   single / pad: a global batch is `world` (single) or `B*world` (pad) consecutive pieces, handed out longest
//   first to the rank with the fewest tokens so far this epoch (ranks stay within about T tokens of each other);
//   pack: a global batch is `B*world` rows, dealt the same way by real tokens (heaviest row first, B rows per
//   rank); each rank serves its rows in row order. With one rank, the batch is simply the B rows.
//   Every rank gets the same number of batches per epoch; a rank with nothing left in the final global batch
//   gets an all-padding batch (b->B = 1, b->T = 1, n_valid = 0) so that ranks stay in lock step.
//
// Evaluation (every document of a split exactly once): open with seed 0, call batcher_next until it returns 1.
//     Batcher *bt = batcher_open(dir, 2, PM_POLICY_PACK, B, T, 0, 0, 1, 0);
//     int end; do { end = batcher_next(bt, &b); ...use b... } while (!end);
// batcher_epoch_batches() says how many batches that is (per rank).
// Carry mode: Batcher *bt = batcher_open(dir, PM_SPLIT_TRAIN, PM_POLICY_PACK, B, T, seed, 0, 1, 0);
//             if (batcher_set_carry(bt, 1) != 0) ...pm_last_error()...
#pragma once
#include <stdint.h>

#include "batch.h"

enum { PM_POLICY_SINGLE = 0, PM_POLICY_PAD = 1, PM_POLICY_PACK = 2 };
enum { PM_SPLIT_ALL = 0, PM_SPLIT_TRAIN = 1, PM_SPLIT_VAL = 2 };

#define PM_PACK_WINDOW_DEFAULT 512  // pieces considered for best fit when window <= 0 is passed

typedef struct Batcher Batcher;

// Opens DIR/data.pms (see shard.h), or the shards of several directories named "a,b" as one data set (their
// documents in that order; vocabulary and end-of-document id must agree). split: PM_SPLIT_*; policy: PM_POLICY_*;
// B, T: the allocated batch size; rank in [0, world); window: pack's best-fit window (<= 0:
// PM_PACK_WINDOW_DEFAULT; 1: greedy in order).
// Returns NULL with pm_error set on failure (missing/corrupt data, empty split, bad arguments).
Batcher *batcher_open(const char *data_dir, int split, int policy, int B, int T, uint64_t seed, int rank, int world,
                      int window);
// Fills b (allocated with batch_alloc(B, T)) with the next batch; returns 1 if this batch is the last of an epoch,
// else 0. Calls batch_count_valid.
int batcher_next(Batcher *bt, Batch *b);
void batcher_close(Batcher *bt);
// Carried state on (1) or off (0, the default): see "Carried state" above. Call it right after batcher_open, before
// the first batcher_next or batcher_set_position. With world > 1 the plan is the global batch's (B x world rows,
// the same as one rank's of B x world) and its row slots are dealt in order, B to a rank (slot j to rank j / B, row
// j % B there), so a chain stays in one row of one rank. Returns 0, or -1 with pm_error set when the batcher is not
// PM_POLICY_PACK, or when the setting would change after a batch was served or a position restored (asking for the
// setting the batcher already has is always 0).
int batcher_set_carry(Batcher *bt, int on);

// Data position for checkpoints: pos[0] = format tag, [1] = epoch, [2] = batch index within the epoch,
// [3] = seed, [4] = data fingerprint, [5] = policy/B/T, [6] = rank/world, [7] = window | carry << 63.
void batcher_get_position(const Batcher *bt, uint64_t pos[8]);
// Restores a position saved by batcher_get_position on a batcher opened with the same arguments (and the same
// batcher_set_carry, which must come first); the batches that
// follow are exactly those the original run would have produced. Returns 0, or -1 with pm_error set if the
// position belongs to other data or other arguments.
int batcher_set_position(Batcher *bt, const uint64_t pos[8]);

int batcher_epoch_batches(const Batcher *bt);  // batches per epoch on this rank (of the epoch planned last; pack's
                                               // count, carry's more so, can differ from one epoch to the next)
int batcher_epoch(const Batcher *bt);          // current epoch (0-based) of the next batch
int batcher_documents(const Batcher *bt);      // documents in the opened split
int64_t batcher_tokens(const Batcher *bt);     // tokens in the opened split (all ranks)

const char *policy_name(int policy);  // "single", "pad", "pack"
int policy_parse(const char *name);   // -1 if unknown

// Fill of one policy over one epoch of a split (world = 1), computed from the same plan batcher_next serves:
// fill = real tokens / tokens computed, where a batch computes b->B * b->T tokens (single: every piece on its own,
// so fill is 1 but it takes one step per piece; pad: B pieces per step padded to the longest; pack: rows of T).
typedef struct {
    int64_t real_tokens, computed_tokens, rows, batches;
    double fill;
} PolicyStats;
int batcher_policy_stats(const char *data_dir, int split, int policy, int B, int T, uint64_t seed, int window,
                         PolicyStats *out);  // 0, or -1 + pm_error
