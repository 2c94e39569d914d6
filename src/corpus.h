// corpus.h — reads the inputs of `packmamba prepare` and hands out documents one by one, in a deterministic order.
//
// Inputs (each optionally gzip'd; gzip is detected by content, not name):
//   - a directory: every regular file below it is read, recursively, in byte-wise sorted name order; names starting
//     with '.' and symbolic links inside the walk are skipped (links would duplicate files, e.g. fortunes' *.u8).
//     With --ext, only files whose name (less a trailing .gz) ends in one of the extensions are taken.
//   - a JSONL file (name ends in .jsonl or .jsonl.gz): one JSON object per line, its "text" string is a document.
//     Blank lines are skipped; a line that is not a JSON object with a "text" string is an error (file:line).
//   - any other file: one document — unless it is split (below).
//   - split files: with --split-on LINE every plain file is cut into documents at lines equal to LINE. Without it,
//     a file with a strfile index beside it (NAME and NAME.dat, as Debian's fortunes) is a fortune file: documents
//     are separated by lines holding only "%"; the NAME.dat index itself is skipped. --ext does not filter them.
// Empty documents (empty files, empty JSONL texts, "%%" in a fortune file) are skipped and counted.
// UTF-8 is validated per document: invalid bytes are an error naming the file and byte offset (default), or
// replaced with U+FFFD (--invalid replace), or the document is skipped (--invalid skip).
#pragma once
#include <stddef.h>
#include <stdint.h>

enum { PM_INVALID_ERROR = 0, PM_INVALID_REPLACE = 1, PM_INVALID_SKIP = 2 };

typedef struct {
    char **ext;          // (n_ext) extensions without the dot, e.g. "rst"; NULL: take every file
    int n_ext;
    const char *split_on;  // NULL: fortune auto-detection only
    int invalid;           // PM_INVALID_*
} CorpusOptions;

typedef struct {
    int64_t files, documents, bytes;  // bytes: of the documents handed out
    int64_t empty_skipped, invalid_skipped, invalid_replaced, blank_lines;
} CorpusCounts;

// Called once per document: text is valid UTF-8 of n bytes (not NUL-terminated); `source` names the file (and line
// for JSONL). Return 0 to go on, non-zero to stop (that value is returned by corpus_read).
typedef int (*CorpusDocFn)(void *ctx, const char *text, size_t n, const char *source);

// Reads every input in order. Returns 0, the callback's non-zero value, or -1 with pm_error("<file>: <problem>").
int corpus_read(char *const *inputs, int n_inputs, const CorpusOptions *opt, CorpusDocFn fn, void *ctx,
                CorpusCounts *counts);
