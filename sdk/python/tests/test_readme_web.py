"""Upstream tenso 0.24's README examples for tenso.fastapi and tenso.grpc, and the examples in
upstream's tenso.serve / tenso.client docstrings, run unchanged against ours (on real servers);
and the core ``import tenso`` imports none of the web extras."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tenso
from web_servers import httpx, serve

# Verbatim from upstream's README ("FastAPI Integration").
README_FASTAPI = '''
from fastapi import FastAPI
import numpy as np
from tenso.fastapi import TensoResponse

app = FastAPI()

@app.get("/tensor")
async def get_tensor():
    data = np.ones((1024, 1024), dtype=np.float32)
    return TensoResponse(data) # Zero-copy streaming response
'''

# Verbatim from upstream's README ("gRPC Integration").
README_GRPC = '''
from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc
import tenso

# In your Servicer
def Predict(self, request, context):
    data = tenso.loads(request.tensor_packet)
    result = data * 2
    return tenso_msg_pb2.PredictResponse(
        result_packet=bytes(tenso.dumps(result))
    )
'''

# Verbatim from upstream's tenso/serve.py docstring, but for the last line, run(app, workers=4),
# which would bind 0.0.0.0:8000: it is run below on 127.0.0.1 with an ephemeral port.
SERVE_DOC = '''
from tenso.serve import create_app, run

app = create_app()

@app.tenso_endpoint("/infer")
def infer(tensor):
    return tensor * 2.0
'''


def _upstream_readme():
    python = os.environ.get("TENSO_UPSTREAM_PYTHON")
    if not python:
        return None
    code = "import importlib.metadata as m; print(m.metadata('tenso').get_payload())"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("snippet", [README_FASTAPI, README_GRPC], ids=["fastapi", "grpc"])
def test_snippets_are_upstreams_own(snippet):
    readme = _upstream_readme()
    if readme is None:
        pytest.skip("the upstream venv is not available")
    assert snippet.strip() in readme


def test_readme_fastapi_example():
    ns = {}
    exec(README_FASTAPI, ns)
    with serve(ns["app"]) as url:
        r = httpx.get(url + "/tensor")
    got = tenso.loads(r.content)
    assert got.shape == (1024, 1024) and got.dtype == np.float32 and float(got.sum()) == 1024 * 1024


def test_readme_grpc_example():
    grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
    from tenso.serve import grpc_server

    ns = {}
    exec(README_GRPC, ns)
    servicer = type("Servicer", (ns["tenso_msg_pb2_grpc"].TensorInferenceServicer,), {"Predict": ns["Predict"]})
    server, port = grpc_server(servicer(), port=0, host="127.0.0.1", max_workers=2)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = ns["tenso_msg_pb2_grpc"].TensorInferenceStub(ch)
            x = np.arange(6, dtype=np.int16)
            reply = stub.Predict(ns["tenso_msg_pb2"].PredictRequest(tensor_packet=bytes(tenso.dumps(x))))
    finally:
        server.stop(None)
    np.testing.assert_array_equal(tenso.loads(reply.result_packet), x * 2)


def test_serve_and_client_docstring_examples():
    from tenso.client import TensoFastAPIClient

    ns = {}
    exec(SERVE_DOC, ns)
    with serve(ns["app"].app) as url:
        # upstream's tenso/client.py docstring, against that server
        client = TensoFastAPIClient(url)
        result = client.predict("/infer", np.random.randn(1, 224, 224, 3).astype(np.float32))
        assert result.shape == (1, 224, 224, 3)
        client.close()


WEB_MODULES = ("fastapi", "starlette", "uvicorn", "httpx", "httpcore", "anyio", "pydantic", "grpc", "google.protobuf")


def test_core_import_loads_no_extra():
    code = "import json, sys, tenso; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    bad = [m for m in loaded if m.split(".")[0] in {w.split(".")[0] for w in WEB_MODULES} and m != "tenso"]
    bad = [m for m in bad if not (m == "google" and "google.protobuf" not in loaded)]
    assert bad == []
    # tenso.grpc itself is importable without grpcio or protobuf (only its stub modules need them).
    code = "import sys, tenso.grpc; print('grpc' in sys.modules, 'google.protobuf' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split() == [
        "False",
        "False",
    ]
