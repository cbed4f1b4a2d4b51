"""aread_stream / awrite_stream over real asyncio sockets: TCP on 127.0.0.1 and a unix socket."""

import asyncio
import os
import tempfile

import numpy as np
import pytest

import tenso
from interop_codec import describe
from tenso.async_core import aread_stream, awrite_stream

VALUES = [
    np.arange(10, dtype=np.int16),
    {"w": np.ones((3, 3), np.float32), "nested": {"b": np.array([True, False])}},
    tenso.QuantizedTensor.quantize(np.linspace(0, 1, 17, dtype=np.float32), "qint8", "per_tensor"),
    tenso.StringTensor(["α", "β", ""]),
    np.random.default_rng(5).standard_normal((300, 300)),  # 720 KB: many transport chunks
]


async def echo_roundtrip(start_server, open_connection, values, **opts):
    """Client sends every value; the server decodes each and sends it back re-encoded."""
    done = asyncio.Event()

    async def handle(reader, writer):
        while (obj := await aread_stream(reader)) is not None:
            await awrite_stream(obj, writer, **opts)
        writer.close()
        done.set()

    server = await start_server(handle)
    async with server:
        reader, writer = await open_connection(server)
        for v in values:
            await awrite_stream(v, writer, **opts)
        writer.write_eof()
        got = []
        while (obj := await aread_stream(reader)) is not None:
            got.append(obj)
        writer.close()
        await done.wait()
    return got


def run_tcp(values, **opts):
    async def start(handle):
        return await asyncio.start_server(handle, "127.0.0.1", 0)

    async def connect(server):
        port = server.sockets[0].getsockname()[1]
        return await asyncio.open_connection("127.0.0.1", port)

    return asyncio.run(echo_roundtrip(start, connect, values, **opts))


def test_tcp_roundtrip():
    got = run_tcp(VALUES)
    assert [describe(g) for g in got] == [describe(v) for v in VALUES]


def test_tcp_roundtrip_with_integrity():
    got = run_tcp(VALUES, check_integrity=True)
    assert [describe(g) for g in got] == [describe(v) for v in VALUES]


def test_unix_socket_roundtrip():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.sock")

        async def start(handle):
            return await asyncio.start_unix_server(handle, path)

        async def connect(server):
            return await asyncio.open_unix_connection(path)

        got = asyncio.run(echo_roundtrip(start, connect, VALUES))
    assert [describe(g) for g in got] == [describe(v) for v in VALUES]


def test_aread_views_are_zero_copy_of_one_aligned_buffer():
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(bytes(tenso.dumps({"a": np.arange(8.0), "b": np.arange(4)})))
        reader.feed_eof()
        return await aread_stream(reader)

    out = asyncio.run(main())
    assert out["a"].base is out["b"].base  # one packet buffer (the decoder's), received into once
    assert out["a"].base.owns_data and out["a"].base.source is None
    assert not out["a"].flags.writeable and not out["a"].flags.owndata  # views, not copies
    assert out["a"].tolist() == list(range(8))


def test_compressed_over_asyncio():
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(bytes(tenso.dumps(np.zeros(10_000), compress=True)) * 2)
        reader.feed_eof()
        return [await aread_stream(reader) for _ in range(3)]

    a, b, c = asyncio.run(main())
    assert np.array_equal(a, np.zeros(10_000)) and np.array_equal(b, a) and c is None


@pytest.mark.parametrize("cut", [3, 9, 30, 70])
def test_truncated_asyncio_stream(cut):
    packet = bytes(tenso.dumps(np.arange(16, dtype=np.float32)))

    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(packet[:cut])
        reader.feed_eof()
        return await aread_stream(reader)

    with pytest.raises(EOFError):  # asyncio.IncompleteReadError, as upstream
        asyncio.run(main())


def test_empty_asyncio_stream_is_none():
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_eof()
        return await aread_stream(reader)

    assert asyncio.run(main()) is None


def test_exported_from_package():
    assert tenso.aread_stream is aread_stream
    assert tenso.awrite_stream is awrite_stream
