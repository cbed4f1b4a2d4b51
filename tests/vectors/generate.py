#!/usr/bin/env python3
"""Generate the golden Tenso vectors with the REAL pinned upstream package.

    PY=$(bash tests/upstream/venv.sh | tail -n1)
    "$PY" tests/vectors/generate.py

Writes tests/vectors/<name>.tenso and tests/vectors/manifest.json (see
README.md for the schema). Nearly every packet comes from upstream
`tenso.dumps` / `StringTensor.dumps` / `RaggedArray.dumps`. A few are built
here with struct (`"producer": "handmade"`): the legacy v1-v3 packets (upstream
only writes v4), the GPU IPC reference (no Python writer upstream) and two
packets whose LZ4 frames come from liblz4 instead of upstream's lz4_flex.

Before anything is written, every packet is decoded again with upstream and
compared with its manifest VALUE through tests/upstream/decode_ours.py, the
same checker that later judges our own library's packets. Output is
deterministic: a re-run reproduces every file byte for byte.
"""

import importlib.util
import json
import platform
import struct
import sys
from importlib.metadata import version as dist_version
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _load_checker():
    spec = importlib.util.spec_from_file_location("decode_ours", REPO / "tests" / "upstream" / "decode_ours.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()  # also exits with a clear message if tenso is missing
checker.require_upstream_version()

import lz4.frame  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import xxhash  # noqa: E402

import tenso  # noqa: E402
from tenso import QuantizedTensor, RaggedArray, StringTensor  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
DEFAULT_OPTIONS = {"alignment": 64, "check_integrity": False, "compress": False}

# Sizes the reference doc (§1.7, §2, §6) states for the upstream fixtures.
# A disagreement is reported (the package wins) but does not stop generation.
REFERENCE_SIZES = {
    "dense_f32_vec": 84,
    "dense_f64_mat": 160,
    "dense_i32_integrity": 104,
    "dense_u8_3d_zeros": 128,
    "dense_bf16_vec": 72,
    "dense_f32_scalar": 68,
    "bundle_mixed": 188,
    "string_mixed_utf8": 113,
    "quantized_qint8_per_tensor": 80,
    "sparse_coo_f32": 270,
    "gpu_ipc_ref": 106,
}


# --- VALUE descriptions (manifest schema, see README.md) ---


def _hex(arr) -> str:
    # Every host we target is little-endian; upstream refuses non-native order.
    return np.ascontiguousarray(arr).tobytes().hex()


def describe(obj):
    """Describe an input object as a manifest VALUE."""
    if isinstance(obj, np.ndarray):
        return {"kind": "dense", "dtype": obj.dtype.name, "shape": list(obj.shape), "body_hex": _hex(obj)}
    if isinstance(obj, dict):
        return {"kind": "bundle", "entries": [{"key": k, "value": describe(v)} for k, v in obj.items()]}
    if isinstance(obj, QuantizedTensor):
        raise TypeError("quantized VALUEs come from quantize(), which knows the float input")
    if isinstance(obj, StringTensor):
        return {"kind": "string", "strings": obj.to_list(), "shape": list(obj.shape)}
    if sp.issparse(obj):
        kind = {"coo": "sparse_coo", "csr": "sparse_csr", "csc": "sparse_csc"}[obj.format]
        attrs = checker.SPARSE_COMPONENTS[kind][1]
        return {
            "kind": kind,
            "shape": list(obj.shape),
            "components": [describe(np.asarray(getattr(obj, a))) for a in attrs],
        }
    raise TypeError(f"cannot describe {type(obj).__name__}")


def quantize(x: np.ndarray, dtype: str, scheme: str = "per_tensor", group_size: int = 0, axis: int = 0):
    """Quantize with upstream and return (QuantizedTensor, VALUE)."""
    q = QuantizedTensor.quantize(x, dtype, scheme, group_size=group_size, axis=axis)
    value = {
        "kind": "quantized",
        "dtype": q.dtype_name,
        "scheme": checker.QUANT_SCHEMES[q.quant_scheme],
        "axis": q.axis,
        "group_size": q.group_size,
        "shape": list(q.shape),
        "scales_hex": _hex(q.scales.astype("<f4")),
        "zero_points_hex": _hex(q.zero_points.astype("<f4")),
        "body_hex": _hex(np.asarray(q.data, dtype=np.uint8)),
        "input_dtype": "float32",
        "input_hex": _hex(x.astype("<f4")),
        "dequant_hex": _hex(q.dequantize().astype("<f4")),
    }
    return q, value


def describe_with_quantized(obj, qvalues):
    """describe() for bundles holding QuantizedTensors (values looked up by id)."""
    if isinstance(obj, QuantizedTensor):
        return qvalues[id(obj)]
    if isinstance(obj, dict):
        return {
            "kind": "bundle",
            "entries": [{"key": k, "value": describe_with_quantized(v, qvalues)} for k, v in obj.items()],
        }
    return describe(obj)


# --- Case collection ---

CASES = []  # (case dict, packet bytes)


def add(name, pkt, value, options=None, producer="upstream", note=None):
    pkt = bytes(pkt)
    case = {
        "name": name,
        "file": f"{name}.tenso",
        "producer": producer,
        "size": len(pkt),
        "version": pkt[4],
        "compressed": checker.packet_is_compressed(pkt),
        "options": {**DEFAULT_OPTIONS, **(options or {})},
        # Observed, not assumed: does upstream `loads` decode the packet whole?
        "upstream_reads": checker.loads_error(pkt) is None,
        "value": value,
    }
    if note:
        case["note"] = note
    assert all(c["name"] != name for c, _ in CASES), name
    CASES.append((case, pkt))


def up(name, obj, value=None, note=None, **options):
    """A case produced by upstream `tenso.dumps(obj, **options)`."""
    add(name, tenso.dumps(obj, **options), value or describe(obj), options, note=note)


def observe(fn) -> str:
    """Record what upstream does: 'ok: ...' or the exception it raises."""
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the exception is the observation
        return f"raises {type(exc).__name__}: {exc}"
    if isinstance(result, (bytes, memoryview)):
        return f"ok: {len(bytes(result))}-byte packet"
    return f"ok: {type(result).__name__}"


# --- Dense ---


def value_pattern(dtype) -> np.ndarray:
    """A small non-trivial (2, 3) pattern per dtype, including each int type's extremes."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([[True, False, True], [False, False, True]])
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return np.array([[info.min, -1, 0], [1, 42, info.max]], dtype=dtype)
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        return np.array([[0, 1, 2], [42, info.max - 1, info.max]], dtype=dtype)
    if dtype.kind == "c":
        return np.array([[1 + 2j, -0.5 + 0j, 0 - 3.25j], [1e3 + 1e-3j, -0.0 - 0.0j, 7.5 + 8.125j]], dtype=dtype)
    # float16 / bfloat16 / float32 / float64: values exact in every one of them
    return np.array([[-1.5, -0.0, 0.25], [1.0, 3.75, 100.5]], dtype=dtype)


DENSE_DTYPES = [
    ("bool", np.bool_),
    ("int8", np.int8),
    ("int16", np.int16),
    ("int32", np.int32),
    ("int64", np.int64),
    ("uint8", np.uint8),
    ("uint16", np.uint16),
    ("uint32", np.uint32),
    ("uint64", np.uint64),
    ("float16", np.float16),
    ("bfloat16", BF16),
    ("float32", np.float32),
    ("float64", np.float64),
    ("complex64", np.complex64),
    ("complex128", np.complex128),
]


def dense_cases():
    for name, dtype in DENSE_DTYPES:
        up(f"dense_{name}_2x3", value_pattern(dtype))
    # The reference fixtures (§6), under the same names as upstream's tests/fixtures.
    up("dense_f32_vec", np.arange(1, 6, dtype=np.float32))
    up("dense_f64_mat", np.arange(12, dtype=np.float64).reshape(3, 4))
    up("dense_u8_3d_zeros", np.zeros((4, 4, 4), dtype=np.uint8))
    up("dense_bf16_vec", np.array([1.0, -1.5, 0.25, 3.75], dtype=BF16))
    # ndim 0: empty shape block, one element (a numpy scalar itself is refused).
    up("dense_f32_scalar", np.array(3.5, dtype=np.float32))
    up("dense_i64_scalar", np.array(-42, dtype=np.int64))
    # Zero-size dimensions: empty body, header still padded.
    up("dense_f32_empty_0", np.zeros((0,), dtype=np.float32))
    up("dense_f64_empty_2x0x3", np.zeros((2, 0, 3), dtype=np.float64))
    up("dense_f32_ndim32", np.ones((1,) * 32, dtype=np.float32))
    # A dimension above 65535 (stored as u32); bytes 0..250 repeating.
    up("dense_u8_70000", (np.arange(70000) % 251).astype(np.uint8))


def alignment_cases():
    x = np.arange(1, 6, dtype=np.float32)
    for alignment in (1, 8, 16, 128, 4096):
        # Any alignment other than 64 sets CUST_ALIGN and writes log2(A) after the shape.
        up(f"align_f32_{alignment}", x, alignment=alignment)


def integrity_cases():
    up("dense_i32_integrity", np.arange(8, dtype=np.int32), check_integrity=True)
    up(
        "integrity_f64_align128",
        np.array([[0.5, -2.0, 3.25], [1e-3, 6.0, -7.5]], dtype=np.float64),
        check_integrity=True,
        alignment=128,
    )
    up("integrity_f32_scalar", np.array(-0.75, dtype=np.float32), check_integrity=True)


def compressed_cases():
    tile = np.tile(np.arange(64, dtype=np.float64), 16)
    up("dense_f64_compressed", tile, compress=True, check_integrity=True)
    up("compressed_f64_tile", tile, compress=True)
    up("compressed_f32_zeros1024", np.zeros(1024, dtype=np.float32), compress=True)
    # Random data does not compress: the frame holds an uncompressed block.
    noise = np.random.default_rng(0x7E550).standard_normal(256).astype(np.float32)
    up("compressed_f32_random256", noise, compress=True)
    up("compressed_f64_align128", tile[:256], compress=True, alignment=128)

    # A zero-size body still gets a frame: header and end mark, no block.
    up("compressed_f32_empty_0", np.zeros((0,), dtype=np.float32), compress=True)

    # Upstream writes lz4_flex frames, but any valid frame must decode (a C++
    # writer using liblz4 makes different ones). These frames are liblz4's via
    # python-lz4 with every optional field on; the header and the integrity rule
    # (XXH3 over the compressed bytes) are upstream's. liblz4 only links blocks
    # when there are several, hence the second, 70000-byte case (two 64 KB blocks).
    ramp = (np.arange(70000) % 251).astype(np.uint8)
    for name, x in (("compressed_f64_liblz4_frame", tile), ("compressed_u8_70000_liblz4_linked", ramp)):
        frame = lz4.frame.compress(
            x.tobytes(),
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=True,
            block_checksum=True,
            content_checksum=True,
            store_size=True,
        )
        head = bytes(tenso.dumps(x, compress=True, check_integrity=True))[:64]
        facts = lz4_frame_facts(frame)
        add(
            name,
            head + frame + struct.pack("<Q", xxhash.xxh3_64_intdigest(frame)),
            describe(x),
            {"compress": True, "check_integrity": True},
            producer="handmade",
            note=f"liblz4 frame, FLG {facts['flg_hex']} BD {facts['bd_hex']}: content size, block and "
            f"content checksums, {'independent' if facts['block_independence'] else 'linked'} blocks",
        )


# --- Composite kinds ---


def coo_fixture():
    """The §6 sparse fixture: 3x3 COO, f32 data, i32 row/col."""
    return sp.coo_matrix(
        (
            np.array([1, 2, 3, 4], dtype=np.float32),
            (np.array([0, 0, 1, 2], dtype=np.int32), np.array([0, 2, 1, 0], dtype=np.int32)),
        ),
        shape=(3, 3),
    )


def sparse_cases():
    coo = coo_fixture()
    up("sparse_coo_f32", coo)
    up("sparse_csr_f32", coo.tocsr())
    up("sparse_csc_f32", coo.tocsc())
    # scipy's *_matrix classes narrow small index arrays to int32; the *_array
    # classes keep int64, which upstream writes as-is.
    data = np.array([1.5, -2.25, 3.0, 4.125], dtype=np.float64)
    rows, cols = np.array([0, 1, 2, 3], dtype=np.int64), np.array([3, 0, 2, 1], dtype=np.int64)
    coo64 = sp.coo_array((data, (rows, cols)), shape=(4, 5))
    assert coo64.row.dtype == np.int64
    up("sparse_coo_f64_i64", coo64)
    csr64 = sp.csr_array(coo64)
    csr64.indices = csr64.indices.astype(np.int64)
    csr64.indptr = csr64.indptr.astype(np.int64)
    up("sparse_csr_f64_i64", csr64)
    up("sparse_csr_empty", sp.csr_matrix((3, 4), dtype=np.float32))
    # Sparse components are always written 64-aligned, without footer or LZ4,
    # whatever the caller asks: these bytes equal sparse_coo_f32's.
    up(
        "sparse_coo_options_ignored",
        coo,
        note="alignment/integrity/compress are ignored for sparse; bytes equal sparse_coo_f32",
        alignment=128,
        check_integrity=True,
        compress=True,
    )


def quantized_cases():
    rng = np.random.default_rng(0x9A17)
    x15 = rng.standard_normal((3, 5)).astype(np.float32)  # odd count: last 4-bit byte half used
    x234 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x25 = rng.standard_normal((5, 5)).astype(np.float32)  # 25 = 7+7+7+4: short last group

    def qcase(name, x, dtype, scheme="per_tensor", group_size=0, axis=0, note=None, **options):
        q, value = quantize(x, dtype, scheme, group_size, axis)
        add(name, tenso.dumps(q, **options), value, options, note=note)
        return q, value

    # §6 fixture: linspace(-2, 2, 16) as (4, 4), qint8 per_tensor.
    qcase("quantized_qint8_per_tensor", np.linspace(-2, 2, 16, dtype=np.float32).reshape(4, 4), "qint8")
    for dtype in ("qint8", "quint8", "qint4", "quint4"):
        qcase(f"quantized_{dtype}_per_tensor_odd", x15, dtype)
        qcase(f"quantized_{dtype}_per_channel_axis1", x234, dtype, "per_channel", axis=1)
        qcase(f"quantized_{dtype}_per_group_short_last", x25, dtype, "per_group", group_size=7)
    qcase("quantized_quint8_per_channel_axis2", x234, "quint8", "per_channel", axis=2)
    qcase("quantized_qint8_per_channel_axis0", x15, "qint8", "per_channel", axis=0)
    qcase("quantized_qint8_integrity", x15, "qint8", check_integrity=True)
    qcase("quantized_qint4_per_group_integrity", x25, "qint4", "per_group", group_size=7, check_integrity=True)
    # The exponent byte follows the quant metadata, not the shape.
    qcase("quantized_qint8_align128", x234, "qint8", "per_channel", axis=1, alignment=128)
    qcase("quantized_quint4_align1", x15, "quint4", alignment=1)
    qcase(
        "quantized_qint8_compress_ignored",
        x15,
        "qint8",
        note="compress is ignored for quantized packets; bytes equal quantized_qint8_per_tensor_odd",
        compress=True,
    )
    # A constant block gets scale 1, zero point 0 (so 0.75 dequantizes to 1.0).
    qcase("quantized_qint8_constant", np.full((2, 2), 0.75, dtype=np.float32), "qint8")
    qcase("quantized_qint8_scalar", np.array(-1.25, dtype=np.float32), "qint8")


def string_cases():
    def scase(name, strings, **options):
        st = StringTensor(strings)
        add(name, st.dumps(**options), describe(st), options)

    scase("string_mixed_utf8", ["hi", "", "world", "ñ"])  # §6 fixture
    scase("string_all_empty", ["", "", ""])
    scase("string_cjk_emoji", ["日本語", "😀🚀", "naïve", "Ω≈ç√", "한국어"])
    scase("string_integrity", ["alpha", "βeta", "", "gamma"], check_integrity=True)
    scase("string_empty_tensor", [])


def ragged_cases():
    def rcase(name, rows, **options):
        ra = RaggedArray(rows)
        pkt = bytes(ra.dumps(**options))
        value = {
            "kind": "ragged",
            "dtype": ra.dtype.name,
            "rows_hex": [_hex(r) for r in ra.to_list()],
            "row_lengths": [len(r) for r in ra.to_list()],
            # Its packet is an ordinary bundle; this is that bundle as upstream decodes it.
            "bundle": describe(tenso.loads(pkt)),
        }
        add(name, pkt, value, options)

    f32 = np.float32
    rcase("ragged_f32", [np.array([1, 2, 3], f32), np.array([], f32), np.array([4, 5], f32)])
    rcase("ragged_empty", [])
    rcase(
        "ragged_i64_integrity",
        [np.array([-1, 2**40], np.int64), np.array([7], np.int64), np.array([0, 0, 0], np.int64)],
        check_integrity=True,
    )


def bundle_cases():
    up("bundle_mixed", {"a": np.array([1, 2], np.float32), "b": np.array([10, 20, 30], np.int64)})
    nested = {
        "top": np.array([True, False, True, True]),
        "l1": {
            "x": np.array([1 + 1j, -2.5j], np.complex64),
            "l2": {
                "y": np.array([-7, 0, 300], np.int16),
                "l3": {"z": np.array([0.5, -65504.0], np.float16), "w": np.array(4000000000, np.uint32)},
            },
        },
    }
    up("bundle_nested3", nested)
    small = {"a": np.array([1.5, 2.5, -3.5], np.float32), "b": np.arange(4, dtype=np.uint8).reshape(2, 2)}
    up("bundle_integrity", small, check_integrity=True)
    up("bundle_align128", small, alignment=128)
    up(
        "bundle_compressed",
        {
            "tile": np.tile(np.arange(64, dtype=np.float64), 4),
            "small": np.array([1, 2, 3], np.int32),
            "nested": {"z": np.zeros(256, np.float32)},
        },
        note="upstream 0.24.0 loads() cannot decode a bundle holding a compressed value; each value decodes on its own",
        compress=True,
    )
    up("bundle_empty", {})
    up("bundle_255", {f"k{i:03d}": np.array([i], np.uint8) for i in range(255)})
    up(
        "bundle_utf8_keys",
        {
            "ключ": np.array([1, 2], np.float32),
            "ñ": np.array([-1, 0, 1], np.int8),
            "日本語": np.array([65535], np.uint16),
            "😀": np.array([True, False]),
        },
    )
    up("bundle_empty_key", {"": np.array([9.0], np.float32)})

    # Quantized and sparse values inside bundles.
    rng = np.random.default_rng(0xB0D1E)
    q4, q4_value = quantize(rng.standard_normal((3, 4)).astype(np.float32), "qint4", "per_channel", axis=1)
    q8, q8_value = quantize(rng.standard_normal((2, 5)).astype(np.float32), "qint8", "per_group", group_size=3)
    qvalues = {id(q4): q4_value, id(q8): q8_value}
    mixed = {"dense": np.array([0.25, -4.0], np.float32), "q": q4, "coo": coo_fixture(), "csr": coo_fixture().tocsr()}
    add("bundle_quantized_sparse", tenso.dumps(mixed), describe_with_quantized(mixed, qvalues))
    opts = {"alignment": 128, "check_integrity": True}
    qbundle = {"q": q8, "v": np.array([1, 2, 3], np.float32), "inner": {"q4": q4}}
    add(
        "bundle_quantized_align128_integrity",
        tenso.dumps(qbundle, **opts),
        describe_with_quantized(qbundle, qvalues),
        opts,
    )
    up("bundle_sparse", {"csc": coo_fixture().tocsc(), "x": np.array([5, -6], np.int64)})


# --- Hand-made packets ---

DTYPE_FLOAT32 = 1  # §1.4


def legacy_packet(version, flags, arr, alignment, exponent=None, integrity=False):
    """A v1/v2/v3 dense packet: 8-byte header (flags u8), shape, [exponent],
    zero padding to `alignment` from the packet start, body, [XXH3 footer]."""
    head = b"TNSO" + bytes([version, flags, DTYPE_FLOAT32, arr.ndim])
    head += struct.pack(f"<{arr.ndim}I", *arr.shape)
    if exponent is not None:
        head += bytes([exponent])
    head += b"\0" * ((-len(head)) % alignment)
    body = arr.astype("<f4").tobytes()
    footer = struct.pack("<Q", xxhash.xxh3_64_intdigest(body)) if integrity else b""
    return head + body + footer


def legacy_cases():
    x = np.array([1, 2, 3], np.float32)
    value = describe(x)
    for name, pkt, options in (
        ("legacy_v3_f32", legacy_packet(3, 0x01, x, 64), {}),
        ("legacy_v2_f32", legacy_packet(2, 0x01, x, 64), {}),
        ("legacy_v1_f32", legacy_packet(1, 0x00, x, 1), {"alignment": 1}),
        ("legacy_v3_unaligned", legacy_packet(3, 0x00, x, 1), {"alignment": 1}),
        ("legacy_v3_custalign16", legacy_packet(3, 0x80, x, 16, exponent=4), {"alignment": 16}),
        ("legacy_v3_integrity", legacy_packet(3, 0x03, x, 64, integrity=True), {"check_integrity": True}),
    ):
        add(name, pkt, value, options, producer="handmade")


def ipc_ref_cases():
    handle = bytes(range(64))
    offset, nbytes, uuid = 4096, 1 << 20, b"GPU-0000000000000"[:16]
    # v4 header: flags = GPU_IPC_REF only, dtype 0, ndim 0, reserved byte 1 (discriminator).
    pkt = b"TNSO" + bytes([4]) + struct.pack("<H", 0x0400) + bytes([0, 0, 1])
    pkt += handle + struct.pack("<QQ", offset, nbytes) + uuid
    value = {
        "kind": "gpu_ipc_ref",
        "handle_hex": handle.hex(),
        "byte_offset": offset,
        "nbytes": nbytes,
        "uuid_hex": uuid.hex(),
    }
    add("gpu_ipc_ref", pkt, value, producer="handmade", note="options do not apply to IPC refs")


# --- Upstream behaviours that produce no packet (or a surprising one) ---


def lz4_frame_facts(frame: bytes):
    """Decode an LZ4 frame's descriptor and count its blocks."""
    flg, bd = frame[4], frame[5]
    has_block_checksum, has_content_size = bool(flg & 0x10), bool(flg & 0x08)
    pos, blocks = 7 + (8 if has_content_size else 0), 0
    while (size := struct.unpack_from("<I", frame, pos)[0]) != 0:  # 0 = end mark
        pos += 4 + (size & 0x7FFFFFFF) + (4 if has_block_checksum else 0)
        blocks += 1
    return {
        "first_16_bytes_hex": frame[:16].hex(),
        "flg_hex": f"{flg:#04x}",
        "bd_hex": f"{bd:#04x}",
        "frame_version": flg >> 6,
        "block_independence": bool(flg & 0x20),
        "block_checksum": has_block_checksum,
        "content_size": has_content_size,
        "content_checksum": bool(flg & 0x04),
        "dict_id": bool(flg & 0x01),
        "block_max_size": {4: "64KB", 5: "256KB", 6: "1MB", 7: "4MB"}.get((bd >> 4) & 7, "?"),
        "blocks": blocks,
    }


def lz4_block_size_choice():
    """lz4_flex picks the frame's block size from the body length (zeros here)."""
    choice = {}
    for n in (65536, 65537, 262144, 262145, 4194305):
        pkt = bytes(tenso.dumps(np.zeros(n, np.uint8), compress=True))
        facts = lz4_frame_facts(pkt[64:])
        choice[f"{n} bytes"] = f"BD {facts['bd_hex']} ({facts['block_max_size']}), {facts['blocks']} block(s)"
    return choice


def packet_of(name: str) -> bytes:
    return next(pkt for case, pkt in CASES if case["name"] == name)


def negative_axis_behaviour():
    """per_channel with axis=-1: what lands in the axis byte, and can upstream read it back?"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pkt = bytes(tenso.dumps(QuantizedTensor.quantize(x, "qint8", "per_channel", axis=-1)))
    axis_offset = 10 + 4 * x.ndim + 1  # header, shape, scheme byte
    return {"axis_byte": pkt[axis_offset], "dequantize": observe(lambda: tenso.loads(pkt).dequantize())}


def upstream_behaviour():
    """Observed upstream reactions worth knowing, recorded in the manifest."""
    st = StringTensor(["a"])
    q = QuantizedTensor.quantize(np.arange(4, dtype=np.float32), "qint8")
    compressed_bundle = bytes(tenso.dumps({"x": np.zeros(4, np.float32)}, compress=True))
    return {
        "dumps_empty_dict": observe(lambda: tenso.dumps({})),
        "dumps_string_tensor": observe(lambda: tenso.dumps(st)),
        "dumps_ragged_array": observe(lambda: tenso.dumps(RaggedArray([np.ones(1)]))),
        "dumps_numpy_scalar": observe(lambda: tenso.dumps(np.float32(1))),
        "bundle_with_string_tensor": observe(lambda: tenso.dumps({"s": st})),
        "bundle_with_string_and_quantized": observe(lambda: tenso.dumps({"s": st, "q": q})),
        "bundle_with_quantized": observe(lambda: tenso.dumps({"q": q})),
        "bundle_with_sparse": observe(lambda: tenso.dumps({"s": coo_fixture()})),
        "bundle_with_256_entries": observe(lambda: tenso.dumps({str(i): np.zeros(1) for i in range(256)})),
        "loads_bundle_with_compressed_value": observe(lambda: tenso.loads(compressed_bundle)),
        "loads_v2": observe(lambda: tenso.loads(packet_of("legacy_v2_f32"))),
        "loads_v1": observe(lambda: tenso.loads(packet_of("legacy_v1_f32"))),
        "loads_gpu_ipc_ref": observe(lambda: tenso.loads(packet_of("gpu_ipc_ref"))),
        "quantized_negative_axis": negative_axis_behaviour(),
        "lz4_frame_of_dense_f64_compressed": lz4_frame_facts(packet_of("dense_f64_compressed")[64:]),
        "lz4_block_size_by_body_length": lz4_block_size_choice(),
    }


# --- Main ---


def check_reference_sizes():
    sizes = {c["name"]: c["size"] for c, _ in CASES}
    for name, expected in REFERENCE_SIZES.items():
        if sizes[name] != expected:
            print(f"generate.py: NOTE {name} is {sizes[name]} bytes, the reference says {expected}", file=sys.stderr)


def check_ignored_options():
    """The notes claim some options are ignored; make sure the bytes agree."""
    for name, same_as in (
        ("sparse_coo_options_ignored", "sparse_coo_f32"),
        ("quantized_qint8_compress_ignored", "quantized_qint8_per_tensor_odd"),
    ):
        if packet_of(name) != packet_of(same_as):
            sys.exit(f"generate.py: {name} was expected to equal {same_as} byte for byte")


def self_check():
    failures = 0
    for case, pkt in CASES:
        try:
            checker.check_case(case, pkt, pkt)
        except checker.Mismatch as exc:
            failures += 1
            print(f"generate.py: self-check FAILED {exc}", file=sys.stderr)
    if failures:
        sys.exit(f"generate.py: {failures} case(s) do not decode to their VALUE; nothing written")


def main():
    dense_cases()
    alignment_cases()
    integrity_cases()
    compressed_cases()
    bundle_cases()
    legacy_cases()
    sparse_cases()
    quantized_cases()
    string_cases()
    ragged_cases()
    ipc_ref_cases()

    self_check()
    check_ignored_options()
    check_reference_sizes()

    manifest = {
        "generator": {
            "tenso": tenso.__version__,
            "numpy": np.__version__,
            "ml_dtypes": dist_version("ml_dtypes"),
            "scipy": dist_version("scipy"),
            "xxhash": dist_version("xxhash"),
            "lz4": dist_version("lz4"),
            "python": ".".join(platform.python_version_tuple()[:2]),
        },
        "upstream_behaviour": upstream_behaviour(),
        "cases": [case for case, _ in CASES],
    }

    # Drop stale vectors from cases that no longer exist, then write.
    names = {case["file"] for case, _ in CASES}
    for old in HERE.glob("*.tenso"):
        if old.name not in names:
            old.unlink()
    for case, pkt in CASES:
        (HERE / case["file"]).write_bytes(pkt)
    text = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    (HERE / "manifest.json").write_text(text, encoding="utf-8")
    print(f"generate.py: wrote {len(CASES)} cases to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
