"""Issue 17's behaviour differences from upstream 0.24, each pinned: aligned arrays from
misaligned buffers, upstream's error words, tiny TensoCache pools, and upstream's module
attributes (tenso.cache, config.bfloat16, shm.HAS_SHM, core.HAS_LZ4 / HAS_RUST /
IS_LITTLE_ENDIAN, utils.get_packet_info_rs)."""

import io
import os
import secrets
import struct
import sys
from multiprocessing import shared_memory

import numpy as np
import pytest

import tenso
import tenso.cache
import tenso.config
import tenso.core
import tenso.shm
import tenso.utils
from conftest import UpstreamError


def placed(packet, offset, base_align=8192):
    """The packet's bytes at `offset` past a `base_align` boundary (a numpy uint8 view)."""
    raw = np.zeros(len(packet) + base_align + offset, np.uint8)
    start = (-raw.ctypes.data) % base_align + offset
    raw[start : start + len(packet)] = np.frombuffer(bytes(packet), np.uint8)
    return raw[start : start + len(packet)]


# ---- loads of misaligned buffers ------------------------------------------------------------


def test_misaligned_buffer_gives_an_aligned_copy_by_default():
    a = np.arange(100, dtype=np.float64)
    packet = bytes(tenso.dumps(a))
    buf = memoryview(b"\0" + packet)[1:]  # the example: one byte off
    got = tenso.loads(buf)
    np.testing.assert_array_equal(got, a)
    assert got.ctypes.data % 64 == 0
    assert not got.flags.writeable  # a read-only copy, as upstream's
    assert not isinstance(got.base, tenso.Packet)


def test_misaligned_view_for_callers_who_ask():
    a = np.arange(100, dtype=np.float64)
    buf = placed(tenso.dumps(a), 1)
    got = tenso.loads(buf, align=False)
    np.testing.assert_array_equal(got, a)
    assert isinstance(got.base, tenso.Packet)  # zero-copy
    assert got.ctypes.data == buf.ctypes.data + 64
    assert got.ctypes.data % 64 == 1


def test_aligned_buffer_is_never_copied():
    a = np.arange(100, dtype=np.float32)
    buf = placed(tenso.dumps(a), 0)
    got = tenso.loads(buf)
    assert isinstance(got.base, tenso.Packet)
    assert got.ctypes.data == buf.ctypes.data + 64


@pytest.mark.parametrize("alignment", [128, 4096])
def test_custom_alignments(alignment):
    a = np.arange(1000, dtype=np.int32)
    packet = bytes(tenso.dumps(a, alignment=alignment))
    # 64-byte aligned, but not to the packet's own alignment: copied to meet it.
    got = tenso.loads(placed(packet, 64))
    np.testing.assert_array_equal(got, a)
    assert got.ctypes.data % alignment == 0
    # At an `alignment` boundary: zero-copy.
    buf = placed(packet, 0)
    view = tenso.loads(buf)
    assert isinstance(view.base, tenso.Packet) and view.ctypes.data % alignment == 0
    assert tenso.loads(placed(packet, 64), align=False).ctypes.data % alignment == 64


def test_bundle_members():
    d = {"a": np.arange(10, dtype=np.float32), "b": np.ones((3, 7), dtype=np.int16), "c": np.zeros(0)}
    got = tenso.loads(memoryview(b"\0" + bytes(tenso.dumps(d)))[1:])
    for k in ("a", "b"):
        np.testing.assert_array_equal(got[k], d[k])
        assert got[k].ctypes.data % 64 == 0
    assert got["c"].shape == (0,)
    # A bundle's members sit where its layout puts them, rarely on a 64-byte boundary: by
    # default they are copied to meet it (as upstream); align=False keeps them zero-copy.
    buf = placed(tenso.dumps(d), 0)
    kept = tenso.loads(buf, align=False)
    assert isinstance(kept["a"].base, tenso.Packet) and np.shares_memory(kept["a"], buf)


def test_load_of_a_file_aligns_too(tmp_path):
    a = np.arange(10, dtype=np.float32)
    with open(tmp_path / "x.tnso", "wb") as f:
        tenso.dump(a, f)
    with open(tmp_path / "x.tnso", "rb") as f:
        got = tenso.load(f)
    assert got.ctypes.data % 64 == 0
    np.testing.assert_array_equal(got, a)


# ---- upstream's error words -----------------------------------------------------------------


def _packets():
    p = bytes(tenso.dumps(np.arange(10, dtype=np.float32)))
    footer = bytearray(tenso.dumps(np.arange(10, dtype=np.float32), check_integrity=True))
    footer[-9] ^= 1
    dims = bytearray(p)
    dims[8] = 40
    elements = bytearray(tenso.dumps(np.zeros((1, 1), np.uint8)))
    struct.pack_into("<II", elements, 10, 100000, 100000)
    return p, bytes(footer), bytes(dims), bytes(elements)


@pytest.mark.parametrize(
    "case,cls,words",
    [
        ("checksum", tenso.TensoChecksumError, "Integrity check failed: "),
        ("short", tenso.TensoTruncatedError, "Packet too short: "),
        ("magic", tenso.TensoCorruptError, "Invalid tenso packet: "),
        ("dims", tenso.TensoLimitError, "Packet exceeds maximum dimensions: "),
        ("elements", tenso.TensoLimitError, "Packet exceeds maximum elements: "),
    ],
)
def test_loads_errors_in_upstream_words(case, cls, words):
    p, footer, dims, elements = _packets()
    data = {"checksum": footer, "short": p[:5], "magic": b"XXXX" + p[4:], "dims": dims, "elements": elements}[case]
    with pytest.raises(cls) as e:
        tenso.loads(data)
    assert str(e.value).startswith(words)
    assert len(str(e.value)) > len(words) + 5  # our detail follows
    assert isinstance(e.value, ValueError)
    if case != "short":  # get_packet_info reads only the header
        return
    with pytest.raises(tenso.TensoTruncatedError, match="^Packet too short: "):
        tenso.get_packet_info(data)


def _pipe_fd(data):
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r


@pytest.mark.parametrize("path", ["python", "descriptor"])
def test_stream_errors_in_upstream_words(path):
    p, footer, dims, elements = _packets()

    def read(data):
        if path == "python":
            return tenso.read_stream(io.BytesIO(data))
        fd = _pipe_fd(data)
        try:
            return tenso.read_stream(fd)
        finally:
            os.close(fd)

    cases = [
        (p[:3], tenso.TensoTruncatedError, "Stream ended during header read. Expected 8 bytes, got 3"),
        (p[:9], tenso.TensoTruncatedError, "Stream ended during v4 header read"),
        # float32[10]: the body read expects 40 bytes; 70 - 64 of them came.
        (p[:70], tenso.TensoTruncatedError, "Stream ended during body read. Expected 40 bytes, got 6 ("),
        (footer[:100], tenso.TensoTruncatedError, "Stream ended during body read. Expected 48 bytes, got 36 ("),
        (footer, tenso.TensoChecksumError, "Integrity check failed: "),
        (b"XXXX" + p[4:], tenso.TensoCorruptError, "Invalid tenso packet: "),
        (dims, tenso.TensoLimitError, "Packet exceeds maximum dimensions: "),
        (elements, tenso.TensoLimitError, "Packet exceeds maximum elements: "),
    ]
    for data, cls, words in cases:
        with pytest.raises(cls) as e:
            read(data)
        assert str(e.value).startswith(words), (words, str(e.value))
    with pytest.raises(EOFError):
        read(p[:70])


@pytest.mark.upstream
def test_stream_truncation_words_match_upstream(upstream):
    """Every cut of a few dense packets: where upstream counts bytes (the fixed header, the body
    and footer), our message starts with exactly its message."""
    packets = [
        tenso.dumps(np.arange(10, dtype=np.float32)),
        tenso.dumps(np.arange(6, dtype=np.int64).reshape(2, 3), check_integrity=True),
        tenso.dumps(np.arange(20, dtype=np.uint8), alignment=128),
    ]
    for packet in map(bytes, packets):
        body = tenso.utils._tenso.inspect(packet)["body_offset"]
        for cut in list(range(1, 8)) + list(range(body, len(packet))):
            with pytest.raises(UpstreamError) as theirs:
                upstream.call(op="stream", packets=[packet[:cut].hex()])
            with pytest.raises(tenso.TensoTruncatedError) as ours:
                tenso.read_stream(io.BytesIO(packet[:cut]))
            assert str(ours.value).startswith(theirs.value.message), (cut, theirs.value.message, str(ours.value))


# ---- TensoCache: tiny pools and a foreign segment --------------------------------------------


def _name():
    return "tenso_parity_" + secrets.token_hex(6)


@pytest.mark.parametrize("size,entries", [("5KB", 1), (5120, 1), ("16KB", 4), ("64KB", 16)])
def test_tiny_pools_work(size, entries):
    with tenso.TensoCache(size, name=_name()) as cache:
        stats = cache.stats
        assert stats["max_entries"] == entries
        a = np.arange(16, dtype=np.float32)  # a 128-byte packet
        cache.put("a", a)
        np.testing.assert_array_equal(cache.get("a", copy=True), a)
        cache.put("b", a + 1)
        assert ("a" in cache) == (entries > 1)
        np.testing.assert_array_equal(cache.get("b", copy=True), a + 1)


def test_pool_below_the_smallest_is_refused():
    with pytest.raises(ValueError, match="the smallest pool is 4800 bytes"):
        tenso.TensoCache(4799, name=_name())
    with tenso.TensoCache(4800, name=_name()) as cache:
        assert cache.stats["data_region_size"] == 128


def test_foreign_segment_in_upstream_words():
    seg = shared_memory.SharedMemory(create=True, size=8192)
    try:
        with pytest.raises(ValueError, match=r"^Invalid TensoCache magic: b'\\x00") as e:
            tenso.TensoCache(name=seg.name, create=False)
        assert isinstance(e.value, tenso.TensoCorruptError) and "bad magic" in str(e.value)
    finally:
        seg.close()
        seg.unlink()


# ---- module attributes ------------------------------------------------------------------------


def test_tenso_cache_module():
    assert tenso.cache.TensoCache is tenso.TensoCache
    from tenso.cache import TensoCache  # upstream's import path

    assert TensoCache is tenso.shm.TensoCache


def test_flags():
    assert tenso.shm.HAS_SHM is True
    assert tenso.core.HAS_LZ4 is True
    assert tenso.core.HAS_RUST is True and tenso.utils.HAS_RUST is True
    assert tenso.core.IS_LITTLE_ENDIAN is (sys.byteorder == "little")
    # HAS_LZ4 is honest: compression works.
    a = np.zeros(10000, dtype=np.float32)
    packet = tenso.dumps(a, compress=True)
    assert len(packet) < a.nbytes // 10
    np.testing.assert_array_equal(tenso.loads(packet), a)


def test_config_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert tenso.config.bfloat16 is ml_dtypes.bfloat16
    assert tenso.config._DTYPE_MAP[np.dtype(tenso.config.bfloat16)] == 15
    x = np.arange(4).astype(tenso.config.bfloat16)
    assert tenso.loads(tenso.dumps(x)).dtype == np.dtype(tenso.config.bfloat16)


def test_get_packet_info_rs():
    # Upstream 0.24's tenso_rs.get_packet_info_rs results for the same packets.
    dense = tenso.dumps(np.zeros((2, 3), np.float32))
    assert tenso.utils.get_packet_info_rs(dense) == {
        "version": 4,
        "flags": 1,
        "dtype_code": 1,
        "ndim": 2,
        "aligned": True,
        "integrity_protected": False,
        "total_elements": 6,
        "shape": (2, 3),
    }
    bundle = tenso.dumps({"a": np.zeros(3)})
    assert tenso.utils.get_packet_info_rs(bundle) == {
        "version": 4,
        "flags": 16,
        "dtype_code": 0,
        "ndim": 1,
        "aligned": False,
        "integrity_protected": False,
        "entry_count": 1,
        "shape": (),
        "total_elements": 0,
    }
    with pytest.raises(ValueError, match="^Packet too short"):
        tenso.utils.get_packet_info_rs(b"xx")
    with pytest.raises(ValueError, match="^Invalid tenso packet"):
        tenso.utils.get_packet_info_rs(b"X" * 17)


def test_composite_parts_stay_views():
    # Upstream aligns dense arrays only; a quantized tensor's parts are left where they are.
    q = tenso.QuantizedTensor.quantize(np.arange(64, dtype=np.float32), "qint8")
    buf = placed(tenso.dumps(q), 1)
    back = tenso.loads(buf)
    assert np.shares_memory(back.data, buf)
    np.testing.assert_array_equal(back.dequantize(), q.dequantize())
