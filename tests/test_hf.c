// test_hf.c — checkpoints in Hugging Face transformers' layout (MambaForCausalLM, the *-hf model repositories):
// read, fine-tuned from, and written.
//
// The truth is transformers itself: tests/fixtures/hf/ was written by dev/reference/make_hf_fixture.py on a
// machine with transformers 5.17 (dev/calls/call330.sh). hf_f32/ is save_pretrained of a tiny random model (vocab
// 260, which is not a multiple of 8, so a loader that pads the vocabulary as mamba_ssm's configs do would see the
// wrong shape); hf_sharded/ holds the same weights in bf16, split by save_pretrained over three files named by
// model.safetensors.index.json. expected.json holds token sequences and, per checkpoint, transformers' own float64
// losses of each sequence run alone. We load each directory, run the sequences as one packed batch and compare per
// document (fp32 engine against float64: 1e-5 relative, as test_interop.c). Controls: the layers swapped must miss
// by far; the f32 weights must miss the bf16 checkpoint's losses (the rounding moves them by up to 9.6e-4).
//
// Writing: `packmamba export` output was read by transformers on the same machine and gave our reference's
// losses to 2.9e-8 (call330.sh; transformers' RMSNorm runs in fp32); here the written files are checked for the
// layout's names and keys, re-read bit for bit (f32) or as bf16 rounded to nearest (bf16). `train --init-from`
// must start from the checkpoint's weights: a run of no steps saves them unchanged.
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend.h"
#include "batch.h"
#include "checkpoint.h"
#include "doc_losses.h"
#include "model.h"
#include "safetensors.h"
#include "shell.h"
#include "tmpdir.h"
#include "util.h"

#define FIX "tests/fixtures/hf"
#define TOL 1e-5      // per-document loss, relative (fp32 engine vs float64 transformers)
#define CONTROL 1e-3  // a control must miss the reference by at least this
#define ROW_T 32

typedef struct {
    int n;
    int32_t **docs;
    int *len;
    double *loss_f32, *loss_sharded;  // (n) transformers' losses (NaN: no targets)
} Fixture;

static Fixture F;

static void read_losses(json_t *arr, double *out) {
    assert_true(json_is_array(arr) && (int)json_array_size(arr) == F.n);
    for (int i = 0; i < F.n; i++) {
        json_t *l = json_array_get(arr, i);
        out[i] = json_is_number(l) ? json_number_value(l) : NAN;
    }
}

static int setup(void **state) {
    json_error_t jerr;
    json_t *root = json_load_file(FIX "/expected.json", 0, &jerr);
    if (!root) fail_msg("%s/expected.json: %s", FIX, jerr.text);
    json_t *docs = json_object_get(root, "docs"), *loss = json_object_get(root, "loss");
    assert_true(json_is_array(docs) && json_is_object(loss));
    F.n = (int)json_array_size(docs);
    F.docs = pm_calloc(F.n, sizeof *F.docs);
    F.len = pm_calloc(F.n, sizeof *F.len);
    F.loss_f32 = pm_calloc(F.n, sizeof(double));
    F.loss_sharded = pm_calloc(F.n, sizeof(double));
    for (int i = 0; i < F.n; i++) {
        json_t *d = json_array_get(docs, i);
        F.len[i] = (int)json_array_size(d);
        assert_true(F.len[i] >= 1 && F.len[i] <= ROW_T);
        F.docs[i] = pm_malloc(F.len[i] * sizeof(int32_t));
        for (int k = 0; k < F.len[i]; k++) F.docs[i][k] = (int32_t)json_integer_value(json_array_get(d, k));
    }
    read_losses(json_object_get(loss, "hf_f32"), F.loss_f32);
    read_losses(json_object_get(loss, "hf_sharded"), F.loss_sharded);
    json_decref(root);
    return 0;
}

static int teardown(void **state) {
    for (int i = 0; i < F.n; i++) free(F.docs[i]);
    free(F.docs), free(F.len), free(F.loss_f32), free(F.loss_sharded);
    return 0;
}

// ---- reading ----

static void test_config(void **state) {
    ModelConfig c;
    if (checkpoint_load_config(FIX "/hf_f32", &c) != 0) fail_msg("%s", pm_last_error());
    assert_int_equal(c.d_model, 32);
    assert_int_equal(c.n_layer, 2);
    assert_int_equal(c.vocab_size, 260);
    assert_int_equal(c.vocab_pad, 260);  // the embedding's rows, no padding added
    assert_int_equal(c.d_state, 16);
    assert_int_equal(c.d_conv, 4);
    assert_int_equal(c.d_inner, 64);
    assert_int_equal(c.dt_rank, 2);
}

static void test_losses(const char *dir, const double *ref, const double *other, const char *other_name) {
    Model m;
    load_dir(dir, &m);
    Batch b = pack_docs(F.n, F.docs, F.len, ROW_T);
    model_alloc_activations(&m, b.B, b.T);
    double *ours = pm_malloc(F.n * sizeof(double)), *ctl = pm_malloc(F.n * sizeof(double));
    doc_losses(&m, &b, F.n, ours);
    double err = max_rel(dir, ours, ref, F.n);
    printf("%s: worst per-document rel err %.2e against transformers (tol %.0e)\n", dir, err, TOL);
    assert_true(err <= TOL);
    // The other checkpoint's weights (f32 against bf16) must not pass for these.
    double eo = max_rel(NULL, ours, other, F.n);
    printf("control: against %s's losses %.2e (must be >= %.0e)\n", other_name, eo, 10 * TOL);
    assert_true(eo >= 10 * TOL);
    // Control: the two layers swapped must miss by far.
    swap_layers_0_1(&m);
    doc_losses(&m, &b, F.n, ctl);
    double ec = max_rel(NULL, ctl, ref, F.n);
    printf("control (layers swapped): %.2e (must be >= %.0e)\n", ec, CONTROL);
    assert_true(ec >= CONTROL);
    free(ours), free(ctl);
    batch_free(&b);
    model_destroy(&m);
}

static void test_load_f32(void **state) { test_losses(FIX "/hf_f32", F.loss_f32, F.loss_sharded, "hf_sharded"); }

static void test_load_sharded(void **state) {
    test_losses(FIX "/hf_sharded", F.loss_sharded, F.loss_f32, "hf_f32");
}

// ---- refusals ----

static void copy_dir(const char *from, const char *to) {
    assert_int_equal(sh("rm -rf '%s' && cp -r '%s' '%s'", to, from, to), 0);
}

// Edit a JSON file in place: set key (at the top level) to the JSON text value, or remove it (value NULL).
static void json_edit(const char *path, const char *key, const char *value) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) fail_msg("%s: %s", path, jerr.text);
    if (value) {
        json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
        assert_non_null(v);
        json_object_set_new(root, key, v);
    } else {
        json_object_del(root, key);
    }
    assert_int_equal(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
}

// dir fails to load (config or weights) with a message holding every one of the given words.
static void expect_refused(const char *dir, const char *w1, const char *w2) {
    ModelConfig c;
    int rc = checkpoint_load_config(dir, &c);
    if (rc == 0) {
        Model m;
        model_create(&m, &c, backend_cpu(), 7);
        rc = checkpoint_load_model(dir, &m);
        model_destroy(&m);
    }
    printf("refused: %s\n", rc ? pm_last_error() : "(loaded!)");
    assert_int_equal(rc, -1);
    assert_non_null(strstr(pm_last_error(), w1));
    if (w2) assert_non_null(strstr(pm_last_error(), w2));
}

static void test_config_refusals(void **state) {
    char dir[128], cfg[160];
    snprintf(dir, sizeof dir, "%s/c", tmpdir_);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    static const struct {
        const char *key, *value, *word;
    } cases[] = {
        {"model_type", "\"mamba2\"", "model_type"},
        {"use_bias", "true", "use_bias"},
        {"use_conv_bias", "false", "use_conv_bias"},
        {"intermediate_size", "96", "intermediate_size"},
        {"layer_norm_epsilon", "1e-6", "layer_norm_epsilon"},
        {"time_step_rank", "5", "time_step_rank"},
        {"hidden_act", "\"gelu\"", "hidden_act"},
        {"hidden_size", NULL, "hidden_size"},
        {"vocab_size", "261", "shape"},  // the embedding then has the wrong row count
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        copy_dir(FIX "/hf_f32", dir);
        json_edit(cfg, cases[i].key, cases[i].value);
        expect_refused(dir, cases[i].word, cases[i].value ? NULL : "missing");
    }
    // Keys that do not change the math are ignored, whatever they are.
    copy_dir(FIX "/hf_f32", dir);
    json_edit(cfg, "some_future_option", "{\"x\": [1, 2]}");
    json_edit(cfg, "time_step_rank", "\"auto\"");
    Model m;
    load_dir(dir, &m);
    model_destroy(&m);
}

// A fresh copy of the sharded fixture in dir with one weight_map entry set to file (NULL: removed).
static void sharded_with(const char *dir, const char *tensor, const char *file) {
    char idx[192];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    copy_dir(FIX "/hf_sharded", dir);
    json_error_t jerr;
    json_t *root = json_load_file(idx, 0, &jerr);
    json_t *map = json_object_get(root, "weight_map");
    assert_non_null(map);
    if (file) json_object_set_new(map, tensor, json_string(file));
    else json_object_del(map, tensor);
    assert_int_equal(json_dump_file(root, idx, JSON_INDENT(2)), 0);
    json_decref(root);
}

static void test_shard_refusals(void **state) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/s", tmpdir_);
    // The index puts a tensor in a file that does not hold it.
    sharded_with(dir, "backbone.norm_f.weight", "model-00001-of-00003.safetensors");
    expect_refused(dir, "backbone.norm_f.weight", "weight_map");
    // A tensor in a shard that the index does not name.
    sharded_with(dir, "backbone.layers.1.mixer.D", NULL);
    expect_refused(dir, "backbone.layers.1.mixer.D", "does not name");
    // An entry that is not a plain file name in the directory.
    sharded_with(dir, "backbone.layers.1.mixer.D", "../model-00002-of-00003.safetensors");
    expect_refused(dir, "not a file name", NULL);
    // A shard the index names is missing.
    copy_dir(FIX "/hf_sharded", dir);
    assert_int_equal(sh("rm '%s/model-00002-of-00003.safetensors'", dir), 0);
    expect_refused(dir, "model-00002-of-00003.safetensors", NULL);
}

// ---- writing ----

// Half an ulp of bf16 at x: values within it of x round to the same bf16 neighbour pair.
static double bf16_half_ulp(float x) {
    int e;
    frexp(fabs((double)x), &e);  // |x| = f 2^e, f in [0.5, 1): the ulp of an 8-bit significand is 2^(e-8)
    return ldexp(1.0, e - 9);
}

static void test_export(void **state) {
    Model m;
    load_dir(FIX "/hf_f32", &m);
    float *w = params_of(&m);
    char out[128], out16[128], again[128], path[192];
    snprintf(out, sizeof out, "%s/e32", tmpdir_);
    snprintf(out16, sizeof out16, "%s/e16", tmpdir_);
    snprintf(again, sizeof again, "%s/e32b", tmpdir_);
    if (checkpoint_export(out, &m, PM_LAYOUT_HF, 0, NULL) != 0) fail_msg("%s", pm_last_error());
    if (checkpoint_export(out16, &m, PM_LAYOUT_HF, 1, FIX "/hf_f32/config.json") != 0) fail_msg("%s", pm_last_error());

    // The layout: transformers' names and keys.
    StFile f;
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    assert_int_equal(st_open(path, &f), 0);
    assert_non_null(st_find(&f, "backbone.embeddings.weight"));
    assert_null(st_find(&f, "backbone.embedding.weight"));
    assert_null(st_find(&f, "lm_head.weight"));
    assert_string_equal(st_find(&f, "backbone.norm_f.weight")->dtype, "F32");
    st_close(&f);
    json_error_t jerr;
    snprintf(path, sizeof path, "%s/config.json", out);
    json_t *cfg = json_load_file(path, 0, &jerr);
    assert_non_null(cfg);
    assert_string_equal(json_string_value(json_object_get(cfg, "model_type")), "mamba");
    assert_int_equal(json_integer_value(json_object_get(cfg, "vocab_size")), 260);
    assert_int_equal(json_integer_value(json_object_get(cfg, "hidden_size")), 32);
    assert_int_equal(json_integer_value(json_object_get(cfg, "intermediate_size")), 64);
    json_decref(cfg);
    snprintf(path, sizeof path, "%s/tokenizer.json", out16);  // the file given is copied in as it is
    assert_int_equal(sh("cmp -s '%s' " FIX "/hf_f32/config.json", path), 0);

    // f32: read back bit for bit; exporting that again gives the same file.
    Model m2;
    load_dir(out, &m2);
    float *w2 = params_of(&m2);
    assert_memory_equal(w, w2, m.n_params * sizeof(float));
    if (checkpoint_export(again, &m2, PM_LAYOUT_HF, 0, NULL) != 0) fail_msg("%s", pm_last_error());
    assert_int_equal(sh("cmp -s '%s/model.safetensors' '%s/model.safetensors'", out, again), 0);

    // bf16: every value the bf16 number nearest to the f32 one (ties: either neighbour is as near).
    Model m3;
    load_dir(out16, &m3);
    float *w3 = params_of(&m3);
    size_t changed = 0;
    for (size_t k = 0; k < m.n_params; k++) {
        uint32_t u;
        memcpy(&u, &w3[k], 4);
        assert_int_equal(u & 0xffffu, 0);  // a bf16 value
        double d = fabs((double)w3[k] - (double)w[k]);
        if (d > bf16_half_ulp(w[k])) fail_msg("parameter %zu: %.9g exported as %.9g", k, w[k], w3[k]);
        changed += d > 0;
    }
    printf("bf16 export: %zu of %zu values rounded, each to a nearest bf16\n", changed, m.n_params);
    assert_true(changed > m.n_params / 2);
    free(w), free(w2), free(w3);
    model_destroy(&m), model_destroy(&m2), model_destroy(&m3);
}

// ---- the command line ----

static void test_cli(void **state) {
    const char *t = tmpdir_;
    // data whose tokens the fixture's vocabulary (260) covers: the byte tokenizer's 257
    assert_int_equal(sh("mkdir -p %s/txt && head -c 3000 README.md > %s/txt/a.txt && head -c 2000 docs/perf.md > "
                        "%s/txt/b.txt && %s prepare --out %s/data %s/txt >/dev/null 2>&1",
                        t, t, t, pm_bin(), t, t),
                     0);
    // export refuses an existing --out; --preset and --init-from exclude each other (one line each, exit 1)
    assert_int_equal(sh("mkdir -p %s/exists && %s export --checkpoint " FIX "/hf_sharded --out %s/exists 2>%s/err",
                        t, pm_bin(), t, t),
                     1);
    assert_int_equal(sh("grep -q 'not overwriting' %s/err", t), 0);
    assert_int_equal(sh("%s train --data %s/data --out %s/r0 --preset tiny --init-from " FIX "/hf_f32 2>%s/err",
                        pm_bin(), t, t, t),
                     1);
    assert_int_equal(sh("grep -q 'exclude each other' %s/err", t), 0);
    // A run of no steps from the sharded bf16 checkpoint saves its weights unchanged.
    assert_int_equal(sh("%s train --data %s/data --out %s/r1 --init-from " FIX "/hf_sharded --seq-len 64 --batch 2 "
                        "--steps 0 --log-every 0 >%s/log 2>&1",
                        pm_bin(), t, t, t),
                     0);
    char ck[160];
    snprintf(ck, sizeof ck, "%s/r1/checkpoints/step_00000000", t);
    Model a, b;
    load_dir(FIX "/hf_sharded", &a);
    load_dir(ck, &b);
    float *wa = params_of(&a), *wb = params_of(&b);
    assert_memory_equal(wa, wb, a.n_params * sizeof(float));
    // the run records where it started, and a second run from a run directory takes its newest checkpoint
    assert_int_equal(sh("grep -q '\"init_from\"' %s/r1/run.json && ! grep -q '\"preset\"' %s/r1/run.json", t, t), 0);
    assert_int_equal(sh("%s train --data %s/data --out %s/r2 --init-from %s/r1 --seq-len 64 --batch 2 --steps 2 "
                        "--log-every 0 >%s/log 2>&1 && %s export --checkpoint %s/r2 --out %s/x --dtype bf16 2>%s/log",
                        pm_bin(), t, t, t, t, pm_bin(), t, t, t),
                     0);
    // the exported run reads back, and its tokenizer came along
    Model x;
    snprintf(ck, sizeof ck, "%s/x", t);
    load_dir(ck, &x);
    assert_int_equal(sh("cmp -s %s/x/tokenizer.json %s/r2/tokenizer.json", t, t), 0);
    // generate reads transformers' layout too (the tokenizer named, as the fixture has none)
    assert_int_equal(sh("%s generate --checkpoint " FIX "/hf_sharded --tokenizer %s/r1/tokenizer.json --prompt ab "
                        "--tokens 5 --temperature 0 >%s/gen 2>&1",
                        pm_bin(), t, t),
                     0);
    free(wa), free(wb);
    model_destroy(&a), model_destroy(&b), model_destroy(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_load_f32),
        cmocka_unit_test(test_load_sharded),
        cmocka_unit_test_setup_teardown(test_config_refusals, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_shard_refusals, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_export, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_cli, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
