// checkpoint.c — see checkpoint.h. Loading validates the whole file set first and only then touches the model,
// so a bad checkpoint can never leave a half-loaded model behind. Saving builds a complete directory under a temp
// name and swaps it into place, so a crash leaves either the old checkpoint or the new one, never a mixture.
#define _GNU_SOURCE
#include "checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "torch_bin.h"
#include "util.h"

#define PATH_BUF 4096

void trainer_state_free(TrainerState *ts) {
    if (!ts) return;
    free(ts->run_config_json);
    ts->run_config_json = NULL;
}

// The name a parameter has in a checkpoint's layout: transformers calls the embedding "embeddings".
static const char *layout_name(const char *name, int hf) {
    return hf && strcmp(name, "backbone.embedding.weight") == 0 ? "backbone.embeddings.weight" : name;
}

// ---------------------------------------------------------------------------------------------------------
// config.json

// root (NULL: its json_pack failed) as text with a final newline at path, atomically; root is released.
static int write_config(const char *path, json_t *root, size_t flags) {
    char *text = root ? json_dumps(root, flags) : NULL;
    json_decref(root);
    if (!text) return pm_error("%s: cannot serialize config", path);
    size_t len = strlen(text);
    text = pm_realloc(text, len + 2);
    text[len] = '\n';
    int rc = pm_write_file_atomic(path, text, len + 1);
    free(text);
    return rc;
}

int config_write_json(const char *path, const ModelConfig *c) {
    json_t *ssm = json_pack("{s:i, s:i, s:i}", "d_state", c->d_state, "d_conv", c->d_conv, "expand", c->expand);
    json_t *root = json_pack("{s:i, s:i, s:i, s:o, s:b, s:b, s:b, s:i, s:b}", "d_model", c->d_model, "n_layer",
                             c->n_layer, "vocab_size", c->vocab_size, "ssm_cfg", ssm, "rms_norm", 1,
                             "residual_in_fp32", 1, "fused_add_norm", 1, "pad_vocab_size_multiple",
                             c->pad_vocab_multiple, "tie_embeddings", 1);
    return write_config(path, root, JSON_INDENT(2));
}

// config.json for transformers' MambaConfig (MambaForCausalLM.from_pretrained reads it). Its embedding has
// exactly vocab_size rows, so vocab_size is our padded vocabulary.
static int config_write_hf(const char *path, const ModelConfig *c, int bf16) {
    json_t *root = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b, s:s, s:f, s:b, s:b, s:s}",
                             "architectures", "MambaForCausalLM", "model_type", "mamba", "vocab_size", c->vocab_pad,
                             "hidden_size", c->d_model, "intermediate_size", c->d_inner, "num_hidden_layers",
                             c->n_layer, "state_size", c->d_state, "conv_kernel", c->d_conv, "expand", c->expand,
                             "time_step_rank", c->dt_rank, "use_bias", 0, "use_conv_bias", 1, "hidden_act", "silu",
                             "layer_norm_epsilon", 1e-5, "residual_in_fp32", 1, "tie_word_embeddings", 1,
                             "dtype", bf16 ? "bfloat16" : "float32");
    return write_config(path, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
}

// Integer field `key` of obj into *out: required or defaulted, within [lo, hi].
static int cfg_int(const char *path, json_t *obj, const char *key, int required, int dflt, int lo, int hi,
                   int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return pm_error("%s: missing required key \"%s\"", path, key);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v)) return pm_error("%s: \"%s\" must be an integer", path, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return pm_error("%s: \"%s\" is %lld; must be between %d and %d", path, key, (long long)x, lo, hi);
    *out = (int)x;
    return 0;
}

// Boolean field: absent means the reference default `dflt`; `need` >= 0 means only that value is supported.
static int cfg_bool(const char *path, json_t *obj, const char *key, int dflt, int need, const char *why) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (need >= 0 && dflt != need) return pm_error("%s: missing key \"%s\"", path, key);
        return 0;
    }
    if (!json_is_boolean(v)) return pm_error("%s: \"%s\" must be true or false", path, key);
    if (need >= 0 && json_is_true(v) != need)
        return pm_error("%s: \"%s\": %s is not supported (%s)", path, key, need ? "false" : "true", why);
    return 0;
}

static int key_in(const char *key, const char *const *list) {
    for (; *list; list++)
        if (strcmp(key, *list) == 0) return 1;
    return 0;
}

// v is absent or the string want.
static int absent_or_str(const json_t *v, const char *want) {
    return !v || (json_is_string(v) && strcmp(json_string_value(v), want) == 0);
}

// v (a dt_rank / time_step_rank value) is absent, "auto" or the rank that gives: ceil(d_model / 16), the only
// one config_derive makes.
static int dt_rank_is_auto(const json_t *v, int d_model) {
    return absent_or_str(v, "auto") || (json_is_integer(v) && json_integer_value(v) == (d_model + 15) / 16);
}

// The vocabulary padding of a Hugging Face checkpoint: its embedding has exactly vocab_size rows (the *-hf
// repositories store the padded size, 50280, as vocab_size), so the multiple is one that adds no rows.
static int hf_pad_multiple(int v) {
    int m = 8;
    while (v % m) m /= 2;
    return m;
}

// config.json as transformers' MambaConfig writes it (model_type "mamba"). Keys that change the math are checked
// against what this engine computes; the rest of a PretrainedConfig (token ids, init ranges, use_cache,
// architectures, dtype, versions, ...) does not, and is ignored.
static int config_from_hf(const char *path, json_t *root, ModelConfig *c) {
    json_t *mt = json_object_get(root, "model_type");
    if (!absent_or_str(mt, "mamba"))
        return pm_error("%s: \"model_type\" is %s; only \"mamba\" (Mamba-1) is supported", path,
                        json_is_string(mt) ? json_string_value(mt) : "not a string");
    ModelConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    if (cfg_int(path, root, "hidden_size", 1, 0, 1, 65536, &cfg.d_model) ||
        cfg_int(path, root, "num_hidden_layers", 1, 0, 1, 4096, &cfg.n_layer) ||
        cfg_int(path, root, "vocab_size", 1, 0, 1, 1 << 24, &cfg.vocab_size) ||
        cfg_int(path, root, "state_size", 0, 16, 1, 256, &cfg.d_state) ||
        cfg_int(path, root, "conv_kernel", 0, 4, 1, 64, &cfg.d_conv) ||
        cfg_int(path, root, "expand", 0, 2, 1, 64, &cfg.expand))
        return -1;
    int inter = 0;
    if (cfg_int(path, root, "intermediate_size", 0, cfg.expand * cfg.d_model, 1, INT_MAX, &inter)) return -1;
    if (inter != cfg.expand * cfg.d_model)
        return pm_error("%s: \"intermediate_size\" is %d; must be expand * hidden_size = %d", path, inter,
                        cfg.expand * cfg.d_model);
    if (!dt_rank_is_auto(json_object_get(root, "time_step_rank"), cfg.d_model))
        return pm_error("%s: \"time_step_rank\" must be \"auto\" or ceil(hidden_size/16) = %d", path,
                        (cfg.d_model + 15) / 16);
    if (!absent_or_str(json_object_get(root, "hidden_act"), "silu"))
        return pm_error("%s: \"hidden_act\" must be \"silu\"", path);
    json_t *eps = json_object_get(root, "layer_norm_epsilon");
    if (eps && !(json_is_number(eps) && fabs(json_number_value(eps) - 1e-5) <= 1e-12))
        return pm_error("%s: \"layer_norm_epsilon\" must be 1e-05 (the epsilon this engine's checkpoints keep)",
                        path);
    if (cfg_bool(path, root, "use_bias", 0, 0, "the projections have no bias") ||
        cfg_bool(path, root, "use_conv_bias", 1, 1, "the conv1d always has a bias") ||
        cfg_bool(path, root, "rms_norm", 1, 1, "only RMSNorm is implemented, not LayerNorm") ||
        cfg_bool(path, root, "residual_in_fp32", 1, -1, NULL) ||    // always fp32 here; either is fine
        cfg_bool(path, root, "tie_word_embeddings", 1, -1, NULL))  // the loader checks an lm_head it finds
        return -1;
    cfg.pad_vocab_multiple = hf_pad_multiple(cfg.vocab_size);
    cfg.norm_eps = 1e-5f;
    config_derive(&cfg);
    *c = cfg;
    return 0;
}

// A JSON file (duplicate keys refused), or NULL with pm_error naming the file.
static json_t *read_json(const char *path) {
    size_t bytes;
    char *text = pm_read_file(path, &bytes);
    if (!text) return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, bytes, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) pm_error("%s: malformed JSON at line %d: %s", path, jerr.line, jerr.text);
    return root;
}

static int config_read_layout(const char *path, ModelConfig *c, int *hf) {
    json_t *root = read_json(path);
    if (!root) return -1;
    int rc = -1;
    ModelConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    if (!json_is_object(root)) {
        pm_error("%s: not a JSON object", path);
        goto done;
    }
    *hf = json_object_get(root, "model_type") != NULL || json_object_get(root, "hidden_size") != NULL;
    if (*hf) {
        rc = config_from_hf(path, root, c);
        goto done;
    }
    static const char *const top_keys[] = {"d_model", "n_layer", "vocab_size", "ssm_cfg", "rms_norm",
                                           "residual_in_fp32", "fused_add_norm", "pad_vocab_size_multiple",
                                           "tie_embeddings", "d_intermediate", "attn_layer_idx", "attn_cfg",
                                           NULL};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!key_in(key, top_keys)) {
            pm_error("%s: unknown key \"%s\"", path, key);
            goto done;
        }
    }
    if (cfg_int(path, root, "d_model", 1, 0, 1, 65536, &cfg.d_model) ||
        cfg_int(path, root, "n_layer", 1, 0, 1, 4096, &cfg.n_layer) ||
        cfg_int(path, root, "vocab_size", 1, 0, 1, 1 << 24, &cfg.vocab_size) ||
        cfg_int(path, root, "pad_vocab_size_multiple", 0, 8, 1, 4096, &cfg.pad_vocab_multiple))
        goto done;
    if (cfg_bool(path, root, "rms_norm", 1, 1, "only RMSNorm is implemented, not LayerNorm") ||
        cfg_bool(path, root, "tie_embeddings", 1, 1, "the LM head is always tied to the embedding") ||
        cfg_bool(path, root, "residual_in_fp32", 1, -1, NULL) ||  // always fp32 here; either is fine
        cfg_bool(path, root, "fused_add_norm", 1, -1, NULL))      // a kernel choice, same math
        goto done;
    int d_inter = 0;
    if (cfg_int(path, root, "d_intermediate", 0, 0, 0, INT_MAX, &d_inter)) goto done;
    if (d_inter != 0) {
        pm_error("%s: \"d_intermediate\" is %d; MLP blocks are not supported (must be 0)", path, d_inter);
        goto done;
    }
    json_t *attn = json_object_get(root, "attn_layer_idx");
    if (attn && (!json_is_array(attn) || json_array_size(attn) != 0)) {
        pm_error("%s: \"attn_layer_idx\" must be an empty list; attention layers are not supported", path);
        goto done;
    }
    json_t *attn_cfg = json_object_get(root, "attn_cfg");
    if (attn_cfg && !json_is_object(attn_cfg)) {
        pm_error("%s: \"attn_cfg\" must be an object", path);
        goto done;
    }
    json_t *ssm = json_object_get(root, "ssm_cfg");
    json_t *empty = json_object();
    if (!ssm) ssm = empty;
    if (!json_is_object(ssm)) {
        json_decref(empty);
        pm_error("%s: \"ssm_cfg\" must be an object", path);
        goto done;
    }
    // Keys that only affect initialization (dt_*) or kernel choice (use_fast_path) are accepted and ignored.
    static const char *const ssm_keys[] = {"d_state", "d_conv", "expand", "layer", "dt_rank", "conv_bias", "bias",
                                           "use_fast_path", "dt_min", "dt_max", "dt_init", "dt_scale",
                                           "dt_init_floor", NULL};
    int bad = 0;
    json_object_foreach(ssm, key, v) {
        if (!key_in(key, ssm_keys)) {
            bad = pm_error("%s: unknown key \"ssm_cfg.%s\"", path, key);
            break;
        }
    }
    if (!bad)
        bad = cfg_int(path, ssm, "d_state", 0, 16, 1, 256, &cfg.d_state) ||
              cfg_int(path, ssm, "d_conv", 0, 4, 1, 64, &cfg.d_conv) ||
              cfg_int(path, ssm, "expand", 0, 2, 1, 64, &cfg.expand) ||
              cfg_bool(path, ssm, "conv_bias", 1, 1, "the conv1d always has a bias") ||
              cfg_bool(path, ssm, "bias", 0, 0, "the projections have no bias");
    if (!bad && !absent_or_str(json_object_get(ssm, "layer"), "Mamba1"))
        bad = pm_error("%s: \"ssm_cfg.layer\" must be \"Mamba1\" (Mamba2 is not supported)", path);
    if (!bad && !dt_rank_is_auto(json_object_get(ssm, "dt_rank"), cfg.d_model))
        bad = pm_error("%s: \"ssm_cfg.dt_rank\" must be \"auto\" (= ceil(d_model/16) = %d)", path,
                       (cfg.d_model + 15) / 16);
    json_decref(empty);
    if (bad) goto done;
    cfg.norm_eps = 1e-5f;
    config_derive(&cfg);
    *c = cfg;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

int config_read_json(const char *path, ModelConfig *c) {
    int hf;
    return config_read_layout(path, c, &hf);
}

// ---------------------------------------------------------------------------------------------------------
// helpers: paths, directories

static int join(char *out, const char *dir, const char *name) {
    if ((size_t)snprintf(out, PATH_BUF, "%s/%s", dir, name) >= PATH_BUF)
        return pm_error("%s/%s: path too long", dir, name);
    return 0;
}

static void fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void fsync_parent(const char *path) {
    char buf[PATH_BUF];
    snprintf(buf, sizeof buf, "%s", path);
    fsync_dir(dirname(buf));
}

// ---------------------------------------------------------------------------------------------------------
// save

typedef struct {
    const Model *m;
    int n_tensors;  // tensors per moment buffer
} MomentCtx;

// Writer callback for trainer.safetensors: tensor i < nt is m.<name i>, then v.<name>; downloaded one tensor
// at a time from the backend so no full host copy of the moments is needed.
static int fill_moment(void *ctx, int i, void *buf, size_t nbytes) {
    const MomentCtx *mc = ctx;
    const Model *m = mc->m;
    int which = i / mc->n_tensors;
    const ParamInfo *pi = &m->tensors[i % mc->n_tensors];
    const void *src = which == 0 ? m->adam_m : m->adam_v;
    if (!src) {
        memset(buf, 0, nbytes);  // no optimizer yet: fresh (zero) moments
        return 0;
    }
    m->bk->download(buf, (const char *)src + pi->offset * 4, nbytes);
    return 0;
}

// fp32 -> bf16, rounding to nearest even (NaN stays NaN; the loader has refused non-finite weights anyway).
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The carried state (Model.carry_on) as trainer.safetensors holds it: "carry.h" (n_layer, rows, d_inner, N) and
// "carry.hist" (n_layer, rows, d_conv - 1, d_inner), both F32 whatever the backend's ACT (the GPU's bf16 conv inputs
// widened: exact both ways), so a run resumes where it stopped on either backend; rows: the global batch's
// (Model.carry_rows), so a run resumes with another number of ranks. Host copy of this rank's: h then hist as F32.
float *checkpoint_carry_host(const Model *m, size_t *nh, size_t *nx) {
    const ModelConfig *c = &m->cfg;
    *nh = (size_t)c->n_layer * m->B * c->d_inner * c->d_state;
    *nx = (size_t)c->n_layer * m->B * (c->d_conv - 1) * c->d_inner;
    unsigned char *raw = pm_malloc(model_carry_bytes(m));
    model_get_carry(m, raw);
    float *out = pm_malloc((*nh + *nx) * sizeof(float));
    memcpy(out, raw, *nh * sizeof(float));  // (F32 is 4 bytes: save_dir checks)
    const unsigned char *hist = raw + *nh * sizeof(float);
    for (size_t i = 0; i < *nx; i++) {
        if (m->bk->act_bytes == 2) {
            uint32_t u = (uint32_t)(hist[2 * i] | hist[2 * i + 1] << 8) << 16;
            memcpy(&out[*nh + i], &u, 4);
        } else {
            memcpy(&out[*nh + i], hist + 4 * i, 4);
        }
    }
    free(raw);
    return out;
}

// A checkpoint directory: ours (layout -1: model, config and, with ts, the trainer state) or an export
// (PM_LAYOUT_*: model and config; bf16: the weights rounded to bf16; tokenizer: a tokenizer.json to copy in, or
// NULL).
static int save_dir(const char *dir_in, const Model *m, const TrainerState *ts, int layout, int bf16,
                    const char *tokenizer) {
    const int hf = layout == PM_LAYOUT_HF, bin = layout == PM_LAYOUT_MAMBA_SSM;
    model_settle_updates((Model *)m);  // (the moments below are read directly)
    char dir[PATH_BUF], tmp[PATH_BUF + 64], file[PATH_BUF];
    size_t len = strlen(dir_in);
    while (len > 1 && dir_in[len - 1] == '/') len--;  // "ckpt/" and "ckpt" are the same directory
    if (len == 0 || len >= PATH_BUF - 64) return pm_error("%s: bad checkpoint directory name", dir_in);
    memcpy(dir, dir_in, len);
    dir[len] = 0;
    if (m->bk->f32_bytes != 4)
        return pm_error("%s: cannot save from a backend whose F32 is %zu bytes wide", dir, m->bk->f32_bytes);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", dir, (int)getpid());
    struct stat st;
    if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return pm_error("%s: exists and is not a directory; not overwriting it", dir);
    {
        char parent[PATH_BUF];
        snprintf(parent, sizeof parent, "%s", dir);
        if (pm_mkdir_p(dirname(parent)) != 0) return -1;
    }
    if (pm_remove_tree(tmp) != 0) return -1;  // a leftover of an earlier crashed save by a process with our pid
    if (mkdir(tmp, 0755) != 0) return pm_error("%s: cannot create: %s", tmp, strerror(errno));

    int nt = m->n_tensors;
    const ParamInfo *pi = m->tensors;
    float *host = pm_malloc(m->n_params * sizeof(float));  // (n_params)
    model_get_params(m, host);
    StWrite *w = pm_calloc(2 * (size_t)nt + 3, sizeof(StWrite));
    uint16_t *half = bf16 ? pm_malloc(m->n_params * sizeof(uint16_t)) : NULL;  // (n_params)
    for (size_t k = 0; half && k < m->n_params; k++) half[k] = f32_to_bf16(host[k]);
    for (int i = 0; i < nt; i++) {
        w[i].name = layout_name(pi[i].name, hf);
        w[i].dtype = bf16 ? "BF16" : "F32";
        w[i].ndim = pi[i].ndim;
        for (int d = 0; d < pi[i].ndim; d++) w[i].shape[d] = pi[i].shape[d];
        w[i].data = bf16 ? (const void *)(half + pi[i].offset) : (const void *)(host + pi[i].offset);
        w[i].nbytes = pi[i].size * (bf16 ? sizeof(uint16_t) : sizeof(float));
    }
    int rc = join(file, tmp, bin ? "pytorch_model.bin" : "model.safetensors");
    if (rc == 0 && bin) {
        // mamba_ssm's MambaLMHeadModel.from_pretrained reads pytorch_model.bin and wants lm_head.weight in it:
        // the embedding's storage, shared, as its own state_dict() gives it
        const int emb = model_tensor_index(&m->cfg, -1, 0);
        int *storage_of = pm_malloc(((size_t)nt + 1) * sizeof(int));
        for (int i = 0; i < nt; i++) storage_of[i] = i;
        w[nt] = w[emb];
        w[nt].name = "lm_head.weight";
        storage_of[nt] = emb;
        rc = torch_bin_write(file, w, nt + 1, storage_of);
        free(storage_of);
    } else if (rc == 0) {
        rc = st_write(file, w, nt, "{\"format\": \"pt\"}");
    }
    free(host);
    free(half);
    if (rc == 0) rc = join(file, tmp, "config.json");
    if (rc == 0) rc = hf ? config_write_hf(file, &m->cfg, bf16) : config_write_json(file, &m->cfg);
    if (rc == 0 && tokenizer) {
        size_t tb;
        char *text = pm_read_file(tokenizer, &tb);
        rc = text ? join(file, tmp, "tokenizer.json") : -1;
        if (rc == 0) rc = pm_write_file_atomic(file, text, tb);
        free(text);
    }

    if (rc == 0 && ts) {
        // m.<name> (nt), v.<name> (nt), state (10): moments streamed from the backend by fill_moment.
        char(*names)[128] = pm_calloc(2 * (size_t)nt, 128);
        for (int k = 0; k < 2 * nt; k++) {
            const ParamInfo *p = &pi[k % nt];
            snprintf(names[k], 128, "%c.%s", k < nt ? 'm' : 'v', p->name);
            w[k].name = names[k];
            w[k].dtype = "F32";
            w[k].ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++) w[k].shape[d] = p->shape[d];
            w[k].data = NULL;
            w[k].nbytes = p->size * sizeof(float);
        }
        uint64_t state[10];  // step, rng, data_pos[0..7]
        state[0] = (uint64_t)ts->step;
        state[1] = ts->rng;
        memcpy(state + 2, ts->data_pos, sizeof ts->data_pos);
        w[2 * nt] = (StWrite){.name = "state", .dtype = "U64", .ndim = 1, .shape = {10}, .data = state,
                              .nbytes = sizeof state};
        int nw = 2 * nt + 1;
        size_t nh = 0, nx = 0;
        const ModelConfig *c = &m->cfg;
        // (several ranks: every rank's rows, gathered by dist_gather_optimizer)
        const int rows = m->carry_on && m->carry_all ? m->carry_rows : m->B;
        float *carry = !m->carry_on ? NULL : m->carry_all ? m->carry_all : checkpoint_carry_host(m, &nh, &nx);
        if (m->carry_all) {
            nh = (size_t)c->n_layer * rows * c->d_inner * c->d_state;
            nx = (size_t)c->n_layer * rows * (c->d_conv - 1) * c->d_inner;
        }
        if (carry) {
            w[nw++] = (StWrite){.name = "carry.h", .dtype = "F32", .ndim = 4, .shape = {c->n_layer, rows, c->d_inner,
                                c->d_state}, .data = carry, .nbytes = nh * sizeof(float)};
            w[nw++] = (StWrite){.name = "carry.hist", .dtype = "F32", .ndim = 4, .shape = {c->n_layer, rows,
                                c->d_conv - 1, c->d_inner}, .data = carry + nh, .nbytes = nx * sizeof(float)};
        }
        json_t *md = json_pack("{s:s}", "format", "packmamba-trainer");
        json_t *rcfg = ts->run_config_json ? json_string(ts->run_config_json) : NULL;
        if (ts->run_config_json && !rcfg) rc = pm_error("%s: the run config is not valid UTF-8", dir);
        if (rcfg) json_object_set_new(md, "run_config", rcfg);
        char *mds = rc == 0 ? json_dumps(md, JSON_COMPACT) : NULL;
        json_decref(md);
        if (rc == 0 && !mds) rc = pm_error("%s: cannot serialize the trainer metadata", dir);
        MomentCtx mc = {m, nt};
        if (rc == 0) rc = join(file, tmp, "trainer.safetensors");
        if (rc == 0) rc = st_write_cb(file, w, nw, mds, fill_moment, &mc);
        if (carry != m->carry_all) free(carry);
        free(mds);
        free(names);
    }
    free(w);
    if (rc != 0) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", pm_last_error());
        pm_remove_tree(tmp);
        return pm_error("%s", keep);
    }
    fsync_dir(tmp);

    // Swap the finished directory into place.
    if (lstat(dir, &st) == 0) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
            fsync_parent(dir);
            return pm_remove_tree(tmp);  // now holds the old checkpoint
        }
        // No atomic exchange on this filesystem: move the old one aside, then the new one in.
        char aside[PATH_BUF + 64];
        snprintf(aside, sizeof aside, "%s.tmp.%d.old", dir, (int)getpid());
        if (pm_remove_tree(aside) != 0) return -1;
        if (rename(dir, aside) != 0) {
            int e = errno;
            pm_remove_tree(tmp);
            return pm_error("%s: cannot move the old checkpoint aside: %s", dir, strerror(e));
        }
        if (rename(tmp, dir) != 0) {
            int e = errno;
            rename(aside, dir);  // put the old one back
            pm_remove_tree(tmp);
            return pm_error("%s: rename failed: %s", dir, strerror(e));
        }
        fsync_parent(dir);
        return pm_remove_tree(aside);
    }
    if (rename(tmp, dir) != 0) {
        int e = errno;
        pm_remove_tree(tmp);
        return pm_error("%s: rename failed: %s", dir, strerror(e));
    }
    fsync_parent(dir);
    return 0;
}

int checkpoint_save(const char *dir, const Model *m, const TrainerState *ts) {
    return save_dir(dir, m, ts, -1, 0, NULL);
}

int checkpoint_export(const char *dir, const Model *m, int layout, int bf16, const char *tokenizer) {
    if (layout != PM_LAYOUT_HF && layout != PM_LAYOUT_MAMBA_SSM) return pm_error("%s: unknown layout %d", dir, layout);
    return save_dir(dir, m, NULL, layout, bf16, tokenizer);
}

// ---------------------------------------------------------------------------------------------------------
// load

int checkpoint_load_config(const char *dir, ModelConfig *c) {
    char path[PATH_BUF];
    if (join(path, dir, "config.json") != 0) return -1;
    return config_read_json(path, c);
}

static int same_shape(const StTensor *t, const ParamInfo *p) {
    if (t->ndim != p->ndim) return 0;
    for (int d = 0; d < p->ndim; d++)
        if (t->shape[d] != p->shape[d]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

static int shape_error(const char *path, const StTensor *t, const ParamInfo *p) {
    char got[160], want[160];
    shape_str(got, sizeof got, t->ndim, t->shape);
    shape_str(want, sizeof want, p->ndim, p->shape);
    return pm_error("%s: tensor \"%s\" has shape %s; the model needs %s", path, t->name, got, want);
}

// First non-finite value in x (n), or -1.
static long first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (long)i;
    return -1;
}

// A model's weights: model.safetensors, or the shards that model.safetensors.index.json names (its "weight_map":
// tensor name -> file in the same directory), as transformers writes larger models.
typedef struct {
    int n;
    StFile *files;  // (n)
    char where[PATH_BUF];  // the file named in errors about the set as a whole
} WeightSet;

static void weights_close(WeightSet *w) {
    for (int i = 0; i < w->n; i++) st_close(&w->files[i]);
    free(w->files);
    w->files = NULL;
    w->n = 0;
}

static const StTensor *weights_find(const WeightSet *w, const char *name, const StFile **in) {
    for (int i = 0; i < w->n; i++) {
        const StTensor *t = st_find(&w->files[i], name);
        if (t) {
            *in = &w->files[i];
            return t;
        }
    }
    return NULL;
}

// A weight file of either format: torch.save's by its name's ".bin" ending, else safetensors.
static int weight_file_open(const char *path, StFile *f) {
    const size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".bin") == 0 ? torch_bin_open(path, f) : st_open(path, f);
}

// The first of a checkpoint's weight files that exists: model.safetensors, its index, then torch.save's
// pytorch_model.bin and its index (the official mamba_ssm checkpoints have only that). 0, or -1 when none does.
static const char *const weight_names[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                           "pytorch_model.bin.index.json"};

static int weights_find_file(const char *dir, char *out, int *index) {
    struct stat st;
    for (int i = 0; i < 4; i++)
        if (join(out, dir, weight_names[i]) == 0 && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
            if (index) *index = i % 2;
            return 0;
        }
    join(out, dir, weight_names[0]);  // (named in the error that follows)
    return -1;
}

static int weights_open(const char *dir, WeightSet *w) {
    memset(w, 0, sizeof *w);
    char path[PATH_BUF];
    int index = 0;
    if (weights_find_file(dir, w->where, &index) != 0)
        return pm_error("%s: missing (and no model.safetensors.index.json, pytorch_model.bin or "
                        "pytorch_model.bin.index.json beside it)", w->where);
    if (!index) {
        w->files = pm_calloc(1, sizeof(StFile));
        if (weight_file_open(w->where, &w->files[0]) != 0) {
            free(w->files);
            w->files = NULL;
            return -1;
        }
        w->n = 1;
        return 0;
    }
    const char *ipath = w->where;
    json_t *root = read_json(ipath);
    if (!root) return -1;
    int rc = 0;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0)
        rc = pm_error("%s: no \"weight_map\" object naming the weight files", ipath);
    const char *name;
    json_t *v;
    // The distinct files, in order of first mention; each a plain name in this directory.
    size_t cap = rc ? 0 : json_object_size(map);
    const char **fnames = pm_calloc(cap ? cap : 1, sizeof *fnames);
    int nf = 0;
    json_object_foreach(map, name, v) {
        if (rc) break;
        const char *f = json_is_string(v) ? json_string_value(v) : NULL;
        if (!f || !*f || strchr(f, '/') || strcmp(f, ".") == 0 || strcmp(f, "..") == 0) {
            rc = pm_error("%s: \"weight_map\" entry \"%s\" is not a file name in this directory", ipath, name);
            break;
        }
        int seen = 0;
        for (int i = 0; i < nf && !seen; i++) seen = strcmp(fnames[i], f) == 0;
        if (!seen) fnames[nf++] = f;
    }
    if (rc == 0) w->files = pm_calloc((size_t)nf, sizeof(StFile));
    for (int i = 0; i < nf && rc == 0; i++) {
        if (join(path, dir, fnames[i]) != 0 || weight_file_open(path, &w->files[i]) != 0)
            rc = -1;
        else
            w->n++;
    }
    // The index and the files must agree: every mapped tensor where the index says, and no tensor twice.
    json_object_foreach(map, name, v) {
        if (rc) break;
        const StFile *in = NULL;
        const StTensor *t = weights_find(w, name, &in);
        const char *slash = t ? strrchr(in->path, '/') : NULL;
        if (!t || strcmp(slash ? slash + 1 : in->path, json_string_value(v)) != 0)
            rc = pm_error("%s: tensor \"%s\" is not in %s, where \"weight_map\" puts it", ipath, name,
                          json_string_value(v));
    }
    for (int i = 0; i < w->n && rc == 0; i++)
        for (int k = 0; k < w->files[i].n && rc == 0; k++) {
            const char *tn = w->files[i].tensors[k].name;
            for (int j = i + 1; j < w->n && rc == 0; j++)
                if (st_find(&w->files[j], tn))
                    rc = pm_error("%s: tensor \"%s\" is in both %s and %s", ipath, tn, w->files[i].path,
                                  w->files[j].path);
            if (rc == 0 && !json_object_get(map, tn))
                rc = pm_error("%s: %s holds tensor \"%s\", which \"weight_map\" does not name", ipath,
                              w->files[i].path, tn);
        }
    free(fnames);
    json_decref(root);
    if (rc) weights_close(w);
    return rc;
}

int checkpoint_load_model(const char *dir, Model *m) {
    model_settle_updates(m);  // (nothing pending may land on what is loaded)
    char cpath[PATH_BUF];
    if (join(cpath, dir, "config.json") != 0) return -1;
    ModelConfig c;
    int hf = 0;
    if (config_read_layout(cpath, &c, &hf) != 0) return -1;
    const ModelConfig *mc = &m->cfg;
#define CFG_SAME(field, key)                                                                              \
    if (c.field != mc->field)                                                                             \
        return pm_error("%s: %s is %d but the model was created with %d", cpath, key, c.field, mc->field);
    CFG_SAME(n_layer, "n_layer");
    CFG_SAME(d_model, "d_model");
    CFG_SAME(vocab_size, "vocab_size");
    CFG_SAME(pad_vocab_multiple, "pad_vocab_size_multiple");
    CFG_SAME(d_state, "ssm_cfg.d_state");
    CFG_SAME(d_conv, "ssm_cfg.d_conv");
    CFG_SAME(expand, "ssm_cfg.expand");
#undef CFG_SAME

    WeightSet w;
    if (weights_open(dir, &w) != 0) return -1;
    int nt = m->n_tensors;
    const ParamInfo *pi = m->tensors;
    float *host = pm_malloc(m->n_params * sizeof(float));  // (n_params)
    int rc = 0;
    for (int i = 0; i < nt && rc == 0; i++) {
        const StFile *f = NULL;
        const char *name = layout_name(pi[i].name, hf);
        const StTensor *t = weights_find(&w, name, &f);
        if (!t) {
            rc = pm_error("%s: missing tensor \"%s\"", w.where, name);
        } else if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16") &&
                   strcmp(t->dtype, "F64")) {
            rc = pm_error("%s: tensor \"%s\" has dtype %s; expected F32 (or BF16, F16, F64)", f->path, t->name,
                          t->dtype);
        } else if (!same_shape(t, &pi[i])) {
            rc = shape_error(f->path, t, &pi[i]);
        } else if ((rc = st_read_f32(f, t, host + pi[i].offset, pi[i].size)) == 0) {
            long bad = first_nonfinite(host + pi[i].offset, pi[i].size);
            if (bad >= 0)
                rc = pm_error("%s: tensor \"%s\" element %ld is %s", f->path, t->name, bad,
                              isnan(host[pi[i].offset + bad]) ? "NaN" : "infinite");
        }
    }
    // Nothing else may be in the files, except a tied LM head equal to the embedding.
    for (int fi = 0; fi < w.n && rc == 0; fi++) {
        const StFile *f = &w.files[fi];
        for (int k = 0; k < f->n && rc == 0; k++) {
            const StTensor *t = &f->tensors[k];
            int known = 0;
            for (int i = 0; i < nt && !known; i++) known = strcmp(t->name, layout_name(pi[i].name, hf)) == 0;
            if (known) continue;
            if (strcmp(t->name, "lm_head.weight") != 0) {
                rc = pm_error("%s: unexpected tensor \"%s\" (not a parameter of this model)", f->path, t->name);
                break;
            }
            const ParamInfo *emb = &pi[model_tensor_index(&m->cfg, -1, 0)];
            if (!same_shape(t, emb)) {
                rc = shape_error(f->path, t, emb);
                break;
            }
            size_t n = emb->size;
            float *head = pm_malloc(n * sizeof(float));
            if (st_read_f32(f, t, head, n) != 0)
                rc = -1;
            else if (memcmp(head, host + emb->offset, n * sizeof(float)) != 0)
                rc = pm_error("%s: lm_head.weight differs from %s; untied LM heads are not supported", f->path,
                              layout_name(emb->name, hf));
            free(head);
        }
    }
    weights_close(&w);
    if (rc == 0) model_set_params(m, host);
    free(host);
    return rc;
}

int checkpoint_load_trainer(const char *dir, Model *m, TrainerState *ts) {
    model_settle_updates(m);  // (nothing pending may land on what is loaded)
    char path[PATH_BUF];
    if (join(path, dir, "trainer.safetensors") != 0) return -1;
    if (m->bk->f32_bytes != 4)
        return pm_error("%s: cannot load into a backend whose F32 is %zu bytes wide", path, m->bk->f32_bytes);
    StFile f;
    if (st_open(path, &f) != 0) return -1;
    int nt = m->n_tensors;
    const ParamInfo *pi = m->tensors;
    const StTensor **mt = pm_calloc(2 * (size_t)nt, sizeof *mt);  // m.<name> then v.<name>
    size_t max_size = 0;
    for (int i = 0; i < nt; i++) max_size = pi[i].size > max_size ? pi[i].size : max_size;
    float *buf = pm_malloc((max_size ? max_size : 1) * sizeof(float));
    TrainerState out;
    memset(&out, 0, sizeof out);
    int rc = 0;

    const StTensor *st = st_find(&f, "state");
    if (!st) {
        rc = pm_error("%s: missing tensor \"state\"", path);
    } else if ((strcmp(st->dtype, "U64") && strcmp(st->dtype, "I64")) || st->ndim != 1 || st->shape[0] != 10) {
        rc = pm_error("%s: tensor \"state\" must be U64 or I64 of shape (10)", path);
    } else {
        uint64_t w[10];
        memcpy(w, st->data, sizeof w);  // little-endian on every supported host
        out.step = (int64_t)w[0];
        out.rng = w[1];
        memcpy(out.data_pos, w + 2, sizeof out.data_pos);
        if (out.step < 0 || out.step > INT_MAX) rc = pm_error("%s: step %lld out of range", path, (long long)out.step);
    }
    for (int k = 0; k < 2 * nt && rc == 0; k++) {
        const ParamInfo *p = &pi[k % nt];
        char name[160];
        snprintf(name, sizeof name, "%c.%s", k < nt ? 'm' : 'v', p->name);
        const StTensor *t = st_find(&f, name);
        if (!t) {
            rc = pm_error("%s: missing tensor \"%s\"", path, name);
        } else if (strcmp(t->dtype, "F32") != 0) {
            rc = pm_error("%s: tensor \"%s\" has dtype %s; expected F32", path, name, t->dtype);
        } else if (!same_shape(t, p)) {
            rc = shape_error(path, t, p);
        } else if ((rc = st_read_f32(&f, t, buf, p->size)) == 0) {
            long bad = first_nonfinite(buf, p->size);
            if (bad >= 0) rc = pm_error("%s: tensor \"%s\" element %ld is not finite", path, name, bad);
            for (size_t j = 0; rc == 0 && k >= nt && j < p->size; j++)
                if (buf[j] < 0) rc = pm_error("%s: tensor \"%s\" element %zu is negative", path, name, j);
        }
        mt[k] = t;
    }
    // the carried state: present exactly when the model carries state (a run with --carry-state saves it)
    const StTensor *carry_t[2] = {st_find(&f, "carry.h"), st_find(&f, "carry.hist")};
    if (rc == 0 && m->carry_on) {
        const ModelConfig *c = &m->cfg;
        const int64_t R = m->carry_rows;  // (the global batch's rows: this rank takes its own)
        const int64_t want[2][4] = {{c->n_layer, R, c->d_inner, c->d_state}, {c->n_layer, R, c->d_conv - 1, c->d_inner}};
        for (int k = 0; k < 2 && rc == 0; k++) {
            const char *nm = k ? "carry.hist" : "carry.h";
            const StTensor *t = carry_t[k];
            if (!t) {
                rc = pm_error("%s: missing tensor \"%s\": the run did not carry state between batches", path, nm);
                break;
            }
            int same = strcmp(t->dtype, "F32") == 0 && t->ndim == 4;
            for (int d = 0; same && d < 4; d++) same = t->shape[d] == want[k][d];
            if (!same)
                rc = pm_error("%s: tensor \"%s\" must be F32 of shape (%lld, %lld, %lld, %lld)", path, nm,
                              (long long)want[k][0], (long long)want[k][1], (long long)want[k][2], (long long)want[k][3]);
            for (size_t j = 0; rc == 0 && j < t->nbytes / 4; j++) {
                float v;
                memcpy(&v, (const char *)t->data + 4 * j, 4);
                if (!isfinite(v)) rc = pm_error("%s: tensor \"%s\" element %zu is not finite", path, nm, j);
            }
        }
    } else if (rc == 0 && (carry_t[0] || carry_t[1])) {
        rc = pm_error("%s: holds a carried state (a run with --carry-state); resume it with --carry-state", path);
    }
    if (rc == 0 && f.n != 2 * nt + 1 + (m->carry_on ? 2 : 0)) {
        for (int k = 0; k < f.n; k++) {
            const char *nm = f.tensors[k].name;
            int known = strcmp(nm, "state") == 0 || (m->carry_on && (!strcmp(nm, "carry.h") || !strcmp(nm, "carry.hist")));
            for (int i = 0; i < nt && !known; i++)
                known = (nm[0] == 'm' || nm[0] == 'v') && nm[1] == '.' && strcmp(nm + 2, pi[i].name) == 0;
            if (!known) {
                rc = pm_error("%s: unexpected tensor \"%s\"", path, nm);
                break;
            }
        }
    }
    if (rc == 0 && f.metadata_json) {
        json_t *md = json_loads(f.metadata_json, 0, NULL);
        json_t *rcfg = json_object_get(md, "run_config");
        if (rcfg) out.run_config_json = pm_strdup(json_string_value(rcfg));  // values checked to be strings
        json_decref(md);
    }
    if (rc == 0) {
        // Everything checked: now change the model.
        if (!m->adam_m || !m->adam_v) model_alloc_optimizer(m);
        for (int k = 0; k < 2 * nt; k++) {
            void *dst = (char *)(k < nt ? m->adam_m : m->adam_v) + pi[k % nt].offset * 4;
            m->bk->upload(dst, mt[k]->data, mt[k]->nbytes);
        }
        if (m->carry_on) {
            // this rank's rows of each layer, back into the backend's element types (hist was widened from them:
            // narrowing is exact)
            const ModelConfig *c = &m->cfg;
            const size_t L = c->n_layer, B = m->B, R = m->carry_rows, r0 = m->carry_row0;
            const size_t hrow = (size_t)c->d_inner * c->d_state, xrow = (size_t)(c->d_conv - 1) * c->d_inner;
            const size_t nh = L * B * hrow, nx = L * B * xrow;
            unsigned char *raw = pm_malloc(model_carry_bytes(m));
            for (size_t l = 0; l < L; l++)
                memcpy(raw + l * B * hrow * 4, (const char *)carry_t[0]->data + (l * R + r0) * hrow * 4, B * hrow * 4);
            for (size_t i = 0; i < nx; i++) {
                const size_t l = i / (B * xrow), k = i % (B * xrow);  // (layer, offset in this rank's rows)
                uint32_t u;
                memcpy(&u, (const char *)carry_t[1]->data + ((l * R + r0) * xrow + k) * 4, 4);
                if (m->bk->act_bytes == 2) {
                    float v;
                    memcpy(&v, &u, 4);
                    const uint16_t h = f32_to_bf16(v);
                    memcpy(raw + nh * 4 + 2 * i, &h, 2);
                } else {
                    memcpy(raw + nh * 4 + 4 * i, &u, 4);
                }
            }
            model_set_carry(m, raw);
            free(raw);
        }
        m->step = (int)out.step;
        *ts = out;
    } else {
        free(out.run_config_json);
    }
    free(buf);
    free(mt);
    st_close(&f);
    return rc;
}

// The step number of a checkpoint directory name "step_<digits>", or -1 (also for "step_N.tmp.<pid>" builds).
static long long step_of_name(const char *nm) {
    if (strncmp(nm, "step_", 5) != 0) return -1;
    size_t len = strlen(nm + 5);
    if (len == 0 || len > 18) return -1;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)nm[5 + i])) return -1;
    return atoll(nm + 5);
}

int checkpoint_find_latest(const char *run_dir, char *out, size_t n) {
    char cdir[PATH_BUF];
    if (join(cdir, run_dir, "checkpoints") != 0) return -1;
    DIR *d = opendir(cdir);
    if (!d) return pm_error("%s: no checkpoints (%s)", cdir, strerror(errno));
    long long best = -1;
    char best_name[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        long long step = step_of_name(nm);
        if (step <= best) continue;
        char sub[PATH_BUF], file[PATH_BUF];
        struct stat st;
        if (join(sub, cdir, nm) != 0) continue;
        if (join(file, sub, "model.safetensors") != 0 || stat(file, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (join(file, sub, "config.json") != 0 || stat(file, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        best = step;
        snprintf(best_name, sizeof best_name, "%s", nm);
    }
    closedir(d);
    if (best < 0) return pm_error("%s: no complete checkpoint found", cdir);
    if ((size_t)snprintf(out, n, "%s/%s", cdir, best_name) >= n)
        return pm_error("%s/%s: path too long for the output buffer", cdir, best_name);
    return 0;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

int checkpoint_prune(const char *run_dir, int keep) {
    if (keep <= 0) return 0;
    char cdir[PATH_BUF];
    if (join(cdir, run_dir, "checkpoints") != 0) return -1;
    DIR *d = opendir(cdir);
    if (!d) return pm_error("%s: cannot open: %s", cdir, strerror(errno));
    long long *steps = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long long step = step_of_name(e->d_name);
        if (step < 0) continue;
        if (n == cap) steps = pm_realloc(steps, (cap = cap ? 2 * cap : 64) * sizeof *steps);
        steps[n++] = step;
    }
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_ll);
    int rc = 0;
    for (size_t i = 0; i + (size_t)keep < n; i++) {
        char name[64], sub[PATH_BUF];
        snprintf(name, sizeof name, "step_%08lld", steps[i]);
        if (join(sub, cdir, name) != 0 || pm_remove_tree(sub) != 0) rc = -1;
    }
    free(steps);
    return rc;
}

int checkpoint_tokenizer(const char *ckpt, char *out, size_t n) {
    static const char *const cands[] = {"%s/tokenizer.json", "%s/../../tokenizer.json"};  // beside it; the run's
    struct stat st;
    for (int i = 0; i < 2; i++)
        if ((size_t)snprintf(out, n, cands[i], ckpt) < n && stat(out, &st) == 0 && S_ISREG(st.st_mode)) return 0;
    out[0] = 0;
    return -1;
}

int checkpoint_resolve(const char *path, char *out, size_t n) {
    char probe[PATH_BUF];
    struct stat st;
    if (weights_find_file(path, probe, NULL) == 0) {
        if ((size_t)snprintf(out, n, "%s", path) >= n) return pm_error("%s: path too long", path);
        return 0;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return pm_error("%s: no such checkpoint or run directory", path);
    if (checkpoint_find_latest(path, out, n) != 0)
        return pm_error("%s: no checkpoint found (expected model.safetensors, or checkpoints/step_* inside a run)",
                        path);
    return 0;
}
