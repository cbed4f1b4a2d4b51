"""Zero copy: loads returns views into the caller's buffer whose base keeps it alive; writes to
descriptors never copy the body; the GIL is released around long work and blocking I/O."""

import gc
import mmap
import socket
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import tenso


def as_bytes_array(obj):
    return np.frombuffer(obj, dtype=np.uint8)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy", "mmap"])
def test_loads_is_a_view_of_the_source(kind, tmp_path):
    a = np.arange(1000, dtype=np.float64)
    packet = bytes(tenso.dumps(a))
    if kind == "bytes":
        src = packet
    elif kind == "bytearray":
        src = bytearray(packet)
    elif kind == "memoryview":
        src = memoryview(packet)
    elif kind == "numpy":
        src = np.frombuffer(packet, np.uint8).copy()
    else:
        path = tmp_path / "p.tenso"
        path.write_bytes(packet)
        with open(path, "rb") as f:
            src = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    out = tenso.loads(src, align=False)  # these sources need not be 64-byte aligned
    assert np.array_equal(out, a)
    assert not out.flags.writeable and not out.flags.owndata
    assert np.shares_memory(out, as_bytes_array(src))
    # The base chain: array -> Packet -> the exported source object.
    assert isinstance(out.base, tenso.Packet)
    assert out.base.source is src
    assert not out.base.owns_data
    # The body sits exactly where the packet puts it.
    body_offset = tenso._tenso.inspect(packet)["body_offset"]
    assert out.ctypes.data == as_bytes_array(src).ctypes.data + body_offset


def test_bundle_entries_are_views_of_one_source():
    value = {"a": np.arange(10, dtype=np.int32), "b": {"c": np.ones((4, 4))}}
    src = bytearray(tenso.dumps(value))
    out = tenso.loads(src, align=False)  # views wherever the members sit
    whole = as_bytes_array(src)
    assert np.shares_memory(out["a"], whole) and np.shares_memory(out["b"]["c"], whole)
    assert out["a"].base is out["b"]["c"].base  # one Packet owns them all


def test_source_kept_alive_by_the_arrays():
    packet = bytes(tenso.dumps(np.arange(100, dtype=np.int64)))
    src = np.frombuffer(packet, np.uint8).copy()  # weak-referenceable
    ref = weakref.ref(src)
    out = tenso.loads(src, align=False)
    del src
    gc.collect()
    assert ref() is not None  # the array's base holds the exported buffer
    assert out.sum() == sum(range(100))
    del out
    gc.collect()
    assert ref() is None  # ... and lets it go with the last array


def test_bytearray_cannot_be_resized_under_a_view():
    src = bytearray(tenso.dumps(np.arange(10, dtype=np.float32)))
    out = tenso.loads(src, align=False)  # a bytearray need not be 64-byte aligned
    with pytest.raises(BufferError):
        src.extend(b"more")  # the buffer is exported: resizing would leave the view dangling
    del out
    gc.collect()
    src.extend(b"more")  # released with the view


def test_mmap_cannot_be_closed_under_a_view(tmp_path):
    path = tmp_path / "p.tenso"
    path.write_bytes(bytes(tenso.dumps(np.arange(10, dtype=np.float32))))
    with open(path, "rb") as f:
        out = tenso.load(f, mmap_mode=True)
    mm = out.base.source
    assert isinstance(mm, mmap.mmap)
    with pytest.raises(BufferError):
        mm.close()
    assert out.tolist() == list(range(10))


def test_writes_through_the_source_are_visible():
    """A view really is the caller's memory (this is what zero-copy means)."""
    src = bytearray(tenso.dumps(np.zeros(4, dtype=np.uint8)))
    out = tenso.loads(src, align=False)
    body_offset = tenso._tenso.inspect(src)["body_offset"]
    src[body_offset] = 7
    assert out[0] == 7


def test_copy_true_detaches():
    src = bytearray(tenso.dumps({"a": np.arange(5)}))
    out = tenso.loads(src, copy=True)
    assert out["a"].flags.writeable
    assert not np.shares_memory(out["a"], as_bytes_array(src))
    src.extend(b"x")  # nothing exported any more


def _placed(packet, offset):
    """packet copied into fresh memory at `offset` bytes past a 64-byte boundary."""
    buf = np.zeros(len(packet) + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start : start + len(packet)]
    out[:] = np.frombuffer(packet, np.uint8)
    return out


def test_align_copies_only_misaligned_views():
    packet = bytes(tenso.dumps(np.arange(16, dtype=np.float32)))
    misaligned = _placed(packet, 1)
    view = tenso.loads(misaligned, align=False)
    assert view.ctypes.data % 64 == 1 and np.shares_memory(view, misaligned)
    fixed = tenso.loads(misaligned, align=True)
    assert fixed.ctypes.data % 64 == 0 and not np.shares_memory(fixed, misaligned)
    assert not fixed.flags.writeable and np.array_equal(fixed, view)
    aligned = _placed(packet, 0)
    kept = tenso.loads(aligned, align=True)
    assert kept.ctypes.data % 64 == 0 and np.shares_memory(kept, aligned)


def test_dumps_makes_exactly_one_copy_of_the_body():
    """The packet's body is the array's bytes (one memcpy into the bytes object), and the
    memoryview's owner is that bytes object, not an intermediate buffer."""
    a = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8)
    p = tenso.dumps(a)
    assert isinstance(p.obj, bytes) and len(p.obj) - len(p) < 64
    assert not np.shares_memory(as_bytes_array(p), a)
    assert bytes(p[64:]) == a.tobytes()


def test_socket_write_sends_the_array_memory(monkeypatch):
    """write_stream to a socket goes through tenso_write_fd: Python's socket methods (which
    would need the packet as one buffer) are never called."""
    a = np.arange(1 << 16, dtype=np.float32)
    left, right = socket.socketpair()
    with left, right:

        def forbidden(*args, **kwargs):
            raise AssertionError("the packet went through a Python-level send")

        class Spy(socket.socket):
            sendall = send = forbidden

        spy = Spy(fileno=left.detach())
        with spy:
            received = {}
            t = threading.Thread(target=lambda: received.setdefault("v", tenso.read_stream(right)))
            t.start()
            n = tenso.write_stream(a, spy)
            t.join(10)
        assert n == 64 + a.nbytes
        assert np.array_equal(received["v"], a)


GIL_PROBE = textwrap.dedent(
    """
    import socket, threading, time, sys
    import numpy as np
    import tenso

    # 1. A blocking read in libtenso must not hold the GIL: the main thread has to be able to
    #    run to send the packet the reader is waiting for (with the GIL held: deadlock).
    left, right = socket.socketpair()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("v", tenso.read_stream(right)))
    t.start()
    time.sleep(0.2)
    tenso.write_stream(np.arange(10, dtype=np.int32), left)
    t.join(10)
    assert not t.is_alive() and got["v"].tolist() == list(range(10))

    # 2. A blocking vectored write of 64 MiB (more than the socket buffer) must not hold it
    #    either: the main thread reads while the writer is blocked.
    big = np.random.default_rng(1).integers(0, 255, 64 << 20, dtype=np.uint8)
    t = threading.Thread(target=lambda: tenso.write_stream(big, left))
    t.start()
    got = tenso.read_stream(right)
    t.join(30)
    assert np.array_equal(got, big)

    # 3. CPU-bound work (compressing and hashing 256 MiB): another thread makes progress while
    #    each call runs. With a switch interval longer than the test, this thread gives the GIL
    #    up only where it blocks or C code releases it: beats counted between two statements
    #    can only have happened inside the call between them (a call holding the GIL: none).
    data = np.tile(np.arange(4096, dtype=np.float64), 8192)
    beats = 0
    done = threading.Event()
    def heartbeat():
        global beats
        while not done.is_set():
            beats += 1
            time.sleep(0.0001)  # lets the main thread take the GIL back when the call returns
    hb = threading.Thread(target=heartbeat)
    sys.setswitchinterval(3600)
    hb.start()
    before = beats
    p = tenso.dumps(data, compress=True, check_integrity=True)
    during_dumps = beats - before
    before = beats
    out = tenso.loads(p)
    during_loads = beats - before
    done.set()
    hb.join()
    sys.setswitchinterval(0.005)
    print(f"beats during dumps {during_dumps}, during loads {during_loads}")
    assert during_dumps > 0, "the GIL was held during the compressing, hashing encode"
    assert during_loads > 0, "the GIL was held during the decompressing, verifying decode"
    assert np.array_equal(out, data)
    print("ok")
    """
)


def test_gil_released_during_io_and_large_work():
    # A subprocess with a timeout: if the GIL were held across a blocking call, this would
    # deadlock rather than fail.
    r = subprocess.run([sys.executable, "-c", GIL_PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")


def test_large_dumps_is_a_pooled_buffer_that_lives_as_long_as_its_views():
    """From 32 MiB on, dumps' memoryview is of a libtenso buffer (pages kept for the next packet
    when it goes): read-only bytes, 64-byte aligned, alive while arrays decoded from it are."""
    a = np.arange(9 << 20, dtype=np.float32)  # 36 MiB
    p = tenso.dumps(a, check_integrity=True)
    assert isinstance(p, memoryview) and p.readonly and p.format == "B" and p.contiguous
    assert type(p.obj).__name__ == "PacketBuffer" and len(p) == 64 + a.nbytes + 8
    with pytest.raises(TypeError):
        p[0] = 0
    out = tenso.loads(p)
    assert tenso.is_aligned(p) and np.shares_memory(out, as_bytes_array(p))
    del p
    q = tenso.dumps(a + 1)  # may reuse pages, never those `out` still points into
    assert np.array_equal(out, a) and np.array_equal(tenso.loads(q), a + 1)
