"""
Measurement code shared by both interpreters of the Python benchmark.

bench.py imports it in build/venv-sdk (our `tenso` and the peers) and also runs it as a script
under build/venv-upstream (upstream tenso 0.24.0, which has the same import name), so every
library is timed by the same loop over the same arrays:

    python worker.py --lib upstream --sizes 1024,65536 ...   ->  JSON on stdout

Timing: one warm-up call, then repetitions until at least MIN_REPS calls AND at least MIN_TIME
seconds (capped at MAX_REPS / MAX_TIME); the reported value is the median of the per-call times.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import queue
import socket
import statistics
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

MIN_REPS = 5
MIN_TIME = 0.2
MAX_REPS = 20000
MAX_TIME = 2.0
FILE_MAX_REPS = 1000

OPS = ["dumps", "loads", "file_save", "file_load", "file_load_sum", "socket"]
TMPDIR = "/tmp"


def make_array(nbytes: int) -> np.ndarray:
    """float32 tensor of nbytes, 2-D when it divides nicely (as a real weight matrix would be)."""
    n = nbytes // 4
    a = np.random.default_rng(nbytes).standard_normal(n, dtype=np.float32)
    return a.reshape(-1, 256) if n % 256 == 0 and n >= 256 else a


def time_op(
    fn: Callable[[], Any], setup: Optional[Callable[[], Any]] = None, max_reps: int = MAX_REPS
) -> Dict[str, float]:
    """Median per-call seconds of fn() (setup(), if given, runs untimed before each call)."""
    if setup:
        setup()
    fn()  # warm-up
    times: List[float] = []
    start = time.perf_counter()
    while True:
        if setup:
            setup()
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) * 1e-9)
        elapsed = time.perf_counter() - start
        if len(times) >= MIN_REPS and elapsed >= MIN_TIME:
            break
        if len(times) >= max_reps or elapsed >= MAX_TIME and len(times) >= 3:
            break
    return {"median": statistics.median(times), "reps": len(times), "min": min(times)}


# ---------------------------------------------------------------------------------------------
# Socket harness: a persistent sender thread, the receiver in the timed (main) thread. The time
# is from "send starts" to "receiver holds the array"; the thread hand-off cost is the same for
# every library (see the `raw` row).
# ---------------------------------------------------------------------------------------------


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """A connected TCP loopback pair (client, server side), Nagle off as a sender of many
    small packets would set it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        tx = socket.create_connection(server.getsockname())
        rx, _ = server.accept()
    tx.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return tx, rx


class SocketPair:
    def __init__(self, transport: str = "unix") -> None:
        if transport == "tcp":
            self.tx, self.rx = tcp_pair()
        else:
            self.tx, self.rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for s in (self.tx, self.rx):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.jobs: queue.Queue[Optional[Callable[[socket.socket], None]]] = queue.Queue()
        self.done = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job(self.tx)
            self.done.release()

    def roundtrip(self, send: Callable[[socket.socket], None], recv: Callable[[socket.socket], Any]) -> Any:
        self.jobs.put(send)
        out = recv(self.rx)
        self.done.acquire()
        return out

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join()
        self.tx.close()
        self.rx.close()


def recv_exact_into(sock: socket.socket, buf: Any) -> None:
    view = memoryview(buf).cast("B")
    got = 0
    n = len(view)
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise EOFError("socket closed")
        got += r


# ---------------------------------------------------------------------------------------------
# Libraries. Each returns {op: (callable, setup or None)} for one array; missing ops = not
# supported by that library (or not part of the benchmark for it).
# ---------------------------------------------------------------------------------------------


def lib_tenso(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    import tenso

    blob = tenso.dumps(a)

    def save() -> None:
        with open(path, "wb") as f:
            tenso.dump(a, f)

    def load_lazy() -> Any:
        with open(path, "rb") as f:
            return tenso.load(f, mmap_mode=True)

    def send(s: socket.socket) -> None:
        tenso.write_stream(a, s)

    return {
        "dumps": lambda: tenso.dumps(a),
        "loads": lambda: tenso.loads(blob),
        "file_save": save,
        "file_load": load_lazy,
        "file_load_sum": lambda: float(np.sum(load_lazy())),
        "socket": lambda: sp.roundtrip(send, tenso.read_stream),
    }


def lib_pickle(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    blob = pickle.dumps(a, protocol=5)

    def save() -> None:
        with open(path, "wb") as f:
            pickle.dump(a, f, protocol=5)

    def load() -> Any:
        with open(path, "rb") as f:
            return pickle.load(f)

    # Out-of-band protocol 5: the array's memory goes straight to sendall, the receiver reads it
    # into its own buffer with recv_into and hands that to pickle.loads (no extra copy).
    def send(s: socket.socket) -> None:
        bufs: List[pickle.PickleBuffer] = []
        head = pickle.dumps(a, protocol=5, buffer_callback=bufs.append)
        raws = [b.raw() for b in bufs]
        s.sendall(struct.pack("<QI", len(head), len(raws)) + b"".join(struct.pack("<Q", r.nbytes) for r in raws))
        s.sendall(head)
        for r in raws:
            s.sendall(r)

    def recv(s: socket.socket) -> Any:
        pre = bytearray(12)
        recv_exact_into(s, pre)
        hlen, nbuf = struct.unpack("<QI", pre)
        lens = bytearray(8 * nbuf)
        recv_exact_into(s, lens)
        head = bytearray(hlen)
        recv_exact_into(s, head)
        buffers = []
        for (blen,) in struct.iter_unpack("<Q", lens):
            b = bytearray(blen)
            recv_exact_into(s, b)
            buffers.append(b)
        return pickle.loads(head, buffers=buffers)

    return {
        "dumps": lambda: pickle.dumps(a, protocol=5),
        "loads": lambda: pickle.loads(blob),
        "file_save": save,
        "file_load": load,
        "file_load_sum": lambda: float(np.sum(load())),
        "socket": lambda: sp.roundtrip(send, recv),
    }


def lib_npy(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    def dumps() -> Any:
        bio = io.BytesIO()
        np.save(bio, a)
        return bio.getbuffer()

    blob = bytes(dumps())

    def save() -> None:
        with open(path, "wb") as f:
            np.save(f, a)

    def load_lazy() -> Any:
        return np.load(path, mmap_mode="r")

    return {
        "dumps": dumps,
        "loads": lambda: np.load(io.BytesIO(blob)),
        "file_save": save,
        "file_load": load_lazy,
        "file_load_sum": lambda: float(np.sum(load_lazy())),
    }


def lib_safetensors(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    import safetensors.numpy as stn

    blob = stn.save({"t": a})

    def load() -> Any:
        return stn.load_file(path)["t"]

    return {
        "dumps": lambda: stn.save({"t": a}),
        "loads": lambda: stn.load(blob)["t"],
        "file_save": lambda: stn.save_file({"t": a}, path),
        "file_load": load,
        "file_load_sum": lambda: float(np.sum(load())),
    }


def lib_arrow(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    import pyarrow as pa

    def dumps() -> Any:
        sink = pa.BufferOutputStream()
        pa.ipc.write_tensor(pa.Tensor.from_numpy(a), sink)
        return sink.getvalue()

    blob = dumps()

    def save() -> None:
        with pa.OSFile(path, "wb") as f:
            pa.ipc.write_tensor(pa.Tensor.from_numpy(a), f)

    def load_lazy() -> Any:
        with pa.memory_map(path, "r") as mm:
            return pa.ipc.read_tensor(mm).to_numpy()

    return {
        "dumps": dumps,
        "loads": lambda: pa.ipc.read_tensor(pa.BufferReader(blob)).to_numpy(),
        "file_save": save,
        "file_load": load_lazy,
        "file_load_sum": lambda: float(np.sum(load_lazy())),
    }


def lib_msgpack(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    import msgpack
    import msgpack_numpy as mn

    blob = msgpack.packb(a, default=mn.encode)

    def save() -> None:
        with open(path, "wb") as f:
            f.write(msgpack.packb(a, default=mn.encode))

    def load() -> Any:
        with open(path, "rb") as f:
            return msgpack.unpackb(f.read(), object_hook=mn.decode)

    return {
        "dumps": lambda: msgpack.packb(a, default=mn.encode),
        "loads": lambda: msgpack.unpackb(blob, object_hook=mn.decode),
        "file_save": save,
        "file_load": load,
        "file_load_sum": lambda: float(np.sum(load())),
    }


def lib_raw(a: np.ndarray, path: str, sp: SocketPair) -> Dict[str, Any]:
    """The physical reference: np.copy for memory, tofile/readinto for files, bare sendall."""
    nbytes = a.nbytes

    def load() -> Any:
        out = np.empty(a.shape, a.dtype)
        with open(path, "rb", buffering=0) as f:
            f.readinto(memoryview(out).cast("B"))
        return out

    def recv(s: socket.socket) -> Any:
        out = np.empty(a.shape, a.dtype)
        recv_exact_into(s, out)
        return out

    def save() -> None:
        with open(path, "wb", buffering=0) as f:
            f.write(memoryview(a).cast("B"))

    del nbytes
    return {
        "dumps": lambda: np.copy(a),
        "loads": lambda: np.copy(a),
        "file_save": save,
        "file_load": load,
        "file_load_sum": lambda: float(np.sum(load())),
        "socket": lambda: sp.roundtrip(lambda s: s.sendall(memoryview(a).cast("B")), recv),
    }


LIBS = {
    "tenso": lib_tenso,  # ours in venv-sdk, upstream 0.24.0 in venv-upstream (same import name)
    "pickle": lib_pickle,
    "npy": lib_npy,
    "safetensors": lib_safetensors,
    "pyarrow": lib_arrow,
    "msgpack-numpy": lib_msgpack,
    "raw": lib_raw,
}


def check_result(op: str, value: Any, a: np.ndarray) -> None:
    """Every load must give the same float32 values (and a numpy array)."""
    if op in ("loads", "file_load", "socket") and not (
        isinstance(value, np.ndarray) and value.dtype == a.dtype and np.array_equal(value.reshape(-1), a.reshape(-1))
    ):
        raise AssertionError(f"{op}: wrong result {type(value)}")
    if op == "file_load_sum" and value != float(np.sum(a)):
        raise AssertionError(f"{op}: wrong sum {value} != {float(np.sum(a))}")


def measure(lib: str, sizes: List[int], ops: List[str] = OPS) -> Dict[str, Dict[str, Dict[str, float]]]:
    """{op: {size: {"median": s, "reps": n, "min": s}}} for one library."""
    results: Dict[str, Dict[str, Dict[str, float]]] = {}
    sp = SocketPair()
    path = os.path.join(TMPDIR, f"tenso-pybench-{os.getpid()}-{lib}.bin")
    try:
        for size in sizes:
            a = make_array(size)
            fns = LIBS[lib](a, path, sp)
            for op in ops:
                if op not in fns:
                    continue
                if op.startswith("file_load"):
                    fns["file_save"]()
                check_result(op, fns[op](), a)
                # Saves start from a fresh file: rewriting (O_TRUNC) an existing ext4 file forces a
                # writeback on close (auto_da_alloc), which would time the disk, not the library.
                setup = (lambda: os.path.exists(path) and os.unlink(path)) if op == "file_save" else None
                # File ops are capped at FILE_MAX_REPS: upstream 0.24.0's load(mmap_mode=True) never
                # closes its mmap (one leaked descriptor per call, gc does not help), and 20k calls
                # would exhaust the descriptor limit.
                cap = FILE_MAX_REPS if op.startswith("file") else MAX_REPS
                results.setdefault(op, {})[str(size)] = time_op(fns[op], setup, cap)
                print(
                    f"  {lib:14s} {op:14s} {size:>9d} B  {results[op][str(size)]['median'] * 1e6:12.2f} us",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        sp.close()
        if os.path.exists(path):
            os.unlink(path)
    return results


# ---------------------------------------------------------------------------------------------
# Small packets (issue 14): one sender process, one receiver, TCP loopback. The sender pushes
# pre-encoded 1 KiB-tensor packets (batches of SMALL_BATCH per sendall, so it is never the
# bottleneck); the receiver decodes them one by one. Result: packets per second, received.
# ---------------------------------------------------------------------------------------------

SMALL_BATCH = 256


def small_packets(readers: Dict[str, Callable[[socket.socket], int]], packet: bytes, count: int) -> Dict[str, float]:
    """{reader name: packets/s}; each reader drains one fresh connection of `count` packets and
    returns how many it decoded."""
    out: Dict[str, float] = {}
    for name, read_all in readers.items():
        best = 0.0
        for _ in range(3):  # best of three: the sender process competes for 2 cores
            tx, rx = tcp_pair()
            pid = os.fork()
            if pid == 0:  # the sender
                try:
                    rx.close()
                    batch = packet * SMALL_BATCH
                    for _ in range(count // SMALL_BATCH):
                        tx.sendall(batch)
                    tx.close()
                finally:
                    os._exit(0)
            tx.close()
            t0 = time.perf_counter()
            got = read_all(rx)
            dt = time.perf_counter() - t0
            rx.close()
            os.waitpid(pid, 0)
            if got != count // SMALL_BATCH * SMALL_BATCH:
                raise AssertionError(f"{name}: {got} packets received")
            best = max(best, got / dt)
        out[name] = best
        print(f"  small packets {name:28s} {best:12.0f} packets/s", file=sys.stderr, flush=True)
    return out


def one_process(tenso: Any, count: int, rounds: int = 5) -> Dict[str, float]:
    """{name: packets/s} of one thread that writes a 1 KiB float32 tensor to a TCP loopback
    connection and reads it back from the other end, count times: write_stream + read_stream
    (ours, and upstream's where it runs in its own venv), against the same bytes moved with
    sendall + recv_into a preallocated buffer (the reference). Rounds alternate the two, and
    each gives the median of its rounds."""
    a = make_array(1024)
    packet = bytes(tenso.dumps(a))
    tx, rx = tcp_pair()
    buf = bytearray(len(packet))
    view = memoryview(buf)

    def raw() -> None:
        for _ in range(count):
            tx.sendall(packet)
            got = 0
            while got < len(packet):
                got += rx.recv_into(view[got:])

    def ours() -> None:
        for _ in range(count):
            tenso.write_stream(a, tx)
            tenso.read_stream(rx)

    tenso.write_stream(a, tx)
    back = tenso.read_stream(rx)
    if not np.array_equal(back, a):
        raise AssertionError("write_stream/read_stream returned other values")
    times: Dict[str, List[float]] = {"raw sendall + recv_into": [], "write_stream + read_stream": []}
    try:
        for _ in range(rounds):
            for name, fn in (("raw sendall + recv_into", raw), ("write_stream + read_stream", ours)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    finally:
        tx.close()
        rx.close()
    return {name: count / statistics.median(v) for name, v in times.items()}


def small_readers(tenso: Any) -> Dict[str, Callable[[socket.socket], int]]:
    """read_stream in a loop (both packages); iter_stream where the package has it (ours)."""

    def loop(s: socket.socket) -> int:
        n = 0
        while tenso.read_stream(s) is not None:
            n += 1
        return n

    readers = {"read_stream": loop}
    if hasattr(tenso, "iter_stream"):
        readers["iter_stream"] = lambda s: sum(1 for _ in tenso.iter_stream(s))
    return readers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, choices=sorted(LIBS))
    ap.add_argument("--sizes", default="")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--small", type=int, default=0, help="only the small-packet run, with this many packets")
    ap.add_argument("--one-process", type=int, default=0, help="only the one-process write/read run")
    args = ap.parse_args()
    if args.one_process:
        import tenso

        json.dump(one_process(tenso, args.one_process), sys.stdout)
        return
    if args.small:
        import tenso

        packet = bytes(tenso.dumps(make_array(1024)))
        json.dump(small_packets(small_readers(tenso), packet, args.small), sys.stdout)
        return
    res = measure(args.lib, [int(s) for s in args.sizes.split(",")], args.ops.split(","))
    import tenso

    json.dump(
        {"results": res, "version": getattr(tenso, "__version__", "?"), "python": sys.version.split()[0]}, sys.stdout
    )


if __name__ == "__main__":
    main()
