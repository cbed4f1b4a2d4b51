"""One HTTP inference server for http_bench.py, run in its own process: uvicorn (one worker,
httptools) on 127.0.0.1:<ephemeral>, printing {"port": N} once it listens. The handler is the
identity (the "model" returns its input), so the round trip measures the transport only.

    python http_server.py tenso   # tenso.fastapi's get_tenso_data + TensoResponse
    python http_server.py json    # JSON {"shape", "data": nested lists} both ways
    python http_server.py npy     # np.save bytes both ways

Run with the upstream venv's python, ``tenso`` is upstream 0.24's tenso.fastapi.
"""

import io
import json
import socket
import sys

import numpy as np
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response


def make_app(mode):
    app = FastAPI()
    if mode == "tenso":
        from tenso.fastapi import TensoResponse, get_tenso_data

        @app.post("/infer")
        async def infer(x=Depends(get_tenso_data)):
            return TensoResponse(x)

    elif mode == "json":

        @app.post("/infer")
        async def infer(request: Request):
            body = json.loads(await request.body())
            x = np.asarray(body["data"], dtype=np.float32)
            return Response(json.dumps({"shape": list(x.shape), "data": x.tolist()}), media_type="application/json")

    elif mode == "npy":

        @app.post("/infer")
        async def infer(request: Request):
            x = np.load(io.BytesIO(await request.body()))
            out = io.BytesIO()
            np.save(out, x)
            return Response(out.getbuffer(), media_type="application/octet-stream")

    else:
        raise SystemExit(f"unknown mode {mode}")
    return app


if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    config = uvicorn.Config(make_app(sys.argv[1]), log_level="warning", lifespan="off", http="httptools")
    uvicorn.Server(config).run(sockets=[sock])
