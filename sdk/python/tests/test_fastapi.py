"""tenso.fastapi on a real uvicorn server (127.0.0.1, ephemeral port): TensoResponse's bytes and
headers, incremental reads, get_tenso_data's statuses for hostile bodies (compared with upstream's
own server), LZ4 and checksummed request bodies, and upstream's client against our server."""

import json

import numpy as np
import pytest
from fastapi import Depends, FastAPI
from fastapi.responses import Response

import tenso
from tenso.fastapi import CHUNK_BYTES, TensoResponse, get_tenso_data, tenso_data
from web_servers import httpx, serve, upstream_client, upstream_server

OCTET = {"content-type": "application/octet-stream"}
ARR = np.arange(12, dtype=np.float32).reshape(3, 4)


def make_app():
    app = FastAPI()
    big = np.arange(3 * CHUNK_BYTES // 4 + 5, dtype=np.float32)  # 3 slices and a bit

    @app.get("/tensor")
    async def tensor():
        return TensoResponse(ARR, filename="a.tnso")

    @app.get("/big")
    async def big_tensor():
        return TensoResponse(big, check_integrity=True)

    @app.get("/bundle")
    async def bundle():
        return TensoResponse({"a": ARR, "b": np.array([1, 2], np.int64)})

    @app.post("/describe")
    async def describe(x=Depends(get_tenso_data)):
        arrays = x if isinstance(x, dict) else {"": x}
        out = {
            k: {
                "shape": list(v.shape),
                "dtype": str(v.dtype),
                "writeable": bool(v.flags.writeable),
                "sum": float(v.astype(np.float64).sum()),
            }
            for k, v in arrays.items()
        }
        return Response(json.dumps(out), media_type="application/json")

    @app.post("/double")
    async def double(x=Depends(get_tenso_data)):
        return TensoResponse(x * 2)

    @app.post("/small")
    async def small(x=Depends(tenso_data(max_body_bytes=4096))):
        return TensoResponse(x)

    app.state.big = big
    return app


@pytest.fixture(scope="module")
def url():
    with serve(make_app()) as u:
        yield u


def test_response_is_exactly_the_packet(url):
    r = httpx.get(url + "/tensor")
    assert r.status_code == 200
    assert r.content == bytes(tenso.dumps(ARR))
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-length"] == str(len(r.content))
    assert r.headers["x-tenso-version"] == "4"
    assert r.headers["x-tenso-shape"] == "(3, 4)"
    assert r.headers["x-tenso-dtype"] == "float32"
    assert r.headers["content-disposition"] == 'attachment; filename="a.tnso"'


def test_response_body_is_never_copied():
    # Count the copies: tracemalloc sees every Python and numpy allocation (dumps' packet bytes
    # included). Draining a TensoResponse of 16 MiB allocates next to nothing, and the body
    # slices are the array's own memory.
    import asyncio
    import tracemalloc

    x = np.arange(4 << 20, dtype=np.float32)

    async def drain(resp):
        sizes, shared = [], 0
        async for chunk in resp.body_iterator:
            sizes.append(len(chunk))
            if isinstance(chunk, memoryview) and np.shares_memory(np.frombuffer(chunk, np.uint8), x):
                shared += len(chunk)
        return sizes, shared

    tracemalloc.start()
    try:
        resp = TensoResponse(x, check_integrity=True)
        sizes, shared = asyncio.run(drain(resp))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        tenso.dumps(x)  # the same measure sees a copying encoder
        _, dumps_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(sizes) == len(tenso.dumps(x, check_integrity=True)) == int(resp.headers["content-length"])
    assert shared == x.nbytes
    assert max(sizes) == CHUNK_BYTES
    assert peak < 1 << 20, peak
    assert dumps_peak >= x.nbytes


def test_bundle_response(url):
    r = httpx.get(url + "/bundle")
    got = tenso.loads(r.content)
    assert set(got) == {"a", "b"}
    np.testing.assert_array_equal(got["a"], ARR)
    np.testing.assert_array_equal(got["b"], [1, 2])
    assert "x-tenso-shape" not in r.headers  # a dict has no shape


def test_streamed_response_read_incrementally(url):
    big = np.arange(3 * CHUNK_BYTES // 4 + 5, dtype=np.float32)
    decoder = tenso._tenso.Decoder(None, False, False, False)
    chunks, obj = 0, None
    with httpx.stream("GET", url + "/big") as r:
        assert int(r.headers["content-length"]) == len(tenso.dumps(big, check_integrity=True))
        for chunk in r.iter_raw(64 * 1024):
            chunks += 1
            data = memoryview(chunk)
            while obj is None and len(data):
                consumed, obj = decoder.feed(data)
                data = data[consumed:]
            if chunks == 1:
                assert obj is None  # the first piece is not the whole packet
    assert chunks > 4
    np.testing.assert_array_equal(obj, big)


def test_get_tenso_data_gives_writeable_arrays(url):
    r = httpx.post(url + "/describe", content=bytes(tenso.dumps(ARR)), headers=OCTET)
    assert r.status_code == 200
    assert r.json() == {"": {"shape": [3, 4], "dtype": "float32", "writeable": True, "sum": 66.0}}


def test_lz4_and_checksummed_bodies(url):
    x = np.zeros((256, 256), np.float64)
    x[::7] = 3.5
    for opts in ({"compress": True}, {"check_integrity": True}, {"compress": True, "check_integrity": True}):
        packet = tenso.dumps(x, **opts)
        if opts.get("compress"):
            assert len(packet) < x.nbytes // 4
        r = httpx.post(url + "/double", content=bytes(packet), headers=OCTET)
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(tenso.loads(r.content), x * 2)


def test_chunked_request_body(url):
    packet = bytes(tenso.dumps(np.arange(100000, dtype=np.int32)))

    def pieces():
        for i in range(0, len(packet), 999):
            yield packet[i : i + 999]

    r = httpx.post(url + "/describe", content=pieces(), headers=OCTET)  # no Content-Length: chunked
    assert r.status_code == 200
    assert r.json()[""]["sum"] == float(np.arange(100000).sum())


def test_async_client(url):
    import asyncio

    async def go():
        async with httpx.AsyncClient(base_url=url) as c:
            rs = await asyncio.gather(
                *(c.post("/double", content=bytes(tenso.dumps(ARR + i)), headers=OCTET) for i in range(8))
            )
        return [tenso.loads(r.content) for r in rs]

    for i, y in enumerate(asyncio.run(go())):
        np.testing.assert_array_equal(y, (ARR + i) * 2)


def _packet():
    return bytes(tenso.dumps(np.arange(64, dtype=np.float32), check_integrity=True))


def _corrupt_body():
    p = bytearray(_packet())
    p[100] ^= 0xFF
    return bytes(p)


def _huge_header():
    # A valid header whose shape declares 2**40 float32 elements, then nothing.
    p = bytearray(tenso.dumps(np.zeros(1, np.float32)))
    p[12:16] = (0xFFFFFFFF).to_bytes(4, "little")
    return bytes(p)


# (name, body, headers): what each hostile request sends.
HOSTILE = [
    ("wrong content type", _packet(), {"content-type": "application/json"}),
    ("no content type", _packet(), {}),
    ("empty", b"", OCTET),
    ("garbage", b"this is not a tenso packet at all" * 3, OCTET),
    ("truncated", _packet()[:-20], OCTET),
    ("header only", _packet()[:10], OCTET),
    ("checksum", _corrupt_body(), OCTET),
    ("too many elements", _huge_header(), OCTET),
]


def _status_and_detail(url, endpoint, body, headers):
    r = httpx.post(url + endpoint, content=body, headers=headers)
    return r.status_code, r.json()["detail"]


@pytest.mark.parametrize("name,body,headers", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_bodies_get_4xx(url, name, body, headers):
    status, detail = _status_and_detail(url, "/double", body, headers)
    if "content type" in name:
        assert (status, detail) == (400, "Expected application/octet-stream content type.")
        return
    assert status == 422
    assert detail.startswith("Invalid Tenso packet: ")
    expected = {
        "empty": "Packet too short",
        "garbage": "Invalid tenso packet",
        "truncated": "stream ended",
        "header only": "stream ended",
        "checksum": "Integrity check failed",
        "too many elements": "elements",  # part B brings upstream's exact wording
    }[name]
    assert expected.lower() in detail.lower(), detail


def test_hostile_statuses_match_upstream(url):
    with upstream_server() as up:
        for name, body, headers in HOSTILE:
            ours = httpx.post(url + "/double", content=body, headers=headers).status_code
            theirs = httpx.post(up + "/double", content=body, headers=headers).status_code
            assert ours == theirs, name


def test_oversized_body_is_413_declared_or_not(url):
    big = bytes(tenso.dumps(np.zeros(2048, np.float32)))  # > 4096 bytes
    r = httpx.post(url + "/small", content=big, headers=OCTET)
    assert r.status_code == 413
    assert r.json()["detail"] == f"Invalid Tenso packet: the body of {len(big)} bytes exceeds the limit of 4096 bytes."

    def pieces():  # chunked: no Content-Length to check up front
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    r = httpx.post(url + "/small", content=pieces(), headers=OCTET)
    assert r.status_code == 413
    assert "4096" in r.json()["detail"]  # the packet's header already claims more
    ok = bytes(tenso.dumps(np.zeros(16, np.float32)))
    r = httpx.post(url + "/small", content=ok, headers=OCTET)
    assert r.status_code == 200 and r.content == ok


def test_oversized_packet_header_refused_before_the_body(url):
    # A small body whose header declares a packet far over the limit: 413 from the header.
    declared = bytes(tenso.dumps(np.zeros(100000, np.float32)))[:200]
    r = httpx.post(url + "/small", content=declared, headers=OCTET)
    assert r.status_code == 413, r.text
    assert r.json()["detail"].startswith("Invalid Tenso packet: ")


def test_tenso_data_rejects_a_bad_limit():
    with pytest.raises(ValueError):
        tenso_data(max_body_bytes=0)


def test_upstream_client_against_our_server(url):
    x = np.linspace(0, 1, 3000, dtype=np.float32).reshape(30, 100)
    reqs = [
        {"endpoint": "/double", "packet": bytes(tenso.dumps(x)).hex(), "mode": mode, "compress": compress}
        for mode, compress in (("predict", False), ("predict", True), ("apredict", False), ("stream", False))
    ]
    reqs.append(
        {"endpoint": "/small", "packet": bytes(tenso.dumps(np.zeros(4096, np.float32))).hex(), "mode": "predict"}
    )
    reqs.append({"endpoint": "/double", "packet": bytes(tenso.dumps(x)).hex(), "mode": "client"})
    results = upstream_client(url, reqs)
    for res in results[:4]:
        np.testing.assert_array_equal(tenso.loads(bytes.fromhex(res["packet"])), x * 2)
    assert results[4] == {"error": "HTTPStatusError", "status": 413}
    # Upstream's own TensoFastAPIClient cannot send at all with the httpx it requires (it hands
    # httpx a memoryview, which httpx iterates as ints); ours sends the same bytes fine.
    assert results[5]["error"] == "TypeError", results[5]


def test_upstream_response_read_by_us():
    with upstream_server() as up:
        r = httpx.get(up + "/tensor")
        np.testing.assert_array_equal(tenso.loads(r.content), ARR)
        assert r.content == bytes(tenso.dumps(ARR))  # byte-identical packets
        assert r.headers["x-tenso-shape"] == "(3, 4)"
