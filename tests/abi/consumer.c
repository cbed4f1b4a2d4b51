/*
 * tests/abi/consumer.c - a downstream C11 program that knows tenso only through its installed
 * headers and library (found with pkg-config, or CMake's find_package). It exercises the
 * calls a new user makes first and exits non-zero on any mismatch:
 *   - header and library agree on the version;
 *   - an f32 tensor encodes to exactly the bytes upstream tenso 0.24.0 writes
 *     (tests/vectors/dense_float32_2x3.tenso), and decodes back zero-copy;
 *   - a bundle {"weights": f32[2x3], "step": i64 scalar} round-trips.
 */
#include <tenso/tenso.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "consumer.c:%d: expected %s\n", __LINE__, #cond); \
            ++failures;                                                       \
        }                                                                     \
    } while (0)

#define EXPECT_OK(call)                                                                                     \
    do {                                                                                                    \
        tenso_status st_ = (call);                                                                          \
        if (st_ != TENSO_OK) {                                                                              \
            fprintf(stderr, "consumer.c:%d: %s returned %s: %s\n", __LINE__, #call, tenso_status_name(st_), \
                    tenso_last_error());                                                                    \
            ++failures;                                                                                     \
        }                                                                                                   \
    } while (0)

/* tenso.dumps(np.array([[-1.5, -0.0, 0.25], [1.0, 3.75, 100.5]], np.float32)) from the
 * pinned upstream package: header, shape (2, 3), padding to 64, 24 body bytes. */
static const unsigned char golden_f32_2x3[88] = {
    0x54, 0x4e, 0x53, 0x4f, 0x04,        0x01, 0x00, 0x01, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, [64] = 0x00, 0x00, 0xc0, 0xbf, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00,
    0x80, 0x3e, 0x00, 0x00, 0x80,        0x3f, 0x00, 0x00, 0x70, 0x40, 0x00, 0x00, 0xc9, 0x42};

static const float values[6] = {-1.5f, -0.0f, 0.25f, 1.0f, 3.75f, 100.5f};
static const uint64_t shape[2] = {2, 3};

static void check_version(void) {
    printf("headers %s (%d), library %s (%u), protocol %u\n", TENSO_VERSION_STRING, TENSO_VERSION_NUMBER,
           tenso_version_string(), (unsigned)tenso_version_number(), (unsigned)tenso_protocol_version());
    EXPECT(tenso_version_number() == TENSO_VERSION_NUMBER);
    EXPECT(strcmp(tenso_version_string(), TENSO_VERSION_STRING) == 0);
    EXPECT(tenso_protocol_version() == TENSO_PROTOCOL_VERSION);
}

static void check_tensor(void) {
    tenso_tensor t;
    memset(&t, 0, sizeof t);
    t.data = values;
    t.nbytes = sizeof values;
    t.shape = shape;
    t.ndim = 2;
    t.dtype = TENSO_DTYPE_FLOAT32;

    size_t bound = 0;
    EXPECT_OK(tenso_dumps_bound(&bound, &t, NULL));
    EXPECT(bound == sizeof golden_f32_2x3);

    /* A caller buffer, aligned like the packet's body should be. */
    _Alignas(64) unsigned char buf[256];
    size_t written = 0;
    EXPECT_OK(tenso_dumps_into(buf, sizeof buf, &written, &t, NULL));
    EXPECT(written == sizeof golden_f32_2x3);
    EXPECT(written == sizeof golden_f32_2x3 && memcmp(buf, golden_f32_2x3, written) == 0);

    /* Too small: the needed size comes back. */
    size_t needed = 0;
    EXPECT(tenso_dumps_into(buf, 10, &needed, &t, NULL) == TENSO_E_BUFFER_TOO_SMALL);
    EXPECT(needed == sizeof golden_f32_2x3);

    tenso_view *v = NULL;
    EXPECT_OK(tenso_loads(&v, buf, written, NULL));
    if (v == NULL) return;
    EXPECT(tenso_view_kind(v) == TENSO_KIND_DENSE);
    EXPECT(tenso_view_dtype(v) == TENSO_DTYPE_FLOAT32);
    EXPECT(tenso_view_ndim(v) == 2);
    EXPECT(tenso_view_shape(v) != NULL && tenso_view_shape(v)[0] == 2 && tenso_view_shape(v)[1] == 3);
    EXPECT(tenso_view_nbytes(v) == sizeof values);
    EXPECT(tenso_view_packet_size(v) == written);
    /* Zero copy: the data points into buf, at the 64-byte boundary. */
    EXPECT(tenso_view_owns_data(v) == 0);
    EXPECT(tenso_view_data(v) == (const void *)(buf + 64));
    EXPECT(tenso_view_data(v) != NULL && memcmp(tenso_view_data(v), values, sizeof values) == 0);
    tenso_view_free(v);

    /* A library-allocated buffer holds the same bytes. */
    tenso_buffer out = TENSO_BUFFER_INIT;
    EXPECT_OK(tenso_dumps(&out, &t, NULL));
    EXPECT(out.size == sizeof golden_f32_2x3 && out.data != NULL && memcmp(out.data, golden_f32_2x3, out.size) == 0);
    tenso_buffer_dispose(&out);
    EXPECT(out.data == NULL && out.size == 0);

    /* The golden packet decodes as well (upstream's bytes through our reader). */
    EXPECT_OK(tenso_loads(&v, golden_f32_2x3, sizeof golden_f32_2x3, NULL));
    EXPECT(v != NULL && tenso_view_nbytes(v) == sizeof values &&
           memcmp(tenso_view_data(v), values, sizeof values) == 0);
    tenso_view_free(v);

    /* Errors are statuses, with a message. */
    EXPECT(tenso_loads(&v, "XXXXXXXXXXXX", 12, NULL) == TENSO_E_BAD_MAGIC);
    EXPECT(tenso_last_error()[0] != '\0');
    tenso_error_clear();
    EXPECT(tenso_last_error()[0] == '\0');
}

static void check_bundle(void) {
    tenso_tensor w;
    memset(&w, 0, sizeof w);
    w.data = values;
    w.nbytes = sizeof values;
    w.shape = shape;
    w.ndim = 2;
    w.dtype = TENSO_DTYPE_FLOAT32;
    const int64_t step = 1234567890123LL;
    tenso_tensor s;
    memset(&s, 0, sizeof s);
    s.data = &step;
    s.nbytes = sizeof step;
    s.ndim = 0;
    s.dtype = TENSO_DTYPE_INT64;

    tenso_value *bundle = NULL, *wv = NULL, *sv = NULL;
    EXPECT_OK(tenso_value_new_bundle(&bundle));
    EXPECT_OK(tenso_value_new_tensor(&wv, &w));
    EXPECT_OK(tenso_value_new_tensor(&sv, &s));
    EXPECT_OK(tenso_bundle_insert(bundle, "weights", 7, wv));
    EXPECT_OK(tenso_bundle_insert(bundle, "step", 4, sv));
    tenso_value_free(wv); /* the bundle keeps its own description */
    tenso_value_free(sv);
    EXPECT(tenso_bundle_count(bundle) == 2);

    tenso_buffer buf = TENSO_BUFFER_INIT;
    tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
    opts.flags = TENSO_ENCODE_INTEGRITY;
    EXPECT_OK(tenso_value_dumps(&buf, bundle, &opts));
    tenso_value_free(bundle);

    tenso_packet_info info;
    EXPECT_OK(tenso_inspect(&info, buf.data, buf.size));
    EXPECT(info.kind == TENSO_KIND_BUNDLE && info.entry_count == 2);
    EXPECT(info.packet_size == buf.size);

    tenso_view *v = NULL;
    EXPECT_OK(tenso_loads(&v, buf.data, buf.size, NULL));
    EXPECT(tenso_view_kind(v) == TENSO_KIND_BUNDLE);
    EXPECT(tenso_view_bundle_count(v) == 2);

    const char *key = NULL;
    size_t key_len = 0;
    const tenso_view *child = NULL;
    EXPECT_OK(tenso_view_bundle_entry(&key, &key_len, &child, v, 0));
    EXPECT(key != NULL && key_len == 7 && memcmp(key, "weights", 7) == 0);
    EXPECT(child != NULL && tenso_view_dtype(child) == TENSO_DTYPE_FLOAT32 &&
           tenso_view_nbytes(child) == sizeof values && memcmp(tenso_view_data(child), values, sizeof values) == 0);

    child = NULL;
    EXPECT_OK(tenso_view_bundle_find(&child, v, "step", 4));
    int64_t got = 0;
    EXPECT(child != NULL && tenso_view_dtype(child) == TENSO_DTYPE_INT64 && tenso_view_ndim(child) == 0 &&
           tenso_view_nbytes(child) == sizeof got);
    if (child != NULL && tenso_view_data(child) != NULL) memcpy(&got, tenso_view_data(child), sizeof got);
    EXPECT(got == step);
    EXPECT(tenso_view_bundle_find(&child, v, "missing", 7) == TENSO_E_INVALID_ARGUMENT);

    tenso_view_free(v);
    tenso_buffer_dispose(&buf);
}

int main(void) {
    check_version();
    check_tensor();
    check_bundle();
    if (failures != 0) {
        fprintf(stderr, "consumer: %d check(s) failed\n", failures);
        return 1;
    }
    printf("consumer: all checks passed\n");
    return 0;
}
