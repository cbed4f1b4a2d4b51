/*
 * The C link of the cross-language chain (Python -> Go -> Rust -> C and back, see
 * run-chain.sh): reads Tenso packets from standard input, decodes each one and writes it to
 * standard output again, until the input ends between two packets.
 *
 * Every kind is rebuilt from its decoded parts through the C ABI and encoded again with the
 * options the packet was written with (alignment from its header, integrity and compression
 * from its flags): dense tensors (tenso_write_fd), bundles, sparse matrices (their three
 * components), quantized tensors, strings, ragged arrays (upstream's bundle form, through
 * tenso_view_ragged) and GPU references (tenso_value_write_fd). A bundle entry written with
 * other options than its bundle is encoded alone with its own and inserted as a pre-encoded
 * packet (the bytes it would have inline). No packet is forwarded as it came: a kind without
 * a writer (a direct ragged packet) is an error. Packets are framed with tenso_packet_length.
 *
 * Exit status: 0 at a clean end of stream, 1 on any error (on stderr, with the packet index),
 * 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L /* read, ssize_t */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tenso/tenso.h>

/* What the values of one packet borrow until it is written: packets of entries encoded alone,
 * and aligned copies of ragged offsets (a bundle entry's body can sit at any address). */
typedef struct {
    tenso_buffer *packets;
    size_t npackets, cap_packets;
    void **blocks;
    size_t nblocks, cap_blocks;
} arena;

static void arena_clear(arena *s) {
    for (size_t i = 0; i < s->npackets; ++i) {
        tenso_buffer_dispose(&s->packets[i]);
    }
    for (size_t i = 0; i < s->nblocks; ++i) {
        free(s->blocks[i]);
    }
    s->npackets = s->nblocks = 0;
}

static int grow(void **items, size_t *cap, size_t count, size_t size) {
    if (count < *cap) {
        return 1;
    }
    size_t n = *cap ? 2 * *cap : 8;
    void *p = realloc(*items, n * size);
    if (!p) {
        return 0;
    }
    *items = p;
    *cap = n;
    return 1;
}

static tenso_buffer *arena_packet(arena *s) {
    if (!grow((void **)&s->packets, &s->cap_packets, s->npackets, sizeof *s->packets)) {
        return NULL;
    }
    tenso_buffer init = TENSO_BUFFER_INIT;
    s->packets[s->npackets] = init;
    return &s->packets[s->npackets++];
}

static void *arena_copy(arena *s, const void *src, size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p || !grow((void **)&s->blocks, &s->cap_blocks, s->nblocks, sizeof *s->blocks)) {
        free(p);
        return NULL;
    }
    memcpy(p, src, n);
    s->blocks[s->nblocks++] = p;
    return p;
}

/* Reads the next packet into *buf (grown as needed). 1: a packet of *len bytes; 0: clean end
 * of stream; -1: error (message printed). */
static int next_packet(unsigned char **buf, size_t *cap, size_t *len, long index) {
    size_t have = 0;
    for (;;) {
        size_t need = 0;
        tenso_status st = tenso_packet_length(&need, *buf, have, NULL);
        if (st == TENSO_OK) {
            *len = need;
            return 1;
        }
        if (st != TENSO_E_TRUNCATED) {
            fprintf(stderr, "relay (c): packet %ld: framing: %s: %s\n", index, tenso_status_name(st),
                    tenso_last_error());
            return -1;
        }
        if (need > *cap) {
            unsigned char *p = realloc(*buf, need);
            if (!p) {
                fprintf(stderr, "relay (c): packet %ld: out of memory (%zu bytes)\n", index, need);
                return -1;
            }
            *buf = p;
            *cap = need;
        }
        while (have < need) {
            ssize_t n = read(STDIN_FILENO, *buf + have, need - have);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0) {
                fprintf(stderr, "relay (c): packet %ld: read: %s\n", index, strerror(errno));
                return -1;
            }
            if (n == 0) {
                if (have == 0) {
                    return 0;
                }
                fprintf(stderr, "relay (c): packet %ld: stream ended after %zu of %zu bytes\n", index, have, need);
                return -1;
            }
            have += (size_t)n;
        }
    }
}

static tenso_encode_options written_with(const tenso_view *v) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    uint32_t flags = tenso_view_flags(v);
    o.flags = ((flags & TENSO_FLAG_INTEGRITY) ? TENSO_ENCODE_INTEGRITY : 0u) |
              ((flags & TENSO_FLAG_COMPRESSION) ? TENSO_ENCODE_COMPRESS : 0u);
    o.alignment = tenso_view_alignment(v) ? tenso_view_alignment(v) : 64u;
    return o;
}

static int same_options(const tenso_encode_options *a, const tenso_encode_options *b) {
    return a->flags == b->flags && a->alignment == b->alignment;
}

static tenso_tensor tensor_of(const tenso_view *v) {
    tenso_tensor t = {tenso_view_data(v), tenso_view_nbytes(v), tenso_view_shape(v), tenso_view_ndim(v),
                      tenso_view_dtype(v)};
    return t;
}

static tenso_status no_writer(const tenso_view *v) {
    fprintf(stderr, "relay (c): no writer for a packet of kind %d\n", (int)tenso_view_kind(v));
    return TENSO_E_UNSUPPORTED_KIND;
}

static tenso_status build(tenso_value **out, const tenso_view *v, const tenso_encode_options *root, arena *side);

static tenso_status build_ragged(tenso_value **out, const tenso_view *v, arena *side) {
    const tenso_view *flat, *offsets;
    tenso_status st = tenso_view_ragged(&flat, &offsets, v);
    if (st != TENSO_OK) {
        return st;
    }
    const uint64_t *row_offsets = arena_copy(side, tenso_view_data(offsets), tenso_view_nbytes(offsets));
    if (!row_offsets) {
        return TENSO_E_NO_MEMORY;
    }
    tenso_tensor t = tensor_of(flat);
    return tenso_value_new_ragged(out, &t, tenso_view_nbytes(offsets) / 8 - 1, row_offsets);
}

static tenso_status build_bundle(tenso_value **out, const tenso_view *v, const tenso_encode_options *root,
                                 arena *side) {
    tenso_value *b = NULL;
    tenso_status st = tenso_value_new_bundle(&b);
    for (uint32_t i = 0; st == TENSO_OK && i < tenso_view_bundle_count(v); ++i) {
        const char *key;
        size_t key_len;
        const tenso_view *child;
        tenso_value *cv = NULL;
        st = tenso_view_bundle_entry(&key, &key_len, &child, v, i);
        if (st == TENSO_OK) {
            st = build(&cv, child, root, side);
        }
        if (st == TENSO_OK) {
            st = tenso_bundle_insert(b, key, key_len, cv);
        }
        tenso_value_free(cv);
    }
    if (st != TENSO_OK) {
        tenso_value_free(b);
        return st;
    }
    *out = b;
    return TENSO_OK;
}

/* A value for one view that is not a plain bundle, without regard to its options. */
static tenso_status build_leaf(tenso_value **out, const tenso_view *v, arena *side) {
    switch (tenso_view_kind(v)) {
    case TENSO_KIND_BUNDLE: return build_ragged(out, v, side);
    case TENSO_KIND_DENSE: {
        tenso_tensor t = tensor_of(v);
        return tenso_value_new_tensor(out, &t);
    }
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC: {
        tenso_tensor c[3];
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *comp;
            tenso_status st = tenso_view_component(&comp, v, i);
            if (st != TENSO_OK) {
                return st;
            }
            c[i] = tensor_of(comp);
        }
        return tenso_value_new_sparse(out, tenso_view_kind(v), tenso_view_ndim(v), tenso_view_shape(v), &c[0], &c[1],
                                      &c[2]);
    }
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized q;
        tenso_status st = tenso_view_quantized(&q, v);
        return st == TENSO_OK ? tenso_value_new_quantized(out, &q) : st;
    }
    case TENSO_KIND_STRING: {
        const uint64_t *offsets;
        const char *payload;
        tenso_status st = tenso_view_string_offsets(&offsets, &payload, v);
        const uint64_t count = tenso_view_ndim(v) ? tenso_view_shape(v)[0] : 0;
        return st == TENSO_OK ? tenso_value_new_strings(out, count, offsets, payload, offsets[count]) : st;
    }
    case TENSO_KIND_GPU_IPC_REF: {
        tenso_ipc_ref ref;
        tenso_status st = tenso_view_ipc_ref(&ref, v);
        return st == TENSO_OK ? tenso_value_new_ipc_ref(out, &ref) : st;
    }
    default: return no_writer(v);
    }
}

/* A value for `v` under the options `root` the whole packet is encoded with. Dense, quantized
 * and string bodies carry options of their own, a ragged array those of its components (its
 * bundle header has none); sparse components and GPU references ignore options. A part whose
 * own options differ from `root` is encoded alone with them (at the top they are `root`,
 * except for a ragged array). */
static tenso_status build(tenso_value **out, const tenso_view *v, const tenso_encode_options *root, arena *side) {
    const tenso_view *flat, *offsets;
    const int ragged = tenso_view_ragged(&flat, &offsets, v) == TENSO_OK;
    const tenso_kind kind = tenso_view_kind(v);
    if (kind == TENSO_KIND_BUNDLE && !ragged) {
        return build_bundle(out, v, root, side);
    }
    const tenso_encode_options own = written_with(ragged ? flat : v);
    const int has_own = ragged || kind == TENSO_KIND_DENSE || kind == TENSO_KIND_QUANTIZED || kind == TENSO_KIND_STRING;
    if (!has_own || same_options(&own, root)) {
        return build_leaf(out, v, side);
    }
    tenso_value *alone = NULL;
    tenso_buffer *pkt = arena_packet(side);
    tenso_status st = pkt ? build_leaf(&alone, v, side) : TENSO_E_NO_MEMORY;
    if (st == TENSO_OK) {
        st = tenso_value_dumps(pkt, alone, &own);
    }
    tenso_value_free(alone);
    return st == TENSO_OK ? tenso_value_new_packet(out, pkt->data, pkt->size) : st;
}

static tenso_status relay_one(const unsigned char *bytes, size_t len, arena *side) {
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, bytes, len, NULL);
    if (st != TENSO_OK) {
        return st;
    }
    if (tenso_view_packet_size(v) != len) {
        fprintf(stderr, "relay (c): the view says %llu bytes, framing said %zu\n",
                (unsigned long long)tenso_view_packet_size(v), len);
        tenso_view_free(v);
        return TENSO_E_INTERNAL;
    }
    tenso_encode_options opts = written_with(v);
    tenso_value *value = NULL;
    if (tenso_view_kind(v) == TENSO_KIND_DENSE) {
        tenso_tensor t = tensor_of(v);
        st = tenso_write_fd(NULL, STDOUT_FILENO, &t, &opts);
    } else {
        st = build(&value, v, &opts, side);
        if (st == TENSO_OK) {
            st = tenso_value_write_fd(NULL, STDOUT_FILENO, value, &opts);
        }
    }
    tenso_value_free(value);
    tenso_view_free(v);
    arena_clear(side);
    return st;
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: relay < packets > packets\n");
        return 2;
    }
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    arena side = {NULL, 0, 0, NULL, 0, 0};
    int rc = 0;
    for (long index = 0;; ++index) {
        int got = next_packet(&buf, &cap, &len, index);
        if (got <= 0) {
            rc = got < 0 ? 1 : 0;
            break;
        }
        tenso_status st = relay_one(buf, len, &side);
        if (st != TENSO_OK) {
            fprintf(stderr, "relay (c): packet %ld: %s: %s\n", index, tenso_status_name(st), tenso_last_error());
            rc = 1;
            break;
        }
    }
    free(side.packets);
    free(side.blocks);
    free(buf);
    return rc;
}
