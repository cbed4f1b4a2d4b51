"""tenso.serve: TensoApp endpoints and /health on a real uvicorn server, run() in a subprocess
(one worker, the multi-worker fallback, and real worker processes from an import string), and
upstream's TensoApp against the same requests."""

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tenso
from tenso.serve import TensoApp, _detect_workers, create_app, run
from web_servers import httpx, serve, upstream_server

OCTET = {"content-type": "application/octet-stream"}
X = np.arange(10, dtype=np.float64)


def make_app():
    app = create_app(title="t")

    @app.tenso_endpoint("/double")
    def double(x):
        return x * 2

    @app.tenso_endpoint("/asum", method="put", check_integrity=True)
    async def asum(x):
        return {k: np.asarray(v.sum()) for k, v in x.items()}

    strict = TensoApp(check_integrity=True, max_body_bytes=1000)

    @strict.tenso_endpoint("/echo")
    def echo(x):
        return x

    return app, strict


@pytest.fixture(scope="module")
def urls():
    app, strict = make_app()
    with serve(app.app) as a, serve(strict.app) as b:
        yield a, b


def test_endpoint_sync_and_async(urls):
    url, _ = urls
    r = httpx.post(url + "/double", content=bytes(tenso.dumps(X)), headers=OCTET)
    assert r.status_code == 200
    assert r.content == bytes(tenso.dumps(X * 2))
    r = httpx.put(url + "/asum", content=bytes(tenso.dumps({"a": X, "b": np.ones(3, np.int32)})), headers=OCTET)
    assert r.status_code == 200
    assert r.content == bytes(tenso.dumps({"a": np.asarray(45.0), "b": np.asarray(3)}, check_integrity=True))
    assert httpx.post(url + "/asum", content=bytes(tenso.dumps({"a": X})), headers=OCTET).status_code == 405


def test_health(urls):
    url, strict = urls
    assert httpx.get(url + "/health").json() == {"status": "ok", "endpoints": ["/double", "/asum"]}
    assert httpx.get(strict + "/health").status_code == 404  # TensoApp() alone adds none


def test_app_defaults_and_limits(urls):
    _, strict = urls
    r = httpx.post(strict + "/echo", content=bytes(tenso.dumps(np.ones(4))), headers=OCTET)
    assert r.content == bytes(tenso.dumps(np.ones(4), check_integrity=True))
    r = httpx.post(strict + "/echo", content=bytes(tenso.dumps(np.ones(400))), headers=OCTET)
    assert r.status_code == 413
    r = httpx.post(strict + "/echo", content=b"nope", headers=OCTET)
    assert r.status_code == 422
    r = httpx.post(strict + "/echo", content=bytes(tenso.dumps(np.ones(4))), headers={"content-type": "text/plain"})
    assert r.status_code == 400


def test_statuses_match_upstream_tenso_app(urls):
    url, _ = urls
    cases = [
        (bytes(tenso.dumps(X)), OCTET),
        (b"garbage!" * 4, OCTET),
        (bytes(tenso.dumps(X))[:-3], OCTET),
        (bytes(tenso.dumps(X)), {"content-type": "text/plain"}),
    ]
    with upstream_server() as up:
        for body, headers in cases:
            ours = httpx.post(url + "/double", content=body, headers=headers)
            theirs = httpx.post(up + "/double", content=body, headers=headers)
            assert ours.status_code == theirs.status_code
            if ours.status_code == 200:
                assert ours.content == theirs.content
        assert httpx.get(up + "/health").json()["status"] == "ok"


def test_detect_workers():
    assert _detect_workers() == max(1, min((os.cpu_count() or 1) // 2, 8))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_health(url, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.communicate()}")
        try:
            return httpx.get(url + "/health", timeout=2)
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("server did not answer /health")


SERVER = """
import numpy as np
from tenso.serve import create_app, run

app = create_app()

@app.tenso_endpoint("/infer")
def infer(tensor):
    return tensor * 2.0

if __name__ == "__main__":
    import sys
    workers = int(sys.argv[2])
    run(app, host="127.0.0.1", port=int(sys.argv[1]), workers=workers, log_level="info",
        app_import_string=sys.argv[3] if len(sys.argv) > 3 else None)
"""


@pytest.mark.parametrize("workers,import_string", [(1, None), (2, None), (2, "server:app.app")])
def test_run_serves_with_uvicorn(tmp_path, workers, import_string):
    (tmp_path / "server.py").write_text(textwrap.dedent(SERVER))
    port = _free_port()
    args = [sys.executable, "server.py", str(port), str(workers)] + ([import_string] if import_string else [])
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        assert _wait_health(url, proc).json() == {"status": "ok", "endpoints": ["/infer"]}
        y = tenso.loads(httpx.post(url + "/infer", content=bytes(tenso.dumps(X)), headers=OCTET).content)
        np.testing.assert_array_equal(y, X * 2.0)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    fell_back = "Falling back to workers=1" in err
    assert fell_back == (workers > 1 and import_string is None), err
    if import_string:
        assert err.count("Started server process") >= 2, err  # real worker processes


def test_run_signature_matches_upstream():
    import inspect

    params = inspect.signature(run).parameters
    assert list(params) == ["app", "host", "port", "workers", "log_level", "app_import_string"]
    assert params["host"].default == "0.0.0.0" and params["port"].default == 8000
