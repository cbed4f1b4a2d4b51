"""
Ray object transfer with and without tenso.ray.register() (issue 17), side by side in one run,
on one local cluster (ray.init(num_cpus=2), object store sized for the 256 MiB case):

  pickle           Ray's default serialization (pickle protocol 5: numpy arrays go out of band,
                   zero-copy on get)
  tenso            tenso.ray.register(): one packet per array, out of band; get decodes a
                   writeable copy (upstream's behaviour)
  tenso zero-copy  tenso.ray.register(zero_copy=True): get decodes in place (read-only views
                   into the object store, as Ray's own numpy path)

Payloads: a dict of 100 float32 arrays of 64 KiB (6.25 MiB) and one 256 MiB float32 array.
Workloads (median seconds of REPS runs after a warm-up):

  put    ray.put(x)
  get    ray.get(ref) of an object put before (driver side)
  task   ray.get(f.remote(x)): x serialized by the driver, deserialized by a worker, which
         returns one number (the element count): the cost of passing x as a task argument

    python ray_bench.py [--quick] [--out results.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

KiB, MiB = 1 << 10, 1 << 20
MODES = ["pickle", "tenso", "tenso zero-copy"]


def median_time(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm-up: first-touch of object store pages, worker start
    times: List[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def payloads(quick: bool) -> Dict[str, Any]:
    rng = np.random.default_rng(0)
    big = (16 if quick else 256) * MiB
    return {
        "dict of 100 × 64 KiB": {f"layer{i}": rng.standard_normal(16 * KiB).astype(np.float32) for i in range(100)},
        f"{big // MiB} MiB array": rng.standard_normal(big // 4).astype(np.float32),
    }


def count(x: Any) -> int:
    if isinstance(x, dict):
        return sum(v.size for v in x.values())
    return int(x.size)


def run(quick: bool) -> Dict[str, Any]:
    import ray

    import tenso.ray

    ray.init(
        num_cpus=2, object_store_memory=3 << 30, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    remote_count = ray.remote(count)
    reps = 3 if quick else 7
    results: Dict[str, Dict[str, Dict[str, float]]] = {}
    try:
        data = payloads(quick)
        for mode in MODES:
            if mode == "tenso":
                tenso.ray.register()
            elif mode == "tenso zero-copy":
                tenso.ray.register(zero_copy=True)
            for name, x in data.items():
                n = count(x)

                def put() -> None:
                    ref = ray.put(x)
                    del ref

                ref = ray.put(x)

                def get(ref: Any = ref) -> None:  # bound now: `del ref` below drops the loop's own
                    y = ray.get(ref)
                    assert count(y) == n

                def task() -> None:
                    assert ray.get(remote_count.remote(x)) == n

                row = results.setdefault(name, {})
                row.setdefault("put", {})[mode] = median_time(put, reps)
                row.setdefault("get", {})[mode] = median_time(get, reps)
                row.setdefault("task", {})[mode] = median_time(task, reps)
                del ref, get
            tenso.ray.unregister()
    finally:
        ray.shutdown()
    return {
        "results": results,
        "env": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "ray": ray.__version__,
            "tenso": __import__("tenso").__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "reps": reps,
        },
    }


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def table(out: Dict[str, Any]) -> str:
    env = out["env"]
    lines = [
        f"Environment: Python {env['python']}, numpy {env['numpy']}, ray {env['ray']}, tenso {env['tenso']}; "
        f"{env['machine']}; median of {env['reps']} runs",
        "",
        "| payload | workload | pickle (Ray default) | tenso | tenso zero-copy | pickle / tenso "
        "| pickle / tenso zero-copy |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in out["results"].items():
        for workload, t in rows.items():
            lines.append(
                f"| {name} | {workload} | {fmt(t['pickle'])} | {fmt(t['tenso'])} | {fmt(t['tenso zero-copy'])} | "
                f"{t['pickle'] / t['tenso']:.2f}× | {t['pickle'] / t['tenso zero-copy']:.2f}× |"
            )
    lines.append("")
    lines.append("Ratios above 1 mean tenso is faster than Ray's default.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="16 MiB instead of 256 MiB, 3 runs")
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    out = run(args.quick)
    text = table(out)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Ray: tenso.ray.register() vs Ray's default serialization\n\n")
            f.write("`bash bench/python/run.sh ray` (issue 17), one run, modes side by side:\n\n```\n")
            f.write(__doc__.split("\n\n")[1].strip("\n") + "\n```\n\n")
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
