"""tenso.client.TensoFastAPIClient against real uvicorn servers: ours (sync, async, streamed,
LZ4, headers, errors, truncated replies) and upstream 0.24's own server."""

import asyncio

import numpy as np
import pytest
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response

import tenso
from tenso.client import TensoFastAPIClient
from tenso.fastapi import TensoResponse, get_tenso_data
from web_servers import httpx, serve, upstream_server

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def make_app():
    app = FastAPI()
    seen = {}

    @app.post("/double")
    async def double(x=Depends(get_tenso_data)):
        return TensoResponse(x * 2)

    @app.post("/bundle")
    async def bundle(x=Depends(get_tenso_data)):
        return TensoResponse({k: v + 1 for k, v in x.items()})

    @app.post("/raw")
    async def raw(request: Request):
        # What the client sent, byte for byte, and its headers.
        body = await request.body()
        seen["headers"] = dict(request.headers)
        seen["body"] = body
        return Response(body, media_type="application/octet-stream")

    @app.post("/truncated")
    async def truncated(x=Depends(get_tenso_data)):
        return Response(bytes(tenso.dumps(x))[:-7], media_type="application/octet-stream")

    @app.post("/large")
    async def large(x=Depends(get_tenso_data)):
        return TensoResponse(np.full(int(x[0]), 1.5, np.float32))

    app.state.seen = seen
    return app


@pytest.fixture(scope="module")
def server():
    app = make_app()
    with serve(app) as url:
        yield url, app.state.seen


def test_predict(server):
    url, _ = server
    with TensoFastAPIClient(url + "/") as c:  # a trailing slash is dropped, as upstream
        y = c.predict("/double", X)
        np.testing.assert_array_equal(y, X * 2)
        assert y.dtype == np.float32
        got = c.predict("/bundle", {"a": X, "b": np.array([5], np.int16)})
        np.testing.assert_array_equal(got["a"], X + 1)
        np.testing.assert_array_equal(got["b"], [6])
    assert c._sync_client is None  # closed by the context manager


def test_request_bytes_and_headers(server):
    url, seen = server
    c = TensoFastAPIClient(url, check_integrity=True, headers={"authorization": "Bearer t"})
    c.predict("/raw", X)
    assert seen["body"] == bytes(tenso.dumps(X, check_integrity=True))
    assert seen["headers"]["content-type"] == "application/octet-stream"
    assert seen["headers"]["authorization"] == "Bearer t"
    c.predict("/raw", X, compress=True)
    assert seen["body"] == bytes(tenso.dumps(X, check_integrity=True, compress=True))
    c.close()
    c.close()  # idempotent


def test_compressed_request_round_trip(server):
    url, seen = server
    x = np.zeros((512, 512), np.float32)
    with TensoFastAPIClient(url) as c:
        np.testing.assert_array_equal(c.predict("/double", x, compress=True), x)
        c.predict("/raw", x, compress=True)
    assert len(seen["body"]) < x.nbytes // 50  # the body really went compressed


def test_apredict_concurrent(server):
    url, _ = server

    async def go():
        async with TensoFastAPIClient(url) as c:
            ys = await asyncio.gather(*(c.apredict("/double", X + i, compress=i % 2 == 1) for i in range(6)))
            assert c._async_client is not None
        assert c._async_client is None
        return ys

    for i, y in enumerate(asyncio.run(go())):
        np.testing.assert_array_equal(y, (X + i) * 2)


def test_stream_predict_large(server):
    url, _ = server
    n = 3_000_000  # 12 MB reply, many chunks
    with TensoFastAPIClient(url) as c:
        y = c.stream_predict("/large", np.array([n], np.int64))
    assert y.shape == (n,) and y.dtype == np.float32
    assert float(y[0]) == 1.5 and float(y[-1]) == 1.5


def test_stream_predict_truncated_reply(server):
    url, _ = server
    with TensoFastAPIClient(url) as c:
        with pytest.raises(EOFError, match="(?i)stream ended"):
            c.stream_predict("/truncated", X)
        with pytest.raises(ValueError):
            c.predict("/truncated", X)


def test_http_errors_raise(server):
    url, _ = server
    with TensoFastAPIClient(url) as c:
        with pytest.raises(httpx.HTTPStatusError) as e:
            c.predict("/nowhere", X)
        assert e.value.response.status_code == 404

    async def go():
        c = TensoFastAPIClient(url)
        try:
            await c.apredict("/nowhere", X)
        finally:
            await c.aclose()

    with pytest.raises(httpx.HTTPStatusError):
        asyncio.run(go())


def test_our_client_against_upstream_server():
    x = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    with upstream_server() as up:
        with TensoFastAPIClient(up) as c:
            np.testing.assert_array_equal(c.predict("/double", x), x * 2)
            np.testing.assert_array_equal(c.predict("/double", x, compress=True), x * 2)
            np.testing.assert_array_equal(c.stream_predict("/echo", x), x)
            bundle = c.predict("/echo", {"w": x, "b": np.arange(3)})
            np.testing.assert_array_equal(bundle["w"], x)

        async def go():
            async with TensoFastAPIClient(up) as ac:
                return await ac.apredict("/double", x)

        np.testing.assert_array_equal(asyncio.run(go()), x * 2)
