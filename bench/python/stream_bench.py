"""
Receive at wire speed (issue 14): read_stream over an AF_UNIX socketpair and over TCP loopback,
float32 tensors of 1 KiB .. 64 MiB, against raw ``recv_into(np.empty)`` of the same bytes and
pickle protocol 5 with out-of-band buffers, side by side in one run (worker.py's harness: a
sender thread, the receiver timed from "send starts" to "receiver holds the array"). Then small
packets: 1 KiB tensors, one sender process, one receiver, TCP loopback, packets/s, for ours and
(in its own venv) upstream tenso 0.24; and one process that writes each packet with write_stream
and reads it back with read_stream, against sendall + recv_into of the same bytes.

    python stream_bench.py [--quick] [--upstream-python PY]   ->  stream_results.md / .json

Rounds: the three libraries are measured one after another for each size, ROUNDS times over
(interleaved, so a noisy neighbour hits all of them alike); the table gives the median of the
rounds' medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from typing import Dict, List

import numpy as np

import worker

SIZES = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
QUICK_SIZES = [1 << 10, 64 << 10, 1 << 20]
LIBS = ["raw", "tenso", "pickle"]  # raw first: the reference each ratio divides by
ROUNDS = 3
SMALL_COUNT = 200_000


def size_label(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def fmt_time(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def socket_rows(transport: str, sizes: List[int]) -> Dict[str, Dict[str, float]]:
    """{size: {lib: median seconds}} for one transport."""
    out: Dict[str, Dict[str, float]] = {}
    sp = worker.SocketPair(transport)
    try:
        for size in sizes:
            a = worker.make_array(size)
            fns = {lib: worker.LIBS[lib](a, "/nonexistent", sp)["socket"] for lib in LIBS}
            for fn in fns.values():
                worker.check_result("socket", fn(), a)
            rounds: Dict[str, List[float]] = {lib: [] for lib in LIBS}
            for _ in range(ROUNDS):
                for lib, fn in fns.items():
                    rounds[lib].append(worker.time_op(fn)["median"])
            out[str(size)] = {lib: statistics.median(v) for lib, v in rounds.items()}
            row = out[str(size)]
            print(
                f"  {transport} {size_label(size):>7s}: raw {fmt_time(row['raw'])}, ours {fmt_time(row['tenso'])} "
                f"({row['tenso'] / row['raw']:.2f}x raw), pickle-5 OOB {fmt_time(row['pickle'])}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        sp.close()
    return out


def run_upstream(python: str, *args: str) -> Dict[str, float]:
    """worker.py with these arguments in upstream's venv: its JSON answer, or {} if it failed."""
    try:
        p = subprocess.run(
            [python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py"), "--lib", "tenso", *args],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as e:
        print(f"upstream run {' '.join(args)} failed: {e}", file=sys.stderr)
        return {}
    return json.loads(p.stdout)


def report(res: Dict, sizes: List[int]) -> str:
    lines = [
        f"Environment: Python {platform.python_version()}, numpy {np.__version__}, ours tenso {res['version']}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "",
    ]
    goals = []
    for transport in ("unix", "tcp"):
        name = "AF_UNIX socketpair" if transport == "unix" else "TCP loopback"
        lines += [
            f"### read_stream over {name}",
            "",
            "| size | raw recv_into | tenso read_stream | pickle-5 OOB | ours / raw | ours / pickle |",
            "|---|---|---|---|---|---|",
        ]
        for size in sizes:
            row = res["socket"][transport][str(size)]
            r_raw, r_pickle = row["tenso"] / row["raw"], row["tenso"] / row["pickle"]
            lines.append(
                f"| {size_label(size)} | {fmt_time(row['raw'])} | {fmt_time(row['tenso'])} | "
                f"{fmt_time(row['pickle'])} | {r_raw:.2f}x | {r_pickle:.2f}x |"
            )
            if size in (1 << 20, 16 << 20):
                goals.append((f"{name} {size_label(size)}: ours / raw", r_raw, "≤ 1.15", r_raw <= 1.15))
            goals.append((f"{name} {size_label(size)}: ours / pickle-5 OOB", r_pickle, "< 1", r_pickle < 1))
        lines.append("")
    small = res.get("small", {})
    if small:
        lines += [
            "### Small packets: 1 KiB float32 tensors, one sender process, TCP loopback",
            "",
            "| receiver | packets/s |",
            "|---|---|",
        ]
        for key, rate in small.items():
            lines.append(f"| {key} | {rate:,.0f} |")
        lines.append("")
        best = max(v for k, v in small.items() if k.startswith("ours"))
        goals.append(("small packets, ours (best reader), packets/s", best, "≥ 150,000", best >= 150_000))
    one = res.get("one_process", {})
    if one:
        raw = one["ours"]["raw sendall + recv_into"]
        lines += [
            "### One process: write_stream then read_stream of a 1 KiB float32 tensor, TCP loopback",
            "",
            f"Load average at the start: {res.get('loadavg', '?')}.",
            "",
            "| package | operation | packets/s | / raw |",
            "|---|---|---|---|",
        ]
        for pkg, rates in one.items():
            for op, rate in rates.items():
                lines.append(f"| {pkg} | {op} | {rate:,.0f} | {rate / raw:.2f} |")
        lines.append("")
        ours = one["ours"]["write_stream + read_stream"]
        goals.append(("one process write_stream + read_stream, 1 KiB, packets/s", ours, "≥ 150,000", ours >= 150_000))
    lines += ["| target | measured | goal | met |", "|---|---|---|---|"]
    for what, value, goal, met in goals:
        shown = f"{value:,.0f}" if value > 100 else f"{value:.2f}x"
        lines.append(f"| {what} | {shown} | {goal} | {'yes' if met else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB, fewer small packets")
    ap.add_argument("--upstream-python", default="", help="python of the upstream tenso 0.24 venv")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    import tenso

    sizes = QUICK_SIZES if args.quick else SIZES
    count = SMALL_COUNT // 10 if args.quick else SMALL_COUNT
    res: Dict = {"version": tenso.__version__, "socket": {}}
    for transport in ("unix", "tcp"):
        res["socket"][transport] = socket_rows(transport, sizes)
    res["loadavg"] = " ".join(open("/proc/loadavg").read().split()[:3])
    res["one_process"] = {"ours": worker.one_process(tenso, count // 4)}
    if args.upstream_python:
        up = run_upstream(args.upstream_python, "--one-process", str(count // 4))
        if up:
            res["one_process"]["upstream 0.24"] = up
    print(f"  one process: {res['one_process']}", file=sys.stderr, flush=True)
    packet = bytes(tenso.dumps(worker.make_array(1024)))
    res["small"] = {f"ours {k}": v for k, v in worker.small_packets(worker.small_readers(tenso), packet, count).items()}
    if args.upstream_python:
        res["small"].update(
            {f"upstream 0.24 {k}": v for k, v in run_upstream(args.upstream_python, "--small", str(count)).items()}
        )
    text = report(res, sizes)
    suffix = "_quick" if args.quick else ""
    with open(os.path.join(args.out, f"stream_results{suffix}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, f"stream_results{suffix}.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
