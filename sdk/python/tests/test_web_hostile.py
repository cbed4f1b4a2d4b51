"""Hostile and heavy request bodies against tenso.fastapi / tenso.serve (uvicorn) and
tenso.grpc (grpcio), each server in a process of its own on 127.0.0.1 (web_hostile_server.py),
so that its peak memory (VmHWM, reset before each request) is measured alone:

- an LZ4 bomb (2 MiB that inflate to 512 MiB) is refused, 413 / RESOURCE_EXHAUSTED, before it is
  inflated: the server's peak RSS grows by under 64 MiB;
- a legitimate large body (about 130 MiB of LZ4 that inflate 8x to 1 GiB) is decoded once, with
  no second copy, off the event loop: peak RSS grows by at most the body (four times for gRPC,
  whose receive buffer, serialized message and protobuf field hold copies of it) + the decoded 1 GiB + 96 MiB, the
  arrays are writeable (HTTP), and an unrelated request sent meanwhile (GET /ping, a small
  Predict) is served while the decode runs (the server logs both, on one clock): a decode that
  blocks the server serves nothing until it ends. Latency is not asserted; it depends on the
  machine's load (benchmarks measure it). The large request is sent by a
  child process, so the client's own GIL does not delay the pings."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tenso
from web_servers import httpx

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc  # noqa: E402

HERE = Path(__file__).resolve().parent
OCTET = {"content-type": "application/octet-stream"}
MIB = 1 << 20


class Server:
    """web_hostile_server.py MODE in a child process; its port and its memory."""

    def __init__(self, mode, events):
        self.events = events
        events.write_text("")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "web_hostile_server.py"), mode, str(events)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=HERE,
        )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"web_hostile_server.py {mode} did not start (exit {self.proc.wait()})")
        self.port = json.loads(line)["port"]

    def status(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(key)

    def served_while_decoding(self, since):
        """The calls served while a decode ran, the decodes' total time (s) and their count, of
        the events logged after `since` (time.monotonic())."""
        events = [json.loads(line) for line in self.events.read_text().splitlines()]
        pings = [e[1] for e in events if e[0] == "ping" and e[1] >= since]
        decodes = [(e[1], e[2]) for e in events if e[0] == "decode" and e[1] >= since]
        served = sum(1 for t in pings if any(start < t < end for start, end in decodes))
        return served, sum(end - start for start, end in decodes), len(decodes)

    def reset_peak(self):
        """VmHWM back to the current RSS (Linux's clear_refs 5); returns that RSS."""
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")
        return self.status("VmRSS")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    with Server("http", tmp_path_factory.mktemp("http") / "events") as s:
        yield s


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory):
    with Server("grpc", tmp_path_factory.mktemp("grpc") / "events") as s:
        yield s


@pytest.fixture(scope="module")
def bomb():
    # np.zeros is calloc'd: compressing it reads the zero page, so this costs no RSS here.
    packet = bytes(tenso.dumps(np.zeros(512 * MIB, np.uint8), compress=True))
    assert len(packet) < 3 * MIB
    return packet


@pytest.fixture(scope="module")
def heavy_file(heavy, tmp_path_factory):
    """The heavy packet in a file, for the child process that sends it."""
    path = tmp_path_factory.mktemp("web") / "heavy.tnso"
    path.write_bytes(heavy[0])
    return str(path)


def served_during_decode(server, attempt):
    """Runs `attempt()` (the heavy request with small calls every 10 ms on a thread) and asserts
    that a small call was served while the heavy packet was being decoded. Runs it once more if
    none was: on 2 loaded cores a decode running off the loop, on every core, can still starve
    the small calls for a while; a decode that blocks the server starves them every time."""
    for _ in range(2):
        since = time.monotonic()
        attempt()
        served, decoding, steps = server.served_while_decoding(since)
        # 1 GiB cannot be inflated in under 50 ms here: a shorter total means the decode was not seen.
        assert decoding > 0.05, f"{steps} decode steps took {decoding * 1000:.0f} ms in all"
        if served:
            return
    pytest.fail(
        f"no small call was served while the heavy packet was decoded ({steps} steps, "
        f"{decoding * 1000:.0f} ms): the decode blocks the server"
    )


# Sends the packet in argv[3] to the server (argv[1]: http or grpc, argv[2]: port); prints what
# the server answered as a JSON list.
SENDER = """
import json, sys
import tenso
mode, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
packet = open(path, "rb").read()
if mode == "http":
    import httpx
    r = httpx.post(f"http://127.0.0.1:{port}/describe", content=packet,
                   headers={"content-type": "application/octet-stream"}, timeout=300)
    r.raise_for_status()
    out = tenso.loads(r.content)
else:
    import grpc
    from tenso.grpc import tenso_msg_pb2, tenso_msg_pb2_grpc
    options = [("grpc.max_send_message_length", 512 << 20), ("grpc.max_receive_message_length", 512 << 20)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = tenso_msg_pb2_grpc.TensorInferenceStub(channel)
        reply = stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=packet), timeout=300)
    out = tenso.loads(reply.result_packet)
print(json.dumps(out.tolist()))
"""


def send_from_child(mode, server, path):
    out = subprocess.run(
        [sys.executable, "-c", SENDER, mode, str(server.port), path],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def heavy():
    """1 GiB (2^29 uint16) that LZ4 packs about 8 to 1: a random eighth of every 32 KiB, zeros
    after it."""
    x = np.zeros((32768, 16384), np.uint16)
    x[:, :2048] = np.random.default_rng(5).integers(0, 1 << 16, (32768, 2048), dtype=np.uint16)
    x = x.reshape(-1)
    packet = bytes(tenso.dumps(x, compress=True))
    assert x.nbytes / len(packet) > 6  # within the default max_inflation (16)
    want = [x.size, int(x[:: 1 << 16].astype(np.int64).sum())]
    return packet, want


class Pinger:
    """Calls `ping()` every 10 ms on a thread while the block runs, and counts the calls."""

    def __init__(self, ping):
        self.ping = ping
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        while not self._stop.is_set():
            self.ping()
            self.count += 1
            self._stop.wait(0.01)

    def __enter__(self):
        self.ping()  # connected and warm before the measured request
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def http_describe(server, client, body):
    return client.post(f"http://127.0.0.1:{server.port}/describe", content=body, headers=OCTET, timeout=120)


def test_http_lz4_bomb_refused_before_inflating(http_server, bomb):
    with httpx.Client() as client:
        small = bytes(tenso.dumps(np.arange(10, dtype=np.uint8)))
        assert http_describe(http_server, client, small).status_code == 200  # warm
        base = http_server.reset_peak()
        r = http_describe(http_server, client, bomb)
        grew = http_server.status("VmHWM") - base
    assert r.status_code == 413, r.text
    assert "max_inflation" in r.json()["detail"]
    assert grew < 64 * MIB, f"the server's peak RSS grew by {grew / MIB:.0f} MiB"


def test_http_heavy_body_decoded_once_off_the_loop(http_server, heavy, heavy_file):
    packet, want = heavy
    url = f"http://127.0.0.1:{http_server.port}"

    def attempt():
        with httpx.Client() as pings:
            base = http_server.reset_peak()
            with Pinger(lambda: pings.get(url + "/ping", timeout=60).raise_for_status()) as p:
                got = send_from_child("http", http_server, heavy_file)
            grew = http_server.status("VmHWM") - base
        assert got == want + [1]  # and the handler's array was writeable
        budget = len(packet) + (1 << 30) + 96 * MIB
        assert grew <= budget, f"peak RSS grew by {grew / MIB:.0f} MiB, budget {budget / MIB:.0f} MiB"
        assert p.count >= 2

    served_during_decode(http_server, attempt)


def _stub(server):
    channel = grpc.insecure_channel(
        f"127.0.0.1:{server.port}",
        options=[("grpc.max_send_message_length", 512 * MIB), ("grpc.max_receive_message_length", 512 * MIB)],
    )
    return channel, tenso_msg_pb2_grpc.TensorInferenceStub(channel)


def test_grpc_lz4_bomb_refused_before_inflating(grpc_server, bomb):
    channel, stub = _stub(grpc_server)
    with channel:
        stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=bytes(tenso.dumps(np.ones(4, np.uint8)))))
        base = grpc_server.reset_peak()
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=bomb))
        grew = grpc_server.status("VmHWM") - base
        # A malformed packet is INVALID_ARGUMENT.
        with pytest.raises(grpc.RpcError) as bad:
            stub.Predict(tenso_msg_pb2.PredictRequest(tensor_packet=b"TNSO\x04garbage"))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
    assert info.value.details().startswith("Invalid Tenso packet: ")
    assert "max_inflation" in info.value.details()
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad.value.details()
    assert grew < 64 * MIB + 2 * len(bomb), f"the server's peak RSS grew by {grew / MIB:.0f} MiB"


def test_grpc_heavy_message_does_not_stall_others(grpc_server, heavy, heavy_file):
    packet, want = heavy
    channel, stub = _stub(grpc_server)
    small = tenso_msg_pb2.PredictRequest(tensor_packet=bytes(tenso.dumps(np.ones(4, np.uint8))))

    def attempt():
        base = grpc_server.reset_peak()
        with Pinger(lambda: stub.Predict(small, timeout=60)) as p:
            got = send_from_child("grpc", grpc_server, heavy_file)
        grew = grpc_server.status("VmHWM") - base
        assert got[:2] == want
        budget = 4 * len(packet) + (1 << 30) + 96 * MIB
        assert grew <= budget, f"peak RSS grew by {grew / MIB:.0f} MiB, budget {budget / MIB:.0f} MiB"
        assert p.count >= 2

    with channel:
        served_during_decode(grpc_server, attempt)
