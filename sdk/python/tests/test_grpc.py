"""tenso.grpc and tenso.serve.run_grpc on a real grpcio server (127.0.0.1): the TensorInference
service carrying Tenso packets, message-size limits, the committed stubs matching what the pinned
grpcio-tools generates, and packets from upstream decoded by our servicer."""

import filecmp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
pytest.importorskip("google.protobuf", reason="the grpc extra is not installed")

import tenso  # noqa: E402
from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc  # noqa: E402
from tenso.serve import grpc_server  # noqa: E402

HERE = Path(__file__).resolve().parent
SDK = HERE.parent


class Doubler(tenso_msg_pb2_grpc.TensorInferenceServicer):
    """Upstream README's servicer, plus the model name echoed in ``status``."""

    def Predict(self, request, context):
        data = tenso.loads(request.tensor_packet)
        result = data * 2
        return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(result)), status=request.model_name)


@pytest.fixture(scope="module")
def channel():
    server, port = grpc_server(Doubler(), port=0, host="127.0.0.1", max_workers=4, max_message_length=16 << 20)
    ch = grpc.insecure_channel(
        f"127.0.0.1:{port}",
        options=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)],
    )
    try:
        yield ch
    finally:
        ch.close()
        server.stop(None)


def test_predict_round_trip(channel):
    stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
    x = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)  # 4 MiB
    reply = stub.Predict(tenso_msg_pb2.PredictRequest(model_name="m1", tensor_packet=bytes(tenso.dumps(x))))
    assert reply.status == "m1"
    assert reply.result_packet == bytes(tenso.dumps(x * 2))


def test_compressed_and_bundle_packets(channel):
    stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
    x = np.zeros((300, 300), np.float64)
    reply = stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=bytes(tenso.dumps(x, compress=True))))
    np.testing.assert_array_equal(tenso.loads(reply.result_packet), x)


def test_message_over_the_servers_limit(channel):
    stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
    big = bytes(tenso.dumps(np.zeros(5 << 20, np.float32)))  # 20 MiB > 16 MiB
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=big))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_bad_packet_is_an_rpc_error_not_a_dead_server(channel):
    stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=b"garbage"))
    assert e.value.code() == grpc.StatusCode.UNKNOWN
    reply = stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=bytes(tenso.dumps(np.ones(2)))))
    np.testing.assert_array_equal(tenso.loads(reply.result_packet), [2.0, 2.0])


def test_messages_as_upstream_declares_them():
    fields = {f.name: (f.number, f.type) for f in tenso_msg_pb2.PredictRequest.DESCRIPTOR.fields}
    assert fields == {"model_name": (1, 9), "tensor_packet": (2, 12)}  # string, bytes
    fields = {f.name: (f.number, f.type) for f in tenso_msg_pb2.PredictResponse.DESCRIPTOR.fields}
    assert fields == {"result_packet": (1, 12), "status": (2, 9)}
    service = tenso_msg_pb2.DESCRIPTOR.services_by_name["TensorInference"]
    assert service.full_name == "tenso_grpc.TensorInference"
    assert [m.name for m in service.methods] == ["Predict"]
    from tenso.grpc import benchmark_msg_pb2, benchmark_msg_pb2_grpc

    assert benchmark_msg_pb2.DESCRIPTOR.package == "tenso_benchmark"
    assert hasattr(benchmark_msg_pb2_grpc, "BenchmarkerStub")


def test_proto_files_are_upstreams():
    python = os.environ.get("TENSO_UPSTREAM_PYTHON")
    if not python:
        pytest.skip("the upstream venv is not available")
    out = subprocess.run(
        [python, "-c", "import tenso.grpc, os; print(os.path.dirname(tenso.grpc.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
    )
    theirs = Path(out.stdout.strip())
    # Upstream ships the .proto files only: its README's import fails there.
    failed = subprocess.run([python, "-c", "from tenso.grpc import tenso_msg_pb2"], capture_output=True, text=True)
    assert failed.returncode != 0 and "ImportError: cannot import name" in failed.stderr
    ours = Path(tenso_msg_pb2.__file__).parent
    for name in ("tenso_msg.proto", "benchmark_msg.proto"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes()


def test_committed_stubs_are_what_the_generator_makes(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools is not installed")
    subprocess.run(
        ["bash", str(SDK / "scripts" / "gen-grpc.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    committed = SDK / "src" / "tenso" / "grpc"
    names = sorted(p.name for p in (tmp_path / "tenso" / "grpc").iterdir())
    assert len(names) == 6
    for name in names:
        assert filecmp.cmp(committed / name, tmp_path / "tenso" / "grpc" / name, shallow=False), name


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RUN_GRPC = """
import sys, numpy as np, tenso
from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc
from tenso.serve import run_grpc

class S(tenso_msg_pb2_grpc.TensorInferenceServicer):
    def Predict(self, request, context):
        data = tenso.loads(request.tensor_packet)
        return tenso_msg_pb2.PredictResponse(result_packet=bytes(tenso.dumps(data + 1)), status="ok")

run_grpc(S(), port=int(sys.argv[1]), max_workers=2)
"""


def test_run_grpc_serves_until_killed():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", RUN_GRPC, str(port)])
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            grpc.channel_ready_future(ch).result(timeout=60)
            stub = tenso_msg_pb2_grpc.TensorInferenceStub(ch)
            reply = stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=bytes(tenso.dumps(np.arange(3)))))
            assert reply.status == "ok"
            np.testing.assert_array_equal(tenso.loads(reply.result_packet), [1, 2, 3])
        time.sleep(0.1)
        assert proc.poll() is None  # run_grpc blocks: the server is still up
    finally:
        proc.terminate()
        proc.wait(30)


def test_upstream_packets_through_our_service(channel):
    python = os.environ.get("TENSO_UPSTREAM_PYTHON")
    if not python:
        pytest.skip("the upstream venv is not available")
    code = (
        "import sys, numpy as np, tenso; "
        "sys.stdout.write(bytes(tenso.dumps(np.arange(6.0).reshape(2, 3), check_integrity=True)).hex())"
    )
    packet = bytes.fromhex(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)
    stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
    reply = stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=packet))
    np.testing.assert_array_equal(tenso.loads(reply.result_packet), np.arange(6.0).reshape(2, 3) * 2)


def test_wheel_ships_the_web_modules_and_protos():
    import zipfile

    wheel = os.environ.get("TENSO_WHEEL")
    if not wheel:
        pytest.skip("TENSO_WHEEL not set (run-tests.sh sets it to the wheel it built)")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "fastapi.py",
        "client.py",
        "serve.py",
        "grpc/__init__.py",
        "grpc/tenso_msg.proto",
        "grpc/benchmark_msg.proto",
        "grpc/tenso_msg_pb2.py",
        "grpc/tenso_msg_pb2_grpc.py",
        "grpc/benchmark_msg_pb2.py",
        "grpc/benchmark_msg_pb2_grpc.py",
    ):
        assert f"tenso/{name}" in names, name
