// tokenizer.h — text <-> token ids. Two kinds:
//   byte: the 256 byte values plus an end-of-document id (256); vocab_size 257. The default.
//   bpe:  byte-level BPE of the GPT-2 / GPT-NeoX kind: optional NFC normalization, the GPT-2 pre-tokenizer regex
//         (through PCRE2), bytes mapped to GPT-2's printable code points, merges applied by rank; special/added
//         tokens (e.g. <|endoftext|>) matched literally before pre-tokenization.
// tokenizer_load accepts: "byte"; a Hugging Face tokenizer.json; a directory holding tokenizer.json, or
// vocab.json + merges.txt, or GPT-2's encoder.json + vocab.bpe; or a path to one of vocab.json / encoder.json
// (the merges file is looked up beside it). The end-of-document id is <|endoftext|> (or the first special token).
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;

Tokenizer *tokenizer_load(const char *path);                // NULL + pm_error on failure
// DATA_DIR/tokenizer.json written by `prepare`; with several directories ("a,b", see shard.h) the first one's,
// which every other one's must equal.
Tokenizer *tokenizer_load_from_data(const char *data);
// Writes the tokenizer to `path` (atomically) in a form tokenizer_load reads back: a Hugging Face tokenizer.json
// for BPE, {"type": "packmamba-byte", ...} for the byte tokenizer. 0 or -1 + pm_error.
int tokenizer_save(const Tokenizer *tk, const char *path);
void tokenizer_free(Tokenizer *tk);

int tokenizer_vocab_size(const Tokenizer *tk);  // ids are in [0, vocab_size)
int tokenizer_eod_id(const Tokenizer *tk);
const char *tokenizer_kind(const Tokenizer *tk);  // "byte" or "bpe"

// Encodes n bytes of UTF-8 `text`, appending ids to the growable array (*ids, *cap) starting at index 0.
// special != 0: added/special tokens written literally in the text (e.g. "<|endoftext|>") become their ids, as
// Hugging Face tokenizers do; special == 0: they are ordinary text (what `prepare` uses for corpus text).
// Returns the number of ids, or -1 with pm_error (text is not valid UTF-8).
int64_t tokenizer_encode(const Tokenizer *tk, const char *text, size_t n, int special, int32_t **ids, size_t *cap);
// The bytes that ids stand for, NUL-terminated, malloc'd; *len gets the byte count (may be NULL). The EOD id
// decodes to "" for the byte tokenizer and to its text (e.g. "<|endoftext|>") for BPE. Ids out of range: "".
char *tokenizer_decode(const Tokenizer *tk, const int32_t *ids, size_t n, size_t *len);

// Byte offset of the first invalid UTF-8 sequence in s (overlong forms, surrogates, > U+10FFFF and truncated
// sequences are invalid), or -1 if all n bytes are valid.
int64_t pm_utf8_invalid_offset(const char *s, size_t n);
