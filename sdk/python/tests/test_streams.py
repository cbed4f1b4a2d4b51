"""read_stream / write_stream over real sockets (socketpair, TCP), pipes, files and duck-typed
objects: exact framing (nothing read past a packet), None at a clean end, EOFError when cut."""

import io
import os
import socket
import threading

import numpy as np
import pytest

import tenso
from interop_codec import describe

VALUES = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.zeros((), np.int64),
    np.zeros((2, 0), np.float16),
    {"a": np.arange(3, dtype=np.uint8), "b": {"c": np.ones(4, np.complex64)}},
    tenso.QuantizedTensor.quantize(np.linspace(-2, 2, 11, dtype=np.float32), "quint4", "per_group", group_size=4),
    tenso.StringTensor(["x", "", "héllo"]),
    np.random.default_rng(3).standard_normal(100_000),  # larger than a pipe/socket buffer
]


def same(a, b):
    return describe(a) == describe(b)


def writer_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # surfaced by the test
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


def roundtrip_over(write_end, read_end, close_write, values=VALUES, **opts):
    def produce():
        for v in values:
            tenso.write_stream(v, write_end, **opts)
        close_write()

    t, errors = writer_thread(produce)
    got = []
    while (obj := tenso.read_stream(read_end)) is not None:
        got.append(obj)
    t.join(30)
    assert not errors, errors
    assert len(got) == len(values)
    for g, v in zip(got, values, strict=True):
        assert same(g, v)
    return got


def test_socketpair_fd_path():
    left, right = socket.socketpair()
    with left, right:
        got = roundtrip_over(left, right, lambda: left.shutdown(socket.SHUT_WR))
    # read by libtenso (tenso_read_fd): the arrays own their memory
    assert got[0].base.owns_data and got[0].base.source is None


def test_socketpair_with_integrity():
    left, right = socket.socketpair()
    with left, right:
        roundtrip_over(left, right, lambda: left.shutdown(socket.SHUT_WR), check_integrity=True)


def test_socket_with_timeout():
    """A socket with a timeout is read by libtenso too, its timeout the decoder's deadline (it
    must be honoured: Python keeps such a socket's descriptor non-blocking)."""
    left, right = socket.socketpair()
    with left, right:
        right.settimeout(10)
        left.settimeout(10)
        got = roundtrip_over(left, right, lambda: left.shutdown(socket.SHUT_WR))
        assert got[0].base.owns_data and got[0].base.source is None
    left, right = socket.socketpair()
    with left, right:
        right.settimeout(0.2)
        with pytest.raises(TimeoutError):
            tenso.read_stream(right)  # nothing comes: the timeout fires, no hang
        left.sendall(bytes(tenso.dumps(np.arange(3)))[:20])
        with pytest.raises(TimeoutError):
            tenso.read_stream(right)  # stalls inside a packet: same


def test_nonblocking_socket():
    left, right = socket.socketpair()
    with left, right:
        right.setblocking(False)
        roundtrip_over(left, right, lambda: left.shutdown(socket.SHUT_WR))


def test_tcp_sockets():
    server = socket.create_server(("127.0.0.1", 0))
    with server:
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        with client, conn:
            roundtrip_over(client, conn, lambda: client.shutdown(socket.SHUT_WR))


def test_pipes_as_file_objects():
    r, w = os.pipe()
    with os.fdopen(r, "rb") as rf, os.fdopen(w, "wb") as wf:
        roundtrip_over(wf, rf, wf.close)


def test_pipes_as_raw_descriptors():
    r, w = os.pipe()
    try:
        roundtrip_over(w, r, lambda: os.close(w))
    finally:
        os.close(r)


def test_unbuffered_file_objects(tmp_path):
    path = tmp_path / "s.tenso"
    with open(path, "wb", buffering=0) as f:
        total = sum(tenso.write_stream(v, f) for v in VALUES)
    assert total == path.stat().st_size
    ends = np.cumsum([len(tenso.dumps(v)) for v in VALUES])
    with open(path, "rb", buffering=0) as f:
        got = []
        while (obj := tenso.read_stream(f)) is not None:
            got.append(obj)
            assert f.tell() == ends[len(got) - 1]  # nothing read past the packet
    assert all(same(g, v) for g, v in zip(got, VALUES, strict=True))


def test_buffered_writer_keeps_order_and_position(tmp_path):
    """Buffered bytes are flushed before the vectored write, and tell() is right afterwards."""
    path = tmp_path / "mixed.bin"
    a = np.arange(1000, dtype=np.int32)
    with open(path, "wb") as f:
        f.write(b"HEAD")
        n = tenso.write_stream(a, f)
        assert f.tell() == 4 + n
        f.write(b"TAIL")
        tenso.dump({"x": a}, f)
        end = f.tell()
    data = path.read_bytes()
    assert len(data) == end
    assert data[:4] == b"HEAD" and data[4 + n : 8 + n] == b"TAIL"
    with open(path, "rb") as f:
        assert f.read(4) == b"HEAD"
        assert np.array_equal(tenso.read_stream(f), a)
        assert f.read(4) == b"TAIL"
        assert np.array_equal(tenso.load(f)["x"], a)
        assert f.read() == b""


def test_bytesio_and_duck_types():
    class RecvOnly:
        def __init__(self, data):
            self.data = memoryview(data)

        def recv(self, n):
            chunk, self.data = self.data[: min(n, 7)], self.data[min(n, 7) :]  # dribbles
            return bytes(chunk)

    class ReadOnly:
        def __init__(self, data):
            self.f = io.BytesIO(data)

        def read(self, n):
            return self.f.read(min(n, 5))

    class RecvIntoOnly:
        def __init__(self, data):
            self.f = io.BytesIO(data)

        def recv_into(self, buf):
            return self.f.readinto(memoryview(buf)[:3])

    class Sink:
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))

    sink = Sink()
    for v in VALUES:
        tenso.write_stream(v, sink)
    data = b"".join(sink.parts)
    for src in (io.BytesIO(data), RecvOnly(data), ReadOnly(data), RecvIntoOnly(data)):
        got = []
        while (obj := tenso.read_stream(src)) is not None:
            got.append(obj)
        assert len(got) == len(VALUES) and all(same(g, v) for g, v in zip(got, VALUES, strict=True))


def test_partial_writes_are_completed():
    class Trickle:
        def __init__(self):
            self.buf = bytearray()

        def write(self, b):
            b = bytes(b)[:100]
            self.buf += b
            return len(b)

    t = Trickle()
    a = np.arange(10_000, dtype=np.float64)
    n = tenso.write_stream(a, t)
    assert n == len(t.buf)
    assert np.array_equal(tenso.loads(bytes(t.buf)), a)


def test_write_stream_without_write_method():
    with pytest.raises(AttributeError, match="has no '.write' or '.sendall' method"):
        tenso.write_stream(np.zeros(1), object())


def test_compressed_packets_stream():
    """Upstream cannot stream compressed packets; tenso_packet_length frames them."""
    buf = io.BytesIO()
    a = np.zeros(50_000)
    buf.write(bytes(tenso.dumps(a, compress=True)))
    buf.write(bytes(tenso.dumps({"k": a}, compress=True, check_integrity=True)))
    buf.seek(0)
    assert np.array_equal(tenso.read_stream(buf), a)
    assert np.array_equal(tenso.read_stream(buf)["k"], a)
    assert tenso.read_stream(buf) is None


def test_empty_stream_is_none_and_load_raises():
    assert tenso.read_stream(io.BytesIO(b"")) is None
    with pytest.raises(EOFError, match="Empty file or stream"):
        tenso.load(io.BytesIO(b""))
    left, right = socket.socketpair()
    with left, right:
        left.close()
        assert tenso.read_stream(right) is None


@pytest.mark.parametrize("cut", [1, 5, 9, 10, 13, 40, 63, 64, 100, -1])
def test_truncated_stream_is_eof_error(cut):
    packet = bytes(tenso.dumps(np.arange(20, dtype=np.float32), check_integrity=True))
    part = packet[:cut]
    with pytest.raises(EOFError) as e:
        tenso.read_stream(io.BytesIO(part))
    assert isinstance(e.value, ValueError)  # a TensoTruncatedError is both
    left, right = socket.socketpair()
    with left, right:
        left.sendall(part)
        left.close()
        with pytest.raises(EOFError):
            tenso.read_stream(right)  # libtenso's reader


def test_garbage_stream_is_value_error():
    with pytest.raises(ValueError):
        tenso.read_stream(io.BytesIO(b"NOTATENSOPACKET!"))
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"NOTATENSOPACKET!")
        with pytest.raises(ValueError):
            tenso.read_stream(right)


def test_lying_length_does_not_allocate_up_front():
    """A header claiming a 1 GB body costs memory only as bytes arrive: the stream ends early
    and the reader fails with EOFError, having allocated about what it received."""
    import tracemalloc

    claimed = 999_999_999
    head = b"TNSO\x04\x01\x00\x05\x01\x00" + claimed.to_bytes(4, "little")
    head += b"\x00" * (64 - len(head))
    stream_data = head + b"\x01" * 3_000_000
    for framed in (
        head,
        b"TNSO\x04\x10\x00\x00\x01\x00"
        + (1).to_bytes(4, "little")
        + b"k"
        + (len(head) + claimed).to_bytes(4, "little")
        + head,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(EOFError):
                tenso.read_stream(io.BytesIO(framed + stream_data[len(head) :]))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024 * 1024, peak


def test_failed_packet_leaves_the_threads_decoder_ready():
    """read_stream on descriptors reuses one decoder per thread: a packet that failed (cut off,
    garbage) is dropped with its stream, so the next stream on that thread starts clean."""
    a = np.arange(300, dtype=np.float32)
    packet = bytes(tenso.dumps(a))
    for bad in (packet[:100], b"NOTATENSOPACKET!" * 8):
        left, right = socket.socketpair()
        with left, right:
            left.sendall(bad)
            left.close()
            with pytest.raises(ValueError):  # TensoTruncatedError is an EOFError and a ValueError
                tenso.read_stream(right)
        left, right = socket.socketpair()
        with left, right:
            left.sendall(packet)
            assert np.array_equal(tenso.read_stream(right), a)


def test_reused_decoder_never_overwrites_a_live_array():
    """The thread's decoder takes the previous packet's buffer for the next one only once that
    packet's arrays are gone: arrays still held keep their values."""
    values = [np.full(100_000, i, np.float64) for i in range(4)]
    left, right = socket.socketpair()
    with left, right:
        t, errors = writer_thread(lambda: [tenso.write_stream(v, left) for v in values])
        kept = tenso.read_stream(right)
        for v in values[1:]:
            got = tenso.read_stream(right)  # the one before is dropped here: its buffer is reusable
            assert np.array_equal(got, v)
        t.join(30)
        assert not errors, errors
    assert np.array_equal(kept, values[0])


def test_threads_read_with_their_own_decoders():
    """Threads reading their own sockets at once (the GIL released while they wait) each
    decode their own stream."""
    results, streams = {}, {}
    for i in range(4):
        streams[i] = socket.socketpair()

    def reader(i):
        right = streams[i][1]
        results[i] = [tenso.read_stream(right) for _ in range(20)]

    readers = [threading.Thread(target=reader, args=(i,)) for i in streams]
    for r in readers:
        r.start()
    for n in range(20):
        for i, (left, _) in streams.items():
            tenso.write_stream(np.full(5000, i * 100 + n, np.int32), left)
    for r in readers:
        r.join(30)
    for i, (left, right) in streams.items():
        left.close()
        right.close()
        assert [int(x[0]) for x in results[i]] == [i * 100 + n for n in range(20)]
        assert all(x.shape == (5000,) and (x == x[0]).all() for x in results[i])
