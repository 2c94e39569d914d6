// batcher.c — see batcher.h. Each epoch is planned in full when it starts (shuffled document order, pieces, and
// for `pack` the rows); batches are then slices of that plan, so a data position is just (epoch, batch index) and
// resuming replays exactly.
#include "batcher.h"

#include <stdio.h>
#include <string.h>

#include "shard.h"
#include "util.h"

typedef struct {
    int64_t doc;    // global document index
    int64_t start;  // first token of the piece within the document
    int32_t len;    // 1..T
    int32_t last;   // 1 if the piece ends its document (its last token targets EOD)
} Piece;

struct Batcher {
    Shard *shards;       // (n_shards) the data directories' shards, in the order named
    uint64_t *doc_base;  // (n_shards + 1) global index of each shard's first document; the last: all documents
    int n_shards;
    int split, policy, B, T, rank, world, window;
    int carry;    // batcher_set_carry: pieces of one document chained through one row of consecutive batches
    int started;  // a batch was served or a position restored: the plan's settings are fixed from then on
    uint64_t seed;
    int64_t *docs;  // (n_docs) global indices of the split's documents with at least one token, in shard order
    int64_t n_docs, n_tokens;
    // Plan of the current epoch.
    int64_t plan_epoch;  // epoch the plan below belongs to (-1: none)
    Piece *pieces;       // (n_pieces) in shuffled order
    int64_t n_pieces;
    int64_t *row_start;  // pack: (n_rows + 1) offsets into row_piece (carry: grown as the plan needs)
    int64_t row_cap;     // carry: entries allocated in row_start
    int64_t *row_piece;  // pack: (n_pieces) piece indices, row by row
    int32_t *piece_rank;  // single/pad: (n_pieces) the rank that serves each piece
    int32_t *row_rank;    // pack: (n_rows) the rank that serves each row
    int64_t n_rows;
    int64_t n_batches;  // per rank, per epoch
    // Position of the next batch.
    int64_t epoch, batch;
};

const char *policy_name(int p) {
    return p == PM_POLICY_SINGLE ? "single" : p == PM_POLICY_PAD ? "pad" : p == PM_POLICY_PACK ? "pack" : "?";
}

int policy_parse(const char *s) {
    for (int p = 0; p < 3; p++)
        if (strcmp(s, policy_name(p)) == 0) return p;
    return -1;
}

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------------------------------------------
// Packing. Both packers emit rows as runs of piece indices; a row's pieces sum to at most T.

// Greedy in order (next fit, the paper's baseline): append pieces in order, start a new row when one does not fit.
static int64_t pack_greedy(const Piece *p, int64_t n, int T, int64_t *row_start, int64_t *row_piece) {
    int64_t rows = 0, used = 0;
    row_start[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (used > 0 && used + p[i].len > T) row_start[++rows] = i, used = 0;
        row_piece[i] = i;
        used += p[i].len;
    }
    if (n > 0) row_start[++rows] = n;
    return rows;
}

// The oldest waiting piece of the longest waiting length L <= space, taken from its per-length FIFO queue
// (head/tail/next; occ: bit L set while some piece of length L waits); -1 when none fits. A bitset over lengths
// finds that L in T/64 steps.
static int64_t take_longest_fitting(int space, int64_t *head, int64_t *tail, const int64_t *next, uint64_t *occ) {
    int L = -1;
    for (int w = space >> 6; w >= 0 && L < 0; w--) {
        uint64_t bits = occ[w];
        if (w == space >> 6) bits &= (space & 63) == 63 ? ~0ull : ((1ull << ((space & 63) + 1)) - 1);
        if (bits) L = w * 64 + 63 - __builtin_clzll(bits);
    }
    if (L <= 0) return -1;
    const int64_t i = head[L];
    head[L] = next[i];
    if (head[L] < 0) tail[L] = -1, occ[L >> 6] &= ~(1ull << (L & 63));
    return i;
}

// Best fit over a window: the next `window` pieces (in order) wait in per-length FIFO queues; a row is filled by
// repeatedly taking the longest waiting piece that still fits (oldest first among equal lengths), refilling the
// window from the order after each take. A bitset over lengths finds "longest length <= space" in T/64 steps.
// Piece q (of length L) onto the back of its length's queue (head/tail/next), and L marked waiting in occ: the
// best-fit packers' enqueue (pack_best_fit, pack_carry).
static inline void queue_piece(int64_t q, int L, int64_t *next, int64_t *head, int64_t *tail, uint64_t *occ) {
    next[q] = -1;
    if (tail[L] >= 0) next[tail[L]] = q;
    else head[L] = q;
    tail[L] = q;
    occ[L >> 6] |= 1ull << (L & 63);
}

static int64_t pack_best_fit(const Piece *p, int64_t n, int T, int window, int64_t *row_start, int64_t *row_piece) {
    int64_t *head = pm_malloc((T + 1) * sizeof(int64_t)), *tail = pm_malloc((T + 1) * sizeof(int64_t));
    int64_t *next = pm_malloc((n ? n : 1) * sizeof(int64_t));
    int nw = (T + 64) / 64;
    uint64_t *occ = pm_calloc(nw, sizeof(uint64_t));  // bit L set: some waiting piece has length L
    for (int L = 0; L <= T; L++) head[L] = tail[L] = -1;
    int64_t q = 0, waiting = 0, rows = 0, placed = 0;
#define ENQUEUE()                                                      \
    while (waiting < window && q < n) {                                \
        queue_piece(q, p[q].len, next, head, tail, occ);               \
        q++, waiting++;                                                \
    }
    ENQUEUE();
    row_start[0] = 0;
    while (waiting > 0) {
        int space = T;
        while (space > 0 && waiting > 0) {
            const int64_t i = take_longest_fitting(space, head, tail, next, occ);
            if (i < 0) break;
            waiting--;
            row_piece[placed++] = i;
            space -= p[i].len;
            ENQUEUE();
        }
        row_start[++rows] = placed;
    }
#undef ENQUEUE
    free(head), free(tail), free(next), free(occ);
    return rows;
}

// Waiting chains of pack_carry: a binary max-heap of first pieces by (pieces in the chain, then earliest in order).
typedef struct {
    int64_t *first, *pieces;
    int64_t n;
} ChainHeap;

static int chain_before(const ChainHeap *h, int64_t a, int64_t b) {
    return h->pieces[a] != h->pieces[b] ? h->pieces[a] > h->pieces[b] : h->first[a] < h->first[b];
}

static void chain_swap(ChainHeap *h, int64_t a, int64_t b) {
    int64_t f = h->first[a], k = h->pieces[a];
    h->first[a] = h->first[b], h->pieces[a] = h->pieces[b];
    h->first[b] = f, h->pieces[b] = k;
}

static void chain_push(ChainHeap *h, int64_t first, int64_t pieces) {
    int64_t i = h->n++;
    h->first[i] = first, h->pieces[i] = pieces;
    for (; i > 0 && chain_before(h, i, (i - 1) / 2); i = (i - 1) / 2) chain_swap(h, i, (i - 1) / 2);
}

static int64_t chain_pop(ChainHeap *h) {
    int64_t top = h->first[0], i = 0;
    chain_swap(h, 0, --h->n);
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && chain_before(h, c + 1, c)) c++;
        if (!chain_before(h, c, i)) break;
        chain_swap(h, i, c);
        i = c;
    }
    return top;
}

// Carry mode (batcher_set_carry): the epoch is planned batch by batch, B rows each, because a document longer than
// T must run through one row index ("lane") of consecutive batches. Such a document waits in the window as a chain
// and can only start in an empty row; it then takes column 0 of its lane in the batches that follow, its final
// piece leaving the rest of that row to best fit. An empty row takes a waiting chain before any single piece, the
// chain with the most pieces first: chains are what can overrun the epoch's end (longest processing time first
// keeps the lanes ending together), and an empty row is the only place one can start. Pieces of a document are
// consecutive in p (a chain's next piece is i + 1); a piece with start > 0 is never an item of the window.
// Otherwise this is pack_best_fit (window 1: next fit). Every batch has B rows except the epoch's last, which drops
// its trailing empty rows (nothing carries out of it, so no later row index is needed). Returns the rows.
static int64_t pack_carry(const Piece *p, int64_t n, int B, int T, int window, int64_t **row_start_io, int64_t *row_cap,
                          int64_t *row_piece) {
    int64_t *head = pm_malloc((T + 1) * sizeof(int64_t)), *tail = pm_malloc((T + 1) * sizeof(int64_t));
    int64_t *next = pm_malloc((n ? n : 1) * sizeof(int64_t));
    int64_t *lane = pm_malloc((size_t)B * sizeof(int64_t));  // next piece of the chain in row r, -1: none
    ChainHeap chains = {pm_malloc((n ? n : 1) * sizeof(int64_t)), pm_malloc((n ? n : 1) * sizeof(int64_t)), 0};
    int nw = (T + 64) / 64;
    uint64_t *occ = pm_calloc(nw, sizeof(uint64_t));  // bit L set: some waiting single piece has length L
    for (int L = 0; L <= T; L++) head[L] = tail[L] = -1;
    for (int r = 0; r < B; r++) lane[r] = -1;
    int64_t *row_start = *row_start_io;
    int64_t q = 0, waiting = 0, running = 0, rows = 0, placed = 0, last_batch = 0;
#define ENQUEUE()                                                      \
    while (waiting < window && q < n) {                                \
        if (p[q].start > 0) { q++; continue; }                         \
        if (!p[q].last) {                                              \
            int64_t k = q;                                             \
            while (!p[k].last) k++;                                    \
            chain_push(&chains, q, k - q + 1);                         \
            q++, waiting++;                                            \
            continue;                                                  \
        }                                                              \
        queue_piece(q, p[q].len, next, head, tail, occ);               \
        q++, waiting++;                                                \
    }
    ENQUEUE();
    row_start[0] = 0;
    while (waiting > 0 || running > 0) {
        last_batch = rows;
        for (int r = 0; r < B; r++) {
            int space = T;
            if (lane[r] >= 0) {  // the chain running in this lane goes on at column 0
                int64_t i = lane[r];
                row_piece[placed++] = i;
                space -= p[i].len;
                if (p[i].last) lane[r] = -1, running--;
                else lane[r] = i + 1;
            } else if (chains.n > 0) {  // an empty row: a chain starts (its first piece fills the row)
                int64_t i = chain_pop(&chains);
                waiting--;
                row_piece[placed++] = i;
                space = 0;
                lane[r] = i + 1, running++;
                ENQUEUE();
            }
            while (space > 0 && waiting > chains.n) {
                const int64_t i = take_longest_fitting(space, head, tail, next, occ);
                if (i < 0) break;
                waiting--;
                row_piece[placed++] = i;
                space -= p[i].len;
                ENQUEUE();
            }
            if (rows + 1 >= *row_cap) {
                *row_cap *= 2;
                row_start = *row_start_io = pm_realloc(row_start, *row_cap * sizeof(int64_t));
            }
            row_start[++rows] = placed;
        }
    }
#undef ENQUEUE
    while (rows > last_batch + 1 && row_start[rows] == row_start[rows - 1]) rows--;
    free(head), free(tail), free(next), free(lane), free(occ), free(chains.first), free(chains.pieces);
    return rows;
}

// ---------------------------------------------------------------------------------------------------------------

static int cmp_len_desc(const void *a, const void *b) {
    const Piece *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;  // ties by document: a total, deterministic order
}

// Deals the items [first, first + cnt) of a global batch (already in the order to deal them: heaviest first) to
// `world` ranks, at most per_rank each, each item to the rank with the least weight so far this epoch
// (cumulative longest-processing-time), so ranks stay within about one item's weight of each other.
static void deal_to_ranks(const int64_t *weight, int64_t first, int64_t cnt, int world, int per_rank, int64_t *load,
                          int *slots, int32_t *rank_of) {
    for (int r = 0; r < world; r++) slots[r] = 0;
    for (int64_t j = first; j < first + cnt; j++) {
        int best = -1;
        for (int r = 0; r < world; r++)
            if (slots[r] < per_rank && (best < 0 || load[r] < load[best])) best = r;
        rank_of[j] = best;
        slots[best]++;
        load[best] += weight[j - first];
    }
}

static int cmp_i64_pair_desc(const void *a, const void *b) {  // (weight, index) by weight desc, then index
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? 1 : -1) : (x[1] > y[1]) - (x[1] < y[1]);
}

static int cmp_i64_pair_asc(const void *a, const void *b) {  // (key, index) by key, then index
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0] ? 1 : -1) : (x[1] > y[1]) - (x[1] < y[1]);
}

// The shard holding global document g, and g's index in it.
static const Shard *shard_of(const Batcher *bt, int64_t g, uint64_t *local) {
    int i = 0;
    while ((uint64_t)g >= bt->doc_base[i + 1]) i++;
    *local = (uint64_t)g - bt->doc_base[i];
    return &bt->shards[i];
}

static int64_t doc_len(const Batcher *bt, int64_t g) {
    uint64_t d;
    const Shard *s = shard_of(bt, g, &d);
    return (int64_t)shard_doc_len(s, d);
}

// Carry mode: a document of n > 1 pieces holds its row for n consecutive batches, so one that started in the
// epoch's last n batches would run on alone after the other rows have run out, the rest of its batches padding.
// Each such document is moved earlier in the shuffled order, from token offset c (of the epoch's tokens) to
// c * (N - n) / N, N = the epoch's batches at full rows: the shuffle still decides where it goes, scaled into the part
// of the epoch in which it can finish. Documents of one piece keep their offsets; ties keep the shuffled order.
static void pull_chains_forward(const Batcher *bt, int64_t *order) {
    int64_t bt_tokens = (int64_t)bt->B * bt->world * bt->T, N = (bt->n_tokens + bt_tokens - 1) / bt_tokens, cum = 0;
    int64_t *pair = pm_malloc(2 * (size_t)bt->n_docs * sizeof(int64_t));
    for (int64_t k = 0; k < bt->n_docs; k++) {
        int64_t len = doc_len(bt, order[k]), n = (len + bt->T - 1) / bt->T;
        pair[2 * k] = n > 1 ? (int64_t)((unsigned __int128)cum * (uint64_t)(N > n ? N - n : 0) / (uint64_t)N) : cum;
        pair[2 * k + 1] = k;
        cum += len;
    }
    qsort(pair, bt->n_docs, 2 * sizeof(int64_t), cmp_i64_pair_asc);
    int64_t *was = pm_malloc((size_t)bt->n_docs * sizeof(int64_t));
    memcpy(was, order, bt->n_docs * sizeof(int64_t));
    for (int64_t k = 0; k < bt->n_docs; k++) order[k] = was[pair[2 * k + 1]];
    free(was), free(pair);
}

static void plan_epoch(Batcher *bt, int64_t epoch) {
    // Document order: Fisher-Yates with an RNG seeded from (seed, epoch).
    int64_t *order = pm_malloc((bt->n_docs ? bt->n_docs : 1) * sizeof(int64_t));
    memcpy(order, bt->docs, bt->n_docs * sizeof(int64_t));
    PmRng rng;
    pm_rng_seed(&rng, splitmix(bt->seed ^ splitmix((uint64_t)epoch + 0x51ed)));
    for (int64_t i = bt->n_docs - 1; i > 0; i--) {
        int64_t j = (int64_t)(pm_rng_u64(&rng) % (uint64_t)(i + 1));
        int64_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    if (bt->carry) pull_chains_forward(bt, order);
    // Pieces of at most T tokens, in that order.
    int64_t n = 0;
    for (int64_t k = 0; k < bt->n_docs; k++) n += (doc_len(bt, order[k]) + bt->T - 1) / bt->T;
    bt->pieces = pm_realloc(bt->pieces, (n ? n : 1) * sizeof(Piece));
    n = 0;
    for (int64_t k = 0; k < bt->n_docs; k++) {
        int64_t len = doc_len(bt, order[k]);
        for (int64_t s = 0; s < len; s += bt->T) {
            int64_t l = len - s < bt->T ? len - s : bt->T;
            bt->pieces[n++] = (Piece){order[k], s, (int32_t)l, s + l == len};
        }
    }
    free(order);
    bt->n_pieces = n;
    int64_t per_batch;  // pieces (single, pad) or rows (pack) in one global batch
    if (bt->policy == PM_POLICY_PACK) {
        bt->row_cap = n + 1;
        bt->row_start = pm_realloc(bt->row_start, bt->row_cap * sizeof(int64_t));
        bt->row_piece = pm_realloc(bt->row_piece, (n ? n : 1) * sizeof(int64_t));
        if (bt->carry)  // (the global batch's rows: a chain keeps its row slot, and so its rank)
            bt->n_rows = pack_carry(bt->pieces, n, bt->B * bt->world, bt->T, bt->window, &bt->row_start, &bt->row_cap,
                                    bt->row_piece);
        else
            bt->n_rows = bt->window <= 1
                             ? pack_greedy(bt->pieces, n, bt->T, bt->row_start, bt->row_piece)
                             : pack_best_fit(bt->pieces, n, bt->T, bt->window, bt->row_start, bt->row_piece);
        per_batch = (int64_t)bt->B * bt->world;
        bt->n_batches = (bt->n_rows + per_batch - 1) / per_batch;
        if (bt->world > 1 && bt->carry) {
            // Data parallel with carried state: by row slot, B each in order (slot j of a global batch to rank j / B,
            // its row j % B there), so that a chain of pieces stays in one row of one rank from batch to batch.
            bt->row_rank = pm_realloc(bt->row_rank, (bt->n_rows ? bt->n_rows : 1) * sizeof(int32_t));
            for (int64_t j = 0; j < bt->n_rows; j++) bt->row_rank[j] = (int32_t)(j % per_batch / bt->B);
        } else if (bt->world > 1) {
            // Data parallel: the rows of each global batch are dealt to ranks by real tokens (heaviest row first,
            // to the rank with the fewest tokens so far this epoch, B rows each), not by position, so a rank
            // never gets all the short rows of an epoch's tail.
            bt->row_rank = pm_realloc(bt->row_rank, (bt->n_rows ? bt->n_rows : 1) * sizeof(int32_t));
            int64_t *load = pm_calloc(bt->world, sizeof(int64_t)), *pair = pm_malloc(2 * per_batch * sizeof(int64_t));
            int64_t *weight = pm_malloc(per_batch * sizeof(int64_t));
            int32_t *dealt = pm_malloc(per_batch * sizeof(int32_t));
            int *slots = pm_malloc(bt->world * sizeof(int));
            for (int64_t first = 0; first < bt->n_rows; first += per_batch) {
                int64_t cnt = bt->n_rows - first < per_batch ? bt->n_rows - first : per_batch;
                for (int64_t j = 0; j < cnt; j++) {
                    int64_t tok = 0;
                    for (int64_t k = bt->row_start[first + j]; k < bt->row_start[first + j + 1]; k++)
                        tok += bt->pieces[bt->row_piece[k]].len;
                    pair[2 * j] = tok, pair[2 * j + 1] = j;
                }
                qsort(pair, cnt, 2 * sizeof(int64_t), cmp_i64_pair_desc);
                for (int64_t j = 0; j < cnt; j++) weight[j] = pair[2 * j];
                deal_to_ranks(weight, 0, cnt, bt->world, bt->B, load, slots, dealt);
                for (int64_t j = 0; j < cnt; j++) bt->row_rank[first + pair[2 * j + 1]] = dealt[j];
            }
            free(load), free(pair), free(weight), free(dealt), free(slots);
        }
    } else {
        // single/pad: a global batch is `world * per_rank` consecutive pieces. Within it, pieces are sorted by
        // length (longest first) and each goes to the rank with the fewest tokens so far this epoch among those
        // with a free slot — cumulative longest-processing-time assignment, so ranks stay within about one
        // piece (<= T tokens) of each other over the epoch.
        int per_rank = bt->policy == PM_POLICY_SINGLE ? 1 : bt->B;
        per_batch = (int64_t)per_rank * bt->world;
        bt->n_rows = n;
        bt->n_batches = (n + per_batch - 1) / per_batch;
        bt->piece_rank = pm_realloc(bt->piece_rank, (n ? n : 1) * sizeof(int32_t));
        int64_t *load = pm_calloc(bt->world, sizeof(int64_t)), *weight = pm_malloc(per_batch * sizeof(int64_t));
        int *slots = pm_malloc(bt->world * sizeof(int));
        for (int64_t first = 0; first < n; first += per_batch) {
            int64_t cnt = n - first < per_batch ? n - first : per_batch;
            qsort(bt->pieces + first, cnt, sizeof(Piece), cmp_len_desc);
            for (int64_t j = 0; j < cnt; j++) weight[j] = bt->pieces[first + j].len;
            deal_to_ranks(weight, first, cnt, bt->world, per_rank, load, slots, bt->piece_rank);
        }
        free(load), free(weight), free(slots);
    }
    bt->plan_epoch = epoch;
}

Batcher *batcher_open(const char *data_dir, int split, int policy, int B, int T, uint64_t seed, int rank, int world,
                      int window) {
    if (policy < 0 || policy > 2) return pm_error("batcher: unknown policy %d", policy), NULL;
    if (split < 0 || split > 2) return pm_error("batcher: unknown split %d", split), NULL;
    if (B < 1 || T < 1) return pm_error("batcher: batch size %d x %d must be positive", B, T), NULL;
    if (world < 1 || rank < 0 || rank >= world) return pm_error("batcher: bad rank %d of world %d", rank, world), NULL;
    int nd;
    char **dirs = data_dirs(data_dir, &nd);
    if (!dirs) return NULL;
    Batcher *bt = pm_calloc(1, sizeof *bt);
    bt->shards = pm_calloc((size_t)nd, sizeof(Shard));
    bt->doc_base = pm_calloc((size_t)nd + 1, sizeof(uint64_t));
    char path[4096], first[4096] = "";
    int rc = 0;
    for (int i = 0; i < nd && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], PM_SHARD_FILE);
        if ((rc = shard_open(&bt->shards[i], path)) != 0) break;
        bt->n_shards++;
        bt->doc_base[i + 1] = bt->doc_base[i] + bt->shards[i].n_docs;
        const Shard *s0 = &bt->shards[0], *s = &bt->shards[i];
        if (i == 0) snprintf(first, sizeof first, "%s", path);
        else if (s->vocab_size != s0->vocab_size || s->eod_id != s0->eod_id)
            rc = pm_error("%s: vocabulary %u, end-of-document id %u; %s has %u, %u (prepared with different "
                          "tokenizers)", path, s->vocab_size, s->eod_id, first, s0->vocab_size, s0->eod_id);
    }
    data_dirs_free(dirs, nd);
    if (rc != 0 || bt->doc_base[nd] > INT32_MAX) {  // (a batch's doc field holds global indices as int32)
        if (rc == 0) pm_error("%s: more than %d documents in all", data_dir, INT32_MAX);
        batcher_close(bt);
        return NULL;
    }
    bt->split = split, bt->policy = policy, bt->B = B, bt->T = T, bt->seed = seed;
    bt->rank = rank, bt->world = world;
    bt->window = window <= 0 ? PM_PACK_WINDOW_DEFAULT : window;
    bt->docs = pm_malloc((bt->doc_base[nd] ? bt->doc_base[nd] : 1) * sizeof(int64_t));
    for (int i = 0; i < nd; i++) {
        const Shard *s = &bt->shards[i];
        for (uint64_t d = 0; d < s->n_docs; d++) {
            if (shard_doc_len(s, d) == 0) continue;
            if (split != PM_SPLIT_ALL && s->split[d] != split) continue;
            bt->docs[bt->n_docs++] = (int64_t)(bt->doc_base[i] + d);
            bt->n_tokens += (int64_t)shard_doc_len(s, d);
        }
    }
    if (bt->n_docs == 0) {
        pm_error("%s: no documents in split %s", nd == 1 ? path : data_dir,
                 split == 0 ? "all" : split == 1 ? "train" : "val");
        batcher_close(bt);
        return NULL;
    }
    bt->plan_epoch = -1;
    plan_epoch(bt, 0);
    return bt;
}

void batcher_close(Batcher *bt) {
    if (!bt) return;
    for (int i = 0; i < bt->n_shards; i++) shard_close(&bt->shards[i]);
    free(bt->shards), free(bt->doc_base);
    free(bt->docs), free(bt->pieces), free(bt->row_start), free(bt->row_piece), free(bt->piece_rank),
        free(bt->row_rank);
    free(bt);
}

// Writes piece p at row r (of width b->T) starting at column c. In carry mode the piece is a stretch of its unbroken
// document: positions count from the document's start and its last token targets the next piece's first.
static void put_piece(const Batcher *bt, Batch *b, int r, int c, const Piece *p) {
    uint64_t d;
    const Shard *s = shard_of(bt, p->doc, &d);
    uint64_t base = s->offsets[d] + (uint64_t)p->start;
    int32_t *tok = b->tokens + (size_t)r * b->T + c, *pos = b->pos + (size_t)r * b->T + c;
    int32_t *tgt = b->targets + (size_t)r * b->T + c, *doc = b->doc + (size_t)r * b->T + c;
    int32_t pos0 = bt->carry ? (int32_t)p->start : 0;
    int len_on = bt->carry && !p->last ? p->len + 1 : p->len;  // tokens whose successor is a target
    for (int i = 0; i < p->len; i++) {
        tok[i] = (int32_t)shard_token(s, base + i);
        pos[i] = pos0 + i;
        doc[i] = (int32_t)p->doc;
        tgt[i] = i + 1 < len_on ? (int32_t)shard_token(s, base + i + 1) : p->last ? (int32_t)s->eod_id : PM_IGNORE;
    }
}

// All padding, B x T, and no row carried: all of the allocated rows' carry flags (alloc_B, the batcher's B) are
// cleared, whatever the policy, since a Batch is reused and a carry batch may have left some set.
static void clear_batch(Batch *b, int B, int T, int alloc_B) {
    b->B = B, b->T = T;
    size_t n = (size_t)B * T;
    memset(b->tokens, 0, n * sizeof(int32_t));
    memset(b->pos, 0, n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) b->targets[i] = PM_IGNORE, b->doc[i] = -1;
    if (b->carry_in) memset(b->carry_in, 0, (size_t)alloc_B * sizeof(int32_t));
    if (b->carry_out) memset(b->carry_out, 0, (size_t)alloc_B * sizeof(int32_t));
}


int batcher_next(Batcher *bt, Batch *b) {
    bt->started = 1;
    if (bt->plan_epoch != bt->epoch) plan_epoch(bt, bt->epoch);
    int64_t g = bt->batch;
    if (bt->policy != PM_POLICY_PACK) {
        // This rank's pieces of the global batch (already longest first), each in its own row, padded to the
        // longest (pad) or exactly its length (single, one piece).
        int per_rank = bt->policy == PM_POLICY_SINGLE ? 1 : bt->B;
        int64_t first = g * per_rank * bt->world, last = first + (int64_t)per_rank * bt->world;
        if (last > bt->n_pieces) last = bt->n_pieces;
        int nm = 0, longest = 0;
        for (int64_t j = first; j < last; j++)
            if (bt->piece_rank[j] == bt->rank) {
                nm++;
                if (bt->pieces[j].len > longest) longest = bt->pieces[j].len;
            }
        if (nm == 0) {
            clear_batch(b, 1, 1, bt->B);  // nothing left for this rank in the epoch's last global batch
        } else {
            clear_batch(b, nm, longest, bt->B);
            int r = 0;
            for (int64_t j = first; j < last; j++)
                if (bt->piece_rank[j] == bt->rank) put_piece(bt, b, r++, 0, &bt->pieces[j]);
        }
    } else {
        // This rank's rows of global batch g: all of them with one rank, else those dealt to it (in row order).
        int64_t first = g * bt->B * bt->world, last = first + (int64_t)bt->B * bt->world;
        if (last > bt->n_rows) last = bt->n_rows;
        int nr = 0;
        for (int64_t j = first; j < last; j++) nr += bt->world == 1 || bt->row_rank[j] == bt->rank;
        if (nr == 0) {
            clear_batch(b, 1, 1, bt->B);  // nothing left for this rank in the epoch's last global batch
        } else {
            clear_batch(b, nr, bt->T, bt->B);
            int r = 0;
            for (int64_t j = first; j < last; j++) {
                if (bt->world > 1 && bt->row_rank[j] != bt->rank) continue;
                int c = 0;
                for (int64_t k = bt->row_start[j]; k < bt->row_start[j + 1]; k++) {
                    const Piece *p = &bt->pieces[bt->row_piece[k]];
                    put_piece(bt, b, r, c, p);
                    c += p->len;
                }
                if (bt->carry && bt->row_start[j] < bt->row_start[j + 1]) {  // (r is j's slot on this rank)
                    b->carry_in[r] = bt->pieces[bt->row_piece[bt->row_start[j]]].start > 0;
                    b->carry_out[r] = !bt->pieces[bt->row_piece[bt->row_start[j + 1] - 1]].last;
                }
                r++;
            }
        }
    }
    batch_count_valid(b);
    int end = ++bt->batch >= bt->n_batches;
    if (end) bt->epoch++, bt->batch = 0;
    return end;
}

int batcher_set_carry(Batcher *bt, int on) {
    on = on != 0;
    if (on == bt->carry) return 0;
    if (bt->started) return pm_error("batcher: carried state must be chosen before the first batch");
    if (on && bt->policy != PM_POLICY_PACK)
        return pm_error("batcher: carried state needs the pack policy (this batcher is %s)", policy_name(bt->policy));
    bt->carry = on;
    plan_epoch(bt, bt->epoch);  // the plan of epoch 0, made by batcher_open without carry
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------

#define POS_TAG 0x504d504f53000001ull  // "PMPOS" + format 1

void batcher_get_position(const Batcher *bt, uint64_t pos[8]) {
    pos[0] = POS_TAG;
    pos[1] = (uint64_t)bt->epoch;
    pos[2] = (uint64_t)bt->batch;
    pos[3] = bt->seed;
    // the data's fingerprint: one shard's checksum, or the checksums of several in their order
    uint64_t fp = bt->shards[0].checksum;
    for (int i = 1; i < bt->n_shards; i++) fp = splitmix(fp ^ splitmix(bt->shards[i].checksum + (uint64_t)i));
    pos[4] = fp ^ ((uint64_t)bt->split << 62);
    pos[5] = (uint64_t)bt->policy << 56 | (uint64_t)bt->B << 32 | (uint64_t)(uint32_t)bt->T;
    pos[6] = (uint64_t)bt->rank << 32 | (uint32_t)bt->world;
    pos[7] = (uint64_t)bt->window | (uint64_t)bt->carry << 63;  // carry: another plan, so part of what must match
}

int batcher_set_position(Batcher *bt, const uint64_t pos[8]) {
    uint64_t cur[8];
    batcher_get_position(bt, cur);
    if (pos[0] != POS_TAG) return pm_error("data position: not a batcher position (bad tag)");
    if (pos[4] != cur[4]) return pm_error("data position: saved for different data (fingerprint mismatch)");
    if (pos[7] >> 63 != cur[7] >> 63)
        return pm_error("data position: saved with carried state %s, this batcher has it %s (--carry-state)",
                        pos[7] >> 63 ? "on" : "off", cur[7] >> 63 ? "on" : "off");
    if (pos[3] != cur[3] || pos[5] != cur[5] || pos[7] != cur[7])
        return pm_error("data position: saved with a different seed, policy, batch size or window");
    if (pos[6] != cur[6]) return pm_error("data position: saved for a different rank/world");
    bt->epoch = (int64_t)pos[1];
    if (bt->plan_epoch != bt->epoch) plan_epoch(bt, bt->epoch);
    if ((int64_t)pos[2] >= bt->n_batches) return pm_error("data position: batch %llu beyond the epoch's %lld",
                                                          (unsigned long long)pos[2], (long long)bt->n_batches);
    bt->batch = (int64_t)pos[2];
    bt->started = 1;
    return 0;
}

int batcher_epoch_batches(const Batcher *bt) { return (int)bt->n_batches; }
int batcher_epoch(const Batcher *bt) { return (int)bt->epoch; }
int batcher_documents(const Batcher *bt) { return (int)bt->n_docs; }
int64_t batcher_tokens(const Batcher *bt) { return bt->n_tokens; }

int batcher_policy_stats(const char *data_dir, int split, int policy, int B, int T, uint64_t seed, int window,
                         PolicyStats *out) {
    Batcher *bt = batcher_open(data_dir, split, policy, B, T, seed, 0, 1, window);
    if (!bt) return -1;
    memset(out, 0, sizeof *out);
    // Counted from the plan (same rows the batches hold) without materializing batches.
    out->real_tokens = bt->n_tokens;
    out->batches = bt->n_batches;
    if (policy == PM_POLICY_SINGLE) {
        out->rows = bt->n_pieces;
        out->computed_tokens = bt->n_tokens;
    } else if (policy == PM_POLICY_PAD) {
        out->rows = bt->n_pieces;
        for (int64_t first = 0; first < bt->n_pieces; first += B) {
            int longest = 0, n = 0;
            for (int64_t i = first; i < bt->n_pieces && i < first + B; i++, n++)
                if (bt->pieces[i].len > longest) longest = bt->pieces[i].len;
            out->computed_tokens += (int64_t)n * longest;
        }
    } else {
        out->rows = bt->n_rows;
        out->computed_tokens = bt->n_rows * (int64_t)T;
    }
    out->fill = out->computed_tokens ? (double)out->real_tokens / (double)out->computed_tokens : 0;
    batcher_close(bt);
    return 0;
}
