/*
 * make_inputs.c - writes the packet files the CLI tests start from, through the public C API
 * only. The tensor values are simple formulas that test_cli.py recomputes to check bytes.
 *
 *   dense.tnso   float32 [2, 3], x[i] = 1.5 * i, with an XXH3 integrity footer
 *   bundle.tnso  {"weight": float32 [4, 8] 0.25 * i, "bias": float32 [8] i - 4,
 *                 "ids": int32 [5] 7 * i, "step": int64 [] 42}, integrity footers
 *   kinds.tnso   {"dense": float32 [3] i, "q8": qint8 of float32 [2, 4] i - 3 (per tensor),
 *                 "names": strings ["alpha", "beta", ""], "csr": CSR 3x3 float64 diagonal 1 2 3,
 *                 "nested": {"x": uint8 [2] {7, 9}}}
 *   stream.tnso  two packets back to back: float32 [2] {1, 2} and int32 [3] {5, 6, 7}
 *
 * usage: make_inputs DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <tenso/tenso.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_dir;

static void ok(tenso_status st, const char *what) {
    if (st != TENSO_OK) {
        fprintf(stderr, "make_inputs: %s: %s (%s)\n", what, tenso_last_error(), tenso_status_name(st));
        exit(1);
    }
}

static char *path_of(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
    return buf;
}

static tenso_value *tensor_value(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                 tenso_dtype dtype) {
    tenso_tensor t = {data, nbytes, shape, ndim, dtype};
    tenso_value *v;
    ok(tenso_value_new_tensor(&v, &t), "tensor value");
    return v;
}

static void insert(tenso_value *bundle, const char *key, tenso_value *child) {
    ok(tenso_bundle_insert(bundle, key, strlen(key), child), key);
    tenso_value_free(child);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_inputs DIR\n");
        return 2;
    }
    g_dir = argv[1];
    tenso_encode_options integ = TENSO_ENCODE_OPTIONS_INIT;
    integ.flags = TENSO_ENCODE_INTEGRITY;

    /* dense.tnso */
    float d[6];
    for (int i = 0; i < 6; ++i) d[i] = 1.5f * (float)i;
    uint64_t dshape[2] = {2, 3};
    tenso_tensor dt = {d, sizeof d, dshape, 2, TENSO_DTYPE_FLOAT32};
    ok(tenso_save_file(path_of("dense.tnso"), &dt, &integ), "dense.tnso");

    /* bundle.tnso */
    float w[32], b[8];
    int32_t ids[5];
    int64_t step = 42;
    for (int i = 0; i < 32; ++i) w[i] = 0.25f * (float)i;
    for (int i = 0; i < 8; ++i) b[i] = (float)i - 4.0f;
    for (int i = 0; i < 5; ++i) ids[i] = 7 * i;
    uint64_t wshape[2] = {4, 8}, bshape[1] = {8}, ishape[1] = {5};
    tenso_value *bundle;
    ok(tenso_value_new_bundle(&bundle), "bundle");
    insert(bundle, "weight", tensor_value(w, sizeof w, wshape, 2, TENSO_DTYPE_FLOAT32));
    insert(bundle, "bias", tensor_value(b, sizeof b, bshape, 1, TENSO_DTYPE_FLOAT32));
    insert(bundle, "ids", tensor_value(ids, sizeof ids, ishape, 1, TENSO_DTYPE_INT32));
    insert(bundle, "step", tensor_value(&step, sizeof step, NULL, 0, TENSO_DTYPE_INT64));
    ok(tenso_value_save_file(path_of("bundle.tnso"), bundle, &integ), "bundle.tnso");
    tenso_value_free(bundle);

    /* kinds.tnso */
    float k3[3] = {0, 1, 2}, q[8];
    for (int i = 0; i < 8; ++i) q[i] = (float)i - 3.0f;
    uint64_t k3shape[1] = {3}, qshape[2] = {2, 4};
    tenso_tensor qt = {q, sizeof q, qshape, 2, TENSO_DTYPE_FLOAT32};
    tenso_value *kinds, *qv, *sv, *csr, *nested;
    ok(tenso_value_new_bundle(&kinds), "kinds");
    insert(kinds, "dense", tensor_value(k3, sizeof k3, k3shape, 1, TENSO_DTYPE_FLOAT32));
    ok(tenso_quantize(&qv, &qt, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_TENSOR, 0, 0), "quantize");
    insert(kinds, "q8", qv);
    const char payload[] = "alphabeta";
    uint64_t offsets[4] = {0, 5, 9, 9};
    ok(tenso_value_new_strings(&sv, 3, offsets, payload, 9), "strings");
    insert(kinds, "names", sv);
    double cdata[3] = {1, 2, 3};
    int64_t cind[3] = {0, 1, 2}, cptr[4] = {0, 1, 2, 3};
    uint64_t n3[1] = {3}, n4[1] = {4}, mshape[2] = {3, 3};
    tenso_tensor ca = {cdata, sizeof cdata, n3, 1, TENSO_DTYPE_FLOAT64};
    tenso_tensor cb = {cind, sizeof cind, n3, 1, TENSO_DTYPE_INT64};
    tenso_tensor cc = {cptr, sizeof cptr, n4, 1, TENSO_DTYPE_INT64};
    ok(tenso_value_new_sparse(&csr, TENSO_KIND_SPARSE_CSR, 2, mshape, &ca, &cb, &cc), "csr");
    insert(kinds, "csr", csr);
    uint8_t x[2] = {7, 9};
    uint64_t xshape[1] = {2};
    ok(tenso_value_new_bundle(&nested), "nested");
    insert(nested, "x", tensor_value(x, sizeof x, xshape, 1, TENSO_DTYPE_UINT8));
    insert(kinds, "nested", nested);
    ok(tenso_value_save_file(path_of("kinds.tnso"), kinds, NULL), "kinds.tnso");
    tenso_value_free(kinds);

    /* stream.tnso */
    float s1[2] = {1, 2};
    int32_t s2[3] = {5, 6, 7};
    uint64_t s1shape[1] = {2}, s2shape[1] = {3};
    tenso_tensor t1 = {s1, sizeof s1, s1shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_tensor t2 = {s2, sizeof s2, s2shape, 1, TENSO_DTYPE_INT32};
    FILE *f = fopen(path_of("stream.tnso"), "wb");
    if (!f) {
        perror("stream.tnso");
        return 1;
    }
    tenso_buffer buf = TENSO_BUFFER_INIT;
    ok(tenso_dumps(&buf, &t1, NULL), "stream 1");
    fwrite(buf.data, 1, buf.size, f);
    ok(tenso_dumps(&buf, &t2, NULL), "stream 2");
    fwrite(buf.data, 1, buf.size, f);
    tenso_buffer_dispose(&buf);
    if (fclose(f) != 0) {
        perror("stream.tnso");
        return 1;
    }
    return 0;
}
