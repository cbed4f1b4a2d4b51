"""Runs under the pinned upstream tenso (0.24.0) venv: upstream's own web modules, for the interop
tests (the two packages share an import name, so they never share an interpreter).

  upstream_web.py serve         serves upstream's create_app() on 127.0.0.1:<ephemeral> with
                                uvicorn; prints {"port": N} on one line, then serves until killed.
                                Routes: POST /double (x * 2), POST /echo (the request, as is),
                                GET /tensor (np.arange(12, float32).reshape(3, 4) as TensoResponse),
                                GET /health.
  upstream_web.py client URL    reads a JSON list of requests on stdin:
                                {"endpoint", "packet": HEX, "mode": "predict"|"apredict"|"stream"|
                                 "client", "compress": bool}; decodes each packet with upstream's
                                loads, re-encodes it with upstream's dumps, sends it with httpx as
                                upstream's TensoFastAPIClient does (sync, async, streamed) and prints
                                a JSON list of {"packet": HEX} (the reply decoded by upstream's
                                loads, re-encoded by its dumps) or {"error": type, "status": N}.
                                "client": upstream's TensoFastAPIClient.predict itself.
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
    # Listening before the port is announced: a bound socket that is not yet listening refuses
    # connections, and uvicorn calls listen() only once its loop has started.
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    server = uvicorn.Server(uvicorn.Config(app.app, log_level="warning", lifespan="off"))
    server.run(sockets=[sock])


def client(url):
    import httpx

    from tenso.client import TensoFastAPIClient

    octet = {"content-type": "application/octet-stream"}
    results = []
    sync = httpx.Client(base_url=url)
    for req in json.load(sys.stdin):
        x = tenso.loads(bytes.fromhex(req["packet"]), copy=True)
        # The request upstream's TensoFastAPIClient means to make. Its own methods pass dumps()'s
        # memoryview to httpx, which iterates it as ints and raises TypeError before sending
        # (httpx 0.28, the version upstream requires): mode "client" shows that.
        body = bytes(tenso.dumps(x, compress=req.get("compress", False)))
        try:
            if req["mode"] == "client":
                try:
                    TensoFastAPIClient(url).predict(req["endpoint"], x)
                    results.append({"ok": True})
                except TypeError as e:
                    results.append({"error": "TypeError", "message": str(e)})
                continue
            if req["mode"] == "predict":
                r = sync.post(req["endpoint"], content=body, headers=octet)
                r.raise_for_status()
                y = tenso.loads(r.content)
            elif req["mode"] == "apredict":

                async def go():
                    async with httpx.AsyncClient(base_url=url) as c:
                        r = await c.post(req["endpoint"], content=body, headers=octet)
                        r.raise_for_status()
                        return tenso.loads(r.content)

                y = asyncio.run(go())
            else:
                with sync.stream("POST", req["endpoint"], content=body, headers=octet) as r:
                    r.raise_for_status()
                    y = tenso.loads(b"".join(r.iter_bytes()))
            results.append({"packet": bytes(tenso.dumps(y)).hex()})
        except httpx.HTTPStatusError as e:
            results.append({"error": type(e).__name__, "status": e.response.status_code})
    sync.close()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        client(sys.argv[2])
