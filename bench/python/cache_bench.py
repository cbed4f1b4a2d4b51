"""
Shared-memory tensor cache benchmark (issue 6), side by side in one run:

  tenso (ours)     tenso.TensoCache: zero-copy pinned get, put encodes straight into the pool
  tenso 0.24.0     upstream TensoCache (its own venv, same code in a subprocess)
  shm + pickle     multiprocessing.shared_memory + pickle: one segment per key, put = pickle
                   into a fresh segment, get = attach + pickle.loads (the do-it-yourself way)
  raw              the physical reference: np.copyto of the same bytes (put), a dict lookup (get)

Workloads (float32 arrays):
  get      latency of a hit on a 1 KiB tensor (median per call)
  put      a 1 MiB tensor under a key that exists (in-place rewrite where the library can)
  2 procs  two processes at once on one pool, each 80 % get / 20 % put over 64 keys of 64 KiB:
           total operations per second

    python cache_bench.py --lib ours|upstream|shm-pickle|raw   ->  JSON on stdout
    python cache_bench.py --upstream-python PY                 ->  the table (all libraries)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
from multiprocessing import shared_memory
from typing import Any, Callable, Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KiB, MiB = 1 << 10, 1 << 20
LIBS = ["ours", "upstream", "shm-pickle", "raw"]
TITLES = {"ours": "tenso (ours)", "upstream": "tenso 0.24.0", "shm-pickle": "shm + pickle", "raw": "raw"}
PROC_KEYS, PROC_SIZE, PROC_SECONDS = 64, 64 * KiB, 2.0


def time_op(fn: Callable[[], Any], min_time: float = 0.3, min_reps: int = 20, max_reps: int = 200000) -> float:
    """Median seconds per call of fn() after one warm-up call."""
    fn()
    times: List[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_time and len(times) < max_reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) * 1e-9)
    return statistics.median(times)


def array(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(nbytes // 4, dtype=np.float32)


# ------------------------------------------------------------------------------------ caches
# Each adapter: open(name, create) -> handle with put(key, arr), get(key) -> ndarray, close().


class TensoAdapter:
    """Ours and upstream: both are `tenso.TensoCache` with the same signature."""

    def __init__(self, name: str, create: bool) -> None:
        from tenso import TensoCache

        self.c = TensoCache(max_memory=64 * MiB, name=name, create=create)
        self.owner = create

    def put(self, key: str, arr: np.ndarray) -> None:
        self.c.put(key, arr)

    def get(self, key: str) -> np.ndarray:
        return self.c.get(key)

    def close(self) -> None:
        self.c.close()
        if self.owner:
            try:
                self.c.unlink()
            except Exception:
                pass


class ShmPickleAdapter:
    """One shared-memory segment per key holding [u64 length][pickle protocol 5 bytes]."""

    def __init__(self, name: str, create: bool) -> None:
        self.prefix = name
        self.owner = create
        self.mine: Dict[str, shared_memory.SharedMemory] = {}

    def _seg(self, key: str) -> str:
        return f"{self.prefix}_{key}"

    def put(self, key: str, arr: np.ndarray) -> None:
        data = pickle.dumps(arr, protocol=5)
        need = 8 + len(data)
        seg = self.mine.get(key)
        if seg is None or seg.size < need:
            try:
                seg = shared_memory.SharedMemory(self._seg(key), create=True, size=need)
            except FileExistsError:
                seg = shared_memory.SharedMemory(self._seg(key))
                if seg.size < need:
                    seg.close()
                    seg.unlink()
                    seg = shared_memory.SharedMemory(self._seg(key), create=True, size=need)
            self.mine[key] = seg
        seg.buf[8:need] = data
        seg.buf[:8] = len(data).to_bytes(8, "little")

    def get(self, key: str) -> np.ndarray:
        seg = self.mine.get(key)
        if seg is None:
            seg = shared_memory.SharedMemory(self._seg(key))
            self.mine[key] = seg
        n = int.from_bytes(seg.buf[:8], "little")
        return pickle.loads(seg.buf[8 : 8 + n])

    def close(self) -> None:
        for seg in self.mine.values():
            seg.close()
        if self.owner:
            for key in self.mine:
                try:
                    shared_memory.SharedMemory(self._seg(key)).unlink()
                except FileNotFoundError:
                    pass


class RawAdapter:
    """The physical reference: a dict of preallocated arrays in this process, put = np.copyto."""

    def __init__(self, name: str, create: bool) -> None:
        self.d: Dict[str, np.ndarray] = {}

    def put(self, key: str, arr: np.ndarray) -> None:
        dst = self.d.get(key)
        if dst is None or dst.nbytes != arr.nbytes:
            self.d[key] = dst = np.empty_like(arr)
        np.copyto(dst, arr)

    def get(self, key: str) -> np.ndarray:
        return self.d[key]

    def close(self) -> None:
        self.d.clear()


ADAPTERS = {"ours": TensoAdapter, "upstream": TensoAdapter, "shm-pickle": ShmPickleAdapter, "raw": RawAdapter}


def proc_worker(lib: str, name: str, seed: int, seconds: float, q: mp.Queue[int]) -> None:
    c = ADAPTERS[lib](name, False)
    rng = np.random.default_rng(seed)
    vals = [array(PROC_SIZE, seed * 1000 + i) for i in range(8)]
    ops = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            k = f"k{int(rng.integers(PROC_KEYS))}"
            if rng.random() < 0.2:
                c.put(k, vals[ops % 8])
            else:
                a = c.get(k)
                assert a is not None and a.nbytes == PROC_SIZE
                del a
            ops += 1
    q.put(ops)
    c.close()


def measure(lib: str) -> Dict[str, float]:
    name = f"tb{os.getpid()}{lib.replace('-', '')}"
    c = ADAPTERS[lib](name, True)
    res: Dict[str, float] = {}
    try:
        small = array(1 * KiB, 1)
        c.put("small", small)
        got = c.get("small")
        assert np.array_equal(got, small), "get returned other values"
        del got

        def get_small() -> None:
            c.get("small")

        res["get_1KiB"] = time_op(get_small)

        big = array(1 * MiB, 2)
        c.put("big", big)
        res["put_1MiB"] = time_op(lambda: c.put("big", big))
        assert np.array_equal(c.get("big"), big)

        if lib == "raw":
            return res  # a process-local dict has no cross-process throughput
        for i in range(PROC_KEYS):
            c.put(f"k{i}", array(PROC_SIZE, i))
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=proc_worker, args=(lib, name, s, PROC_SECONDS, q)) for s in (1, 2)]
        for p in procs:
            p.start()
        total = sum(q.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(60)
        res["two_proc_ops"] = total / PROC_SECONDS
    finally:
        c.close()
    return res


def fmt(key: str, v: float) -> str:
    if key == "two_proc_ops":
        return f"{v / 1e3:.3g} k ops/s"
    return f"{v * 1e6:.3g} µs" if v < 1e-3 else f"{v * 1e3:.3g} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=LIBS)
    ap.add_argument("--upstream-python")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    if args.lib:
        print(json.dumps(measure(args.lib)))
        return
    res: Dict[str, Dict[str, float]] = {}
    for lib in LIBS:
        print(f"measuring {TITLES[lib]}", file=sys.stderr)
        if lib == "upstream":
            out = subprocess.run(
                [args.upstream_python, __file__, "--lib", "upstream"], check=True, stdout=subprocess.PIPE, cwd=HERE
            )
            res[lib] = json.loads(out.stdout)
        else:
            res[lib] = measure(lib)
    # memcpy of 1 MiB for the put ratio, in this process.
    src, dst = array(MiB, 3), np.empty(MiB // 4, np.float32)
    memcpy = time_op(lambda: np.copyto(dst, src))
    rows = [
        ("get, 1 KiB hit", "get_1KiB"),
        ("put, 1 MiB (key exists)", "put_1MiB"),
        ("2 processes, 80/20 get/put, 64 KiB", "two_proc_ops"),
    ]
    md = [
        f"Environment: Python {platform.python_version()}, numpy {np.__version__}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs",
        "",
        "| workload | " + " | ".join(TITLES[lib] for lib in LIBS) + " |",
        "|---|" + "---|" * len(LIBS),
    ]
    for title, key in rows:
        md.append(
            f"| {title} | " + " | ".join(fmt(key, res[lib][key]) if key in res[lib] else "—" for lib in LIBS) + " |"
        )
    ours = res["ours"]
    md += [
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
        f"| Python get latency | {ours['get_1KiB'] * 1e6:.3g} µs | ≤ 3 µs | "
        f"{'yes' if ours['get_1KiB'] <= 3e-6 else '**no**'} |",
        f"| put 1 MiB / np.copyto 1 MiB ({memcpy * 1e6:.3g} µs) | {ours['put_1MiB'] / memcpy:.3g}× | ≤ 1.2× (C) | "
        f"{'yes' if ours['put_1MiB'] / memcpy <= 1.2 else 'see C'} |",
        f"| get: upstream / ours | {res['upstream']['get_1KiB'] / ours['get_1KiB']:.3g}× faster | — | — |",
        f"| 2-process throughput: ours / upstream | "
        f"{ours['two_proc_ops'] / res['upstream']['two_proc_ops']:.3g}× | — | — |",
        f"| 2-process throughput: ours / shm + pickle | "
        f"{ours['two_proc_ops'] / res['shm-pickle']['two_proc_ops']:.3g}× | — | — |",
    ]
    with open(os.path.join(args.out, "cache_results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
