"""The cross-language node test: a Go node pushes values to a Python node, which publishes what
it received for a Rust node to pull; every byte is checked at each step.

    Go (tenso-node-push) -(push, TLS)-> Python TensorNode -(pull, TLS)-> Rust (node_pull)

Every language computes the values the same way (byte i of the value with seed s is
(i*131 + s*17 + i/251) mod 256, viewed as the dtype): Python checks each push it receives
(name, sender = the Go node's key fingerprint, dtype, shape, bytes) against its own copy, then
publishes the received arrays themselves (served from the memory they were received into); the
Rust node writes each pulled body to a file and prints its dtype and shape, which Python checks
again. Among the values: a 16 MiB one, an empty one and a bundle.

Usage: nodes.py --go BIN --rust BIN.  Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from tenso.net import TensorNode


def pattern(seed: int, n: int) -> np.ndarray:
    i = np.arange(n, dtype=np.int64)
    return ((i * 131 + seed * 17 + i // 251) & 0xFF).astype(np.uint8)


def dense(dtype: str, seed: int, *shape: int) -> np.ndarray:
    n = np.dtype(dtype).itemsize * math.prod(shape)
    return pattern(seed, n).view(dtype).reshape(shape)


# In the order the Go node pushes them (sdk/go/cmd/tenso-node-push).
EXPECTED: Dict[str, Any] = {
    "u8": dense("uint8", 1, 1000),
    "f32": dense("float32", 2, 64, 64),
    "i64": dense("int64", 3, 3, 5, 7),
    "big": dense("uint8", 4, 16 << 20),
    "empty": dense("float64", 5, 0, 3),
    "bundle": {"a": dense("int16", 6, 10), "b": dense("float64", 7, 4)},
}


def flat(name: str, value: Any) -> Dict[str, np.ndarray]:
    if isinstance(value, dict):
        return {f"{name}.{k}": v for k, v in value.items()}
    return {name: value}


def same(what: str, want: np.ndarray, got: Any, failures: List[str]) -> None:
    if not isinstance(got, np.ndarray):
        failures.append(f"{what}: got {type(got).__name__}, not an array")
    elif got.dtype != want.dtype or got.shape != want.shape:
        failures.append(f"{what}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}")
    elif got.tobytes() != want.tobytes():
        failures.append(f"{what}: bytes differ")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--rust", required=True)
    args = ap.parse_args()
    failures: List[str] = []
    checked = 0

    with TensorNode() as node:  # TLS 1.3, ephemeral key
        addr = node.get_node_addr_sync()
        go = subprocess.Popen([args.go, addr], stdout=subprocess.PIPE, text=True)
        assert go.stdout is not None
        go_id = go.stdout.readline().strip()
        received: Dict[str, Any] = {}
        for want_name, want in EXPECTED.items():
            got = node.receive_tensor_with_sender_sync(timeout=120)
            if got is None:
                failures.append(f"push {want_name}: nothing arrived")
                break
            name, sender, value = got
            if name != want_name or sender != go_id:
                failures.append(f"push: got {name!r} from {sender!r}, want {want_name!r} from {go_id!r}")
            for key, arr in flat(want_name, want).items():
                sub = value
                if isinstance(want, dict):
                    sub = value.get(key.split(".", 1)[1]) if isinstance(value, dict) else None
                same(f"push {key}", arr, sub, failures)
                checked += 1
            received[name] = value
        if go.wait(timeout=120) != 0:
            failures.append(f"the Go node exited with {go.returncode}")

        for name, value in received.items():
            node.publish(name, value)  # the received memory itself is served
        with tempfile.TemporaryDirectory() as out:
            rust = subprocess.run([args.rust, addr, out, *received], stdout=subprocess.PIPE, text=True, timeout=300)
            if rust.returncode != 0:
                failures.append(f"the Rust node exited with {rust.returncode}")
            lines = {ln.split(" ", 1)[0]: ln for ln in rust.stdout.splitlines()}
            for want_name, want in EXPECTED.items():
                for key, arr in flat(want_name, want).items():
                    line = lines.get(key)
                    meta = f"{key} {arr.dtype.name} [{', '.join(map(str, arr.shape))}]"
                    if line != meta:
                        failures.append(f"pull {key}: Rust saw {line!r}, want {meta!r}")
                        continue
                    body = (Path(out) / f"{key}.bin").read_bytes()
                    if body != arr.tobytes():
                        failures.append(f"pull {key}: bytes differ")
                    checked += 1

    for f in failures:
        print("FAIL", f)
    print(f"{checked} checks passed, {len(failures)} failed")
    return 0 if not failures and checked == 2 * sum(len(flat(n, v)) for n, v in EXPECTED.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
