/*
 * The C link of the cross-language chain (Python -> Go -> Rust -> C and back, see
 * run-chain.sh): reads Tenso packets from standard input, decodes each one and writes it to
 * standard output again, until the input ends between two packets.
 *
 * Dense tensors and bundles of dense tensors are re-encoded from the view with the options
 * the packet was written with (alignment from its header, integrity and compression from its
 * flags), through tenso_write_fd / tenso_value_write_fd. A bundle entry written with other
 * options than its bundle is encoded alone with its own and inserted as a pre-encoded packet
 * (the bytes it would have inline). Everything else (sparse, quantized, strings, ragged, GPU
 * references, bundles holding one of those) is forwarded as the original packet through
 * tenso_value_new_packet, after a successful decode. Packets are framed with
 * tenso_packet_length so that those original bytes are at hand.
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

typedef struct {
    tenso_buffer *items; /* packets encoded alone, borrowed by the value until it is written */
    size_t count, capacity;
} side_packets;

static void side_clear(side_packets *s) {
    for (size_t i = 0; i < s->count; ++i) {
        tenso_buffer_dispose(&s->items[i]);
    }
    s->count = 0;
}

static tenso_buffer *side_push(side_packets *s) {
    if (s->count == s->capacity) {
        size_t cap = s->capacity ? 2 * s->capacity : 8;
        tenso_buffer *p = realloc(s->items, cap * sizeof *p);
        if (!p) {
            return NULL;
        }
        s->items = p;
        s->capacity = cap;
    }
    tenso_buffer init = TENSO_BUFFER_INIT;
    s->items[s->count] = init;
    return &s->items[s->count++];
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
            fprintf(stderr, "relay (c): packet %ld: framing: %s: %s\n", index,
                    tenso_status_name(st), tenso_last_error());
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
                fprintf(stderr, "relay (c): packet %ld: stream ended after %zu of %zu bytes\n",
                        index, have, need);
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
    tenso_tensor t = {tenso_view_data(v), tenso_view_nbytes(v), tenso_view_shape(v),
                      tenso_view_ndim(v), tenso_view_dtype(v)};
    return t;
}

/* 1 when the tree holds only dense tensors and bundles (what this relay rebuilds). */
static int rebuildable(const tenso_view *v) {
    tenso_kind k = tenso_view_kind(v);
    if (k == TENSO_KIND_DENSE) {
        return 1;
    }
    if (k != TENSO_KIND_BUNDLE) {
        return 0;
    }
    for (uint32_t i = 0; i < tenso_view_bundle_count(v); ++i) {
        const char *key;
        size_t key_len;
        const tenso_view *child;
        if (tenso_view_bundle_entry(&key, &key_len, &child, v, i) != TENSO_OK || !rebuildable(child)) {
            return 0;
        }
    }
    return 1;
}

/* A value for the bundle `v` (children dense or bundles), encoded under `root`. */
static tenso_status build_bundle(tenso_value **out, const tenso_view *v,
                                 const tenso_encode_options *root, side_packets *side) {
    tenso_value *b = NULL;
    tenso_status st = tenso_value_new_bundle(&b);
    for (uint32_t i = 0; st == TENSO_OK && i < tenso_view_bundle_count(v); ++i) {
        const char *key;
        size_t key_len;
        const tenso_view *child;
        tenso_value *cv = NULL;
        st = tenso_view_bundle_entry(&key, &key_len, &child, v, i);
        if (st != TENSO_OK) {
            break;
        }
        if (tenso_view_kind(child) == TENSO_KIND_BUNDLE) {
            st = build_bundle(&cv, child, root, side);
        } else {
            tenso_tensor t = tensor_of(child);
            tenso_encode_options own = written_with(child);
            if (same_options(&own, root)) {
                st = tenso_value_new_tensor(&cv, &t);
            } else {
                tenso_buffer *pkt = side_push(side);
                st = pkt ? tenso_dumps(pkt, &t, &own) : TENSO_E_NO_MEMORY;
                if (st == TENSO_OK) {
                    st = tenso_value_new_packet(&cv, pkt->data, pkt->size);
                }
            }
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

static tenso_status relay_one(const unsigned char *bytes, size_t len, side_packets *side) {
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, bytes, len, NULL);
    if (st != TENSO_OK) {
        return st;
    }
    if (tenso_view_packet_size(v) != len) {
        tenso_view_free(v);
        fprintf(stderr, "relay (c): the view says %llu bytes, framing said %zu\n",
                (unsigned long long)tenso_view_packet_size(v), len);
        return TENSO_E_INTERNAL;
    }
    tenso_encode_options opts = written_with(v);
    tenso_value *value = NULL;
    if (tenso_view_kind(v) == TENSO_KIND_DENSE) {
        tenso_tensor t = tensor_of(v);
        st = tenso_write_fd(NULL, STDOUT_FILENO, &t, &opts);
    } else {
        if (rebuildable(v)) {
            st = build_bundle(&value, v, &opts, side);
        } else {
            st = tenso_value_new_packet(&value, bytes, len);
        }
        if (st == TENSO_OK) {
            st = tenso_value_write_fd(NULL, STDOUT_FILENO, value, &opts);
        }
    }
    tenso_value_free(value);
    tenso_view_free(v);
    side_clear(side);
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
    side_packets side = {NULL, 0, 0};
    int rc = 0;
    for (long index = 0;; ++index) {
        int got = next_packet(&buf, &cap, &len, index);
        if (got <= 0) {
            rc = got < 0 ? 1 : 0;
            break;
        }
        tenso_status st = relay_one(buf, len, &side);
        if (st != TENSO_OK) {
            fprintf(stderr, "relay (c): packet %ld: %s: %s\n", index, tenso_status_name(st),
                    tenso_last_error());
            rc = 1;
            break;
        }
    }
    free(side.items);
    free(buf);
    return rc;
}
