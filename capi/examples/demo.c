/*
 * capi/examples/demo.c - a tour of the tenso C API, and a quick health check of the build.
 *
 * Run it with `make demo` (or build/capi/examples/tenso_demo). It encodes float32 tensors
 * into Tenso packets and decodes them again through the public C ABI only, the way any C
 * program (or language binding) would, and prints what each step costs:
 *
 *   1. dumps into a caller buffer vs a plain memcpy of the same bytes; loads (zero copy,
 *      O(1) in the tensor size); the same with the XXH3 integrity footer on;
 *   2. LZ4 compression on compressible and on random data;
 *   3. a bundle {"weights", "bias", "step"};
 *   4. files: tenso_save_file, then tenso_load_file in READ and MMAP modes;
 *   5. a pipe: writer | echo | reader processes, each packet crossing two pipes with
 *      tenso_write_fd / tenso_read_fd, ended by a clean TENSO_E_END_OF_STREAM;
 *   6. two nodes on loopback: one push and one pull over TLS 1.3.
 *
 * Every decoded value is compared bit for bit with what was encoded; the program exits 1 on
 * any mismatch or unexpected status, 0 otherwise. Timings are the best of a few runs.
 */
#define _POSIX_C_SOURCE 200809L

#include <tenso/tenso.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------
 * Checks and reporting
 * ------------------------------------------------------------------------------------- */

static int g_checks = 0;
static int g_failures = 0;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    ++g_failures;
}

#define CHECK(cond)                                                \
    do {                                                           \
        ++g_checks;                                                \
        if (!(cond)) fail("%s:%d: %s", __FILE__, __LINE__, #cond); \
    } while (0)

/* Evaluates a tenso call once; on a status other than `want`, reports it with the message. */
#define CHECK_STATUS(want, call)                                                                               \
    do {                                                                                                       \
        tenso_status st_ = (call);                                                                             \
        ++g_checks;                                                                                            \
        if (st_ != (want))                                                                                     \
            fail("%s:%d: %s returned %s (%s), expected %s", __FILE__, __LINE__, #call, tenso_status_name(st_), \
                 tenso_last_error(), tenso_status_name(want));                                                 \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(TENSO_OK, call)

static void *xmalloc(size_t n) {
    /* Rounded up to the alignment: C11 aligned_alloc wants a multiple of it. */
    size_t rounded = (n + 63u) & ~(size_t)63u;
    void *p = aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == NULL) {
        fprintf(stderr, "demo: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* "812 ns", "41.3 us", "12.07 ms", "1.20 s". */
static const char *fmt_time(char *buf, size_t cap, double ns) {
    if (ns < 1e3) snprintf(buf, cap, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(buf, cap, "%.1f us", ns / 1e3);
    else if (ns < 1e9) snprintf(buf, cap, "%.2f ms", ns / 1e6);
    else snprintf(buf, cap, "%.2f s", ns / 1e9);
    return buf;
}

static const char *fmt_size(char *buf, size_t cap, double bytes) {
    if (bytes < 1024.0) snprintf(buf, cap, "%.0f B", bytes);
    else if (bytes < 1024.0 * 1024.0) snprintf(buf, cap, "%.0f KiB", bytes / 1024.0);
    else snprintf(buf, cap, "%.0f MiB", bytes / (1024.0 * 1024.0));
    return buf;
}

/* Bytes per nanosecond is GB/s (10^9 bytes per second). */
static double gbps(double bytes, double ns) { return ns > 0 ? bytes / ns : 0.0; }

static void section(const char *title) {
    printf("\n== %s ", title);
    for (size_t i = strlen(title); i < 86; ++i) putchar('=');
    putchar('\n');
}

/* ---------------------------------------------------------------------------------------
 * Test data: deterministic float32 values, exactly representable, recomputed to verify
 * ------------------------------------------------------------------------------------- */

/* Pseudo-random (for `random` patterns) or a slow staircase (compressible). */
static float value_at(size_t i, uint32_t seed, int compressible) {
    if (compressible) return (float)((i / 4096u) % 100u) * 0.5f;
    uint32_t h = (uint32_t)i * 2654435761u ^ (seed * 0x9E3779B9u);
    h ^= h >> 15;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    /* A 24-bit integer times 1/8: exact in float32, sign included. */
    return (float)((int32_t)(h & 0xFFFFFFu) - 0x800000) * 0.125f;
}

static void fill(float *p, size_t n, uint32_t seed, int compressible) {
    for (size_t i = 0; i < n; ++i) p[i] = value_at(i, seed, compressible);
}

/* Compares every element bit for bit with its expected value; reports the first mismatch. */
static int verify(const void *data, size_t n, uint32_t seed, int compressible, const char *what) {
    ++g_checks;
    if (n != 0 && data == NULL) {
        fail("%s: no data", what);
        return 0;
    }
    const unsigned char *bytes = (const unsigned char *)data;
    for (size_t i = 0; i < n; ++i) {
        float want = value_at(i, seed, compressible), got;
        memcpy(&got, bytes + i * sizeof got, sizeof got); /* data may be unaligned */
        if (memcmp(&got, &want, sizeof got) != 0) {
            fail("%s: element %zu is %.9g, expected %.9g", what, i, (double)got, (double)want);
            return 0;
        }
    }
    return 1;
}

static int view_is_f32_vector(const tenso_view *v, uint64_t n) {
    return v != NULL && tenso_view_kind(v) == TENSO_KIND_DENSE && tenso_view_dtype(v) == TENSO_DTYPE_FLOAT32 &&
           tenso_view_ndim(v) == 1 && tenso_view_shape(v) != NULL && tenso_view_shape(v)[0] == n &&
           tenso_view_nbytes(v) == n * sizeof(float);
}

/* ---------------------------------------------------------------------------------------
 * Timing: run `fn` in batches long enough to measure, report the best batch per call
 * ------------------------------------------------------------------------------------- */

typedef void (*bench_fn)(void *ctx);

static double best_ns(bench_fn fn, void *ctx, int rounds) {
    /* Calibrate: grow the batch until it takes at least ~1 ms. */
    unsigned iters = 1;
    for (;;) {
        double t0 = now_ns();
        for (unsigned i = 0; i < iters; ++i) fn(ctx);
        double dt = now_ns() - t0;
        if (dt >= 1e6 || iters >= (1u << 20)) break;
        iters *= 2;
    }
    double best = -1;
    for (int r = 0; r < rounds; ++r) {
        double t0 = now_ns();
        for (unsigned i = 0; i < iters; ++i) fn(ctx);
        double per = (now_ns() - t0) / iters;
        if (best < 0 || per < best) best = per;
    }
    return best;
}

typedef struct {
    const tenso_tensor *t;
    const tenso_encode_options *opts;
    void *dst;
    size_t cap;
    size_t written;
    tenso_status status;
} dumps_ctx;

static void run_dumps_into(void *p) {
    dumps_ctx *c = (dumps_ctx *)p;
    tenso_status st = tenso_dumps_into(c->dst, c->cap, &c->written, c->t, c->opts);
    if (st != TENSO_OK) c->status = st;
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} memcpy_ctx;

static void run_memcpy(void *p) {
    memcpy_ctx *c = (memcpy_ctx *)p;
    memcpy(c->dst, c->src, c->n);
    /* Keep the copy observable so it is not optimised away. */
    __asm__ volatile("" : : "r"(c->dst) : "memory");
}

typedef struct {
    const void *data;
    size_t len;
    tenso_status status;
} loads_ctx;

static void run_loads(void *p) {
    loads_ctx *c = (loads_ctx *)p;
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, c->data, c->len, NULL);
    if (st != TENSO_OK) c->status = st;
    tenso_view_free(v);
}

/* Describes data[0..n) as a float32 vector; shape1 is the caller's one-element shape array. */
static tenso_tensor f32_vector(const float *data, size_t n, uint64_t *shape1) {
    shape1[0] = n;
    const tenso_tensor t = {
        .data = data, .nbytes = n * sizeof(float), .shape = shape1, .ndim = 1, .dtype = TENSO_DTYPE_FLOAT32};
    return t;
}

/* ---------------------------------------------------------------------------------------
 * 1. dumps / loads in memory
 * ------------------------------------------------------------------------------------- */

static void demo_memory(void) {
    static const size_t sizes[] = {1024, 1024 * 1024, 64 * 1024 * 1024};
    section("1. dumps into a caller buffer, loads from it (float32 vectors)");
    printf("%-9s %-9s %10s  %10s %9s  %10s %9s %7s  %10s %9s\n", "tensor", "integrity", "packet", "dumps_into", "GB/s",
           "memcpy", "GB/s", "vs cpy", "loads", "GB/s");

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
        const size_t nbytes = sizes[s], n = nbytes / sizeof(float);
        const uint32_t seed = (uint32_t)(s + 1);
        float *src = (float *)xmalloc(nbytes);
        fill(src, n, seed, 0);
        uint64_t shape[1];
        tenso_tensor t = f32_vector(src, n, shape);
        void *copy = xmalloc(nbytes);
        memset(copy, 0, nbytes); /* fault the pages in before timing */

        for (int integrity = 0; integrity <= 1; ++integrity) {
            tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
            opts.flags = integrity ? TENSO_ENCODE_INTEGRITY : 0u;
            size_t bound = 0;
            CHECK_OK(tenso_dumps_bound(&bound, &t, &opts));
            void *dst = xmalloc(bound);
            memset(dst, 0, bound);

            dumps_ctx dc = {&t, &opts, dst, bound, 0, TENSO_OK};
            double t_dumps = best_ns(run_dumps_into, &dc, 5);
            CHECK_STATUS(TENSO_OK, dc.status);
            /* Uncompressed, the bound is exact: header + shape + padding + body (+ footer). */
            CHECK(dc.written == bound);
            CHECK(dc.written == 64 + nbytes + (integrity ? 8u : 0u));

            memcpy_ctx mc = {copy, src, nbytes};
            double t_copy = best_ns(run_memcpy, &mc, 5);

            loads_ctx lc = {dst, dc.written, TENSO_OK};
            double t_loads = best_ns(run_loads, &lc, 5);
            CHECK_STATUS(TENSO_OK, lc.status);

            /* Verify: the view points into dst (zero copy), every value as encoded. */
            tenso_view *v = NULL;
            CHECK_OK(tenso_loads(&v, dst, dc.written, NULL));
            CHECK(view_is_f32_vector(v, n));
            CHECK(tenso_view_owns_data(v) == 0);
            CHECK(tenso_view_data(v) == (const unsigned char *)dst + 64);
            CHECK(((tenso_view_flags(v) & TENSO_FLAG_INTEGRITY) != 0) == integrity);
            verify(tenso_view_data(v), n, seed, 0, "loads");
            tenso_view_free(v);

            if (integrity) {
                /* A flipped body bit must be caught by the footer. */
                unsigned char *body = (unsigned char *)dst + 64;
                body[nbytes / 2] ^= 0x10u;
                v = NULL;
                CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(&v, dst, dc.written, NULL));
                CHECK(v == NULL);
                tenso_view_free(v);
                body[nbytes / 2] ^= 0x10u;
            }

            char a[32], b[32], c[32], d[32], e[32];
            if (integrity) snprintf(e, sizeof e, "%.2f", gbps((double)nbytes, t_loads));
            else snprintf(e, sizeof e, "O(1)");
            printf("%-9s %-9s %10zu  %10s %9.2f  %10s %9.2f %6.0f%%  %10s %9s\n", fmt_size(a, sizeof a, (double)nbytes),
                   integrity ? "xxh3" : "off", dc.written, fmt_time(b, sizeof b, t_dumps),
                   gbps((double)nbytes, t_dumps), fmt_time(c, sizeof c, t_copy), gbps((double)nbytes, t_copy),
                   t_dumps > 0 ? 100.0 * t_copy / t_dumps : 0.0, fmt_time(d, sizeof d, t_loads), e);
            free(dst);
        }
        free(copy);
        free(src);
    }
    printf(
        "(vs cpy: dumps_into speed relative to memcpy of the body. loads without integrity\n"
        " reads the header only, whatever the size; with integrity it hashes the body.)\n");
}

/* ---------------------------------------------------------------------------------------
 * 2. LZ4
 * ------------------------------------------------------------------------------------- */

static void demo_lz4(void) {
    static const struct {
        const char *name;
        size_t nbytes;
        int compressible;
    } cases[] = {{"staircase", 16u * 1024 * 1024, 1}, {"random", 1024 * 1024, 0}};
    section("2. LZ4 frame compression (TENSO_ENCODE_COMPRESS)");
    printf("%-10s %9s %10s %7s  %10s %9s  %10s %9s\n", "data", "raw", "packet", "ratio", "dumps_into", "GB/s", "loads",
           "GB/s");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const size_t nbytes = cases[k].nbytes, n = nbytes / sizeof(float);
        const uint32_t seed = 40u + (uint32_t)k;
        float *src = (float *)xmalloc(nbytes);
        fill(src, n, seed, cases[k].compressible);
        uint64_t shape[1];
        tenso_tensor t = f32_vector(src, n, shape);
        tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
        opts.flags = TENSO_ENCODE_COMPRESS;
        size_t bound = 0;
        CHECK_OK(tenso_dumps_bound(&bound, &t, &opts));
        void *dst = xmalloc(bound);
        memset(dst, 0, bound);

        dumps_ctx dc = {&t, &opts, dst, bound, 0, TENSO_OK};
        double t_dumps = best_ns(run_dumps_into, &dc, 3);
        CHECK_STATUS(TENSO_OK, dc.status);
        CHECK(dc.written > 64 && dc.written <= bound);
        /* The packet frames itself: its length is known from the headers alone. */
        size_t len = 0;
        CHECK_OK(tenso_packet_length(&len, dst, bound, NULL));
        CHECK(len == dc.written);

        loads_ctx lc = {dst, dc.written, TENSO_OK};
        double t_loads = best_ns(run_loads, &lc, 3);
        CHECK_STATUS(TENSO_OK, lc.status);

        tenso_view *v = NULL;
        CHECK_OK(tenso_loads(&v, dst, dc.written, NULL));
        CHECK(view_is_f32_vector(v, n));
        CHECK((tenso_view_flags(v) & TENSO_FLAG_COMPRESSION) != 0);
        CHECK(tenso_view_owns_data(v) == 1); /* decompressed into the view's memory */
        verify(tenso_view_data(v), n, seed, cases[k].compressible, "lz4 loads");
        tenso_view_free(v);
        if (cases[k].compressible) CHECK(dc.written * 10 < nbytes); /* a staircase compresses well */

        char a[32], b[32], c[32];
        printf("%-10s %9s %10zu %6.1fx  %10s %9.2f  %10s %9.2f\n", cases[k].name, fmt_size(a, sizeof a, (double)nbytes),
               dc.written, (double)nbytes / (double)dc.written, fmt_time(b, sizeof b, t_dumps),
               gbps((double)nbytes, t_dumps), fmt_time(c, sizeof c, t_loads), gbps((double)nbytes, t_loads));
        free(dst);
        free(src);
    }
    printf("(GB/s of raw tensor bytes; loads decompresses into memory the view owns.)\n");
}

/* ---------------------------------------------------------------------------------------
 * 3. A bundle
 * ------------------------------------------------------------------------------------- */

static void demo_bundle(void) {
    enum { ROWS = 512, COLS = 512 };
    section("3. a bundle {\"weights\", \"bias\", \"step\"}");
    float *weights = (float *)xmalloc(ROWS * COLS * sizeof(float));
    float *bias = (float *)xmalloc(COLS * sizeof(float));
    fill(weights, ROWS * COLS, 7, 0);
    fill(bias, COLS, 8, 0);
    const int64_t step = 123456789012LL;
    const uint64_t wshape[2] = {ROWS, COLS}, bshape[1] = {COLS};

    const tenso_tensor tw = {.data = weights,
                             .nbytes = ROWS * COLS * sizeof(float),
                             .shape = wshape,
                             .ndim = 2,
                             .dtype = TENSO_DTYPE_FLOAT32};
    const tenso_tensor tb = {
        .data = bias, .nbytes = COLS * sizeof(float), .shape = bshape, .ndim = 1, .dtype = TENSO_DTYPE_FLOAT32};
    const tenso_tensor ts = {
        .data = &step, .nbytes = sizeof step, .shape = NULL, .ndim = 0, .dtype = TENSO_DTYPE_INT64}; /* a scalar */

    tenso_value *bundle = NULL, *child = NULL;
    CHECK_OK(tenso_value_new_bundle(&bundle));
    const tenso_tensor *tensors[3] = {&tw, &tb, &ts};
    const char *keys[3] = {"weights", "bias", "step"};
    for (int i = 0; i < 3; ++i) {
        child = NULL;
        CHECK_OK(tenso_value_new_tensor(&child, tensors[i]));
        CHECK_OK(tenso_bundle_insert(bundle, keys[i], strlen(keys[i]), child));
        tenso_value_free(child); /* the bundle copied the description */
    }
    CHECK(tenso_bundle_count(bundle) == 3);

    size_t bound = 0, written = 0;
    CHECK_OK(tenso_value_dumps_bound(&bound, bundle, NULL));
    unsigned char *dst = (unsigned char *)xmalloc(bound);
    double t0 = now_ns();
    CHECK_OK(tenso_value_dumps_into(dst, bound, &written, bundle, NULL));
    double t_dumps = now_ns() - t0;
    CHECK(written == bound);
    tenso_value_free(bundle);

    loads_ctx lc = {dst, written, TENSO_OK};
    double t_loads = best_ns(run_loads, &lc, 5);
    CHECK_STATUS(TENSO_OK, lc.status);

    char a[32], b[32];
    printf("packet %zu bytes; dumps_into %s; loads %s (O(entries), bodies are not copied)\n", written,
           fmt_time(a, sizeof a, t_dumps), fmt_time(b, sizeof b, t_loads));

    tenso_view *v = NULL;
    CHECK_OK(tenso_loads(&v, dst, written, NULL));
    CHECK(tenso_view_kind(v) == TENSO_KIND_BUNDLE);
    CHECK(tenso_view_bundle_count(v) == 3);
    printf("%-4s %-8s %-8s %-11s %9s %9s  %s\n", "#", "key", "dtype", "shape", "bytes", "offset", "values");
    for (uint32_t i = 0; i < tenso_view_bundle_count(v) && i < 3; ++i) {
        const char *key = NULL;
        size_t key_len = 0;
        const tenso_view *c = NULL;
        CHECK_OK(tenso_view_bundle_entry(&key, &key_len, &c, v, i));
        if (c == NULL || key == NULL) continue;
        CHECK(key_len == strlen(keys[i]) && memcmp(key, keys[i], key_len) == 0);
        CHECK(tenso_view_dtype(c) == tensors[i]->dtype);
        CHECK(tenso_view_ndim(c) == tensors[i]->ndim);
        CHECK(tenso_view_nbytes(c) == tensors[i]->nbytes);
        int ok = 1;
        for (uint32_t d = 0; d < tenso_view_ndim(c); ++d) ok = ok && tenso_view_shape(c)[d] == tensors[i]->shape[d];
        CHECK(ok);
        if (i == 0) ok = verify(tenso_view_data(c), ROWS * COLS, 7, 0, "bundle weights");
        else if (i == 1) ok = verify(tenso_view_data(c), COLS, 8, 0, "bundle bias");
        else {
            int64_t got = 0;
            if (tenso_view_data(c) != NULL) memcpy(&got, tenso_view_data(c), sizeof got);
            ok = got == step;
            CHECK(ok);
        }
        char shape_text[32] = "()";
        if (tenso_view_ndim(c) == 1)
            snprintf(shape_text, sizeof shape_text, "(%llu,)", (unsigned long long)tenso_view_shape(c)[0]);
        else if (tenso_view_ndim(c) == 2)
            snprintf(shape_text, sizeof shape_text, "(%llu, %llu)", (unsigned long long)tenso_view_shape(c)[0],
                     (unsigned long long)tenso_view_shape(c)[1]);
        long long offset =
            tenso_view_data(c) == NULL ? -1 : (long long)((const unsigned char *)tenso_view_data(c) - dst);
        printf("%-4u %-8.*s %-8s %-11s %9llu %9lld  %s\n", (unsigned)i, (int)key_len, key,
               tenso_dtype_name(tenso_view_dtype(c)), shape_text, (unsigned long long)tenso_view_nbytes(c), offset,
               ok ? "verified" : "MISMATCH");
    }
    const tenso_view *found = NULL;
    CHECK_OK(tenso_view_bundle_find(&found, v, "bias", 4));
    CHECK(found != NULL && tenso_view_nbytes(found) == COLS * sizeof(float));
    CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&found, v, "nope", 4));
    tenso_view_free(v);
    printf(
        "(each value is a complete packet inside the bundle, its body padded relative to its\n"
        " own start as upstream writes it; offsets are from the start of the bundle.)\n");
    free(dst);
    free(bias);
    free(weights);
}

/* ---------------------------------------------------------------------------------------
 * 4. Files
 * ------------------------------------------------------------------------------------- */

static void demo_files(const char *dir) {
    static const size_t sizes[] = {1024 * 1024, 64 * 1024 * 1024};
    section("4. files: tenso_save_file, tenso_load_file (READ and MMAP)");
    printf("%-9s %10s  %10s %9s  %10s %9s  %10s %9s\n", "tensor", "file", "save", "GB/s", "load READ", "GB/s",
           "load MMAP", "");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
        const size_t nbytes = sizes[s], n = nbytes / sizeof(float);
        const uint32_t seed = 60u + (uint32_t)s;
        float *src = (float *)xmalloc(nbytes);
        fill(src, n, seed, 0);
        uint64_t shape[1];
        tenso_tensor t = f32_vector(src, n, shape);
        char path[4096 + 64];
        snprintf(path, sizeof path, "%s/tensor-%zu.tenso", dir, s);

        double t0 = now_ns();
        CHECK_OK(tenso_save_file(path, &t, NULL));
        double t_save = now_ns() - t0;
        free(src); /* what follows reads only the file */

        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK((uint64_t)st.st_size == 64u + nbytes);

        double t_mode[2] = {0, 0};
        static const uint32_t modes[2] = {TENSO_LOAD_READ, TENSO_LOAD_MMAP};
        for (int m = 0; m < 2; ++m) {
            double best = -1;
            for (int r = 0; r < 3; ++r) {
                tenso_view *v = NULL;
                t0 = now_ns();
                tenso_status status = tenso_load_file(&v, path, modes[m], NULL);
                double dt = now_ns() - t0;
                CHECK_STATUS(TENSO_OK, status);
                if (best < 0 || dt < best) best = dt;
                if (r == 0) {
                    CHECK(view_is_f32_vector(v, n));
                    CHECK(tenso_view_owns_data(v) == 1); /* a buffer or a mapping it keeps */
                    verify(tenso_view_data(v), n, seed, 0,
                           modes[m] == TENSO_LOAD_READ ? "load_file READ" : "load_file MMAP");
                }
                tenso_view_free(v);
            }
            t_mode[m] = best;
        }
        CHECK(unlink(path) == 0);

        char a[32], b[32], c[32], d[32];
        printf("%-9s %10lld  %10s %9.2f  %10s %9.2f  %10s %9s\n", fmt_size(a, sizeof a, (double)nbytes),
               (long long)st.st_size, fmt_time(b, sizeof b, t_save), gbps((double)nbytes, t_save),
               fmt_time(c, sizeof c, t_mode[0]), gbps((double)nbytes, t_mode[0]), fmt_time(d, sizeof d, t_mode[1]),
               "O(1)");
    }
    printf(
        "(save writes a temporary file, flushes it and renames it over the path. READ\n"
        " copies the packet into an aligned buffer; MMAP maps the file and reads the header.)\n");
}

/* ---------------------------------------------------------------------------------------
 * 5. Pipes: writer | echo | reader
 * ------------------------------------------------------------------------------------- */

enum { PIPE_PACKETS = 16, PIPE_ELEMS = 256 * 1024 }; /* 16 x 1 MiB */

static uint32_t pipe_seed(int i) { return 100u + (uint32_t)i; }
static int pipe_integrity(int i) { return i % 4 == 3; }

/* Child 1: encodes PIPE_PACKETS tensors straight from memory onto the pipe. */
static int pipe_writer(int fd) {
    float *src = (float *)xmalloc(PIPE_ELEMS * sizeof(float));
    int rc = 0;
    for (int i = 0; i < PIPE_PACKETS && rc == 0; ++i) {
        fill(src, PIPE_ELEMS, pipe_seed(i), 0);
        uint64_t shape[1];
        tenso_tensor t = f32_vector(src, PIPE_ELEMS, shape);
        tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
        opts.flags = pipe_integrity(i) ? TENSO_ENCODE_INTEGRITY : 0u;
        uint64_t written = 0;
        tenso_status st = tenso_write_fd(&written, fd, &t, &opts);
        if (st != TENSO_OK) {
            fprintf(stderr, "writer: packet %d: %s (%s)\n", i, tenso_status_name(st), tenso_last_error());
            rc = 1;
        }
    }
    free(src);
    close(fd); /* the reader sees the end of the stream */
    return rc;
}

/* Child 2: reads packets and writes each one back out, re-encoded from its view. */
static int pipe_echo(int in, int out) {
    int rc = 0;
    for (;;) {
        tenso_view *v = NULL;
        tenso_status st = tenso_read_fd(&v, in, NULL);
        if (st == TENSO_E_END_OF_STREAM) break;
        if (st != TENSO_OK) {
            fprintf(stderr, "echo: read: %s (%s)\n", tenso_status_name(st), tenso_last_error());
            rc = 1;
            break;
        }
        const tenso_tensor t = {.data = tenso_view_data(v),
                                .nbytes = tenso_view_nbytes(v),
                                .shape = tenso_view_shape(v),
                                .ndim = tenso_view_ndim(v),
                                .dtype = tenso_view_dtype(v)};
        tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
        opts.flags = (tenso_view_flags(v) & TENSO_FLAG_INTEGRITY) ? TENSO_ENCODE_INTEGRITY : 0u;
        st = tenso_write_fd(NULL, out, &t, &opts);
        tenso_view_free(v);
        if (st != TENSO_OK) {
            fprintf(stderr, "echo: write: %s (%s)\n", tenso_status_name(st), tenso_last_error());
            rc = 1;
            break;
        }
    }
    close(in);
    close(out);
    return rc;
}

static void demo_pipe(void) {
    section("5. a pipe: writer | echo | reader (tenso_write_fd, tenso_read_fd)");
    int a[2], b[2];
    if (pipe(a) != 0 || pipe(b) != 0) {
        fail("pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    double t0 = now_ns();
    pid_t writer = fork();
    if (writer == 0) {
        close(a[0]);
        close(b[0]);
        close(b[1]);
        _exit(pipe_writer(a[1]));
    }
    pid_t echo = fork();
    if (echo == 0) {
        close(a[1]);
        close(b[0]);
        _exit(pipe_echo(a[0], b[1]));
    }
    /* The reader must hold no write end, or it would never see the end of the stream. */
    close(a[0]);
    close(a[1]);
    close(b[1]);
    if (writer < 0 || echo < 0) {
        fail("fork: %s", strerror(errno));
        close(b[0]);
        return;
    }

    int received = 0, verified = 0, with_footer = 0;
    tenso_status last = TENSO_OK;
    for (;;) {
        tenso_view *v = NULL;
        last = tenso_read_fd(&v, b[0], NULL);
        if (last != TENSO_OK) break;
        if (received < PIPE_PACKETS && view_is_f32_vector(v, PIPE_ELEMS)) {
            char what[64];
            snprintf(what, sizeof what, "pipe packet %d", received);
            verified += verify(tenso_view_data(v), PIPE_ELEMS, pipe_seed(received), 0, what);
            with_footer += (tenso_view_flags(v) & TENSO_FLAG_INTEGRITY) != 0;
            CHECK(((tenso_view_flags(v) & TENSO_FLAG_INTEGRITY) != 0) == pipe_integrity(received));
        } else {
            fail("pipe packet %d: unexpected packet", received);
        }
        ++received;
        tenso_view_free(v);
    }
    double dt = now_ns() - t0;
    close(b[0]);
    /* Ends cleanly: END_OF_STREAM exactly at a packet boundary, after all packets. */
    CHECK_STATUS(TENSO_E_END_OF_STREAM, last);
    CHECK(received == PIPE_PACKETS);
    CHECK(verified == PIPE_PACKETS);

    int ws = 0;
    CHECK(waitpid(writer, &ws, 0) == writer && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK(waitpid(echo, &ws, 0) == echo && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);

    const double bytes = (double)PIPE_PACKETS * PIPE_ELEMS * sizeof(float);
    char a1[32], b1[32];
    printf("%d packets of %s (%d with an integrity footer), each through two pipes:\n", PIPE_PACKETS,
           fmt_size(a1, sizeof a1, PIPE_ELEMS * sizeof(float)), with_footer);
    printf("received %d, verified %d, then %s; %s end to end, %.2f GB/s\n", received, verified, tenso_status_name(last),
           fmt_time(b1, sizeof b1, dt), gbps(bytes, dt));
}

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------
 * 6. Two nodes: one push and one pull over TLS 1.3 on loopback (tenso/net.h)
 * ------------------------------------------------------------------------------------- */

static void demo_nodes(void) {
    section("6. two nodes: a push and a pull over TLS 1.3 (tenso_node_*)");
    enum { N = 1024 };
    float *w = xmalloc(N * sizeof(float));
    for (size_t i = 0; i < N; ++i) w[i] = value_at(i, 6, 0);
    uint64_t shape[1] = {N};
    tenso_tensor t = {w, N * sizeof(float), shape, 1, TENSO_DTYPE_FLOAT32};

    tenso_node *alice = NULL, *bob = NULL;
    CHECK_OK(tenso_node_new(&alice, NULL)); /* tls://127.0.0.1:<free port>, ephemeral key */
    CHECK_OK(tenso_node_new(&bob, NULL));
    if (alice == NULL || bob == NULL) goto done;
    char addr[256];
    size_t len = 0;
    CHECK_OK(tenso_node_addr(addr, sizeof addr, &len, bob, 0));
    printf("  bob listens at %s\n", addr);

    /* Push: alice sends "weights" to bob; bob takes it from his queue. */
    tenso_value *v = NULL;
    CHECK_OK(tenso_value_new_tensor(&v, &t));
    double t0 = now_ns();
    CHECK_OK(tenso_node_send(alice, addr, "weights", 7, v, 0, NULL));
    tenso_node_message *m = NULL;
    CHECK_OK(tenso_node_receive(&m, bob, 5000, NULL));
    char tm[32];
    if (m != NULL) {
        size_t nlen = 0;
        const char *name = tenso_node_message_name(m, &nlen);
        const tenso_view *got = tenso_node_message_view(m);
        CHECK(nlen == 7 && memcmp(name, "weights", 7) == 0);
        CHECK(tenso_view_nbytes(got) == N * sizeof(float) && memcmp(tenso_view_data(got), w, N * sizeof(float)) == 0);
        printf("  push: bob received \"%.*s\" (%u floats) from %.16s... in %s (first connection: TLS handshake)\n",
               (int)nlen, name, (unsigned)N, tenso_node_message_sender(m), fmt_time(tm, sizeof tm, now_ns() - t0));
        tenso_node_message_free(m);
    }

    /* Pull: bob publishes "weights"; alice requests it (the pooled connection is reused). */
    CHECK_OK(tenso_node_publish(bob, "weights", 7, v, NULL, NULL)); /* bob now owns v */
    tenso_view *pulled = NULL;
    t0 = now_ns();
    CHECK_OK(tenso_node_request(&pulled, alice, addr, "weights", 7, 0, NULL));
    if (pulled != NULL) {
        CHECK(tenso_view_nbytes(pulled) == N * sizeof(float) &&
              memcmp(tenso_view_data(pulled), w, N * sizeof(float)) == 0);
        printf("  pull: alice got \"weights\" back in %s\n", fmt_time(tm, sizeof tm, now_ns() - t0));
        tenso_view_free(pulled);
    }
    CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_node_request(&pulled, alice, addr, "nothing", 7, 0, NULL));
    tenso_node_stats st = {.version = TENSO_NODE_STATS_VERSION};
    CHECK_OK(tenso_node_stats_get(&st, alice));
    CHECK(st.connections_opened == 1 && st.pool_size == 1);
    printf("  alice: %llu connection opened, %llu reused\n", (unsigned long long)st.connections_opened,
           (unsigned long long)st.connections_reused);
done:
    tenso_node_free(alice);
    tenso_node_free(bob);
    free(w);
}

int main(void) {
    const double start = now_ns();
    setvbuf(stdout, NULL, _IOLBF, 0);

    printf("tenso demo: library %s (headers %s), protocol v%u\n", tenso_version_string(), TENSO_VERSION_STRING,
           (unsigned)tenso_protocol_version());
    CHECK(tenso_version_number() == TENSO_VERSION_NUMBER);

    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tenso-demo-XXXXXX", tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "demo: mkdtemp(%s): %s\n", dir, strerror(errno));
        return 2;
    }

    demo_memory();
    demo_lz4();
    demo_bundle();
    demo_files(dir);
    demo_pipe();
    demo_nodes();

    if (rmdir(dir) != 0) fail("rmdir(%s): %s", dir, strerror(errno));

    char t[32];
    printf("\n");
    if (g_failures != 0) {
        printf("tenso demo: %d of %d checks FAILED (%s)\n", g_failures, g_checks,
               fmt_time(t, sizeof t, now_ns() - start));
        return 1;
    }
    printf("tenso demo: all %d checks passed, every value verified (%s)\n", g_checks,
           fmt_time(t, sizeof t, now_ns() - start));
    return 0;
}
