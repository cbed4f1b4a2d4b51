"""A server for test_web_hostile.py in a process of its own, so that its memory (VmHWM) is its
alone: ``http`` serves tenso.serve's app (an endpoint reading the body with get_tenso_data, and
GET /ping) with uvicorn; ``grpc`` serves tenso.serve.grpc_server with a servicer that decodes
with tenso.grpc.request_tensor. Both on 127.0.0.1, an ephemeral port, printed as {"port": N};
then it serves until killed."""

import json
import socket
import sys

import numpy as np


def summary(x):
    """What the endpoints answer: size, a sample's sum and whether the array is writeable."""
    return np.array([x.size, int(x[:: 1 << 16].astype(np.int64).sum()), int(x.flags.writeable)], np.int64)


def serve_http():
    import uvicorn

    from tenso.serve import create_app

    app = create_app(health_check=False)

    @app.tenso_endpoint("/describe")
    def describe(x):
        return summary(x)

    @app.app.get("/ping")
    async def ping():
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

    class Describe(tenso_msg_pb2_grpc.TensorInferenceServicer):
        def Predict(self, request, context):
            x = request_tensor(request, context)
            return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(summary(x))), status="ok")

    server, port = grpc_server(Describe(), port=0, host="127.0.0.1", max_workers=4)
    print(json.dumps({"port": port}), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    {"http": serve_http, "grpc": serve_grpc}[sys.argv[1]]()
