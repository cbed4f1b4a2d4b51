"""
Encode at memory speed (issue 18), side by side in one process, float32 random data at
64 KiB, 1 MiB, 16 MiB and 64 MiB:

* ``tenso.dumps`` against ``np.copy`` (a fresh array: the physical floor of "a new buffer holding
  the bytes") and pyarrow's ``ipc.write_tensor`` into a ``BufferOutputStream``;
* ``dumps(check_integrity=True)`` against ``dumps`` (the fused copy-and-hash);
* minor page faults per call (``getrusage`` ru_minflt, steady state after two warm-up calls);
* ``file_load_sum`` (``load(mmap_mode=True)`` then ``np.sum``), ours here and upstream 0.24.0's
  in a subprocess of its venv (same script, ``--file-load-sum-only``), at 1 MiB and 16 MiB.

Timing: the operations of one size are interleaved round-robin (drift hits them alike), at
least 9 rounds and 0.5 s each; the median per call is reported, with the load average.

    build/venv-sdk/bin/python bench/python/encode_bench.py [--upstream-python PATH] [--quick]
"""

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time

import numpy as np

SIZES = [64 << 10, 1 << 20, 16 << 20, 64 << 20]
LOAD_SUM_SIZES = [1 << 20, 16 << 20]


def make_array(nbytes: int) -> np.ndarray:
    rng = np.random.default_rng(nbytes)
    return rng.standard_normal(nbytes // 4, dtype=np.float32).reshape(-1, 256 if nbytes >= 1024 else 1)


def interleaved(fns: dict, min_rounds: int, min_time: float) -> dict:
    """Median seconds per call of each function, sampled round-robin."""
    for f in fns.values():
        f()
    samples = {k: [] for k in fns}
    start = time.perf_counter()
    while len(samples[next(iter(fns))]) < min_rounds or time.perf_counter() - start < min_time * len(fns):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            samples[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in samples.items()}


def minflt(f) -> int:
    f()
    f()
    a = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    f()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - a


def file_load_sum(tenso, sizes, rounds: int, min_time: float) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            a = make_array(n)
            path = os.path.join(d, f"t{n}.tenso")
            with open(path, "wb") as f:
                tenso.dump(a, f)
            want = float(np.sum(a))

            def load_sum():
                with open(path, "rb") as f:
                    return float(np.sum(tenso.load(f, mmap_mode=True)))

            assert load_sum() == want
            out[n] = interleaved({"file_load_sum": load_sum}, rounds, min_time)["file_load_sum"]
    return out


def fmt(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream-python")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--file-load-sum-only", action="store_true")
    args = ap.parse_args()
    rounds, min_time = (3, 0.05) if args.quick else (9, 0.5)
    import tenso

    if args.file_load_sum_only:
        print(json.dumps(file_load_sum(tenso, LOAD_SUM_SIZES, rounds, min_time)))
        return
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    load0 = os.getloadavg()[0]
    print(
        f"tenso {tenso.__version__}, numpy {np.__version__}, pyarrow {pa.__version__ if pa else '-'}; "
        f"{os.cpu_count()} cpus; load average at start {load0:.2f}"
    )
    print(
        "| size | np.copy | dumps | dumps / np.copy | pyarrow write_tensor | dumps / pyarrow | "
        "dumps +integrity | +integrity / dumps | minflt/call dumps, np.copy, pyarrow |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SIZES[:2] if args.quick else SIZES:
        a = make_array(n)
        fns = {
            "np.copy": lambda: np.copy(a),
            "dumps": lambda: tenso.dumps(a),
            "dumps_integrity": lambda: tenso.dumps(a, check_integrity=True),
        }
        if pa is not None:

            def arrow():
                sink = pa.BufferOutputStream()
                pa.ipc.write_tensor(pa.Tensor.from_numpy(a), sink)
                return sink.getvalue()

            fns["pyarrow"] = arrow
        assert np.array_equal(tenso.loads(tenso.dumps(a, check_integrity=True)), a)
        t = interleaved(fns, rounds, min_time)
        faults = [minflt(fns[k]) if k in fns else "-" for k in ("dumps", "np.copy", "pyarrow")]
        arrow_t = t.get("pyarrow")
        print(
            f"| {n >> 10} KiB | {fmt(t['np.copy'])} | {fmt(t['dumps'])} | {t['dumps'] / t['np.copy']:.2f}× | "
            f"{fmt(arrow_t) if arrow_t else '-'} | {t['dumps'] / arrow_t if arrow_t else float('nan'):.2f}× | "
            f"{fmt(t['dumps_integrity'])} | {t['dumps_integrity'] / t['dumps']:.2f}× | "
            f"{', '.join(str(f) for f in faults)} |"
        )
    ours = file_load_sum(tenso, LOAD_SUM_SIZES, rounds, min_time)
    up = None
    if args.upstream_python:
        r = subprocess.run(
            [os.path.abspath(args.upstream_python), os.path.abspath(__file__), "--file-load-sum-only"]
            + (["--quick"] if args.quick else []),
            capture_output=True,
            text=True,
            check=True,
            cwd=tempfile.gettempdir(),
        )
        up = {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}
    print("\n| file_load_sum | ours | upstream 0.24.0 | ours / upstream |")
    print("|---|---|---|---|")
    for n in LOAD_SUM_SIZES:
        u = up[n] if up else None
        print(
            f"| {n >> 20} MiB | {fmt(ours[n])} | {fmt(u) if u else '-'} | {ours[n] / u if u else float('nan'):.2f}× |"
        )
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
