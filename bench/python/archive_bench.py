"""
Model-file benchmark (issue 7), side by side in one run, on the same tensors:

  tenso archive      tenso.save_file(.tenso) / tenso.safe_open   (ours)
  safetensors        safetensors.numpy.save_file / safetensors.safe_open(framework="np")
  bintensors         bintensors.numpy.save_file / bintensors.safe_open(framework="np")
  tenso, verify=never   the same without the lazy per-tensor XXH3 check
  tenso on .st       tenso.safe_open on the safetensors file (our reader, their format)

Data sets: "1 GiB / 1,000 tensors" (float32 [512, 512] each, 1 MiB) and "10,000 small tensors"
(float32 [16, 16], 1 KiB each).

Phases, each timed separately (medians: open+list of 21 runs warm, every phase of 5 runs cold;
cold runs drop the file's pages from the page cache with posix_fadvise(DONTNEED) first, which
needs no privileges for clean pages):
  open+list   open the file and list its names (index only)
  get all     get_tensor for every name (ours: zero-copy views of the mapping; peers copy)
  read all    get_tensor + np.sum for every name: every byte is touched
References: warm "read all" against the same np.sum loop over the arrays already in memory
(same calls, no file: memory speed); cold against read() of the whole file from the device.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, Tuple

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
        "tenso, verify=never": ("tenso", lambda p: tenso.safe_open(p, framework="np", verify="never")),
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


def run_phases(opener: Callable, path: str, cold: bool) -> Dict[str, float]:
    t_open, t_get, t_read = [], [], []
    for _ in range(5 if cold else 21):
        if cold:
            drop_cache(path)
        t0 = time.perf_counter()
        with opener(path) as f:
            list(f.keys())
        t_open.append(time.perf_counter() - t0)
    for _ in range(5):
        if cold:
            drop_cache(path)
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
        t_get.append(t2 - t1)
        t_read.append(t4 - t3)
    return {
        "open+list": statistics.median(t_open),
        "get all": statistics.median(t_get),
        "read all": statistics.median(t_read),
    }


def in_memory_read(data: Dict[str, np.ndarray]) -> float:
    """The "read all" loop over arrays already in memory: what memory speed means here."""
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0.0
        for a in data.values():
            total += float(np.sum(a))
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def disk_read(path: str) -> float:
    """read() of the whole file into one reused buffer, cold: the device's own speed."""
    t = []
    buf = bytearray(4 * MiB)
    for _ in range(5):
        drop_cache(path)
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


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
    md = [
        f"Environment: Python {platform.python_version()}, numpy {np.__version__}, tenso {tenso.__version__}, "
        f"safetensors {safetensors.__version__}, bintensors {getattr(bintensors, '__version__', '?')}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs",
        "",
    ]
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
            mem_read = in_memory_read(data)
            cold_disk = disk_read(paths["tenso"])
            md += [
                f"### {label} ({nbytes / MiB:.0f} MiB)",
                "",
                f"References: the same get + np.sum loop over the arrays in memory {fmt(mem_read)}; "
                f"read() of the whole .tenso file, cold {fmt(cold_disk)}.",
                "",
                "| reader | cache | open+list | get all | read all (get + np.sum) |",
                "|---|---|---|---|---|",
            ]
            res = {}
            for cold in (True, False):
                for name, (ext, opener) in rd.items():
                    print(f"  {label}: {name}, {'cold' if cold else 'warm'}", file=sys.stderr)
                    r = run_phases(opener, paths[ext], cold)
                    res[(name, cold)] = r
                    md.append(
                        f"| {name} | {'cold' if cold else 'warm'} | {fmt(r['open+list'])} | "
                        f"{fmt(r['get all'])} | {fmt(r['read all'])} |"
                    )
            md.append("")
            for cold in (True, False):
                ours, st = res[("tenso archive", cold)], res[("safetensors", cold)]
                sp = st["open+list"] / ours["open+list"]
                targets.append(
                    f"| {label}, {'cold' if cold else 'warm'}: open+list safetensors / ours | {sp:.3g}× | ≥ 4× | "
                    f"{'yes' if sp >= 4 else '**no**'} |"
                )
            for name in ("tenso archive", "tenso, verify=never"):
                r = res[(name, False)]["read all"] / mem_read
                targets.append(
                    f"| {label}, warm, {name}: read all / same loop in memory | {r:.3g}× | ≈ 1× (memory speed) | — |"
                )
            r = res[("tenso archive", True)]["read all"] / cold_disk
            targets.append(
                f"| {label}, cold, tenso archive: read all / read() of the file | {r:.3g}× | ≈ 1× (disk speed) | — |"
            )
        finally:
            for p in paths.values():
                os.unlink(p)
    md += ["| target | measured | goal | met |", "|---|---|---|---|", *targets]
    with open(os.path.join(args.out, "archive_results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
