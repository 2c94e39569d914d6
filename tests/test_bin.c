// test_bin.c — PyTorch torch.save checkpoints (pytorch_model.bin) read without Python (src/torch_bin.c).
//
// tests/fixtures/bin/ was written by torch 2.11 itself (dev/reference/make_bin_fixture.py, on the GPU machine) from
// the weights of two committed safetensors fixtures: the mamba_ssm layout in bf16 with lm_head sharing the
// embedding's storage, the same in f32 with one tensor saved as a transposed view (strides (1, 64)), transformers'
// layout as model.state_dict() gives it (an OrderedDict with _metadata, set by BUILD), and that state dict over
// three files named by pytorch_model.bin.index.json. Each must load to exactly the bits its safetensors source
// loads to (those sources are checked against float64 references by test_interop.c and test_hf.c). The pre-1.6
// format is refused by name. Archives written here with libzip carry pickles torch would never write: a call of
// os.system, a tensor reaching past its storage, strides that overflow, an unknown opcode, and 400 random mutations of a real data.pkl;
// each must be refused with one message naming the file (never a crash: CI runs this under the sanitizers).
// `export --layout mamba_ssm` writes such files (torch_bin_write): they read back to the bits exported.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <cmocka.h>

#include "backend.h"
#include "checkpoint.h"
#include "doc_losses.h"
#include "model.h"
#include "shell.h"
#include "torch_bin.h"
#include "tmpdir.h"
#include "util.h"

#define FIX "tests/fixtures"

// dir (torch.save files) loads to exactly the parameters ref (safetensors) loads to.
static void same_as(const char *dir, const char *ref) {
    Model a, b;
    load_dir(dir, &a), load_dir(ref, &b);
    float *wa = params_of(&a), *wb = params_of(&b);
    assert_int_equal(a.n_params, b.n_params);
    assert_memory_equal(wa, wb, a.n_params * sizeof(float));
    printf("%s: %zu parameters, bit for bit those of %s\n", dir, a.n_params, ref);
    free(wa), free(wb);
    model_destroy(&a), model_destroy(&b);
}

static void test_mamba_ssm_bf16(void **state) { same_as(FIX "/bin/mamba_ssm_bf16", FIX "/interop/mamba_ssm_bf16"); }
static void test_mamba_ssm_f32_strided(void **state) {
    same_as(FIX "/bin/mamba_ssm_f32", FIX "/interop/mamba_ssm_bf16");
}
static void test_hf_state_dict(void **state) { same_as(FIX "/bin/hf_f32", FIX "/hf/hf_f32"); }
static void test_hf_sharded(void **state) { same_as(FIX "/bin/hf_sharded", FIX "/hf/hf_f32"); }

// The tensor list itself: names, dtypes and shapes as torch saved them, the tied head's copy equal to the embedding.
static void test_tensors(void **state) {
    StFile f;
    if (torch_bin_open(FIX "/bin/mamba_ssm_bf16/pytorch_model.bin", &f) != 0) fail_msg("%s", pm_last_error());
    assert_int_equal(f.n, 1 + 2 * P_PER_LAYER + 1 + 1);  // embedding, 2 layers, norm_f and the tied lm_head
    const StTensor *emb = st_find(&f, "backbone.embedding.weight"), *head = st_find(&f, "lm_head.weight");
    const StTensor *conv = st_find(&f, "backbone.layers.1.mixer.conv1d.weight");
    assert_non_null(emb), assert_non_null(head), assert_non_null(conv);
    assert_string_equal(emb->dtype, "BF16");
    assert_int_equal(emb->ndim, 2);
    assert_int_equal(emb->shape[0], 264), assert_int_equal(emb->shape[1], 32);
    assert_int_equal(conv->ndim, 3);
    assert_int_equal(conv->shape[1], 1), assert_int_equal(conv->shape[2], 4);
    assert_int_equal(head->nbytes, emb->nbytes);
    assert_memory_equal(head->data, emb->data, emb->nbytes);
    st_close(&f);
}

static void test_legacy_refused(void **state) {
    StFile f;
    assert_int_equal(torch_bin_open(FIX "/bin/legacy.bin", &f), -1);
    printf("refused: %s\n", pm_last_error());
    assert_non_null(strstr(pm_last_error(), "legacy.bin"));
    assert_non_null(strstr(pm_last_error(), "before PyTorch 1.6"));
}

// ---- archives with pickles torch would not write ----

// An archive at path with x/data.pkl = pkl (n bytes), x/byteorder = "little" and x/data/0 = 16 bytes.
static void write_archive(const char *path, const void *pkl, size_t n) {
    int err;
    unlink(path);
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(z);
    static const float storage[4] = {1, 2, 3, 4};
    zip_source_t *s1 = zip_source_buffer(z, pkl, n, 0), *s2 = zip_source_buffer(z, "little", 6, 0),
                 *s3 = zip_source_buffer(z, storage, sizeof storage, 0);
    assert_true(zip_file_add(z, "x/data.pkl", s1, 0) >= 0);
    assert_true(zip_file_add(z, "x/byteorder", s2, 0) >= 0);
    assert_true(zip_file_add(z, "x/data/0", s3, 0) >= 0);
    assert_int_equal(zip_close(z), 0);
}

// The pickle of {"w": tensor(storage 0 of 4 floats, offset, size (len,), stride (1,) or, huge set, (2^62,))},
// as torch.save writes it.
static size_t tensor_pickle(unsigned char *b, int offset, int len, int huge) {
    size_t n = 0;
#define PUT(s) (memcpy(b + n, s, sizeof(s) - 1), n += sizeof(s) - 1)
    PUT("\x80\x02}q\x00(X\x01\x00\x00\x00wq\x01" "ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00storage"
        "ctorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x04tQK");
    b[n++] = (unsigned char)offset;
    PUT("K");
    b[n++] = (unsigned char)len;
    if (huge) PUT("\x85\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40\x85\x89");  // LONG1 of 8 bytes: 2^62
    else PUT("\x85K\x01\x85\x89");
    PUT("ccollections\nOrderedDict\n)Rtq\x03Ru.");
#undef PUT
    return n;
}

static void expect_refused(const char *path, const char *word) {
    StFile f;
    const int rc = torch_bin_open(path, &f);
    if (rc == 0) st_close(&f);
    printf("refused: %s\n", rc ? pm_last_error() : "(loaded!)");
    assert_int_equal(rc, -1);
    assert_non_null(strstr(pm_last_error(), path));
    assert_non_null(strstr(pm_last_error(), word));
}

static void test_crafted(void **state) {
    char path[128];
    snprintf(path, sizeof path, "%s/x.bin", tmpdir_);
    unsigned char b[512];
    // the well-formed one loads: w = storage[1..3]
    size_t n = tensor_pickle(b, 1, 3, 0);
    write_archive(path, b, n);
    StFile f;
    if (torch_bin_open(path, &f) != 0) fail_msg("%s", pm_last_error());
    const StTensor *w = st_find(&f, "w");
    assert_non_null(w);
    float got[3];
    assert_int_equal(st_read_f32(&f, w, got, 3), 0);
    assert_true(got[0] == 2 && got[1] == 3 && got[2] == 4);
    st_close(&f);
    // one element past the storage
    n = tensor_pickle(b, 2, 3, 0);
    write_archive(path, b, n);
    expect_refused(path, "storage");
    // strides whose reach wraps around 64 bits
    n = tensor_pickle(b, 0, 3, 1);
    write_archive(path, b, n);
    expect_refused(path, "strides");
    // a call of anything but the state dict's few callables
    static const char evil[] = "\x80\x02" "cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.";
    write_archive(path, evil, sizeof evil - 1);
    expect_refused(path, "os.system");
    // an opcode torch.save does not write (INST)
    static const char inst[] = "\x80\x02(ios\nsystem\n.";
    write_archive(path, inst, sizeof inst - 1);
    expect_refused(path, "opcode");
    // not a state dict
    static const char list[] = "\x80\x02]q\x00.";
    write_archive(path, list, sizeof list - 1);
    expect_refused(path, "not a state dict");
}

// An archive at path: every entry of src (a torch.save archive with prefix "pytorch_model") but its data.pkl,
// which is pkl (n bytes).
static void write_with_pickle(const char *path, zip_t *src, const void *pkl, size_t n) {
    int err;
    unlink(path);
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(z);
    for (zip_int64_t i = 0; i < zip_get_num_entries(src, 0); i++) {
        const char *name = zip_get_name(src, (zip_uint64_t)i, 0);
        zip_source_t *s = strcmp(name, "pytorch_model/data.pkl") == 0 ? zip_source_buffer(z, pkl, n, 0)
                                                                       : zip_source_zip(z, src, (zip_uint64_t)i, 0, 0, -1);
        assert_non_null(s);
        assert_true(zip_file_add(z, name, s, 0) >= 0);
    }
    assert_int_equal(zip_close(z), 0);
}

// 400 random mutations of a real data.pkl, in an archive with all its storages: each loads or is refused
// naming the file; none crashes.
static void test_mutations(void **state) {
    int err;
    zip_t *z = zip_open(FIX "/bin/mamba_ssm_f32/pytorch_model.bin", ZIP_RDONLY, &err);
    assert_non_null(z);
    zip_int64_t i = zip_name_locate(z, "pytorch_model/data.pkl", 0);
    assert_true(i >= 0);
    zip_stat_t st;
    assert_int_equal(zip_stat_index(z, (zip_uint64_t)i, 0, &st), 0);
    unsigned char *orig = pm_malloc(st.size), *b = pm_malloc(st.size + 64);
    zip_file_t *zf = zip_fopen_index(z, (zip_uint64_t)i, 0);
    assert_int_equal(zip_fread(zf, orig, st.size), (zip_int64_t)st.size);
    zip_fclose(zf);
    char path[128];
    snprintf(path, sizeof path, "%s/m.bin", tmpdir_);
    // unchanged, it loads
    write_with_pickle(path, z, orig, st.size);
    StFile f;
    if (torch_bin_open(path, &f) != 0) fail_msg("%s", pm_last_error());
    st_close(&f);
    PmRng r;
    pm_rng_seed(&r, 2026);
    int refused = 0;
    for (int k = 0; k < 400; k++) {
        size_t n = st.size;
        memcpy(b, orig, n);
        switch (k % 3) {
        case 0:  // bytes changed
            for (int j = 1 + (int)(pm_rng_u64(&r) % 4); j > 0; j--)
                b[pm_rng_u64(&r) % n] ^= (unsigned char)(1 + pm_rng_u64(&r) % 255);
            break;
        case 1:  // cut short
            n = 1 + pm_rng_u64(&r) % (n - 1);
            break;
        default:  // a byte set to an opcode's value
            b[pm_rng_u64(&r) % n] = (unsigned char)"}]()NKMJqrhjtQRsuab.X\x85\x86\x87\x88\x89\x8a\x93\x94\x95"[pm_rng_u64(&r) % 30];
        }
        write_with_pickle(path, z, b, n);
        if (torch_bin_open(path, &f) == 0) {
            st_close(&f);
        } else {
            refused++;
            if (!strstr(pm_last_error(), path)) fail_msg("mutant %d: message without the file: %s", k, pm_last_error());
        }
    }
    printf("400 mutants of data.pkl: %d refused with the file named, %d loaded, none crashed\n", refused, 400 - refused);
    assert_true(refused > 100 && refused < 400);  // (both outcomes occur: the mutants reach past the parser)
    zip_close(z);
    free(orig), free(b);
}

static void test_cli(void **state) {
    const char *bin = pm_bin();
    // export reads the official layout's .bin and writes transformers' safetensors, which read back the same
    assert_int_equal(sh("%s export --checkpoint " FIX "/bin/mamba_ssm_bf16 --out %s/x 2>/dev/null", bin, tmpdir_), 0);
    char x[128];
    snprintf(x, sizeof x, "%s/x", tmpdir_);
    same_as(x, FIX "/interop/mamba_ssm_bf16");
    // and mamba_ssm's own layout, a torch.save file written here, reads back too (torch.load reads it in
    // test_interop.c), in bf16 bit for bit (the fixture's values are bf16)
    assert_int_equal(sh("%s export --checkpoint " FIX "/hf/hf_f32 --out %s/y --layout mamba_ssm 2>/dev/null && "
                        "%s export --checkpoint " FIX "/interop/mamba_ssm_bf16 --out %s/z --layout mamba_ssm "
                        "--dtype bf16 2>/dev/null && test -f %s/z/pytorch_model.bin && ! test -e %s/z/model.safetensors",
                        bin, tmpdir_, bin, tmpdir_, tmpdir_, tmpdir_),
                     0);
    snprintf(x, sizeof x, "%s/y", tmpdir_);
    same_as(x, FIX "/hf/hf_f32");
    snprintf(x, sizeof x, "%s/z", tmpdir_);
    same_as(x, FIX "/interop/mamba_ssm_bf16");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mamba_ssm_bf16),
        cmocka_unit_test(test_mamba_ssm_f32_strided),
        cmocka_unit_test(test_hf_state_dict),
        cmocka_unit_test(test_hf_sharded),
        cmocka_unit_test(test_tensors),
        cmocka_unit_test(test_legacy_refused),
        cmocka_unit_test_setup_teardown(test_crafted, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_mutations, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_cli, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
