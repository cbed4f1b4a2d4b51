/* lz4_decode.c - the C engine's side of bench/js's LZ4 row: tenso_loads of the given packet
 * files (compressed float32), on one thread as the WebAssembly engine runs, timed as bench.mjs
 * times JavaScript (median of repeats). Prints one JSON object: {"file": median_ns, ...}.
 * Built and run by bench/js/run.sh against the build tree's libtenso. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tenso/tenso.h"

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    tenso_decode_options opts = TENSO_DECODE_OPTIONS_INIT;
    opts.threads = 1;
    printf("{");
    for (int i = 1; i < argc; ++i) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) return perror(argv[i]), 1;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        void *buf = aligned_alloc(64, ((size_t)n + 63) & ~(size_t)63);
        if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) return fprintf(stderr, "%s: read failed\n", argv[i]), 1;
        fclose(f);
        double t[64];
        int reps = 0;
        double start = now_ns();
        while (reps < 64 && (reps < 5 || now_ns() - start < 1e9)) {
            tenso_view *v = NULL;
            double t0 = now_ns();
            if (tenso_loads(&v, buf, (size_t)n, &opts) != TENSO_OK)
                return fprintf(stderr, "%s\n", tenso_last_error()), 1;
            t[reps++] = now_ns() - t0;
            tenso_view_free(v);
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        printf("%s\"%s\": %.0f", i > 1 ? ", " : "", argv[i], t[reps / 2]);
        free(buf);
    }
    printf("}\n");
    return 0;
}
