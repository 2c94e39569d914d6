// shard.h — the token shard: one binary file holding every document of a prepared data set as token ids, with
// document boundaries and the train/val split of each document. Memory-mapped for reading, validated on open,
// written atomically (temp name + rename), so a failed `prepare` never leaves a partial shard behind.
//
// File layout (little-endian), version 1:
//   offset 0   char     magic[8]      "PMSHARD\0"
//          8   uint32   version       1
//         12   uint32   token_bytes   2 (uint16 ids, when vocab_size <= 65536) or 4 (uint32 ids)
//         16   uint32   vocab_size    every id is < vocab_size
//         20   uint32   eod_id        end-of-document id (never stored in the token stream; see batcher.h)
//         24   uint64   n_docs
//         32   uint64   n_tokens
//         40   uint64   offsets_at    byte offset of the offsets section
//         48   uint64   split_at      byte offset of the split section
//         56   uint64   checksum      64-bit hash of every byte after the 64-byte header (see shard.c)
//         64   tokens   n_tokens ids of token_bytes each, documents back to back
//   offsets_at uint64   offsets[n_docs + 1]: document i is tokens [offsets[i], offsets[i+1]); 8-byte aligned
//   split_at   uint8    split[n_docs]: 1 train, 2 val
//   file size == split_at + n_docs exactly.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define PM_SHARD_FILE "data.pms"  // name of the shard inside a data directory

typedef struct {
    void *map;  // whole file, read-only mapping
    size_t map_bytes;
    uint32_t token_bytes, vocab_size, eod_id;
    uint64_t n_docs, n_tokens;
    const uint64_t *offsets;  // (n_docs + 1)
    const uint8_t *split;     // (n_docs)
    const void *tokens;       // (n_tokens) of token_bytes each
    uint64_t checksum;        // from the header (used as the data fingerprint)
} Shard;

// Maps and validates `path` (magic, version, sizes, offsets monotonic and in range, split values, checksum,
// every id < vocab_size). Returns 0, or -1 with pm_error("<path>: <problem>").
int shard_open(Shard *s, const char *path);
void shard_close(Shard *s);

static inline uint32_t shard_token(const Shard *s, uint64_t i) {
    return s->token_bytes == 2 ? ((const uint16_t *)s->tokens)[i] : ((const uint32_t *)s->tokens)[i];
}
static inline uint64_t shard_doc_len(const Shard *s, uint64_t d) { return s->offsets[d + 1] - s->offsets[d]; }

// A data argument names one prepared directory or several joined by commas ("a,b": their documents in that
// order, as if prepared together). The directories, allocated (free with data_dirs_free), and their count in *n;
// NULL with pm_error on an empty name.
char **data_dirs(const char *list, int *n);
void data_dirs_free(char **dirs, int n);

// The header's checksum function, over n bytes (exposed so tests can build structurally corrupt shards that still
// pass the checksum, to reach the structural checks).
uint64_t shard_checksum(const void *p, size_t n);

// Streaming writer: tokens go to "<path>.tmp.<pid>"; shard_writer_finish writes offsets, split and header, then
// renames onto `path`. shard_writer_abort (or any failure) removes the temp file.
typedef struct ShardWriter ShardWriter;
ShardWriter *shard_writer_open(const char *path, uint32_t vocab_size, uint32_t eod_id);  // NULL + pm_error
int shard_writer_add(ShardWriter *w, const int32_t *ids, size_t n, int split);          // one document
int shard_writer_finish(ShardWriter *w);  // frees w; 0 or -1 + pm_error
void shard_writer_abort(ShardWriter *w);  // frees w
// Changes the split of an already added document (prepare uses it to make sure a non-empty val split exists).
void shard_writer_set_split(ShardWriter *w, uint64_t doc, int split);
uint64_t shard_writer_docs(const ShardWriter *w);
uint64_t shard_writer_tokens(const ShardWriter *w);
