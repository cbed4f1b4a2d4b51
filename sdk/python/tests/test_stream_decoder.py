"""Hostile streams through libtenso's decoder (issue 14), the same suite as the C, Go and Rust
SDKs run: truncation at every byte of the golden packets, claimed huge lengths refused before
allocation, a sender delivering one byte at a time, a quiet peer against a timeout. Every
Python reader is covered: read_stream on descriptors (tenso_read_fd) and on Python objects
(buffer/commit), iter_stream (read-ahead and feed), aread_stream / aiter_stream (feed). Also the
decode options and the dtype facts the extension takes from the ABI."""

import asyncio
import io
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tenso
from conftest import CASES, golden_bytes
from interop_codec import describe
from tenso import DecodeOptions, config, errors

GOLDEN = [(c["name"], golden_bytes(c)) for c in CASES]
# Packets the host decodes (not the GPU IPC reference), for the streams of many packets.
DECODABLE = [p for name, p in GOLDEN if "gpu" not in name]
IDS = [name for name, _ in GOLDEN]


def cuts(packet):
    """Every byte for small packets; for large ones the first 400 and a stride through the rest."""
    n = len(packet)
    if n <= 400:
        return range(n)
    return sorted(set(range(400)) | set(range(400, n, 997)) | {n - 1})


class Dribble:
    """A reader with only recv_into that hands out at most `step` bytes per call (the Python
    path: buffer/commit)."""

    def __init__(self, data, step=1):
        self.f = io.BytesIO(data)
        self.step = step

    def recv_into(self, buf):
        return self.f.readinto(memoryview(buf)[: self.step])


def pipe_with(data):
    """The read end of a pipe holding `data` (written by a thread: it may exceed the pipe buffer),
    then closed."""
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb", buffering=0) as f:
            try:
                f.write(data)
            except BrokenPipeError:
                pass  # the reader refused the packet and stopped

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return r, t


def aread_bytes(data, **kw):
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await tenso.aread_stream(reader, **kw)

    return asyncio.run(main())


def outcome(read):
    """describe() of what read() returns, or the class of what it raises (a GPU IPC reference
    is framed but not decoded on the host, as upstream)."""
    try:
        return describe(read())
    except tenso.TensoUnsupportedError as e:
        return type(e)


def expected(packet):
    return outcome(lambda: tenso.loads(packet))


# ---------------------------------------------------------------------------------------------
# Truncation at every byte
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,packet", GOLDEN, ids=IDS)
def test_truncation_at_every_byte_python_path(name, packet):
    want = expected(packet)
    assert outcome(lambda: tenso.read_stream(Dribble(packet, 1 << 20))) == want
    for cut in cuts(packet):
        src = Dribble(packet[:cut], 1 << 20)
        if cut == 0:
            assert tenso.read_stream(src) is None
            continue
        with pytest.raises(tenso.TensoTruncatedError) as e:  # an EOFError and a ValueError
            tenso.read_stream(src)
        assert e.value.status == errors.TENSO_E_TRUNCATED
        if cut < 8:  # upstream 0.24's words for a cut fixed header
            assert str(e.value).startswith(f"Stream ended during header read. Expected 8 bytes, got {cut} (")


@pytest.mark.parametrize("name,packet", GOLDEN, ids=IDS)
def test_truncation_at_every_byte_descriptor_path(name, packet):
    r, t = pipe_with(packet)
    try:
        assert outcome(lambda: tenso.read_stream(r)) == expected(packet)
        assert tenso.read_stream(r) is None
    finally:
        os.close(r)
        t.join()
    for cut in cuts(packet)[1:]:
        r, t = pipe_with(packet[:cut])
        try:
            with pytest.raises(tenso.TensoTruncatedError) as e:
                tenso.read_stream(r)
            assert e.value.status == errors.TENSO_E_TRUNCATED
        finally:
            os.close(r)
            t.join()


@pytest.mark.parametrize("name,packet", GOLDEN, ids=IDS)
def test_truncation_at_every_byte_asyncio(name, packet):
    assert outcome(lambda: aread_bytes(packet)) == expected(packet)
    for cut in cuts(packet):
        if cut == 0:
            assert aread_bytes(b"") is None
            continue
        with pytest.raises(asyncio.IncompleteReadError) as e:  # an EOFError, as upstream
            aread_bytes(packet[:cut])
        assert isinstance(e.value.__cause__, tenso.TensoTruncatedError)


def test_truncated_stream_of_many_packets_iter_stream():
    data = b"".join(DECODABLE)
    want = [expected(p) for p in DECODABLE]
    for src in (io.BytesIO(data), Dribble(data, 1000)):
        assert [describe(o) for o in tenso.iter_stream(src)] == want
    r, t = pipe_with(data)
    try:
        assert [describe(o) for o in tenso.iter_stream(r)] == want
    finally:
        os.close(r)
        t.join()
    for cut in (1, 7, len(data) // 2, len(data) - 1):
        with pytest.raises(tenso.TensoTruncatedError):
            list(tenso.iter_stream(io.BytesIO(data[:cut])))
        r, t = pipe_with(data[:cut])
        try:
            with pytest.raises(tenso.TensoTruncatedError):
                list(tenso.iter_stream(r))
        finally:
            os.close(r)
            t.join()


# ---------------------------------------------------------------------------------------------
# Claimed huge lengths
# ---------------------------------------------------------------------------------------------

# A dense float64 tensor of 10^9 elements (8 GB) claimed by a 64-byte header.
HUGE_HEAD = b"TNSO\x04\x01\x00\x03\x01\x00" + (10**9).to_bytes(4, "little")
HUGE_HEAD += b"\x00" * (64 - len(HUGE_HEAD))


def test_max_packet_bytes_refuses_a_claim_before_reading_the_body():
    opts = DecodeOptions(max_packet_bytes=1 << 20)
    src = io.BytesIO(HUGE_HEAD + b"\x00" * (2 << 20))
    with pytest.raises(tenso.TensoLimitError) as e:
        tenso.read_stream(src, options=opts)
    assert e.value.status == errors.TENSO_E_LIMIT
    assert src.tell() <= len(HUGE_HEAD)  # refused from the header, the body never read
    r, t = pipe_with(HUGE_HEAD + b"\x00" * 4096)
    try:
        with pytest.raises(tenso.TensoLimitError):
            tenso.read_stream(r, options=opts)
    finally:
        os.close(r)
        t.join()
    with pytest.raises(tenso.TensoLimitError):
        aread_bytes(HUGE_HEAD + b"\x00" * 4096, options=opts)
    with pytest.raises(tenso.TensoLimitError):
        list(tenso.iter_stream(io.BytesIO(HUGE_HEAD), options=opts))
    # max_decoded_bytes bounds the stream's allocation as well
    with pytest.raises(tenso.TensoLimitError):
        tenso.read_stream(io.BytesIO(HUGE_HEAD), options=DecodeOptions(max_decoded_bytes=1 << 20))


LYING_READ = """
import io, os, resource, socket, sys, threading
import tenso
head = {head!r}
data = head + b"\\x01" * 3_000_000
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if sys.argv[1] == "rlimit":
    with open("/proc/self/statm") as f:
        limit = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + (1 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for make in ("bytesio", "socket"):
    if make == "bytesio":
        src = io.BytesIO(data)
    else:
        a, src = socket.socketpair()
        threading.Thread(target=lambda: (a.sendall(data), a.close()), daemon=True).start()
    before = rss()
    try:
        tenso.read_stream(src)
    except (tenso.TensoTruncatedError, tenso.TensoMemoryError) as e:
        print(make, type(e).__name__, rss() - before)
"""


@pytest.mark.parametrize("mode", ["rlimit", "free"])
def test_lying_length_with_default_limits(mode):
    """The default limits allow a 10^9-element float64 tensor, so a header claiming 8 GB is
    legal: the decoder reserves the packet's buffer once the header fixes its length. Followed
    by 3 MB and the end of the stream, that costs resident memory only for the bytes that came
    (untouched pages), and under a 1 GiB address-space limit the reservation is refused cleanly
    (TensoMemoryError), never a crash. max_packet_bytes refuses it before reserving anything
    (test_max_packet_bytes_refuses_a_claim_before_reading_the_body)."""
    code = LYING_READ.format(head=HUGE_HEAD)
    out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert [line[0] for line in lines] == ["bytesio", "socket"], out.stdout + out.stderr
    for _, error, grown in lines:
        if mode == "rlimit":
            assert error in ("TensoMemoryError", "TensoTruncatedError")
        else:
            assert error == "TensoTruncatedError"
            assert int(grown) < 64 << 20  # resident: about the 3 MB received, not 8 GB


# ---------------------------------------------------------------------------------------------
# One byte at a time
# ---------------------------------------------------------------------------------------------

SLOW = [p for p in DECODABLE if len(p) <= 600][:8]


def slow_sender(sock, data, delay=0.0002):
    def run():
        try:
            for i in range(len(data)):
                sock.sendall(data[i : i + 1])
                time.sleep(delay)  # each byte its own segment: the reader sees them one by one
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("reader", ["read_stream fd", "read_stream recv_into", "iter_stream", "aread_stream"])
def test_one_byte_at_a_time_sender(reader):
    data = b"".join(SLOW)
    want = [expected(p) for p in SLOW]
    left, right = socket.socketpair()
    with left, right:
        t = slow_sender(left, data)
        if reader == "read_stream fd":
            got = []
            while (obj := tenso.read_stream(right)) is not None:
                got.append(obj)
        elif reader == "read_stream recv_into":

            class RecvInto:  # no fileno: the Python path, one recv_into per byte that arrives
                def recv_into(self, buf):
                    return right.recv_into(buf)

            src = RecvInto()
            got = []
            while (obj := tenso.read_stream(src)) is not None:
                got.append(obj)
        elif reader == "iter_stream":
            got = list(tenso.iter_stream(right))
        else:

            async def main():
                r, w = await asyncio.open_connection(sock=right.dup())
                try:
                    return [o async for o in tenso.aiter_stream(r)]
                finally:
                    w.close()

            got = asyncio.run(main())
        t.join(30)
    assert [describe(o) for o in got] == want


# ---------------------------------------------------------------------------------------------
# A quiet peer
# ---------------------------------------------------------------------------------------------


def test_quiet_peer_socket_timeout():
    packet = bytes(tenso.dumps(np.arange(100, dtype=np.float32)))
    left, right = socket.socketpair()
    with left, right:
        right.settimeout(0.2)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as e:  # nothing at all
            tenso.read_stream(right)
        assert isinstance(e.value, tenso.TensoTimeoutError) and e.value.status == errors.TENSO_E_TIMEOUT
        left.sendall(packet[:20])
        with pytest.raises(tenso.TensoTimeoutError):  # 20 bytes, then silence
            tenso.read_stream(right)
        with pytest.raises(tenso.TensoTimeoutError):
            list(tenso.iter_stream(right))
        assert time.monotonic() - t0 < 30  # it returned; no hang


def test_quiet_peer_options_timeout_on_a_blocking_socket():
    packet = bytes(tenso.dumps(np.arange(100, dtype=np.float32)))
    left, right = socket.socketpair()
    with left, right:
        assert right.gettimeout() is None
        left.sendall(packet[:9])
        with pytest.raises(tenso.TensoTimeoutError):
            tenso.read_stream(right, options=DecodeOptions(timeout=0.1))
    r, w = os.pipe()
    try:
        os.write(w, packet[:30])
        with pytest.raises(tenso.TensoTimeoutError):
            tenso.read_stream(r, options=DecodeOptions(timeout=0.1))
    finally:
        os.close(r)
        os.close(w)


def test_quiet_peer_asyncio_timeout():
    packet = bytes(tenso.dumps(np.arange(100, dtype=np.float32)))

    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(packet[:20])  # and never the rest, nor the end
        return await tenso.aread_stream(reader, options=DecodeOptions(timeout=0.1))

    with pytest.raises(TimeoutError) as e:
        asyncio.run(main())
    assert isinstance(e.value, tenso.TensoTimeoutError)


# ---------------------------------------------------------------------------------------------
# Decode options
# ---------------------------------------------------------------------------------------------


def test_decode_options_limits_everywhere():
    bundle = {"a": np.zeros((2, 3, 4), np.float32), "b": np.arange(10)}
    packet = bytes(tenso.dumps(bundle))
    refusing = [
        DecodeOptions(max_packet_bytes=len(packet) - 1),
        DecodeOptions(max_entries=2),
        DecodeOptions(max_ndim=2),
        DecodeOptions(max_elements=9),
        DecodeOptions(max_decoded_bytes=16),
    ]
    accepting = [
        DecodeOptions(),
        DecodeOptions(
            max_packet_bytes=len(packet), max_entries=3, max_ndim=3, max_elements=24, max_decoded_bytes=1 << 20
        ),
    ]
    readers = [
        lambda o: tenso.loads(packet, options=o),
        lambda o: tenso.read_stream(io.BytesIO(packet), options=o),
        lambda o: tenso.load(io.BytesIO(packet), options=o),
        lambda o: next(tenso.iter_stream(io.BytesIO(packet), options=o)),
        lambda o: aread_bytes(packet, options=o),
    ]
    for read in readers:
        for o in accepting:
            assert describe(read(o)) == describe(bundle)
        for o in refusing:
            with pytest.raises(tenso.TensoLimitError):
                read(o)
    # the keywords loads() has had since 1.2 still work, and win over options
    with pytest.raises(tenso.TensoLimitError):
        tenso.loads(packet, max_entries=2)
    with pytest.raises(tenso.TensoLimitError):
        tenso.loads(packet, max_entries=2, options=DecodeOptions(max_entries=100))


def test_decode_options_checksum_and_validation_switches():
    packet = bytearray(tenso.dumps(np.arange(16, dtype=np.float32), check_integrity=True))
    packet[70] ^= 1  # a body byte: the footer no longer matches
    with pytest.raises(tenso.TensoChecksumError):
        tenso.loads(packet)
    assert tenso.loads(packet, options=DecodeOptions(skip_checksum=True)).shape == (16,)
    strings = bytearray(tenso.dumps(tenso.StringTensor(["abc"])))
    strings[strings.index(b"abc")] = 0xFF  # not UTF-8
    tenso.loads(strings)  # not checked by default (as upstream)
    with pytest.raises(ValueError):
        tenso.loads(strings, options=DecodeOptions(validate_utf8=True))


@pytest.mark.parametrize(
    "kw",
    [
        {"max_packet_bytes": -1},
        {"max_ndim": 1 << 32},
        {"max_elements": 1.5},
        {"timeout": -1.0},
        {"timeout": float("nan")},
        {"max_entries": True},
    ],
)
def test_decode_options_refuse_bad_values(kw):
    with pytest.raises(ValueError):
        DecodeOptions(**kw)


def test_decode_options_type_checked():
    with pytest.raises(TypeError):
        tenso.loads(tenso.dumps(np.zeros(1)), options={"max_entries": 1})


def test_decode_options_defaults_are_upstreams():
    o = DecodeOptions()
    assert (o.max_packet_bytes, o.max_decoded_bytes, o.max_entries, o.max_ndim, o.max_elements, o.max_depth) == (0,) * 6
    assert o.timeout is None and not o.skip_checksum and not o.validate_utf8
    # 32 dimensions pass and 33 do not, as upstream 0.24
    tenso.loads(tenso.dumps(np.zeros((1,) * 32)), options=o)
    with pytest.raises(tenso.TensoLimitError):
        tenso.loads(b"TNSO\x04\x01\x00\x01\x21\x00" + b"\x01\x00\x00\x00" * 33 + b"\x00" * 64, options=o)


# ---------------------------------------------------------------------------------------------
# Dtype facts from the ABI
# ---------------------------------------------------------------------------------------------


def test_dtype_tables_are_the_abis():
    for dt, code in config._DTYPE_MAP.items():
        assert tenso._tenso.dtype_name(code) == dt.name
        assert tenso._tenso.dtype_itemsize(code) == dt.itemsize
        assert tenso._tenso.dtype_from_name(dt.name) == code
        assert tenso._tenso.dtype_code(dt) == code
    dense = {c for c in range(256) if tenso._tenso.dtype_itemsize(c)}
    assert set(config._DTYPE_MAP.values()) == dense == set(range(1, 16))
    assert config._QDTYPE_NAMES == {16: "qint8", 17: "quint8", 18: "qint4", 19: "quint4"}
    with pytest.raises(tenso.TensoUnsupportedError):
        tenso._tenso.dtype_from_name("float128")
    for bad in (
        np.dtype("float128") if hasattr(np, "float128") else np.dtype("U3"),
        np.dtype("U3"),
        np.dtype("M8[ns]"),
    ):
        with pytest.raises(ValueError, match="Unsupported dtype"):
            tenso._tenso.dtype_code(bad)


def test_load_align_from_streams(tmp_path):
    """load(align=True) from a stream gives arrays at their declared alignment, as loads: a
    read packet starts 64-byte aligned, but a bundle entry sits where its sub-packet does."""
    path = tmp_path / "b.tenso"
    value = {"k": np.arange(64, dtype=np.float64), "kk": np.arange(3.0)}
    with open(path, "wb") as f:
        tenso.dump(value, f)
    for buffering in (-1, 0):  # a BufferedReader (buffer/commit) and a raw FileIO (tenso_read_fd)
        with open(path, "rb", buffering=buffering) as f:
            out = tenso.load(f, align=True)
        assert all(out[k].ctypes.data % 64 == 0 for k in value)
        assert describe(out) == describe(value)
