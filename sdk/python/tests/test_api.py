"""dumps/loads: signatures, return types, options and the exceptions upstream 0.24 raises."""

import inspect
import re

import ml_dtypes
import numpy as np
import pytest

import tenso
from tenso import config, errors


def test_public_names_match_upstream():
    upstream_all = {
        "dumps",
        "loads",
        "dump",
        "load",
        "read_stream",
        "write_stream",
        "aread_stream",
        "read_to_device",
        "get_packet_info",
        "is_aligned",
        "iter_dumps",
        "QuantizedTensor",
        "StringTensor",
        "RaggedArray",
        "TensoShm",
        "TensoCache",
    }
    assert upstream_all <= set(tenso.__all__)
    for name in upstream_all:
        assert hasattr(tenso, name), name
    from tenso.async_core import aread_stream, awrite_stream  # noqa: F401


@pytest.mark.parametrize(
    "func, params",
    [
        (tenso.dumps, ["tensor", "strict", "check_integrity", "compress", "alignment", "threads"]),
        (tenso.loads, ["data", "copy", "align", "max_decoded_bytes", "max_entries", "options", "threads"]),
        (tenso.dump, ["tensor", "fp", "strict", "check_integrity"]),
        (tenso.load, ["fp", "mmap_mode", "copy", "align", "options"]),
        (tenso.iter_dumps, ["tensor", "strict", "check_integrity"]),
        (tenso.write_stream, ["tensor", "dest", "strict", "check_integrity"]),
        (tenso.read_stream, ["source", "options"]),
        (tenso.get_packet_info, ["data"]),
        (tenso.is_aligned, ["data", "alignment"]),
        (tenso.QuantizedTensor.quantize, ["tensor", "dtype", "scheme", "group_size", "axis"]),
    ],
)
def test_signatures(func, params):
    """Upstream's parameter names and order (plus ours last: `align`, the decode limits, threads)."""
    assert list(inspect.signature(func).parameters) == params


def test_dumps_returns_readonly_memoryview_over_bytes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = tenso.dumps(a)
    assert isinstance(p, memoryview)
    assert p.readonly and p.format == "B" and p.contiguous
    assert isinstance(p.obj, bytes)
    assert len(p) == 88 and bytes(p[:4]) == b"TNSO"
    # The packet starts 64-byte aligned, so the body is too and loads() of it is aligned.
    assert tenso.is_aligned(p) and tenso.is_aligned(p[64:])
    out = tenso.loads(p)
    assert out.ctypes.data % 64 == 0


def test_iter_dumps_yields_exact_bytes():
    a = np.arange(5, dtype=np.int64)
    chunks = list(tenso.iter_dumps(a, check_integrity=True))
    assert len(chunks) == 1 and type(chunks[0]) is bytes
    assert chunks[0] == bytes(tenso.dumps(a, check_integrity=True))


@pytest.mark.parametrize(
    "dtype",
    [
        "float32",
        "int32",
        "float64",
        "int64",
        "uint8",
        "uint16",
        "bool",
        "float16",
        "int8",
        "int16",
        "uint32",
        "uint64",
        "complex64",
        "complex128",
        ml_dtypes.bfloat16,
    ],
)
def test_every_dtype_round_trips(dtype):
    dt = np.dtype(dtype)
    a = (np.arange(24) % 2).astype(dt).reshape(2, 3, 4)
    p = tenso.dumps(a)
    assert p[7] == config._DTYPE_MAP[dt]
    b = tenso.loads(p)
    assert b.dtype == dt and b.shape == a.shape and b.tobytes() == a.tobytes()


@pytest.mark.parametrize(
    "dtype",
    ["U3", "S2", "O", "V3", "datetime64[ns]", "timedelta64[s]", np.longdouble, ml_dtypes.float8_e4m3fn, [("a", "i4")]],
)
def test_unsupported_dtype_is_value_error(dtype):
    dt = np.dtype(dtype)
    a = np.zeros(2, dtype=dt)
    with pytest.raises(ValueError, match=re.escape(f"Unsupported dtype: {dt.name}")):
        tenso.dumps(a)


@pytest.mark.parametrize("dtype", [">f4", ">i8", ">c16", ">u2"])
def test_big_endian_is_value_error(dtype):
    a = np.arange(3).astype(dtype)
    with pytest.raises(ValueError, match="big-endian") as e:
        tenso.dumps(a)
    assert isinstance(e.value, tenso.TensoValueError)
    with pytest.raises(ValueError, match="big-endian"):
        tenso.dumps({"x": a})
    # Little-endian explicitly is fine.
    assert tenso.loads(tenso.dumps(a.astype(dtype.replace(">", "<")))).tolist() == [0, 1, 2]


@pytest.mark.parametrize("bad", [0, -64, 3, 48, 100])
def test_alignment_must_be_power_of_two(bad):
    with pytest.raises(ValueError, match="Alignment must be a power of two"):
        tenso.dumps(np.zeros(3), alignment=bad)
    with pytest.raises(ValueError, match="Alignment must be a power of two"):
        tenso.dumps({"a": np.zeros(3)}, alignment=bad)


def test_alignment_is_honoured():
    a = np.arange(5, dtype=np.float32)
    for align in (1, 2, 8, 16, 128, 4096, 1 << 20):
        p = tenso.dumps(a, alignment=align)
        info = tenso.get_packet_info(p)
        body_offset = tenso._tenso.inspect(p)["body_offset"]
        assert body_offset % align == 0
        assert len(p) == body_offset + a.nbytes
        assert info["aligned"] is (align == 64)
        assert tenso.loads(p).tolist() == a.tolist()


def test_non_contiguous_copied_or_refused_with_strict():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    for view in (a.T, a[:, ::2], a[::-1], np.asfortranarray(a)):
        assert np.array_equal(tenso.loads(tenso.dumps(view)), view)
        with pytest.raises(ValueError, match="Tensor is not C-Contiguous"):
            tenso.dumps(view, strict=True)
        with pytest.raises(ValueError, match="Tensor is not C-Contiguous"):
            tenso.dumps({"v": view}, strict=True)
        assert np.array_equal(tenso.loads(tenso.dumps({"v": view}))["v"], view)


def test_type_errors_like_upstream():
    for obj in (np.float32(1), [1, 2], 3, "text", None, b"bytes", object()):
        with pytest.raises(TypeError, match="Cannot serialize object of type"):
            tenso.dumps(obj)
    with pytest.raises(TypeError, match=r"Cannot serialize object of type 'float32'"):
        tenso.dumps(np.float32(1))
    with pytest.raises(TypeError):
        tenso.dumps({1: np.zeros(1)})  # keys must be str
    with pytest.raises(TypeError):
        tenso.dumps({"a": [1]})  # upstream: AttributeError; ours: TypeError


def test_limits():
    with pytest.raises(ValueError, match="exceeds the wire-format limit of 4294967295"):
        tenso.dumps(np.broadcast_to(np.zeros(1, np.uint8), (1 << 32,)))
    with pytest.raises(ValueError, match=r"Packet exceeds maximum elements \(1000000001 > 1000000000\)"):
        tenso.dumps(np.broadcast_to(np.zeros(1, np.uint8), (1000000001,)))
    # ndim: 32 works (golden dense_f32_ndim32), 33 does not.
    with pytest.raises(ValueError, match="maximum dimensions"):
        tenso.dumps(np.zeros((1,) * 33, np.float32))
    with pytest.raises(ValueError, match="at most 255"):
        tenso.dumps({str(i): np.zeros(1) for i in range(256)})
    assert len(tenso.loads(tenso.dumps({str(i): np.zeros(1) for i in range(255)}))) == 255
    deep = np.zeros(1)
    for _ in range(64):
        deep = {"d": deep}
    tenso.loads(tenso.dumps(deep))  # 64 levels of bundles: fine
    with pytest.raises(tenso.TensoLimitError):
        tenso.dumps({"d": deep})


def test_decode_memory_and_entry_limits():
    packet = tenso.dumps({str(i): np.zeros(1, np.uint8) for i in range(10)})
    assert len(tenso.loads(packet, max_entries=11)) == 10  # the bundle and its 10 values
    with pytest.raises(tenso.TensoLimitError, match="max_entries"):
        tenso.loads(packet, max_entries=10)
    zeros = tenso.dumps(np.zeros(1 << 18, np.float32), compress=True)  # 1 MiB, a few KiB on the wire
    assert tenso.loads(zeros, max_decoded_bytes=2 << 20).nbytes == 1 << 20
    with pytest.raises(tenso.TensoLimitError, match="max_decoded_bytes"):
        tenso.loads(zeros, max_decoded_bytes=1 << 20)


def test_empty_scalar_and_zero_dims():
    for a in (np.zeros(0, np.float32), np.zeros((2, 0, 3)), np.full((), 2.5), np.zeros((), np.bool_)):
        b = tenso.loads(tenso.dumps(a))
        assert b.shape == a.shape and b.dtype == a.dtype and b.tobytes() == a.tobytes()


def test_bundles_nested_and_ordered():
    value = {
        "z": np.arange(3),
        "é🙂": {
            "inner": np.ones((2, 2), np.float16),
            "": np.zeros(1, np.uint8),
            "deeper": {"x": np.int8(5) + np.zeros(1, np.int8)},
        },
        "a": np.array([True, False]),
    }
    out = tenso.loads(tenso.dumps(value, check_integrity=True, alignment=16))
    assert list(out) == ["z", "é🙂", "a"]
    assert list(out["é🙂"]) == ["inner", "", "deeper"]
    assert np.array_equal(out["é🙂"]["deeper"]["x"], [5])
    assert tenso.loads(tenso.dumps({})) == {}


def test_compressed_round_trip_and_sizes():
    a = np.zeros(100_000, np.float64)
    p = tenso.dumps(a, compress=True)
    assert len(p) < 4000  # LZ4 tops out near 255:1
    info = tenso.get_packet_info(p)
    assert info["flags"] & config.FLAG_COMPRESSION
    b = tenso.loads(p)
    assert np.array_equal(a, b) and not b.flags.writeable
    assert b.base.owns_data  # decompressed into memory the packet owns
    q = tenso.dumps({"a": a, "b": np.arange(10)}, compress=True, check_integrity=True)
    out = tenso.loads(q)
    assert np.array_equal(out["a"], a) and np.array_equal(out["b"], np.arange(10))


def test_threads_do_not_change_the_bytes():
    # 9 MiB + 4: three 4 MiB LZ4 blocks (the middle one random, stored raw), in an array and in a
    # bundle with footers; every thread count writes the same packet and decodes the same values.
    rng = np.random.default_rng(11)
    n = (9 << 20) + 4
    a = (np.arange(n, dtype=np.uint64) * 7 % 251).astype(np.uint8)
    a[4 << 20 : 8 << 20] = rng.integers(0, 256, 4 << 20, dtype=np.uint8)
    for value in (a, {"a": a, "b": np.arange(300, dtype=np.float32), "a2": a}):
        one = bytes(tenso.dumps(value, compress=True, check_integrity=True, threads=1))
        for threads in (0, 2, 4):
            assert bytes(tenso.dumps(value, compress=True, check_integrity=True, threads=threads)) == one
        for threads in (1, 0):
            for out in (
                tenso.loads(one, threads=threads),
                tenso.loads(one, options=tenso.DecodeOptions(threads=threads)),
            ):
                got = out if isinstance(value, np.ndarray) else out["a2"]
                assert np.array_equal(got, a)
    with pytest.raises(ValueError):
        tenso.dumps(a, threads=-1)
    with pytest.raises(ValueError):
        tenso.DecodeOptions(threads=1 << 32)


def test_max_inflation_bounds_lz4_bodies_by_the_packet():
    # 16 MiB of zeros pack to ~64 KiB, which max_inflation counts as 4 MiB: refused at 3 x by
    # libtenso before it inflates anything, allowed at 4 x; plain loads (0) has no such bound.
    packet = bytes(tenso.dumps(np.zeros(16 << 20, np.uint8), compress=True))
    assert tenso.loads(packet, options=tenso.DecodeOptions(max_inflation=4)).size == 16 << 20
    with pytest.raises(tenso.TensoLimitError, match="max_inflation"):
        tenso.loads(packet, options=tenso.DecodeOptions(max_inflation=3))
    assert tenso.loads(packet).size == 16 << 20
    with pytest.raises(ValueError):
        tenso.DecodeOptions(max_inflation=1 << 32)


def test_checksum_error():
    a = np.arange(100, dtype=np.int32)
    p = bytearray(tenso.dumps(a, check_integrity=True))
    p[100] ^= 0x01
    with pytest.raises(ValueError) as e:
        tenso.loads(bytes(p))
    assert isinstance(e.value, tenso.TensoChecksumError)
    assert e.value.status == errors.TENSO_E_CHECKSUM


def test_error_classes_are_builtins_too():
    assert issubclass(errors.TensoTruncatedError, ValueError)
    assert issubclass(errors.TensoTruncatedError, EOFError)
    assert issubclass(errors.TensoChecksumError, ValueError)
    assert issubclass(errors.TensoEOFError, EOFError)
    assert issubclass(errors.TensoIOError, OSError)
    assert issubclass(errors.TensoTypeError, TypeError)
    for status, cls in errors._BY_STATUS.items():
        assert issubclass(cls, errors.TensoError)
        assert tenso._tenso.status_name(status).startswith("TENSO_E_")


def test_loads_input_types():
    a = np.arange(10, dtype=np.float32)
    p = bytes(tenso.dumps(a))
    for data in (p, bytearray(p), memoryview(p), np.frombuffer(p, np.uint8), memoryview(bytearray(p))):
        assert np.array_equal(tenso.loads(data), a)
    with pytest.raises(TypeError):
        tenso.loads("not bytes")
    with pytest.raises(TypeError):
        tenso.loads(None)
    # Trailing bytes after the packet are ignored.
    assert np.array_equal(tenso.loads(p + b"junk"), a)


def test_loads_copy_is_writeable_and_independent():
    a = np.arange(10, dtype=np.float32)
    p = bytearray(tenso.dumps(a))
    b = tenso.loads(p, copy=True)
    assert b.flags.writeable and b.flags.owndata is False  # aligned slice of its own buffer
    assert b.ctypes.data % 64 == 0
    b[0] = 42
    assert tenso.loads(p)[0] == 0
    assert not np.shares_memory(b, np.frombuffer(p, np.uint8))


def test_packet_info_matches_upstream_shape():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert tenso.get_packet_info(tenso.dumps(a)) == {
        "version": 4,
        "flags": 1,
        "dtype_code": 1,
        "ndim": 2,
        "aligned": True,
        "integrity_protected": False,
        "total_elements": 6,
        "shape": (2, 3),
        "dtype": np.dtype("float32"),
        "data_size_bytes": 24,
    }
    with pytest.raises(ValueError):
        tenso.get_packet_info(b"TNSO")
    with pytest.raises(ValueError):
        tenso.get_packet_info(b"XXXXXXXXXXXXXXXX")


def test_is_aligned():
    buf = np.zeros(256, np.uint8)
    base = (-buf.ctypes.data) % 64
    assert tenso.is_aligned(buf[base:])
    assert not tenso.is_aligned(buf[base + 1 :])
    assert tenso.is_aligned(buf[base + 8 :], 8)
    assert tenso.is_aligned(b"")


def test_config_matches_library():
    assert config._VERSION == tenso._tenso.protocol_version == 4
    for dt, code in config._DTYPE_MAP.items():
        assert tenso._tenso.dtype_code(dt) == code
        assert tenso._tenso.numpy_dtype(code) == dt
        assert tenso._tenso.dtype_name(code) == dt.name
    for code, name in config._QDTYPE_NAMES.items():
        assert tenso._tenso.dtype_name(code) == name


def test_dlpack_producers_are_accepted():
    """Objects with __dlpack__ (torch, jax, our TensorView) encode without a copy."""
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    tv = tenso.view(tenso.dumps(a))
    assert bytes(tenso.dumps(tv)) == bytes(tenso.dumps(a))
