// checkpoint.h — model configs (config.json with the reference's keys) and checkpoint directories:
//   <dir>/model.safetensors    every parameter as F32 under its reference name and shape (model_param_infos);
//                              lm_head.weight is not written (tied to backbone.embedding.weight)
//   <dir>/config.json          d_model, n_layer, vocab_size, ssm_cfg {d_state, d_conv, expand}, rms_norm,
//                              residual_in_fp32, fused_add_norm, pad_vocab_size_multiple, tie_embeddings
//   <dir>/trainer.safetensors  (optional) Adam moments "m.<name>" / "v.<name>" F32, the U64 tensor "state"
//                              (10,) = [step, rng, data_pos[0..7]] and metadata {"run_config": "<json>"}
// A checkpoint is built as "<dir>.tmp.<pid>" and renamed into place, so a directory named like a checkpoint is
// always complete. Every function returns 0 or -1 with pm_error("<file>: <what is wrong>").
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
    int64_t step;          // optimizer steps taken
    uint64_t rng;          // PmRng state of the data order / sampling
    uint64_t data_pos[8];  // data loader position words (meaning defined by the loader)
    char *run_config_json; // the run's settings as a JSON string (may be NULL); owned, free with trainer_state_free
} TrainerState;

void trainer_state_free(TrainerState *ts);  // frees run_config_json

// config.json in the reference's format. Reading rejects missing required keys (d_model, n_layer, vocab_size),
// wrong types, non-positive or implausibly large sizes, unsupported variants (rms_norm false, tie_embeddings
// false, Mamba2 layers, attention layers, MLP layers) and unknown keys; then calls config_derive.
int config_write_json(const char *path, const ModelConfig *c);
int config_read_json(const char *path, ModelConfig *c);

// Write <dir> (replacing an existing one completely; parent directories are created). ts may be NULL for a
// model-only checkpoint. If ts is given and the model has no optimizer state yet, zero moments are written.
int checkpoint_save(const char *dir, const Model *m, const TrainerState *ts);
// This rank's carried state (Model.carry_on) as trainer.safetensors holds it, on the host: "carry.h" (n_layer, B,
// d_inner, N) then "carry.hist" (n_layer, B, d_conv - 1, d_inner), F32 (*nh and *nx elements; malloc'd).
float *checkpoint_carry_host(const Model *m, size_t *nh, size_t *nx);

// The model for another tool, written like checkpoint_save (a temp directory renamed into place), with F32 weights
// or, bf16 set, the weights rounded to bf16 (nearest even), and tokenizer (or NULL) copied in as tokenizer.json:
//   PM_LAYOUT_HF         Hugging Face transformers' MambaForCausalLM (the state-spaces/mamba-*-hf repositories;
//                        from_pretrained reads it): config.json with MambaConfig's keys (vocab_size = our padded
//                        vocabulary, the embedding's row count there) and model.safetensors with
//                        backbone.embeddings.weight in place of backbone.embedding.weight, lm_head left out as tied;
//   PM_LAYOUT_MAMBA_SSM  the official mamba_ssm's (MambaLMHeadModel.from_pretrained reads it): our config.json and a
//                        torch.save pytorch_model.bin (torch_bin.h) holding lm_head.weight on the embedding's storage.
enum { PM_LAYOUT_HF = 1, PM_LAYOUT_MAMBA_SSM = 2 };
int checkpoint_export(const char *dir, const Model *m, int layout, int bf16, const char *tokenizer);

// config.json in our (mamba_ssm's) layout, or in transformers' (recognized by model_type or hidden_size; its keys
// that change the math are checked, the rest ignored; pad_vocab_size_multiple becomes one that adds no rows).
int checkpoint_load_config(const char *dir, ModelConfig *c);
// Load parameters into an already created model with the same config, from the first weight file there is of
// model.safetensors, model.safetensors.index.json, pytorch_model.bin (torch.save, torch_bin.h) and
// pytorch_model.bin.index.json (an index's weight_map and its files must agree), under our names or transformers'
// (the config's layout decides). Everything is validated (config.json
// matches m->cfg; every tensor present with its exact shape; dtype F32, BF16, F16 or F64, converted to F32; all
// values finite; no unknown tensors; lm_head.weight only if equal to the embedding) before the model is touched.
int checkpoint_load_model(const char *dir, Model *m);
// Load trainer.safetensors: Adam moments (allocated with model_alloc_optimizer if needed, validated F32, finite,
// v >= 0) into m->adam_m / adam_v, m->step = ts->step, and the trainer state into *ts (ts->run_config_json
// newly allocated or NULL). Nothing is changed on failure.
int checkpoint_load_trainer(const char *dir, Model *m, TrainerState *ts);

// The newest complete checkpoint "<run_dir>/checkpoints/step_<digits>" (a directory holding model.safetensors
// and config.json; "*.tmp.*" names are ignored) written to out. 0, or -1 when there is none or out is too small.
int checkpoint_find_latest(const char *run_dir, char *out, size_t n);

// Remove all but the newest `keep` complete-or-not "<run_dir>/checkpoints/step_<digits>" directories (keep <= 0:
// remove nothing). "best" and other names are never touched. 0 or -1 with pm_error.
int checkpoint_prune(const char *run_dir, int keep);
// A checkpoint directory (holding one of the weight files checkpoint_load_model reads), or a run directory whose
// newest checkpoint is meant: the checkpoint's path in out. 0 or -1 with pm_error.
int checkpoint_resolve(const char *path, char *out, size_t n);
// The tokenizer.json that goes with a checkpoint: beside it (a downloaded model's), else in the run directory it
// belongs to (RUN/checkpoints/step_N/../../). Its path in out: 0, or -1 (out empty) when there is none.
int checkpoint_tokenizer(const char *ckpt, char *out, size_t n);
