"""TensoShm: one packet in a named shared-memory segment (tenso/shm.h), upstream's API, and
segments exchanged with the real upstream package both ways."""

import ctypes
import gc
import inspect
import os
import secrets
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tenso
from interop_codec import describe


@pytest.fixture
def shm_name():
    name = "tenso_test_" + secrets.token_hex(6)
    yield name
    try:
        tenso.TensoShm(name).unlink()
    except FileNotFoundError:
        pass


def test_signatures_match_upstream():
    params = inspect.signature(tenso.TensoShm).parameters
    assert list(params)[:3] == ["name", "create", "size"]
    assert all(p.kind is p.KEYWORD_ONLY for p in list(params.values())[3:])  # our extensions
    assert list(inspect.signature(tenso.TensoShm.put).parameters) == [
        "self", "obj", "check_integrity", "compress", "alignment"]  # fmt: skip
    assert list(inspect.signature(tenso.TensoShm.create_from).parameters) == [
        "name", "obj", "check_integrity", "compress", "alignment"]  # fmt: skip


VALUES = {
    "dense": np.arange(1000, dtype=np.float32).reshape(10, 100),
    "bundle": {"w": np.ones((3, 4), np.float16), "b": {"x": np.arange(5, dtype=np.int64)}},
    "quantized": tenso.QuantizedTensor.quantize(np.linspace(-1, 1, 64, dtype=np.float32), "qint8"),
    "strings": {"labels": tenso.StringTensor(["a", "bc", "🐟"])},
    "empty": np.zeros((0, 3), np.int32),
}


@pytest.mark.parametrize("kind", sorted(VALUES))
@pytest.mark.parametrize("options", [{}, {"check_integrity": True}, {"compress": True}, {"alignment": 256}])
def test_create_from_get_round_trip(shm_name, kind, options):
    value = VALUES[kind]
    with tenso.TensoShm.create_from(shm_name, value, **options) as shm:
        assert shm.name == shm_name
        packet = bytes(tenso.dumps(value, **options))
        if not options.get("compress"):
            # Sized exactly, and the bytes are dumps()'s.
            assert shm.size == len(packet) and bytes(shm.buffer) == packet
        out = shm.get()
        assert describe(out) == describe(value)
    # Another attachment (as another process would) reads the same.
    with tenso.TensoShm(shm_name) as again:
        assert describe(again.get()) == describe(value)


def test_get_is_zero_copy_and_read_only(shm_name):
    a = np.arange(4096, dtype=np.int64)
    shm = tenso.TensoShm.create_from(shm_name, a)
    out = shm.get()
    assert not out.flags.writeable
    buf = np.frombuffer(shm.buffer, np.uint8)
    assert np.shares_memory(out, buf)
    # The view sees a later put (a segment has no pinning) ...
    shm.put(a + 1)
    assert out[0] == 1
    # ... and keeps the mapping alive after close.
    shm.close()
    del buf
    gc.collect()
    assert out[-1] == 4096
    with pytest.raises(ValueError):
        shm.get()


def test_compressed_packet_with_stale_bytes_after_it(shm_name):
    """Upstream cannot read its own compressed packets back from a segment; tenso frames them."""
    with tenso.TensoShm(shm_name, create=True, size=1 << 16) as shm:
        shm.buffer[:] = b"\xab" * shm.size  # stale bytes after the packet
        value = np.zeros(10000, np.float32)
        n = shm.put(value, compress=True, check_integrity=True)
        assert n < value.nbytes // 10
        out = shm.get()
        assert np.array_equal(out, value) and out.base.owns_data


def test_any_owner_opens_own_segment(shm_name):
    # Another uid's segment is refused unless any_owner (checked in the C tests, which run as
    # two uids); here: the flag reaches libtenso and an own segment opens either way.
    with tenso.TensoShm.create_from(shm_name, np.arange(4, dtype=np.int32)):
        pass
    expected = [0, 1, 2, 3]
    for any_owner in (False, True):
        with tenso.TensoShm(shm_name, any_owner=any_owner) as shm:
            assert shm.get().tolist() == expected
            expected = [7, 8] if any_owner else [5, 6]
            shm.put(np.array(expected, dtype=np.int8))  # writable
    with pytest.raises(TypeError):
        tenso.TensoShm(shm_name, False, 0, True)  # keyword-only


def test_put_into_a_segment(shm_name):
    with tenso.TensoShm(shm_name, create=True, size=4096) as shm:
        assert shm.size == 4096 and bytes(shm.buffer) == bytes(4096)
        a = np.arange(10, dtype=np.uint16)
        n = shm.put(a)
        assert n == len(tenso.dumps(a)) and np.array_equal(shm.get(), a)
        with pytest.raises(MemoryError, match="exceeds SHM size"):
            shm.put(np.zeros(4096, np.uint8))
        assert np.array_equal(shm.get(), a)  # unchanged
        shm.buffer[:4] = b"XXXX"
        with pytest.raises(ValueError):
            shm.get()


def test_errors(shm_name):
    with pytest.raises(FileNotFoundError):
        tenso.TensoShm(shm_name)
    with pytest.raises(ValueError):
        tenso.TensoShm(shm_name, create=True, size=0)
    shm = tenso.TensoShm(shm_name, create=True, size=64)
    with pytest.raises(FileExistsError):
        tenso.TensoShm(shm_name, create=True, size=64)
    with pytest.raises(tenso.TensoError) as e:
        tenso.TensoShm(shm_name, create=True, size=64)
    assert e.value.status == -22
    with pytest.raises(ValueError):
        shm.get()  # zero-filled: no packet
    shm.unlink()
    with pytest.raises(FileNotFoundError):
        shm.unlink()
    assert shm.size == 64  # the mapping stays after unlink
    shm.close()


def test_create_from_replaces_a_stale_segment(shm_name):
    stale = tenso.TensoShm(shm_name, create=True, size=10)
    stale.close()
    with tenso.TensoShm.create_from(shm_name, np.arange(100)) as shm:
        assert shm.size > 10 and np.array_equal(shm.get(), np.arange(100))


def test_buffer_outlives_close(shm_name):
    shm = tenso.TensoShm(shm_name, create=True, size=128)
    mv = shm.buffer
    shm.close()
    mv[0] = 7  # still mapped: the memoryview holds the mapping
    assert tenso.TensoShm(shm_name).buffer[0] == 7
    mv.release()


# ---- the extension type's buffer export (tenso._tenso.Shm) -----------------------------------

READ_ONLY_WRITE = textwrap.dedent(
    """
    import sys
    from tenso import _tenso
    shm = _tenso.Shm.open(sys.argv[1], writable=False)
    mv = memoryview(shm)
    try:
        mv[0] = 1  # a write into a PROT_READ mapping: SIGSEGV if the export claims writable
    except TypeError as e:
        assert "read-only" in str(e), e
    else:
        raise AssertionError("the write went through")
    assert mv.readonly
    mv.release()
    print("ok")
    """
)


def test_read_only_segment_exports_a_read_only_buffer(shm_name):
    """A segment opened read-only must not export a writable buffer (a write through it would
    fault). In a subprocess: on a tree with the defect the write is a segfault, which must fail
    this test rather than end the suite."""
    writer = tenso._tenso.Shm.create(shm_name, 4096)
    try:
        r = subprocess.run(
            [sys.executable, "-c", READ_ONLY_WRITE, shm_name], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)
        assert bytes(memoryview(writer)[:1]) == b"\0"  # nothing was written
        # Asking for a writable buffer of a read-only mapping is refused up front.
        ro = tenso._tenso.Shm.open(shm_name, writable=False)
        with pytest.raises(TypeError, match="not writable"):
            ctypes.c_char.from_buffer(ro)
        ro.close()
    finally:
        writer.close()


def test_close_refuses_while_a_buffer_is_exported(shm_name):
    """close() with a live export raises BufferError (as mmap.close() does) and leaves the
    mapping usable; once the export is released close() works. A close that unmapped under the
    memoryview would turn the reads below into a use after free."""
    shm = tenso._tenso.Shm.create(shm_name, 4096)
    mv = memoryview(shm)
    mv[:4] = b"abcd"
    with pytest.raises(BufferError, match="exported"):
        shm.close()
    assert not shm.closed and bytes(mv[:4]) == b"abcd" and shm.size == 4096
    arr = np.frombuffer(shm, np.uint8)  # numpy holds an export too
    mv.release()
    with pytest.raises(BufferError):
        shm.close()
    assert bytes(arr[:4]) == b"abcd"
    del arr
    gc.collect()
    shm.close()
    assert shm.closed
    with pytest.raises(ValueError, match="closed"):
        memoryview(shm)
    shm.close()  # a second close is a no-op


def test_arrays_from_get_keep_the_mapping_after_close(shm_name):
    """Arrays from get() hold their own reference to the mapping (through their Packet base),
    not a buffer export: close() succeeds and they stay readable."""
    shm = tenso._tenso.Shm.create(shm_name, 4096)
    shm.put(tenso.core._to_value(np.arange(100, dtype=np.int64), False))
    out = shm.get()
    shm.close()
    assert out.tolist() == list(range(100))


# ---- upstream interop ------------------------------------------------------------------------


@pytest.mark.upstream
@pytest.mark.parametrize("kind", ["dense", "bundle", "quantized", "empty"])
def test_upstream_reads_our_segments(upstream, shm_name, kind):
    value = VALUES[kind]
    with tenso.TensoShm.create_from(shm_name, value, check_integrity=kind == "dense"):
        got = upstream.call(op="shm_get", name=shm_name)["value"]
    assert got == describe(value)


@pytest.mark.upstream
@pytest.mark.parametrize("options", [{}, {"check_integrity": True}, {"compress": True}])
def test_we_read_upstream_segments(upstream, shm_name, options):
    value = VALUES["bundle"] if options.get("compress") else VALUES["dense"]
    desc = describe(value)
    upstream.call(op="shm_create_from", name=shm_name, value=desc, options=options)
    try:
        with tenso.TensoShm(shm_name) as shm:
            # Upstream sizes segments with slack (zeros after the packet): framing is exact here.
            assert shm.size > len(tenso.dumps(value, **options))
            assert describe(shm.get()) == desc
            # And back: we overwrite it, upstream reads ours in its own segment.
            shm.put(VALUES["quantized"])
        assert upstream.call(op="shm_get", name=shm_name)["value"] == describe(VALUES["quantized"])
    finally:
        upstream.call(op="shm_release", name=shm_name)
    assert not os.path.exists("/dev/shm/" + shm_name)
