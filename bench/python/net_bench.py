"""
Nodes from Python (issue 16): tenso.net.TensorNode against a raw socket and against PyPI
``tensor-iroh`` (the seed's PyO3 bindings), side by side in one run.

    python net_bench.py [--quick]   ->  net_results.md / net_results.json

- 1 KiB pushes/s from Python on one connection (each push returns once the receiver queued it;
  a receiver thread drains the queue), over TLS 1.3 and plaintext TCP loopback.
- 64 MiB push, sender call to "receiver holds the array", over plaintext TCP, TLS 1.3 and a
  Unix socket (descriptor passing), against raw ``sendall`` / ``recv_into(np.empty)`` of the
  same bytes over TCP loopback; the ratio is raw time / node time (>= 1: as fast as raw).
- 1 KiB pull round trip (request_tensor_sync): median and p99.
- tensor-iroh on the same tensors, when it can start a node on this machine (see ``iroh_note``).
- issue 25: ``await send_tensor`` of 1 KiB, acknowledged, one at a time (the coroutine awaits
  libtenso's completion queue on the running loop, no thread per call), against
  ``send_tensor_sync`` and against the C call itself (``tenso_node_send`` in a loop through
  ctypes, ~1 us of ctypes per call), over TLS and TCP; the receiver queues everything (no
  drain while timed), in the same process.

Rounds interleave the contenders (a noisy neighbour hits all alike); tables give medians.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from typing import Any, Dict, List

import numpy as np

import tenso
from tenso.net import TensorNode

KIB = np.ones(256, np.float32)  # 1 KiB body
BIG = np.random.default_rng(0).integers(0, 255, 64 << 20, dtype=np.uint8)


def pushes_per_second(listen: str, plaintext: bool, n: int, post: bool = False, many: bool = False) -> float:
    """send_tensor_sync per push, or (post) pipelined post_tensor_sync and one flush_sync, or
    (many) post_many_sync of 1000 pairs per call and one flush_sync."""
    with (
        TensorNode(listen, allow_plaintext=plaintext) as rx,
        TensorNode(listen_enabled=False, allow_plaintext=plaintext) as tx,
    ):
        addr = rx.get_node_addr_sync()
        tx.send_tensor_sync(addr, "warm", KIB)
        rx.receive_tensor_sync(timeout=30)

        def drain() -> None:
            for _ in range(n):
                rx.receive_tensor_sync(timeout=60)

        t = threading.Thread(target=drain)
        t.start()
        start = time.perf_counter()
        if many:
            batch = [("k", KIB)] * 1000
            for _ in range(n // 1000):
                tx.post_many_sync(addr, batch)
            tx.flush_sync(addr)
        elif post:
            for _ in range(n):
                tx.post_tensor_sync(addr, "k", KIB)
            tx.flush_sync(addr)
        else:
            for _ in range(n):
                tx.send_tensor_sync(addr, "k", KIB)
        t.join()
        return n / (time.perf_counter() - start)


def node_push_seconds(listen: str, plaintext: bool, rounds: int) -> List[float]:
    out = []
    with (
        TensorNode(listen, allow_plaintext=plaintext) as rx,
        TensorNode(listen_enabled=False, allow_plaintext=plaintext) as tx,
    ):
        addr = rx.get_node_addr_sync()
        for _ in range(rounds):
            start = time.perf_counter()
            th = threading.Thread(target=tx.send_tensor_sync, args=(addr, "big", BIG, 120))
            th.start()
            _, arr = rx.receive_tensor_sync(timeout=120)
            out.append(time.perf_counter() - start)
            th.join()
            assert arr.nbytes == BIG.nbytes
            del arr
    return out


def raw_seconds(rounds: int) -> List[float]:
    out = []
    srv = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            th = threading.Thread(target=cli.sendall, args=(memoryview(BIG),))
            th.start()
            dst = np.empty(BIG.nbytes, np.uint8)
            view = memoryview(dst)
            got = 0
            while got < len(view):
                got += conn.recv_into(view[got:])
            out.append(time.perf_counter() - start)
            th.join()
    finally:
        conn.close()
        cli.close()
        srv.close()
    return out


def pull_latency(n: int) -> Dict[str, float]:
    with TensorNode() as server, TensorNode(listen_enabled=False) as client:
        addr = server.get_node_addr_sync()
        server.publish("k", KIB)
        client.request_tensor_sync(addr, "k")
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.request_tensor_sync(addr, "k")
            lat.append(time.perf_counter() - t0)
    lat.sort()
    return {"median_us": statistics.median(lat) * 1e6, "p99_us": lat[int(len(lat) * 0.99) - 1] * 1e6}


def iroh_bench(rounds: int, n_small: int) -> Dict[str, Any]:
    """tensor-iroh's PyO3 node on the same tensors, if it starts here."""
    try:
        import tensor_iroh  # type: ignore[import-not-found]
    except ImportError as e:
        return {"note": f"tensor-iroh is not installed ({e})"}
    import asyncio

    async def run() -> Dict[str, Any]:
        rx = tensor_iroh.PyTensorNode()
        tx = tensor_iroh.PyTensorNode()
        try:
            await asyncio.wait_for(rx.start(), 30)
            await asyncio.wait_for(tx.start(), 30)
            addr = await asyncio.wait_for(rx.get_node_addr(), 30)
        except Exception as e:  # noqa: BLE001 - report exactly what stopped it
            return {"note": f"tensor-iroh could not start a node: {type(e).__name__}: {e}"}
        small = tensor_iroh.PyTensorData(KIB.view(np.uint8).tobytes(), [256], "float32", False)
        big = tensor_iroh.PyTensorData(BIG.tobytes(), [BIG.size], "uint8", False)
        try:
            await asyncio.wait_for(tx.send_tensor(addr, "warm", small), 60)
            await asyncio.wait_for(rx.wait_for_tensor(), 60)
            start = time.perf_counter()
            for _ in range(n_small):
                await tx.send_tensor(addr, "k", small)
            for _ in range(n_small):
                await rx.wait_for_tensor()
            small_rate = n_small / (time.perf_counter() - start)
            bigs = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                await tx.send_tensor(addr, "big", big)
                _, data = await rx.wait_for_tensor()
                data.as_numpy()
                bigs.append(time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001
            return {"note": f"tensor-iroh failed on loopback: {type(e).__name__}: {e}"}
        finally:
            rx.shutdown()
            tx.shutdown()
        return {"pushes_per_s_1kib": small_rate, "push_64mib_s": statistics.median(bigs)}

    try:
        return asyncio.run(run())
    except Exception as e:  # noqa: BLE001
        return {"note": f"tensor-iroh: {type(e).__name__}: {e}"}


class _COptions(ctypes.Structure):
    """tenso_node_options (tenso/net.h), for the C reference loop."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("listen", ctypes.c_char_p),
        ("cert_pem", ctypes.c_char_p),
        ("key_pem", ctypes.c_char_p),
        ("ca_pem", ctypes.c_char_p),
        ("pinned_keys", ctypes.c_void_p),
        ("pinned_key_count", ctypes.c_uint32),
        ("threads", ctypes.c_uint32),
        ("max_packet_bytes", ctypes.c_uint64),
        ("max_name_bytes", ctypes.c_uint32),
        ("max_queued", ctypes.c_uint32),
        ("max_queued_bytes", ctypes.c_uint64),
        ("max_connections", ctypes.c_uint32),
        ("max_pool_per_peer", ctypes.c_uint32),
        ("idle_timeout_ms", ctypes.c_uint64),
        ("io_timeout_ms", ctypes.c_uint64),
        ("fd_passing_min_bytes", ctypes.c_uint64),
    ]


class _CTensor(ctypes.Structure):
    """tenso_tensor (tenso/tenso.h)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("ndim", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
    ]


def _receiver(listen: str, plaintext: bool, n: int) -> TensorNode:
    """A receiver that queues every push of a timed loop (nothing drains while it runs)."""
    rx = TensorNode(listen, allow_plaintext=plaintext, max_queued=n + 16, max_queued_bytes=1 << 32)
    rx.start_sync()
    return rx


def _drain(rx: TensorNode) -> None:
    while rx.receive_tensor_sync(timeout=0) is not None:
        pass


def c_acked_seconds(listen: str, plaintext: bool, n: int) -> float:
    """n x tenso_node_send (1 KiB, acknowledged) from a C node, called through ctypes."""
    lib = ctypes.CDLL(tenso.library_path)
    lib.tenso_node_send.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]
    lib.tenso_node_new.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_COptions)]
    lib.tenso_node_options_init.argtypes = [ctypes.POINTER(_COptions), ctypes.c_uint32]
    lib.tenso_value_new_tensor.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_CTensor)]
    lib.tenso_node_free.argtypes = [ctypes.c_void_p]
    lib.tenso_value_free.argtypes = [ctypes.c_void_p]
    rx = _receiver(listen, plaintext, n)
    o = _COptions()
    lib.tenso_node_options_init(ctypes.byref(o), 1)
    o.flags = 0x4 | (0x1 if plaintext else 0)  # NO_LISTEN (| ALLOW_PLAINTEXT)
    tx = ctypes.c_void_p()
    v = ctypes.c_void_p()
    shape = (ctypes.c_uint64 * 1)(256)
    t = _CTensor(KIB.ctypes.data, KIB.nbytes, shape, 1, 1)  # float32
    try:
        assert lib.tenso_node_new(ctypes.byref(tx), ctypes.byref(o)) == 0
        assert lib.tenso_value_new_tensor(ctypes.byref(v), ctypes.byref(t)) == 0
        addr = rx.get_node_addr_sync().encode()
        send = lib.tenso_node_send
        assert send(tx, addr, b"w", 1, v, 0, None) == 0  # the dial, outside the timing
        start = time.perf_counter()
        for _ in range(n):
            if send(tx, addr, b"k", 1, v, 0, None) != 0:
                raise RuntimeError("tenso_node_send failed")
        return time.perf_counter() - start
    finally:
        lib.tenso_value_free(v)
        lib.tenso_node_free(tx)
        rx.close()


def py_acked_seconds(listen: str, plaintext: bool, n: int, coroutine: bool) -> float:
    """n x ``await send_tensor`` (or ``send_tensor_sync``) of 1 KiB, acknowledged, one at a time."""
    rx = _receiver(listen, plaintext, n)
    tx = TensorNode(listen_enabled=False, allow_plaintext=plaintext)
    tx.start_sync()
    addr = rx.get_node_addr_sync()
    try:
        if not coroutine:
            tx.send_tensor_sync(addr, "w", KIB)
            start = time.perf_counter()
            for _ in range(n):
                tx.send_tensor_sync(addr, "k", KIB)
            return time.perf_counter() - start

        async def run() -> float:
            await tx.send_tensor(addr, "w", KIB)
            start = time.perf_counter()
            for _ in range(n):
                await tx.send_tensor(addr, "k", KIB)
            return time.perf_counter() - start

        return asyncio.run(run())
    finally:
        tx.close()
        rx.close()


def acked_rates(n: int, rounds: int) -> Dict[str, Dict[str, float]]:
    """Medians of interleaved rounds: acknowledged 1 KiB sends per second, C / sync / coroutine."""
    out: Dict[str, Dict[str, float]] = {}
    for scheme, listen, plaintext in (("tls", "tls://127.0.0.1:0", False), ("tcp", "tcp://127.0.0.1:0", True)):
        s: Dict[str, List[float]] = {"c": [], "sync": [], "await": []}
        for _ in range(rounds):
            s["c"].append(n / c_acked_seconds(listen, plaintext, n))
            s["sync"].append(n / py_acked_seconds(listen, plaintext, n, False))
            s["await"].append(n / py_acked_seconds(listen, plaintext, n, True))
        med = {k: statistics.median(v) for k, v in s.items()}
        med["await_vs_c"] = med["await"] / med["c"]
        out[scheme] = med
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-iroh", action="store_true")
    args = ap.parse_args()
    rounds = 3 if args.quick else 7
    n_small = 5000 if args.quick else 30000

    res: Dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "tenso": tenso._tenso.library_version,
    }
    res["pushes_per_s_1kib"] = {
        "tls": pushes_per_second("tls://127.0.0.1:0", False, n_small),
        "tcp": pushes_per_second("tcp://127.0.0.1:0", True, n_small),
        "post_tls": pushes_per_second("tls://127.0.0.1:0", False, n_small, post=True),
        "post_tcp": pushes_per_second("tcp://127.0.0.1:0", True, n_small, post=True),
        "post_many_tls": pushes_per_second("tls://127.0.0.1:0", False, n_small, many=True),
        "post_many_tcp": pushes_per_second("tcp://127.0.0.1:0", True, n_small, many=True),
    }
    with tempfile.TemporaryDirectory() as d:
        unix = f"unix://{d}/rx.sock"
        samples: Dict[str, List[float]] = {"raw": [], "tcp": [], "tls": [], "unix": []}
        for _ in range(rounds):  # interleaved
            samples["raw"] += raw_seconds(1)
            samples["tcp"] += node_push_seconds("tcp://127.0.0.1:0", True, 1)
            samples["tls"] += node_push_seconds("tls://127.0.0.1:0", False, 1)
            samples["unix"] += node_push_seconds(unix, True, 1)
    med = {k: statistics.median(v) for k, v in samples.items()}
    res["push_64mib_s"] = med
    res["push_64mib_ratio_vs_raw"] = {k: med["raw"] / med[k] for k in ("tcp", "tls", "unix")}
    res["pull_1kib"] = pull_latency(2000 if args.quick else 10000)
    res["acked_1kib_per_s"] = acked_rates(2000 if args.quick else 20000, rounds)
    res["load_average"] = os.getloadavg()
    if not args.no_iroh:
        res["tensor_iroh"] = iroh_bench(rounds, min(n_small, 2000))

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "net_results.json"), "w") as f:
        json.dump(res, f, indent=2)
    posts = res["pushes_per_s_1kib"]
    lines = [
        "# Nodes from Python (bench/python/net_bench.py)",
        "",
        f"{res['machine']}; libtenso {res['tenso']}; medians of {rounds} interleaved rounds.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| 1 KiB pushes/s, one connection, TLS 1.3 | {res['pushes_per_s_1kib']['tls']:,.0f} |",
        f"| 1 KiB pushes/s, one connection, plain TCP | {res['pushes_per_s_1kib']['tcp']:,.0f} |",
        f"| 1 KiB posts/s (pipelined), one connection, TLS 1.3 | {posts['post_tls']:,.0f} |",
        f"| 1 KiB posts/s (pipelined), one connection, plain TCP | {posts['post_tcp']:,.0f} |",
        f"| 1 KiB posts/s (post_many_sync, 1000 per call), TLS 1.3 | {posts['post_many_tls']:,.0f} |",
        f"| 1 KiB posts/s (post_many_sync, 1000 per call), plain TCP | {posts['post_many_tcp']:,.0f} |",
        f"| 64 MiB raw sendall/recv_into (TCP loopback) | {med['raw'] * 1e3:.1f} ms |",
    ]
    for k in ("tcp", "tls", "unix"):
        lines.append(f"| 64 MiB push, {k} | {med[k] * 1e3:.1f} ms ({res['push_64mib_ratio_vs_raw'][k]:.2f}x raw) |")
    lines.append(
        f"| 1 KiB pull round trip (TLS) | median {res['pull_1kib']['median_us']:.0f} us, "
        f"p99 {res['pull_1kib']['p99_us']:.0f} us |"
    )
    for k in ("tls", "tcp"):
        a = res["acked_1kib_per_s"][k]
        lines.append(
            f"| 1 KiB acknowledged sends/s, one at a time, {k}: `await send_tensor` | {a['await']:,.0f} "
            f"({a['await_vs_c']:.2f}x the C call's {a['c']:,.0f}; send_tensor_sync {a['sync']:,.0f}) |"
        )
    lines.append(f"| load average (1, 5, 15 min) at the end | {', '.join(f'{x:.1f}' for x in res['load_average'])} |")
    iroh = res.get("tensor_iroh", {})
    if "note" in iroh:
        lines.append(f"| tensor-iroh | {iroh['note']} |")
    elif iroh:
        lines.append(f"| tensor-iroh 1 KiB pushes/s | {iroh['pushes_per_s_1kib']:,.0f} |")
        lines.append(f"| tensor-iroh 64 MiB push | {iroh['push_64mib_s'] * 1e3:.1f} ms |")
    with open(os.path.join(here, "net_results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
