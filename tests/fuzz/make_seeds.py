#!/usr/bin/env python3
"""Writes the hand-made seed inputs of tests/fuzz/corpus/ (the golden vectors plus crafted
edge cases). Deterministic; standard library only. Entries that libFuzzer found later (hex
SHA-1 names, from -merge=1) live next to these and are not touched.

    python3 tests/fuzz/make_seeds.py
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "vectors")
CORPUS = os.path.join(HERE, "corpus")
MAX_VECTOR = 32 * 1024  # keep the corpus small: the 70 KB vector adds nothing the others lack


def vector(name):
    with open(os.path.join(VECTORS, name + ".tenso"), "rb") as f:
        return f.read()


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pad(n, a=64):
    return (a - n % a) % a


def dense_f32_scalar(value=1.0):
    head = b"TNSO" + bytes([4]) + struct.pack("<H", 1) + bytes([1, 0, 0])
    return head + bytes(pad(len(head))) + struct.pack("<f", value)


def bundle(entries, version_header=None):
    out = b"TNSO" + bytes([4]) + struct.pack("<H", 0x10) + bytes([0, len(entries), 0])
    for key, value in entries:
        out += struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value
    return out


def chain(levels):
    p = dense_f32_scalar()
    for _ in range(levels):
        p = bundle([(b"k", p)])
    return p


# ------------------------------------------------------------------------------------ loads
def loads_seeds():
    names = sorted(f[:-6] for f in os.listdir(VECTORS) if f.endswith(".tenso"))
    for n in names:
        data = vector(n)
        if len(data) <= MAX_VECTOR:
            write("loads", "vec_" + n, data)

    f32 = vector("dense_f32_vec")
    for cut in (0, 3, 4, 9, 10, 13, 50, 83):
        write("loads", "trunc_dense_f32_vec_%d" % cut, f32[:cut])
    lz = vector("compressed_f32_random256")
    for cut in (70, 75, 600, len(lz) - 4, len(lz) - 1):
        write("loads", "trunc_compressed_%d" % cut, lz[:cut])
    nested = vector("bundle_nested3")
    for cut in (10, 14, 200, len(nested) - 1):
        write("loads", "trunc_bundle_nested3_%d" % cut, nested[:cut])
    ipc = vector("gpu_ipc_ref")
    write("loads", "trunc_ipc_105", ipc[:105])
    write("loads", "ipc_trailing", ipc + b"\x00" * 7)
    write("loads", "ipc_integrity", ipc[:5] + struct.pack("<H", 0x0402) + ipc[7:])
    write("loads", "ipc_discriminator0", ipc[:9] + b"\x00" + ipc[10:])

    write("loads", "deep_bundle_64", chain(64))
    write("loads", "deep_bundle_65", chain(65))

    integ = bytearray(vector("dense_i32_integrity"))
    integ[-1] ^= 1
    write("loads", "bad_checksum", bytes(integ))
    write("loads", "bad_magic", b"TNSP" + f32[4:])
    write("loads", "bad_version5", f32[:4] + b"\x05" + f32[5:])
    write("loads", "bad_version0", f32[:4] + b"\x00" + f32[5:])
    write("loads", "bad_dtype0", f32[:7] + b"\x00" + f32[8:])
    write("loads", "bad_dtype22", f32[:7] + b"\x16" + f32[8:])
    write("loads", "ndim33", b"TNSO\x04\x01\x00\x01\x21\x00" + b"\x01\x00\x00\x00" * 33 + bytes(64))
    write("loads", "elements_overflow", b"TNSO\x04\x01\x00\x01\x04\x00" + b"\xff\xff\xff\xff" * 4 + bytes(64))
    write("loads", "cust_align_e64", b"TNSO\x04\x80\x00\x05\x01\x00\x01\x00\x00\x00\x40" + b"\x07")
    write("loads", "cust_align_e21", b"TNSO\x04\x80\x00\x05\x01\x00\x01\x00\x00\x00\x15" + b"\x07")
    write("loads", "bundle_bad_utf8_key", bundle([(b"\xc3\x28", dense_f32_scalar())]))
    write("loads", "bundle_overlong_key", bundle([(b"\xc0\xaf", dense_f32_scalar())]))
    inner = dense_f32_scalar()
    bad_len = (
        b"TNSO\x04\x10\x00\x00\x01\x00"
        + struct.pack("<I", 1)
        + b"a"
        + struct.pack("<I", len(inner) + 3)
        + inner
        + b"xyz"
    )
    write("loads", "bundle_value_len_too_long", bad_len)
    short_len = (
        b"TNSO\x04\x10\x00\x00\x01\x00" + struct.pack("<I", 1) + b"a" + struct.pack("<I", len(inner) - 1) + inner
    )
    write("loads", "bundle_value_len_too_short", short_len)
    write(
        "loads",
        "bundle_count_past_end",
        b"TNSO\x04\x10\x00\x00\x03\x00" + struct.pack("<I", 1) + b"a" + struct.pack("<I", len(inner)) + inner,
    )
    # LZ4: a frame whose stored content size disagrees with the shape, and one with junk after it.
    lzb = bytearray(vector("compressed_f64_liblz4_frame"))
    write("loads", "lz4_trailing_junk", bytes(lzb) + b"\x00" * 9)
    # v4 dense with CUST_ALIGN and exponent 0 (alignment 1): no padding at all.
    write("loads", "align1_u8", b"TNSO\x04\x80\x00\x05\x01\x00\x03\x00\x00\x00\x00" + b"\x01\x02\x03")
    # v1 packet with no flags: alignment 1.
    write("loads", "legacy_v1_u8", b"TNSO\x01\x00\x05\x01" + struct.pack("<I", 2) + b"\x07\x08")


# ------------------------------------------------------------------------------------ stream
def stream_seeds():
    p = {
        n: vector(n)
        for n in (
            "dense_f32_vec",
            "bundle_mixed",
            "compressed_f32_random256",
            "dense_i32_integrity",
            "legacy_v3_f32",
            "gpu_ipc_ref",
            "sparse_coo_f32",
            "string_mixed_utf8",
            "quantized_qint8_per_tensor",
            "compressed_f64_liblz4_frame",
            "bundle_compressed",
            "dense_f32_scalar",
            "align_f32_1",
            "bundle_empty",
            "legacy_v1_f32",
        )
    }
    bad = bytearray(p["dense_i32_integrity"])
    bad[-1] ^= 1
    seqs = [
        ("two_dense", ["dense_f32_vec", "dense_f32_scalar"]),
        ("bundle_then_lz4", ["bundle_mixed", "compressed_f32_random256"]),
        ("integrity_legacy_ipc", ["dense_i32_integrity", "legacy_v3_f32", "gpu_ipc_ref"]),
        ("sparse_string_quant", ["sparse_coo_f32", "string_mixed_utf8", "quantized_qint8_per_tensor"]),
        ("lz4_frames_bundle", ["compressed_f64_liblz4_frame", "bundle_compressed", "align_f32_1", "bundle_empty"]),
        ("legacy_v1_then_v4", ["legacy_v1_f32", "dense_f32_vec", "bundle_mixed"]),
    ]
    # byte 0: transport (bits 0-1), skip checksum (bit 2), max_packet_bytes cap (bits 3-4);
    # byte 1: chunk-size seed.
    modes = [(0, 0), (1, 3), (2, 7), (3, 1), (0x04, 12), (0x09, 2), (0x12, 5), (0x1B, 15)]
    for i, (name, parts) in enumerate(seqs):
        data = b"".join(p[x] for x in parts)
        for j in range(2):
            m, s = modes[(2 * i + j) % len(modes)]
            write("stream", "%s_m%d" % (name, m), bytes([m, s]) + data)
        m, s = modes[i % len(modes)]
        write("stream", "%s_trunc" % name, bytes([m, s]) + data[: len(data) - len(p[parts[-1]]) // 2])
    write("stream", "bad_checksum_mid", bytes([1, 4]) + p["dense_f32_vec"] + bytes(bad) + p["bundle_mixed"])
    write("stream", "garbage_tail_5", bytes([0, 0]) + p["dense_f32_vec"] + b"XXXXX")
    write("stream", "garbage_tail_2", bytes([2, 1]) + p["dense_f32_vec"] + b"TN")
    write("stream", "empty", bytes([3, 9]))
    write("stream", "cap_256_big_packet", bytes([0x08, 3]) + vector("align_f32_4096"))
    write("stream", "deep_chain", bytes([1, 6]) + chain(64) + chain(65))


# --------------------------------------------------------------------------------- roundtrip
# Input grammar (fuzz_roundtrip.cpp): opts = [flags byte: bit0 integrity, bit1 compress,
# (byte>>2)%14 = log2 alignment or 13 = default][level byte]; then a shape selector
# (%16 == 15 chain, 14 wide, odd tree, even single leaf); a tree node = [%3 == 0 means bundle]
# [count][per entry: key kind (%4 == 0 raw bytes), key len, key bytes, node]; a leaf = [kind
# byte %8: 0 packet (then its opts), 1 sparse, 2 quantized, 3 strings, 4 IPC, 5 ragged, 6/7
# dense] and the kind's fields (see the make_* functions there).
def opts(integrity=False, compress=False, align_log2=None, level=0):
    e = 13 if align_log2 is None else align_log2
    return bytes([(e << 2) | (1 if integrity else 0) | (2 if compress else 0), (level + 2) % 16])


ITEMSIZE = {1: 4, 2: 4, 3: 8, 4: 8, 5: 1, 6: 2, 7: 1, 8: 2, 9: 1, 10: 2, 11: 4, 12: 8, 13: 8, 14: 16, 15: 2}


def leaf(dtype, shape, body=b"", packet_opts=None):
    """A leaf with exactly its body's bytes, so whatever follows parses as the next item."""
    n = ITEMSIZE[dtype]
    for d in shape:
        n *= d
    body = (body * (n // max(len(body), 1) + 1))[:n] if body else bytes(n)
    out = bytes([0]) + packet_opts if packet_opts is not None else bytes([7])
    return out + bytes([dtype - 1, len(shape)]) + bytes(shape) + body


def sparse_leaf(fmt, rows, cols, ib, ic, entries, data_dtype, body=b"\x11\x22\x33\x44"):
    """fmt 0 COO (entries = [(row, col)]), 1 CSR / 2 CSC (entries = (per-major counts, indices))."""
    out = bytes([1, fmt, rows, cols, ib, ic, 1])
    if fmt == 0:
        out += bytes([len(entries)]) + b"".join(bytes([r, c]) for r, c in entries)
        nnz = len(entries)
    else:
        counts, idx = entries
        out += bytes(counts) + bytes(idx)
        nnz = len(idx)
    n = ITEMSIZE[data_dtype] * nnz
    return out + bytes([data_dtype - 1]) + (body * (n // len(body) + 1))[:n]


def quant_leaf(src, q, scheme, axis, group, shape, body):
    n = {0: 4, 1: 2, 2: 2}[src]
    for d in shape:
        n *= d
    return bytes([2, src, q, scheme, axis & 0xFF, group, len(shape)]) + bytes(shape) + (body * (n // len(body) + 1))[:n]


def strings_leaf(strs):
    out = bytes([3, len(strs)]) + bytes(len(x) for x in strs)
    for x in strs:
        for ch in x:
            out += bytes([1, ord(ch) - ord("a")])
    return out


def ipc_leaf():
    return (
        bytes([4]) + bytes(range(64)) + struct.pack("<I", 0x1000) + b"\x00" + struct.pack("<I", 4096) + bytes(range(16))
    )


def ragged_leaf(dtype, row_lens, body):
    n = ITEMSIZE[dtype] * sum(row_lens)
    return bytes([5, dtype - 1, len(row_lens)]) + bytes(row_lens) + (body * (n // len(body) + 1))[:n]


def tree_leaf(*a, **k):
    return bytes([1]) + leaf(*a, **k)  # "not a bundle", then the leaf


def tree_of(raw_leaf):
    return bytes([1]) + raw_leaf


def tree_bundle(entries, raw_keys=False):
    out = bytes([0, len(entries)])
    for key, node in entries:
        out += bytes([0 if raw_keys else 1, len(key)])
        out += key if raw_keys else bytes(ord(c) - ord("a") for c in key)
        out += node
    return out


def roundtrip_seeds():
    body = bytes(range(256)) * 2
    shapes = [[], [3], [2, 2], [1, 2, 3], [2, 1, 2, 1], [1, 1, 1, 2, 2]]
    for dtype in range(1, 16):
        shape = shapes[dtype % len(shapes)]
        o = opts(
            integrity=dtype % 2 == 0,
            compress=dtype % 3 == 0,
            align_log2=[None, 0, 3, 4, 7, 12][dtype % 6],
            level=dtype % 13,
        )
        write("roundtrip", "dtype_%02d" % dtype, o + bytes([0]) + leaf(dtype, shape, body))
    write("roundtrip", "empty_dim_compressed", opts(compress=True) + bytes([0]) + leaf(3, [2, 0, 3]))
    write("roundtrip", "scalar_default", opts() + bytes([0]) + leaf(1, [], b"\x00\x00\x80\x3f"))
    write("roundtrip", "packet_leaf", opts() + bytes([0]) + leaf(4, [2], body, packet_opts=opts(True, True, 5)))
    t = tree_bundle(
        [
            ("a", tree_leaf(1, [2], body)),
            ("b", tree_bundle([("x", tree_leaf(5, [4], body)), ("x", tree_leaf(7, [3], body))])),
            ("", tree_leaf(2, [1], body, packet_opts=opts(integrity=True, align_log2=0))),
        ]
    )
    write("roundtrip", "tree_mixed", opts(integrity=True) + bytes([1]) + t)
    write("roundtrip", "tree_compressed_align128", opts(compress=True, align_log2=7) + bytes([1]) + t)
    write(
        "roundtrip",
        "tree_bad_utf8_key",
        opts()
        + bytes([1])
        + tree_bundle([(b"\xff", tree_leaf(1, [1], body)), (b"ok", tree_leaf(1, [1], body))], raw_keys=True),
    )
    write("roundtrip", "chain_64", opts() + bytes([15, 4]) + leaf(1, [1], body))
    write("roundtrip", "chain_65", opts(integrity=True) + bytes([15, 5]) + leaf(9, [2], body))
    write("roundtrip", "wide_256", opts() + bytes([14]) + leaf(5, [1], body))
    floats = struct.pack("<8f", -1.5, 0.25, 3.0, 7.75, -2.0, 0.0, 1.0, 5.5)
    write("roundtrip", "sparse_coo", opts() + bytes([0]) + sparse_leaf(0, 3, 4, 4, 6, [(0, 1), (2, 3), (1, 0)], 1))
    write(
        "roundtrip",
        "sparse_csr",
        opts(integrity=True) + bytes([0]) + sparse_leaf(1, 3, 3, 2, 5, ([1, 0, 2], [0, 2, 1]), 3),
    )
    write("roundtrip", "sparse_csc_empty", opts() + bytes([0]) + sparse_leaf(2, 0, 2, 7, 0, ([0, 0], []), 5))
    write("roundtrip", "quant_qint8_tensor", opts() + bytes([0]) + quant_leaf(0, 0, 0, 0, 0, [2, 4], floats))
    write(
        "roundtrip",
        "quant_quint4_channel",
        opts(integrity=True, align_log2=7) + bytes([0]) + quant_leaf(0, 3, 1, -1, 0, [2, 3], floats),
    )
    write(
        "roundtrip", "quant_qint4_group_f16", opts(compress=True) + bytes([0]) + quant_leaf(1, 2, 2, 0, 3, [7], floats)
    )
    write("roundtrip", "quant_quint8_bf16_empty", opts() + bytes([0]) + quant_leaf(2, 1, 0, 0, 0, [0, 3], floats))
    write("roundtrip", "strings", opts(integrity=True) + bytes([0]) + strings_leaf(["hi", "", "abc"]))
    write("roundtrip", "ipc_ref", opts(integrity=True, compress=True) + bytes([0]) + ipc_leaf())
    write("roundtrip", "ragged_f32", opts(align_log2=4) + bytes([0]) + ragged_leaf(1, [2, 0, 1], floats))
    composite_tree = tree_bundle(
        [
            ("s", tree_of(sparse_leaf(0, 2, 2, 4, 4, [(1, 1)], 1))),
            ("q", tree_of(quant_leaf(0, 0, 0, 0, 0, [4], floats))),
            ("t", tree_of(strings_leaf(["xy"]))),
            ("g", tree_of(ipc_leaf())),
            ("r", tree_of(ragged_leaf(9, [1, 2], floats))),
        ]
    )
    write("roundtrip", "tree_composites", opts(integrity=True) + bytes([1]) + composite_tree)


# fuzz_mutate: byte 0 = mutations - 1 (mod 8), then per mutation u16 LE offset and u8 XOR mask,
# then the packet; each seed flips fields the decoder sizes things by.
def mutate_seeds():
    def seed(name, packet, muts):
        head = bytes([len(muts) - 1]) + b"".join(struct.pack("<HB", off, mask) for off, mask in muts)
        write("mutate", name, head + packet)

    def body_off(p):  # v4 dense-like header: shape, optional exponent, padding
        ndim, flags = p[8], struct.unpack_from("<H", p, 5)[0]
        pos = 10 + 4 * ndim
        if flags & 0x80:
            return pos + 1 + pad(pos + 1, 1 << p[pos])
        return pos + (pad(pos) if flags & 0x01 else 0)

    q = vector("quantized_qint8_per_tensor")
    nscales = 10 + 4 * q[8] + 6
    seed("quant_num_scales", q, [(nscales + 3, 0x01), (nscales, 0x02)])
    seed("quant_scheme_axis", q, [(nscales - 6, 0x01), (nscales - 5, 0x01), (nscales - 4, 0x03)])
    st = vector("string_mixed_utf8")
    count = struct.unpack_from("<I", st, 10)[0]
    last = body_off(st) + 8 * count
    seed("string_last_offset", st, [(last + 5, 0x01), (last, 0x40)])
    seed("string_first_offset", st, [(body_off(st), 0x01), (last - 8, 0x80)])
    bm = vector("bundle_mixed")
    klen = struct.unpack_from("<I", bm, 10)[0]
    seed("bundle_lengths", bm, [(10, 0x20), (14 + klen + 3, 0x01), (14 + klen, 0x04)])
    seed("bundle_count", bm, [(8, 0x40)])
    lz = vector("compressed_f32_random256")
    off = body_off(lz)
    seed("lz4_block_size", lz, [(off + 15 + 2, 0x10), (off + 15, 0x01), (off + 4, 0x01)])
    seed("dense_shape_flags", vector("dense_float32_2x3"), [(10, 0x80), (5, 0x04), (8, 0x01)])
    sp = vector("sparse_coo_f32")
    seed("sparse_component_len", sp, [(10 + 8, 0x08), (10 + 8 + 3, 0x01)])
    seed("nested_bundle", vector("bundle_nested3"), [(8, 0x01), (20, 0x10), (30, 0xFF)])


def control(op, name="", length=0, offset=0, message="", status=0):
    """A node control frame: a string packet of six strings (docs/net-protocol.md)."""
    fields = [
        op.encode(),
        name.encode(),
        str(status).encode(),
        str(length).encode(),
        str(offset).encode(),
        message.encode(),
    ]
    offs = [0]
    for f in fields:
        offs.append(offs[-1] + len(f))
    head = b"TNSO" + bytes([4, 0x01, 0x01, 0x14, 1, 0]) + struct.pack("<Q", 6)
    return head + bytes(pad(len(head))) + b"".join(struct.pack("<Q", o) for o in offs) + b"".join(fields)


def f32x4():
    head = b"TNSO" + bytes([4]) + struct.pack("<H", 1) + bytes([1, 1, 0]) + struct.pack("<Q", 4)
    return head + bytes(pad(len(head))) + struct.pack("<4f", 1, 2, 3, 4)


def net_seeds():
    """fuzz_net's script form: 0xFD, then [ctl][u16 len][bytes] records on up to four
    connections (ctl bits 0-1), passing descriptors (bit 2; kind in bits 3-4: sealed memfd with
    a 4-float packet, memfd of the record's bytes, pipe, directory; bit 5: three of them), bit 6
    ending the connection's writes. The plain-bytes seeds (one connection) are hand-made."""

    def script(*records):
        out = b"\xfd"
        for ctl, data in records:
            out += bytes([ctl]) + struct.pack("<H", len(data)) + data
        return out

    v = f32x4()

    def push(name):
        return control("push", name, len(v), message="ok-count") + v

    a, b = push("a"), push("b")
    write(
        "net",
        "script-interleaved-pushes",
        script(
            (0, a[:50]),
            (1, b[:70]),
            (0, a[50:]),
            (1, b[70:]),
            (2, control("get", "p")),
            (0, push("c")),
            (1, control("get", "missing")),
        ),
    )

    def fd(kind, extra=False):
        return 4 | (kind << 3) | (32 if extra else 0)

    write(
        "net",
        "script-push-fd-short",
        script(
            (fd(0), control("push-fd", "s", 40)),
            (1 | fd(0), control("push-fd", "t", len(v))),
            (2 | fd(0), control("push-fd", "u", len(v) + 64)),
        ),
    )
    write(
        "net",
        "script-push-fd-kinds",
        script(
            (fd(1), control("push-fd", "m", 64)),
            (1 | fd(2), control("push-fd", "pipe", 80)),
            (2 | fd(3), control("push-fd", "dir", 80)),
            (3 | fd(0), control("push-fd", "off", 16, offset=64)),
        ),
    )
    write(
        "net",
        "script-descriptors-without-frames",
        script(
            (fd(0, True), b"T"),
            (1 | fd(1, True), b"TN"),
            (2 | fd(2), control("get", "p")),
            (3 | fd(0, True), b""),
            (0 | fd(0, True), b"SO"),
        ),
    )
    write("net", "script-end-mid-frame", script((64, a[:30]), (1, a), (1 | 64, control("get", "p")), (2 | 64, b"")))


def decoder_seeds():
    # The stream's layout (options byte, piece seed, stream): its seeds serve the decoder too.
    src = os.path.join(CORPUS, "stream")
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name), "rb") as f:
            write("decoder", name, f.read())


def main():
    loads_seeds()
    stream_seeds()
    decoder_seeds()
    roundtrip_seeds()
    mutate_seeds()
    net_seeds()
    total = 0
    for root, _, files in os.walk(CORPUS):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("corpus: %d bytes" % total)
    if total > 2 * 1024 * 1024:
        sys.exit("corpus over 2 MB")


if __name__ == "__main__":
    main()
