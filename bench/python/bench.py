"""
Python benchmark of tenso (this repository's SDK) against upstream tenso 0.24.0 and the usual
peers, in ONE run: one table (markdown, results.md), one chart (chart.png), the issue's targets.

Run through run.sh (it prepares the two venvs). Our tenso and the peers are measured in this
interpreter (build/venv-sdk); upstream tenso, which has the same import name, in a subprocess of
build/venv-upstream running the same worker.py code over the same arrays.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from typing import Dict, List

import numpy as np

import worker

HERE = os.path.dirname(os.path.abspath(__file__))
KiB, MiB = 1 << 10, 1 << 20
SIZES = [1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB]

# Display name -> worker library (and where it runs).
COLUMNS = ["tenso (ours)", "tenso 0.24.0", "pickle", "npy", "safetensors", "pyarrow", "msgpack-numpy", "raw"]
OP_TITLES = {
    "dumps": "dumps (array -> bytes-like)",
    "loads": "loads (bytes -> numpy array)",
    "file_save": "file save (/tmp, new file)",
    "file_load": "file load (lazy where possible)",
    "file_load_sum": "file load + np.sum (all values read)",
    "socket": "socket send+receive (socketpair)",
}


def size_label(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def run_upstream(python: str, sizes: List[int]) -> Dict:
    out = subprocess.run(
        [python, os.path.join(HERE, "worker.py"), "--lib", "tenso", "--sizes", ",".join(map(str, sizes))],
        check=True,
        stdout=subprocess.PIPE,
        cwd=HERE,
    )
    return json.loads(out.stdout)


def table(res: Dict[str, Dict], sizes: List[int]) -> str:
    lines = ["| operation | size | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for op in worker.OPS:
        for size in sizes:
            cells = []
            for col in COLUMNS:
                r = res[col].get(op, {}).get(str(size))
                cells.append(fmt_time(r["median"]) if r else "—")
            lines.append(f"| {op} | {size_label(size)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(res: Dict[str, Dict], sizes: List[int], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    styles = {
        "tenso (ours)": dict(color="C3", lw=2.6, marker="o"),
        "tenso 0.24.0": dict(color="C0", lw=1.8, marker="s"),
        "raw": dict(color="k", ls="--", marker="x"),
    }
    for ax, op in zip(axes.flat, worker.OPS):
        for i, col in enumerate(COLUMNS):
            pts = [(s, res[col][op][str(s)]["median"]) for s in sizes if str(s) in res[col].get(op, {})]
            if not pts:
                continue
            label = "raw (np.copy / tofile / sendall)" if col == "raw" else col
            st = styles.get(col, dict(color=f"C{i + 2}", lw=1.2, marker="."))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **st)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [size_label(s) for s in sizes])
        ax.set_title(OP_TITLES[op])
        ax.set_xlabel("float32 tensor size")
        ax.set_ylabel("median time per op (s)")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels))
    fig.suptitle("tenso Python SDK vs upstream tenso 0.24.0 and peers (lower is better)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=110)


def targets(res: Dict[str, Dict]) -> List[str]:
    big = str(64 * MiB)
    m = lambda col, op: res[col][op][big]["median"]  # noqa: E731
    ours_l, up_l, pk_l = m("tenso (ours)", "loads"), m("tenso 0.24.0", "loads"), m("pickle", "loads")
    ours_d, up_d, cp = m("tenso (ours)", "dumps"), m("tenso 0.24.0", "dumps"), m("raw", "dumps")
    rows = [
        ("loads 64 MiB: ours / upstream", ours_l / up_l, "≤ 0.5", ours_l / up_l <= 0.5),
        ("loads 64 MiB: pickle.loads / ours (speed-up)", pk_l / ours_l, "≥ 1000", pk_l / ours_l >= 1000),
        ("dumps 64 MiB: ours / upstream", ours_d / up_d, "≤ 1.0", ours_d / up_d <= 1.0),
        ("dumps 64 MiB: ours / np.copy", ours_d / cp, "≤ 1.2", ours_d / cp <= 1.2),
    ]
    out = ["| target | measured | goal | met |", "|---|---|---|---|"]
    for name, v, goal, ok in rows:
        out.append(f"| {name} | {v:.3g}× | {goal} | {'yes' if ok else '**no**'} |")
    out.append("")
    out.append(
        f"(64 MiB: ours loads {fmt_time(ours_l)}, upstream loads {fmt_time(up_l)}, pickle.loads {fmt_time(pk_l)}; "
        f"ours dumps {fmt_time(ours_d)}, upstream dumps {fmt_time(up_d)}, np.copy {fmt_time(cp)})"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream-python", required=True)
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB, shorter timing (smoke test)")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sizes = SIZES[:3] if args.quick else SIZES
    if args.quick:
        worker.MIN_TIME = 0.02

    import tenso

    res: Dict[str, Dict] = {}
    print("measuring upstream tenso (subprocess)", file=sys.stderr)
    up = run_upstream(args.upstream_python, sizes)
    res["tenso 0.24.0"] = up["results"]
    for col in COLUMNS:
        if col == "tenso 0.24.0":
            continue
        res[col] = worker.measure("tenso" if col == "tenso (ours)" else col, sizes)

    import msgpack  # (the versions, for the header)
    import msgpack_numpy
    import pyarrow
    import safetensors

    env = (
        f"Python {platform.python_version()}, numpy {np.__version__}, ours tenso {tenso.__version__} "
        f"(libtenso {tenso.library_version}), upstream tenso {up['version']} (Python {up['python']}), "
        f"safetensors {safetensors.__version__}, pyarrow {pyarrow.__version__}, "
        f"msgpack {'.'.join(map(str, msgpack.version))}, "
        f"msgpack-numpy {getattr(msgpack_numpy, '__version__', '0.4.8')}; {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.platform()}"
    )
    md = (
        ["Environment: " + env, "", table(res, sizes), "", *targets(res)]
        if not args.quick
        else ["Environment: " + env, "", table(res, sizes)]
    )
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    chart(res, sizes, os.path.join(args.out, "chart.png"))
    print("\n".join(md))


if __name__ == "__main__":
    main()
