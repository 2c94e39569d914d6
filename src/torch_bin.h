// torch_bin.h — reading state dicts saved by PyTorch's torch.save (`pytorch_model.bin`: the zip format of
// torch >= 1.6, as the official state-spaces/mamba-* checkpoints and transformers' older saves hold them) without
// Python. The archive is read with libzip; its data.pkl is run by a small pickle machine that knows only what a
// state dict needs (dicts, tuples, strings, numbers, torch._utils._rebuild_tensor_v2 / _rebuild_parameter,
// collections.OrderedDict, storages by persistent id) and refuses any other object by name, so loading a file
// never runs code from it. Each tensor is copied out in row-major order (following its strides and storage
// offset; tensors sharing a storage, like a tied LM head, each get their copy) into memory the StFile owns, so
// the checkpoint loader reads them as it reads safetensors (st_find, st_read_f32, st_close).
#pragma once
#include "safetensors.h"

// 0, or -1 with pm_error("<path>: <what is wrong>") (not a zip: the pre-1.6 format, named as such; a compressed
// or missing storage, an unsupported pickle opcode or object, a tensor outside its storage, a value that is not a
// tensor, big-endian data).
int torch_bin_open(const char *path, StFile *f);

// Write n tensors (safetensors.h's StWrite: F32, F64, F16, BF16, I64 or I32, contiguous) as torch.save does, so
// torch.load (and from_pretrained) read them: a zip archive "archive/" of data.pkl (a dict of
// _rebuild_tensor_v2 calls, protocol 2), byteorder, version and one stored entry a storage. storage_of (or NULL):
// tensor i shares tensor storage_of[i]'s storage (a tied head: storage_of[i] < i, same dtype and size), else
// storage_of[i] == i. libzip writes a temporary file and renames it onto path when complete.
int torch_bin_write(const char *path, const StWrite *t, int n, const int *storage_of);
