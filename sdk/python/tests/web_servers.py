"""Real servers for the web tests: uvicorn serving an ASGI app from a thread of this process on
127.0.0.1 (an ephemeral port), and upstream tenso 0.24's own server and client running in the
upstream venv (tests/upstream_web.py), which cannot share this interpreter."""

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

fastapi = pytest.importorskip("fastapi", reason="the fastapi extra is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the fastapi extra is not installed")
httpx = pytest.importorskip("httpx", reason="the fastapi extra is not installed")


@contextlib.contextmanager
def serve(app):
    """Run ``app`` (an ASGI app) with uvicorn on 127.0.0.1:<ephemeral>; yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def upstream_python():
    python = os.environ.get("TENSO_UPSTREAM_PYTHON")
    if not python:
        if os.environ.get("TENSO_REQUIRE_UPSTREAM") == "1":
            pytest.fail("TENSO_UPSTREAM_PYTHON is not set")
        pytest.skip("the upstream venv is not available (run-tests.sh makes it)")
    probe = subprocess.run([python, "-c", "import fastapi, uvicorn, httpx"], capture_output=True)
    if probe.returncode != 0:
        if os.environ.get("TENSO_REQUIRE_UPSTREAM") == "1":
            pytest.fail("the upstream venv lacks fastapi/uvicorn/httpx: run sdk/python/run-tests.sh")
        pytest.skip("the upstream venv lacks fastapi/uvicorn/httpx")
    return python


def _env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@contextlib.contextmanager
def upstream_server():
    """Upstream's create_app/TensoResponse/get_tenso_data served by uvicorn in the upstream venv
    (routes: see upstream_web.py); yields the base URL."""
    proc = subprocess.Popen(
        [upstream_python(), str(HERE / "upstream_web.py"), "serve"],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(HERE),
    )
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"upstream server did not start (exit {proc.wait()})")
        yield f"http://127.0.0.1:{json.loads(line)['port']}"
    finally:
        proc.terminate()
        proc.wait(30)


def upstream_client(url, requests):
    """Runs upstream's TensoFastAPIClient against ``url``: one result per request (see
    upstream_web.py's ``client`` mode)."""
    out = subprocess.run(
        [upstream_python(), str(HERE / "upstream_web.py"), "client", url],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        env=_env(),
        cwd=str(HERE),
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"upstream client failed:\n{out.stderr}")
    return json.loads(out.stdout)
