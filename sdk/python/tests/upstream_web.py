"""Runs under the pinned upstream tenso (0.24.0) venv: upstream's own web modules, for the interop
tests (the two packages share an import name, so they never share an interpreter).

  upstream_web.py serve         serves upstream's create_app() on 127.0.0.1:<ephemeral> with
                                uvicorn; prints {"port": N} on one line, then serves until killed.
                                Routes: POST /double (x * 2), POST /echo (the request, as is),
                                GET /tensor (np.arange(12, float32).reshape(3, 4) as TensoResponse),
                                GET /health.
  upstream_web.py client URL    reads a JSON list of requests on stdin:
                                {"endpoint", "packet": HEX, "mode": "predict"|"apredict"|"stream",
                                 "compress": bool}; decodes each packet with upstream's loads,
                                sends it with upstream's TensoFastAPIClient and prints a JSON list of
                                {"packet": HEX} (the reply re-encoded by upstream's dumps) or
                                {"error": type, "status": N}.
"""

import asyncio
import json
import socket
import sys

import numpy as np
import tenso  # upstream's


def serve():
    import uvicorn
    from tenso.fastapi import TensoResponse
    from tenso.serve import create_app

    app = create_app()

    @app.tenso_endpoint("/double")
    def double(x):
        return x * 2

    @app.tenso_endpoint("/echo")
    async def echo(x):
        return x

    @app.app.get("/tensor")
    async def tensor():
        return TensoResponse(np.arange(12, dtype=np.float32).reshape(3, 4))

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    server = uvicorn.Server(uvicorn.Config(app.app, log_level="warning", lifespan="off"))
    server.run(sockets=[sock])


def client(url):
    import httpx
    from tenso.client import TensoFastAPIClient

    results = []
    c = TensoFastAPIClient(url)
    for req in json.load(sys.stdin):
        x = tenso.loads(bytes.fromhex(req["packet"]), copy=True)
        try:
            if req["mode"] == "predict":
                y = c.predict(req["endpoint"], x, compress=req.get("compress", False))
            elif req["mode"] == "apredict":
                y = asyncio.run(c.apredict(req["endpoint"], x, compress=req.get("compress", False)))
                c._async_client = None  # bound to the loop asyncio.run closed
            else:
                y = c.stream_predict(req["endpoint"], x)
            results.append({"packet": bytes(tenso.dumps(y)).hex()})
        except httpx.HTTPStatusError as e:
            results.append({"error": type(e).__name__, "status": e.response.status_code})
    c.close()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        client(sys.argv[2])
