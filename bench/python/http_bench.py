"""
HTTP inference round trip (issue 17): a float32 tensor POSTed to an identity endpoint and the
answer decoded, over real uvicorn servers on 127.0.0.1 (http_server.py, one process each, one
worker, httptools), one httpx client with keep-alive, side by side in one run:

  - tenso (ours):      tenso.fastapi's get_tenso_data + TensoResponse; client TensoFastAPIClient.predict
  - tenso 0.24.0:      upstream's get_tenso_data + TensoResponse (its own venv), the same client
  - np.save bytes:     np.load(body) / np.save -> Response, client np.save / np.load
  - JSON lists:        {"shape", "data": x.tolist()} both ways

    python http_bench.py [--quick] [--upstream-python PY]   ->  http_results.md / .json

Each size: ROUNDS rounds, the four measured one after another in each (a noisy neighbour hits all
alike); a round times `reps` calls and keeps the median; the table gives the median of the rounds.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List

import httpx
import numpy as np

import tenso
from tenso.client import TensoFastAPIClient

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [1 << 20, 64 << 20]
ROUNDS = 3
LIBS = ["tenso", "upstream", "npy", "json"]
LABELS = {"tenso": "tenso (ours)", "upstream": "tenso 0.24.0", "npy": "np.save bytes", "json": "JSON lists"}


def reps_for(lib: str, size: int) -> int:
    if lib == "json":
        return 3 if size <= 1 << 20 else 1
    return 30 if size <= 1 << 20 else 4


def slow(lib: str, size: int) -> bool:
    """JSON lists of 64 MiB: measured by a single call in the first round only."""
    return lib == "json" and size > 1 << 20


def size_label(n: int) -> str:
    return f"{n >> 20} MiB"


def fmt_time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


class Server:
    def __init__(self, python: str, mode: str):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, "http_server.py"), mode], stdout=subprocess.PIPE, text=True, env=env
        )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{mode} server did not start")
        self.url = f"http://127.0.0.1:{json.loads(line)['port']}"
        deadline = time.monotonic() + 60
        while True:  # listening once the port is printed; wait until uvicorn answers
            try:
                httpx.get(self.url + "/docs", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def make_callers(urls: Dict[str, str]) -> Dict[str, Callable[[np.ndarray], np.ndarray]]:
    tenso_ours = TensoFastAPIClient(urls["tenso"], timeout=600)
    tenso_up = TensoFastAPIClient(urls["upstream"], timeout=600)
    npy = httpx.Client(base_url=urls["npy"], timeout=600)
    js = httpx.Client(base_url=urls["json"], timeout=600)

    def call_npy(x):
        buf = io.BytesIO()
        np.save(buf, x)
        r = npy.post("/infer", content=buf.getvalue(), headers={"content-type": "application/octet-stream"})
        r.raise_for_status()
        return np.load(io.BytesIO(r.content))

    def call_json(x):
        body = json.dumps({"shape": list(x.shape), "data": x.tolist()})
        r = js.post("/infer", content=body, headers={"content-type": "application/json"})
        r.raise_for_status()
        return np.asarray(json.loads(r.content)["data"], dtype=np.float32)

    return {
        "tenso": lambda x: tenso_ours.predict("/infer", x),
        "upstream": lambda x: tenso_up.predict("/infer", x),
        "npy": call_npy,
        "json": call_json,
    }


def time_calls(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1 MiB only, one round")
    ap.add_argument("--upstream-python", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "http_results"))
    args = ap.parse_args()
    sizes = SIZES[:1] if args.quick else SIZES
    rounds = 1 if args.quick else ROUNDS

    servers = {
        lib: Server(
            args.upstream_python if lib == "upstream" else sys.executable, "tenso" if lib == "upstream" else lib
        )
        for lib in LIBS
    }
    try:
        callers = make_callers({lib: s.url for lib, s in servers.items()})
        results: Dict[str, Dict[str, float]] = {}
        for size in sizes:
            x = np.random.default_rng(size).standard_normal(size // 4, dtype=np.float32).reshape(-1, 256)
            for lib in LIBS:  # correctness first, and a warm-up
                if slow(lib, size):
                    continue
                y = callers[lib](x)
                assert y.shape == x.shape and np.array_equal(y, x), lib
            per_round: Dict[str, List[float]] = {lib: [] for lib in LIBS}
            for r in range(rounds):
                for lib in LIBS:
                    if slow(lib, size):
                        if r == 0:  # one call, checked, no warm-up: minutes each on a 2-core VM
                            t0 = time.perf_counter()
                            y = callers[lib](x)
                            per_round[lib].append(time.perf_counter() - t0)
                            assert np.array_equal(y, x), lib
                        continue
                    per_round[lib].append(time_calls(callers[lib], x, reps_for(lib, size)))
            results[size_label(size)] = {lib: statistics.median(v) for lib, v in per_round.items()}
            print(size_label(size), {lib: fmt_time(t) for lib, t in results[size_label(size)].items()}, flush=True)
    finally:
        for s in servers.values():
            s.close()

    up_version = subprocess.run(
        [args.upstream_python, "-c", "import tenso; print(tenso.__version__)"], capture_output=True, text=True
    ).stdout.strip()
    import fastapi
    import uvicorn

    env = (
        f"Python {platform.python_version()}, numpy {np.__version__}, ours tenso {tenso.__version__}, "
        f"upstream tenso {up_version}, fastapi {fastapi.__version__}, uvicorn {uvicorn.__version__} (httptools), "
        f"httpx {httpx.__version__}; {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}"
    )
    lines = [
        f"Environment: {env}",
        "",
        "Round trip: POST a float32 tensor, the identity endpoint answers it, the client decodes it "
        f"(median of {rounds} rounds' medians; JSON lists at 64 MiB: one call).",
        "",
        "| size | " + " | ".join(LABELS[lib] for lib in LIBS) + " | 0.24.0 / ours | npy / ours | JSON / ours |",
        "|---|" + "---|" * (len(LIBS) + 3),
    ]
    for label, row in results.items():
        ours = row["tenso"]
        lines.append(
            f"| {label} | "
            + " | ".join(fmt_time(row[lib]) for lib in LIBS)
            + f" | {row['upstream'] / ours:.2f}x | {row['npy'] / ours:.2f}x | {row['json'] / ours:.1f}x |"
        )
    with open(args.out + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump({"environment": env, "seconds": results}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
