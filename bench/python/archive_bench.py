"""
Model-file benchmark (issue 7), side by side in one run, on the same tensors:

  tenso archive      tenso.save_file(.tenso) / tenso.safe_open   (ours)
  safetensors        safetensors.numpy.save_file / safetensors.safe_open(framework="np")
  bintensors         bintensors.numpy.save_file / bintensors.safe_open(framework="np")
  tenso on .st       tenso.safe_open on the safetensors file (our reader, their format)

Data sets: "1 GiB / 1,000 tensors" (float32 [512, 512] each, 1 MiB) and "10,000 small tensors"
(float32 [16, 16], 1 KiB each).

Phases, each timed separately (median of several runs; cold runs drop the file's pages from the
page cache with posix_fadvise(DONTNEED) first, which needs no privileges for clean pages):
  open+list   open the file and list its names (index only)
  get all     get_tensor for every name (ours: zero-copy views of the mapping; peers copy)
  read all    get_tensor + np.sum for every name: every byte is touched
The physical reference for "read all" is np.sum over the same bytes already in memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def datasets(quick: bool) -> Dict[str, Dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    n_big = 100 if quick else 1000
    big = {f"layers.{i}.weight": rng.standard_normal((512, 512), dtype=np.float32) for i in range(n_big)}
    n_small = 1000 if quick else 10000
    small = {f"block.{i}.bias": rng.standard_normal((16, 16), dtype=np.float32) for i in range(n_small)}
    return {f"{n_big} x 1 MiB": big, f"{n_small} x 1 KiB": small}


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def readers() -> Dict[str, Tuple[str, Callable]]:
    import bintensors
    import safetensors
    import tenso

    return {
        "tenso archive": ("tenso", lambda p: tenso.safe_open(p, framework="np")),
        "safetensors": ("safetensors", lambda p: safetensors.safe_open(p, framework="np")),
        "bintensors": ("bt", lambda p: bintensors.safe_open(p, framework="np")),
        "tenso on .safetensors": ("safetensors", lambda p: tenso.safe_open(p, framework="np")),
    }


def write_files(data: Dict[str, np.ndarray], stem: str) -> Dict[str, str]:
    import bintensors.numpy
    import safetensors.numpy
    import tenso

    paths = {ext: f"{stem}.{ext}" for ext in ("tenso", "safetensors", "bt")}
    tenso.save_file(data, paths["tenso"])
    safetensors.numpy.save_file(data, paths["safetensors"])
    bintensors.numpy.save_file(data, paths["bt"])
    return paths


def run_phases(opener: Callable, path: str, cold: bool, reps: int) -> Dict[str, float]:
    t_open, t_get, t_read = [], [], []
    for _ in range(reps):
        if cold:
            drop_cache(path)
        t0 = time.perf_counter()
        with opener(path) as f:
            names = list(f.keys())
            t1 = time.perf_counter()
            arrs = [f.get_tensor(n) for n in names]
            t2 = time.perf_counter()
        del arrs
        if cold:
            drop_cache(path)
        t3 = time.perf_counter()
        with opener(path) as f:
            total = 0.0
            for n in f.keys():
                total += float(np.sum(f.get_tensor(n)))
        t4 = time.perf_counter()
        t_open.append(t1 - t0)
        t_get.append(t2 - t1)
        t_read.append(t4 - t3)
    return {"open+list": statistics.median(t_open), "get all": statistics.median(t_get),
            "read all": statistics.median(t_read)}


def fmt(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="100 x 1 MiB and 1,000 x 1 KiB")
    ap.add_argument("--dir", default="/tmp", help="where the files go (needs ~3.2 GiB)")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    import bintensors
    import safetensors
    import tenso

    rd = readers()
    md = [f"Environment: Python {platform.python_version()}, numpy {np.__version__}, tenso {tenso.__version__}, "
          f"safetensors {safetensors.__version__}, bintensors {getattr(bintensors, '__version__', '?')}; "
          f"{platform.machine()}, {os.cpu_count()} CPUs", ""]
    targets = []
    for label, data in datasets(args.quick).items():
        stem = os.path.join(args.dir, f"tenso-archive-bench-{os.getpid()}")
        print(f"writing {label}", file=sys.stderr)
        paths = write_files(data, stem)
        try:
            # Every reader must give back the same values before it is timed.
            for name, (ext, opener) in rd.items():
                with opener(paths[ext]) as f:
                    assert sorted(f.keys()) == sorted(data), name
                    k = next(iter(data))
                    assert np.array_equal(f.get_tensor(k), data[k]), name
            nbytes = sum(a.nbytes for a in data.values())
            flat = np.concatenate([a.ravel() for a in data.values()])
            t0 = time.perf_counter()
            float(np.sum(flat))
            mem_sum = time.perf_counter() - t0
            del flat
            md += [f"### {label} ({nbytes / MiB:.0f} MiB; reference: np.sum over the same bytes in memory "
                   f"{fmt(mem_sum)})", "",
                   "| reader | cache | open+list | get all | read all (get + np.sum) |", "|---|---|---|---|---|"]
            res = {}
            for cold in (True, False):
                for name, (ext, opener) in rd.items():
                    print(f"  {label}: {name}, {'cold' if cold else 'warm'}", file=sys.stderr)
                    r = run_phases(opener, paths[ext], cold, 3 if cold else 5)
                    res[(name, cold)] = r
                    md.append(f"| {name} | {'cold' if cold else 'warm'} | {fmt(r['open+list'])} | "
                              f"{fmt(r['get all'])} | {fmt(r['read all'])} |")
            md.append("")
            for cold in (True, False):
                ours, st = res[("tenso archive", cold)], res[("safetensors", cold)]
                sp = st["open+list"] / ours["open+list"]
                targets.append(f"| {label}, {'cold' if cold else 'warm'}: open+list safetensors / ours | {sp:.3g}× | ≥ 4× | "
                               f"{'yes' if sp >= 4 else '**no**'} |")
            warm = res[("tenso archive", False)]
            targets.append(f"| {label}, warm: read all / in-memory np.sum | {warm['read all'] / mem_sum:.3g}× | ≈ 1× (memory speed) | — |")
        finally:
            for p in paths.values():
                os.unlink(p)
    md += ["| target | measured | goal | met |", "|---|---|---|---|", *targets]
    with open(os.path.join(args.out, "archive_results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
