// test_checkpoint.c — checkpoint directories: bit-identical round trip of parameters, Adam moments and trainer
// state; the files' contents checked independently (st_open / jansson); every kind of bad checkpoint rejected
// with one error line naming the file, the model's parameters and the files on disk untouched by a failed load;
// bf16 checkpoints loading; saving over an existing checkpoint; finding the latest checkpoint of a run.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "safetensors.h"
#include "util.h"

static char tmpdir[256];

static void rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rm_rf(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pm_test_ckpt_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state) {
    rm_rf(tmpdir);
    return 0;
}

static ModelConfig tiny_config(void) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.n_layer = 2;
    c.d_model = 16;
    c.vocab_size = 40;
    c.pad_vocab_multiple = 8;
    c.d_state = 16;
    c.d_conv = 4;
    c.expand = 2;
    c.norm_eps = 1e-5f;
    config_derive(&c);
    return c;
}

static float *get_params(const Model *m) {
    float *p = malloc(m->n_params * sizeof(float));
    model_get_params(m, p);
    return p;
}

static float *get_moment(const Model *m, const void *buf) {
    float *p = malloc(m->n_params * sizeof(float));
    m->bk->download(p, buf, m->n_params * sizeof(float));
    return p;
}

// Random moments (v positive) so the round trip has something to preserve.
static void set_random_moments(Model *m, uint64_t seed) {
    model_alloc_optimizer(m);
    PmRng r;
    pm_rng_seed(&r, seed);
    float *h = malloc(m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) h[i] = pm_rng_normal(&r) * 1e-3f;
    m->bk->upload(m->adam_m, h, m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) h[i] = pm_rng_uniform(&r) * 1e-6f;
    m->bk->upload(m->adam_v, h, m->n_params * sizeof(float));
    free(h);
}

static void ck_path(char *out, const char *sub) { assert_true(snprintf(out, 1024, "%s/%s", tmpdir, sub) < 1024); }

static void file_path(char *out, const char *dir, const char *name) {
    assert_true(snprintf(out, 1024, "%s/%s", dir, name) < 1024);
}

// Save a model + trainer checkpoint of a seed-1 tiny model into tmpdir/ck; returns the dir in `dir`.
static void save_reference(char *dir, Model *m) {
    ModelConfig c = tiny_config();
    model_create(m, &c, backend_cpu(), 1);
    set_random_moments(m, 77);
    TrainerState ts = {.step = 123, .rng = 0xDEADBEEFCAFEF00Dull, .data_pos = {1, 2, 3, 4, 5, 6, 7, 1ull << 63},
                       .run_config_json = "{\"lr\": 0.001, \"batch\": [4, 512]}"};
    ck_path(dir, "ck");
    assert_int_equal(checkpoint_save(dir, m, &ts), 0);
}

static void test_roundtrip(void **state) {
    Model a, b;
    char dir[1024], path[1024];
    save_reference(dir, &a);
    TrainerState ts = {.step = 123, .rng = 0xDEADBEEFCAFEF00Dull, .data_pos = {1, 2, 3, 4, 5, 6, 7, 1ull << 63}};

    ModelConfig c;
    assert_int_equal(checkpoint_load_config(dir, &c), 0);
    ModelConfig want = tiny_config();
    assert_int_equal(c.n_layer, want.n_layer);
    assert_int_equal(c.d_model, want.d_model);
    assert_int_equal(c.vocab_size, want.vocab_size);
    assert_int_equal(c.vocab_pad, 40);
    assert_int_equal(c.d_inner, 32);
    assert_int_equal(c.dt_rank, 1);
    assert_int_equal(c.d_state, 16);
    assert_int_equal(c.d_conv, 4);
    assert_int_equal(c.expand, 2);

    model_create(&b, &c, backend_cpu(), 2);  // different weights before loading
    float *pa = get_params(&a), *pb = get_params(&b);
    assert_true(memcmp(pa, pb, a.n_params * 4) != 0);
    free(pb);
    assert_int_equal(checkpoint_load_model(dir, &b), 0);
    pb = get_params(&b);
    assert_memory_equal(pa, pb, a.n_params * 4);
    free(pb);

    TrainerState got;
    memset(&got, 0, sizeof got);
    assert_int_equal(checkpoint_load_trainer(dir, &b, &got), 0);
    assert_int_equal(got.step, ts.step);
    assert_int_equal(b.step, 123);
    assert_true(got.rng == ts.rng);
    assert_memory_equal(got.data_pos, ts.data_pos, sizeof ts.data_pos);
    assert_non_null(got.run_config_json);
    assert_string_equal(got.run_config_json, "{\"lr\": 0.001, \"batch\": [4, 512]}");
    float *ma = get_moment(&a, a.adam_m), *mb = get_moment(&b, b.adam_m);
    assert_memory_equal(ma, mb, a.n_params * 4);
    free(ma);
    free(mb);
    ma = get_moment(&a, a.adam_v);
    mb = get_moment(&b, b.adam_v);
    assert_memory_equal(ma, mb, a.n_params * 4);
    free(ma);
    free(mb);
    trainer_state_free(&got);

    // The files themselves, read without the checkpoint loader: reference names and shapes, all F32, no
    // lm_head.weight, tensor data equal to the parameters.
    file_path(path, dir, "model.safetensors");
    StFile f;
    assert_int_equal(st_open(path, &f), 0);
    assert_int_equal(f.n, a.n_tensors);
    assert_int_equal(a.n_tensors, 2 + P_PER_LAYER * 2);
    assert_null(st_find(&f, "lm_head.weight"));
    for (int i = 0; i < a.n_tensors; i++) {
        const ParamInfo *p = &a.tensors[i];
        const StTensor *t = st_find(&f, p->name);
        assert_non_null(t);
        assert_string_equal(t->dtype, "F32");
        assert_int_equal(t->ndim, p->ndim);
        for (int d = 0; d < p->ndim; d++) assert_int_equal(t->shape[d], p->shape[d]);
        assert_memory_equal(t->data, pa + p->offset, p->size * 4);
    }
    const StTensor *conv = st_find(&f, "backbone.layers.1.mixer.conv1d.weight");
    assert_non_null(conv);
    assert_int_equal(conv->ndim, 3);
    assert_int_equal(conv->shape[0], 32);
    assert_int_equal(conv->shape[1], 1);
    assert_int_equal(conv->shape[2], 4);
    const StTensor *emb = st_find(&f, "backbone.embedding.weight");
    assert_int_equal(emb->shape[0], 40);
    assert_int_equal(emb->shape[1], 16);
    st_close(&f);
    free(pa);

    file_path(path, dir, "trainer.safetensors");
    assert_int_equal(st_open(path, &f), 0);
    assert_int_equal(f.n, 2 * a.n_tensors + 1);
    assert_non_null(st_find(&f, "m.backbone.norm_f.weight"));
    assert_non_null(st_find(&f, "v.backbone.layers.0.mixer.A_log"));
    const StTensor *stt = st_find(&f, "state");
    assert_non_null(stt);
    uint64_t words[10];
    memcpy(words, stt->data, 80);
    assert_int_equal(words[0], 123);
    assert_true(words[1] == ts.rng && words[9] == (1ull << 63));
    json_t *md = json_loads(f.metadata_json, 0, NULL);
    json_t *rc = json_loads(json_string_value(json_object_get(md, "run_config")), 0, NULL);
    assert_non_null(rc);  // the run config is itself JSON, stored as a string
    assert_true(json_real_value(json_object_get(rc, "lr")) == 0.001);
    json_decref(rc);
    json_decref(md);
    st_close(&f);

    file_path(path, dir, "config.json");
    json_t *cj = json_load_file(path, 0, NULL);
    assert_non_null(cj);
    assert_int_equal(json_integer_value(json_object_get(cj, "d_model")), 16);
    assert_int_equal(json_integer_value(json_object_get(cj, "n_layer")), 2);
    assert_int_equal(json_integer_value(json_object_get(cj, "vocab_size")), 40);
    assert_int_equal(json_integer_value(json_object_get(cj, "pad_vocab_size_multiple")), 8);
    assert_true(json_is_object(json_object_get(cj, "ssm_cfg")));
    assert_true(json_is_true(json_object_get(cj, "rms_norm")));
    assert_true(json_is_true(json_object_get(cj, "residual_in_fp32")));
    assert_true(json_is_true(json_object_get(cj, "fused_add_norm")));
    assert_true(json_is_true(json_object_get(cj, "tie_embeddings")));
    json_decref(cj);

    // No temp directories next to it.
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        entries++;
        assert_null(strstr(e->d_name, ".tmp"));
    }
    closedir(d);
    assert_int_equal(entries, 1);
    model_destroy(&a);
    model_destroy(&b);
}

// A model-only checkpoint has no trainer.safetensors, and loading its trainer state fails cleanly.
static void test_model_only(void **state) {
    ModelConfig c = tiny_config();
    Model m, b;
    model_create(&m, &c, backend_cpu(), 3);
    char dir[1024], path[1024];
    ck_path(dir, "runs/x/checkpoints/step_00000001");  // parents are created
    assert_int_equal(checkpoint_save(dir, &m, NULL), 0);
    file_path(path, dir, "trainer.safetensors");
    assert_int_equal(access(path, F_OK), -1);
    model_create(&b, &c, backend_cpu(), 4);
    assert_int_equal(checkpoint_load_model(dir, &b), 0);
    float *pa = get_params(&m), *pb = get_params(&b);
    assert_memory_equal(pa, pb, m.n_params * 4);
    free(pa);
    free(pb);
    TrainerState ts;
    memset(&ts, 0, sizeof ts);
    assert_int_equal(checkpoint_load_trainer(dir, &b, &ts), -1);
    assert_non_null(strstr(pm_last_error(), path));
    assert_null(b.adam_m);  // nothing allocated on failure

    // With a trainer state but no optimizer yet, zero moments are written and load back as zeros.
    TrainerState ts2 = {.step = 0, .rng = 99};
    assert_int_equal(checkpoint_save(dir, &m, &ts2), 0);
    assert_int_equal(checkpoint_load_trainer(dir, &b, &ts), 0);
    assert_non_null(b.adam_m);
    assert_true(ts.rng == 99 && ts.run_config_json == NULL);
    float *mv = get_moment(&b, b.adam_v);
    for (size_t i = 0; i < b.n_params; i++) assert_true(mv[i] == 0.0f);
    free(mv);
    model_destroy(&m);
    model_destroy(&b);
}

// ---- corrupting a saved checkpoint ----

typedef struct {
    char *data;
    size_t n;
} Blob;

static Blob read_blob(const char *path) {
    Blob b = {0};
    b.data = pm_read_file(path, &b.n);
    assert_non_null(b.data);
    return b;
}

static void write_blob(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

// Rewrite <dir>/<file> after `edit` changed its tensor list (copied out of the current file first).
typedef void (*EditFn)(StWrite *w, int *n, void *scratch);

static void rewrite_st(const char *dir, const char *file, EditFn edit) {
    char path[1024];
    file_path(path, dir, file);
    StFile f;
    assert_int_equal(st_open(path, &f), 0);
    StWrite *w = calloc(f.n + 4, sizeof(StWrite));
    char *copy = malloc(f.size);  // tensor data copied so edits may change it
    size_t off = 0;
    // Keep the reference order: sort by name lookup in the file (which is in offset order).
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        memcpy(copy + off, t->data, t->nbytes);
        w[i] = (StWrite){.name = strdup(t->name), .dtype = strdup(t->dtype), .ndim = t->ndim, .data = copy + off,
                         .nbytes = t->nbytes};
        memcpy(w[i].shape, t->shape, sizeof t->shape);
        off += t->nbytes;
    }
    int n = f.n;
    const int slots = f.n + 4;  // (st_close clears f)
    static char scratch[1 << 16];
    edit(w, &n, scratch);
    st_close(&f);
    assert_int_equal(st_write(path, w, n, NULL), 0);
    for (int i = 0; i < slots; i++) {
        free((void *)w[i].name);
        free((void *)w[i].dtype);
    }
    free(w);
    free(copy);
}

static int find_w(StWrite *w, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(w[i].name, name) == 0) return i;
    fail_msg("no tensor %s", name);
    return -1;
}

static void transpose_shape(StWrite *w, int n, const char *name) {
    int i = find_w(w, n, name);  // (64, 16) -> (16, 64): same bytes, only the shape is wrong
    int64_t t = w[i].shape[0];
    w[i].shape[0] = w[i].shape[1];
    w[i].shape[1] = t;
}

static void edit_wrong_shape(StWrite *w, int *n, void *s) {
    transpose_shape(w, *n, "backbone.layers.1.mixer.in_proj.weight");
}

static void edit_wrong_shape_v(StWrite *w, int *n, void *s) {
    transpose_shape(w, *n, "v.backbone.layers.1.mixer.in_proj.weight");
}

static void edit_wrong_dtype(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "backbone.layers.0.mixer.D");
    free((void *)w[i].dtype);
    w[i].dtype = strdup("I32");  // same size, so only the dtype is wrong
}

static void edit_nan(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "backbone.layers.1.mixer.x_proj.weight");
    float nan = NAN;
    memcpy((char *)w[i].data + 4 * 5, &nan, 4);
}

static void edit_inf(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "backbone.norm_f.weight");
    float inf = -INFINITY;
    memcpy((char *)w[i].data, &inf, 4);
}

static void edit_drop(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "backbone.layers.0.mixer.dt_proj.bias");
    free((void *)w[i].name);
    free((void *)w[i].dtype);
    w[i] = w[*n - 1];
    w[*n - 1] = (StWrite){0};
    (*n)--;
}

static void edit_extra(StWrite *w, int *n, void *s) {
    w[*n] = (StWrite){.name = strdup("backbone.layers.2.norm.weight"), .dtype = strdup("F32"), .ndim = 1,
                      .shape = {16}, .data = s, .nbytes = 64};
    (*n)++;
}

static void edit_lm_head_tied(StWrite *w, int *n, void *s) {
    int e = find_w(w, *n, "backbone.embedding.weight");
    w[*n] = w[e];
    w[*n].name = strdup("lm_head.weight");
    w[*n].dtype = strdup("F32");
    (*n)++;
}

static void edit_lm_head_untied(StWrite *w, int *n, void *s) {
    edit_lm_head_tied(w, n, s);
    memcpy(s, w[*n - 1].data, w[*n - 1].nbytes);
    ((float *)s)[7] += 1.0f;
    w[*n - 1].data = s;
}

static void edit_v_negative(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "v.backbone.layers.0.mixer.in_proj.weight");
    float neg = -1e-3f;
    memcpy((char *)w[i].data + 4 * 11, &neg, 4);
}

static void edit_extra_moment(StWrite *w, int *n, void *s) {
    w[*n] = (StWrite){.name = strdup("m.backbone.lm_head.bias"), .dtype = strdup("F32"), .ndim = 1,
                      .shape = {4}, .data = s, .nbytes = 16};
    (*n)++;
}

static void edit_drop_m(StWrite *w, int *n, void *s) {
    int i = find_w(w, *n, "m.backbone.norm_f.weight");
    free((void *)w[i].name);
    free((void *)w[i].dtype);
    w[i] = w[*n - 1];
    w[*n - 1] = (StWrite){0};
    (*n)--;
}

// Convert every F32 tensor to BF16 (truncation), as a PyTorch bf16 checkpoint would hold.
static void edit_to_bf16(StWrite *w, int *n, void *s) {
    for (int i = 0; i < *n; i++) {
        size_t ne = w[i].nbytes / 4;
        uint16_t *h = (uint16_t *)w[i].data;  // in place: the first half of the buffer
        for (size_t k = 0; k < ne; k++) {
            uint32_t bits;
            memcpy(&bits, (char *)w[i].data + 4 * k, 4);
            h[k] = (uint16_t)(bits >> 16);
        }
        free((void *)w[i].dtype);
        w[i].dtype = strdup("BF16");
        w[i].nbytes = ne * 2;
    }
}

// All files of a checkpoint directory, to show a failed load changed nothing.
typedef struct {
    Blob model, config, trainer;
} Snapshot;

static Blob read_blob_opt(const char *path) {
    Blob b = {0};
    if (access(path, F_OK) == 0) b = read_blob(path);
    return b;
}

static Snapshot snap(const char *dir) {
    char p[1024];
    Snapshot s;
    file_path(p, dir, "model.safetensors");
    s.model = read_blob_opt(p);
    file_path(p, dir, "config.json");
    s.config = read_blob_opt(p);
    file_path(p, dir, "trainer.safetensors");
    s.trainer = read_blob_opt(p);
    return s;
}

static void blob_same(Blob a, Blob b) {
    assert_int_equal(a.n, b.n);
    assert_true((a.data == NULL) == (b.data == NULL));
    if (a.n) assert_memory_equal(a.data, b.data, a.n);
    free(a.data);
    free(b.data);
}

static void snap_same(Snapshot a, Snapshot b) {
    blob_same(a.model, b.model);
    blob_same(a.config, b.config);
    blob_same(a.trainer, b.trainer);
}

// Load into a fresh seed-9 model, expect failure with `needle` and the file name in the message, and check that
// the model's parameters and the files on disk did not change.
static void expect_load_fails(const char *dir, const char *file, const char *needle) {
    ModelConfig c = tiny_config();
    Model b;
    model_create(&b, &c, backend_cpu(), 9);
    float *before = get_params(&b);
    Snapshot s0 = snap(dir);
    int rc = checkpoint_load_model(dir, &b);
    const char *msg = pm_last_error();
    if (getenv("PM_TEST_VERBOSE")) printf("  -> %s\n", msg);
    if (rc == 0) fail_msg("load accepted a bad checkpoint (expected an error about %s)", needle);
    char path[1024];
    file_path(path, dir, file);
    if (!strstr(msg, path)) fail_msg("error does not name %s: %s", path, msg);
    if (needle && !strstr(msg, needle)) fail_msg("error does not mention \"%s\": %s", needle, msg);
    assert_null(strchr(msg, '\n'));
    float *after = get_params(&b);
    assert_memory_equal(before, after, b.n_params * 4);
    snap_same(s0, snap(dir));
    free(before);
    free(after);
    model_destroy(&b);
}

static void fresh_checkpoint(char *dir) {
    Model a;
    rm_rf(tmpdir);
    mkdir(tmpdir, 0700);
    save_reference(dir, &a);
    model_destroy(&a);
}

static void test_load_rejects_model_file(void **state) {
    char dir[1024], path[1024];

    fresh_checkpoint(dir);  // truncated model.safetensors
    file_path(path, dir, "model.safetensors");
    Blob b = read_blob(path);
    write_blob(path, b.data, b.n - 6);
    free(b.data);
    expect_load_fails(dir, "model.safetensors", NULL);

    fresh_checkpoint(dir);  // malformed header: the first quote of the JSON becomes '#'
    b = read_blob(path);
    *strchr(b.data + 8, '"') = '#';
    write_blob(path, b.data, b.n);
    free(b.data);
    expect_load_fails(dir, "model.safetensors", "malformed");

    // each edit of a fresh checkpoint's model file, and what the error line must name
    static const struct {
        EditFn edit;
        const char *needle;
    } edits[] = {
        {edit_wrong_shape, "backbone.layers.1.mixer.in_proj.weight"},
        {edit_wrong_dtype, "I32"},
        {edit_nan, "backbone.layers.1.mixer.x_proj.weight\" element 5 is NaN"},
        {edit_inf, "backbone.norm_f.weight"},
        {edit_drop, "missing tensor \"backbone.layers.0.mixer.dt_proj.bias\""},
        {edit_extra, "backbone.layers.2.norm.weight"},
        {edit_lm_head_untied, "lm_head.weight"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        fresh_checkpoint(dir);
        rewrite_st(dir, "model.safetensors", edits[i].edit);
        expect_load_fails(dir, "model.safetensors", edits[i].needle);
    }

    fresh_checkpoint(dir);
    unlink(path);
    expect_load_fails(dir, "model.safetensors", NULL);
}

static void test_load_rejects_config(void **state) {
    char dir[1024], path[1024];
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"d_model\": -16, \"n_layer\": 2, \"vocab_size\": 40}", "d_model"},
        {"{\"d_model\": 16, \"n_layer\": 0, \"vocab_size\": 40}", "n_layer"},
        {"{\"d_model\": 16, \"n_layer\": 2}", "vocab_size"},
        {"{\"d_model\": \"16\", \"n_layer\": 2, \"vocab_size\": 40}", "integer"},
        {"{\"d_model\": 16.5, \"n_layer\": 2, \"vocab_size\": 40}", "integer"},
        {"{\"d_model\": 24, \"n_layer\": 2, \"vocab_size\": 40}", "d_model"},  // valid, but not this model
        {"{\"d_model\": 16, \"n_layer\": 3, \"vocab_size\": 40}", "n_layer"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"rms_norm\": false}", "not supported"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"tie_embeddings\": false}", "not supported"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"d_layers\": 5}", "unknown key"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"ssm_cfg\": {\"layer\": \"Mamba2\"}}", "Mamba2"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"ssm_cfg\": {\"d_state\": 0}}", "d_state"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40, \"attn_layer_idx\": [1]}", "attention"},
        {"{\"d_model\": 16, \"n_layer\": 2, \"vocab_size\": 40", "malformed"},
        {"[16, 2, 40]", "object"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fresh_checkpoint(dir);
        file_path(path, dir, "config.json");
        write_blob(path, bad[k].json, strlen(bad[k].json));
        expect_load_fails(dir, "config.json", bad[k].needle);
    }
    fresh_checkpoint(dir);
    file_path(path, dir, "config.json");
    unlink(path);
    expect_load_fails(dir, "config.json", NULL);
}

// Reference-style configs (as state-spaces/mamba-130m ships: empty ssm_cfg, no tie_embeddings key) are read
// with the reference defaults; write + read is the identity.
static void test_config_read_reference(void **state) {
    char path[1024];
    ck_path(path, "config.json");
    const char *ref = "{\"d_model\": 768, \"n_layer\": 24, \"vocab_size\": 50277, \"ssm_cfg\": {}, \"rms_norm\": true,"
                      " \"residual_in_fp32\": true, \"fused_add_norm\": true, \"pad_vocab_size_multiple\": 8}";
    write_blob(path, ref, strlen(ref));
    ModelConfig c;
    assert_int_equal(config_read_json(path, &c), 0);
    assert_int_equal(c.d_model, 768);
    assert_int_equal(c.n_layer, 24);
    assert_int_equal(c.vocab_size, 50277);
    assert_int_equal(c.vocab_pad, 50280);
    assert_int_equal(c.d_inner, 1536);
    assert_int_equal(c.dt_rank, 48);
    assert_int_equal(c.d_state, 16);
    assert_int_equal(c.d_conv, 4);
    assert_int_equal(c.expand, 2);
    ModelConfig c2 = c, c3;
    c2.d_state = 8;
    c2.pad_vocab_multiple = 16;
    config_derive(&c2);
    assert_int_equal(config_write_json(path, &c2), 0);
    assert_int_equal(config_read_json(path, &c3), 0);
    assert_int_equal(c3.d_state, 8);
    assert_int_equal(c3.pad_vocab_multiple, 16);
    assert_int_equal(c3.vocab_pad, 50288);
    assert_int_equal(c3.n_layer, 24);
}

static void test_load_bf16_and_lm_head(void **state) {
    char dir[1024];
    ModelConfig c = tiny_config();
    Model b;

    // A tied lm_head.weight equal to the embedding is accepted.
    fresh_checkpoint(dir);
    rewrite_st(dir, "model.safetensors", edit_lm_head_tied);
    model_create(&b, &c, backend_cpu(), 9);
    assert_int_equal(checkpoint_load_model(dir, &b), 0);
    model_destroy(&b);

    // A BF16 checkpoint loads as the bf16 values widened to F32.
    Model a;
    rm_rf(tmpdir);
    mkdir(tmpdir, 0700);
    save_reference(dir, &a);
    float *pa = get_params(&a);
    for (size_t i = 0; i < a.n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &pa[i], 4);
        bits &= 0xffff0000u;
        memcpy(&pa[i], &bits, 4);
    }
    rewrite_st(dir, "model.safetensors", edit_to_bf16);
    model_create(&b, &c, backend_cpu(), 9);
    assert_int_equal(checkpoint_load_model(dir, &b), 0);
    float *pb = get_params(&b);
    assert_memory_equal(pa, pb, a.n_params * 4);
    free(pa);
    free(pb);
    model_destroy(&a);
    model_destroy(&b);
}

// Trainer-state validation: nothing changes in the model on failure.
static void expect_trainer_fails(const char *dir, const char *needle) {
    ModelConfig c = tiny_config();
    Model b;
    model_create(&b, &c, backend_cpu(), 9);
    set_random_moments(&b, 5);
    b.step = 7;
    float *m0 = get_moment(&b, b.adam_m), *v0 = get_moment(&b, b.adam_v);
    TrainerState ts = {.step = -5};
    assert_int_equal(checkpoint_load_trainer(dir, &b, &ts), -1);
    char path[1024];
    file_path(path, dir, "trainer.safetensors");
    const char *msg = pm_last_error();
    if (!strstr(msg, path) || !strstr(msg, needle)) fail_msg("unexpected error: %s", msg);
    assert_int_equal(ts.step, -5);
    assert_int_equal(b.step, 7);
    float *m1 = get_moment(&b, b.adam_m), *v1 = get_moment(&b, b.adam_v);
    assert_memory_equal(m0, m1, b.n_params * 4);
    assert_memory_equal(v0, v1, b.n_params * 4);
    free(m0);
    free(m1);
    free(v0);
    free(v1);
    model_destroy(&b);
}

static void test_trainer_rejects(void **state) {
    char dir[1024];
    fresh_checkpoint(dir);
    rewrite_st(dir, "trainer.safetensors", edit_v_negative);
    expect_trainer_fails(dir, "v.backbone.layers.0.mixer.in_proj.weight");
    fresh_checkpoint(dir);
    rewrite_st(dir, "trainer.safetensors", edit_drop_m);
    expect_trainer_fails(dir, "m.backbone.norm_f.weight");
    fresh_checkpoint(dir);
    rewrite_st(dir, "trainer.safetensors", edit_wrong_shape_v);  // a moment of the wrong shape
    expect_trainer_fails(dir, "in_proj");
    fresh_checkpoint(dir);
    rewrite_st(dir, "trainer.safetensors", edit_extra_moment);
    expect_trainer_fails(dir, "unexpected tensor \"m.backbone.lm_head.bias\"");
}

// Saving over an existing checkpoint replaces it completely (stale files gone) and leaves no temp dirs.
static void test_save_replaces(void **state) {
    char dir[1024], path[1024];
    Model a, b;
    save_reference(dir, &a);
    file_path(path, dir, "junk.txt");
    write_blob(path, "x", 1);
    ModelConfig c = tiny_config();
    model_create(&b, &c, backend_cpu(), 11);
    assert_int_equal(checkpoint_save(dir, &b, NULL), 0);
    assert_int_equal(access(path, F_OK), -1);  // stale file gone
    file_path(path, dir, "trainer.safetensors");
    assert_int_equal(access(path, F_OK), -1);  // the old trainer state is gone too
    Model r;
    model_create(&r, &c, backend_cpu(), 12);
    assert_int_equal(checkpoint_load_model(dir, &r), 0);
    float *pb = get_params(&b), *pr = get_params(&r);
    assert_memory_equal(pb, pr, b.n_params * 4);
    free(pb);
    free(pr);
    // A trailing slash names the same directory.
    char slash[1100];
    snprintf(slash, sizeof slash, "%s/", dir);
    assert_int_equal(checkpoint_save(slash, &a, NULL), 0);
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        entries++;
        assert_string_equal(e->d_name, "ck");
    }
    closedir(d);
    assert_int_equal(entries, 1);
    assert_int_equal(checkpoint_load_model(dir, &r), 0);
    float *pa = get_params(&a);
    pr = get_params(&r);
    assert_memory_equal(pa, pr, a.n_params * 4);
    free(pa);
    free(pr);
    // Saving onto a path that is a regular file is refused and leaves it alone.
    ck_path(path, "plainfile");
    write_blob(path, "keep", 4);
    assert_int_equal(checkpoint_save(path, &a, NULL), -1);
    Blob bl = read_blob(path);
    assert_int_equal(bl.n, 4);
    free(bl.data);
    model_destroy(&a);
    model_destroy(&b);
    model_destroy(&r);
}

static void test_find_latest(void **state) {
    char run[1024], out[1024], p[1100];
    ck_path(run, "run");
    assert_int_equal(checkpoint_find_latest(run, out, sizeof out), -1);  // no checkpoints dir yet
    assert_non_null(strstr(pm_last_error(), run));
    ModelConfig c = tiny_config();
    Model m;
    model_create(&m, &c, backend_cpu(), 1);
    const char *complete[] = {"step_00000010", "step_00000200", "step_00000030"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/checkpoints/%s", run, complete[i]);
        assert_int_equal(checkpoint_save(p, &m, NULL), 0);
    }
    // A newer build still in progress (temp name) and a newer directory without model.safetensors.
    snprintf(p, sizeof p, "%s/checkpoints/step_00000300.tmp.4242", run);
    assert_int_equal(checkpoint_save(p, &m, NULL), 0);
    snprintf(p, sizeof p, "%s/checkpoints/step_00000400", run);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/checkpoints/step_00000400/config.json", run);
    assert_int_equal(config_write_json(p, &c), 0);
    assert_int_equal(checkpoint_find_latest(run, out, sizeof out), 0);
    snprintf(p, sizeof p, "%s/checkpoints/step_00000200", run);
    assert_string_equal(out, p);
    char small[8];
    assert_int_equal(checkpoint_find_latest(run, small, sizeof small), -1);
    model_destroy(&m);
}

// checkpoint_prune keeps the newest K step_* directories (by step number, not by name length or time) and never
// touches "best" or a temp build; checkpoint_resolve takes a checkpoint or a run directory.
static void test_prune_and_resolve(void **state) {
    char run[1024], out[1024], p[1100];
    ck_path(run, "run");
    ModelConfig c = tiny_config();
    Model m;
    model_create(&m, &c, backend_cpu(), 1);
    const char *names[] = {"step_00000005", "step_00000040", "step_00000300", "step_00001000", "best",
                           "step_00002000.tmp.77"};
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/checkpoints/%s", run, names[i]);
        assert_int_equal(checkpoint_save(p, &m, NULL), 0);
    }
    assert_int_equal(checkpoint_prune(run, 2), 0);
    struct stat st;
    int expect[] = {0, 0, 1, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/checkpoints/%s", run, names[i]);
        assert_int_equal(stat(p, &st) == 0, expect[i]);
    }
    assert_int_equal(checkpoint_resolve(run, out, sizeof out), 0);
    snprintf(p, sizeof p, "%s/checkpoints/step_00001000", run);
    assert_string_equal(out, p);
    assert_int_equal(checkpoint_resolve(p, out, sizeof out), 0);
    assert_string_equal(out, p);
    snprintf(p, sizeof p, "%s/nothing_here", run);
    assert_int_equal(checkpoint_resolve(p, out, sizeof out), -1);
    assert_non_null(strstr(pm_last_error(), p));
    model_destroy(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_rejects_model_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_rejects_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_read_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_bf16_and_lm_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trainer_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_replaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_find_latest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_and_resolve, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
