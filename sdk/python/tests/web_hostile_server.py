"""A server for test_web_hostile.py in a process of its own, so that its memory (VmHWM) is its
alone: ``http`` serves tenso.serve's app (an endpoint reading the body with get_tenso_data, and
GET /ping) with uvicorn; ``grpc`` serves tenso.serve.grpc_server with a servicer that decodes
with tenso.grpc.request_tensor. Both on 127.0.0.1, an ephemeral port, printed as {"port": N};
then it serves until killed.

Both append to the file in argv[2], one JSON list per line, ``["ping", t]`` when a small call is
served and ``["decode", start, end]`` around each decode (time.monotonic(), the same clock in
every process here): a decode that blocks the server serves no ping between its start and end."""

import json
import socket
import sys
import threading
import time

import numpy as np

_events_lock = threading.Lock()
_events = None


def record(*event):
    with _events_lock:
        _events.write(json.dumps(event) + "\n")
        _events.flush()


def timed_decode(decode):
    """`decode`, recording each call as a decode event."""

    def wrapper(*args, **kwargs):
        start = time.monotonic()
        try:
            return decode(*args, **kwargs)
        finally:
            record("decode", start, time.monotonic())

    return wrapper


def summary(x):
    """What the endpoints answer: size, a sample's sum and whether the array is writeable."""
    return np.array([x.size, int(x[:: 1 << 16].astype(np.int64).sum()), int(x.flags.writeable)], np.int64)


def serve_http():
    import uvicorn

    import tenso.fastapi
    from tenso.serve import create_app

    # Every decode step of a request body, on the loop or off it.
    tenso.fastapi._feed = timed_decode(tenso.fastapi._feed)

    app = create_app(health_check=False)

    @app.tenso_endpoint("/describe")
    def describe(x):
        return summary(x)

    @app.app.get("/ping")
    async def ping():
        record("ping", time.monotonic())
        return {"ok": True}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    config = uvicorn.Config(app.app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def serve_grpc():
    import tenso
    from tenso.grpc import request_tensor, tenso_msg_pb2, tenso_msg_pb2_grpc
    from tenso.serve import grpc_server

    decode = timed_decode(request_tensor)

    class Describe(tenso_msg_pb2_grpc.TensorInferenceServicer):
        def Predict(self, request, context):
            if len(request.tensor_packet) < (1 << 20):
                record("ping", time.monotonic())
                x = request_tensor(request, context)
            else:
                x = decode(request, context)
            return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(summary(x))), status="ok")

    server, port = grpc_server(Describe(), port=0, host="127.0.0.1", max_workers=4)
    print(json.dumps({"port": port}), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    _events = open(sys.argv[2], "a")
    {"http": serve_http, "grpc": serve_grpc}[sys.argv[1]]()
