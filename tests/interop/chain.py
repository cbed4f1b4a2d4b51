"""The cross-language chain: Python writes packets into a Unix socket whose other end is the
Go relay's stdin; the Go relay pipes into the Rust relay, the Rust relay into the C relay, and
the C relay writes into a second socket that Python reads back:

    Python -(socket)-> Go -(pipe)-> Rust -(pipe)-> C -(socket)-> Python

Each relay decodes every packet and encodes it again with the options it was written with,
so a packet must come back byte for byte (uncompressed cases) or, where LZ4 frames may differ
between encoders or a legacy v1-v3 packet is rewritten as v4, decode to the same value. The
packets: every golden vector of tests/vectors that our tenso decodes, plus packets freshly
encoded here (dense arrays of every dtype under several options, bundles, quantized, strings,
ragged, sparse), some written with tenso.write_stream straight into the socket. Python reads
them back with tenso.read_stream, in order, then expects a clean end of stream and every relay
to exit 0.

Usage: chain.py --vectors DIR --go BIN --rust BIN --c BIN.  Prints "N passed, M failed".
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional

import numpy as np

import tenso
from tenso.quantize import QuantizedTensor


@dataclass
class Case:
    name: str
    packet: bytes  # what goes into the chain, and (by_bytes) what must come back
    by_bytes: bool
    send: Optional[Callable[[socket.socket], None]] = None  # default: sendall(packet)


class Tap:
    """A stream over the return socket that keeps the bytes read_stream consumes, so each
    packet can be compared byte for byte while read_stream does the framing. It has only
    readinto: read_stream must go through its Python framing, never the fd behind it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.seen = bytearray()

    def readinto(self, view: memoryview) -> int:
        n = self.sock.recv_into(view)
        self.seen += view[:n]
        return n


def golden_cases(vectors: Path) -> List[Case]:
    manifest = json.loads((vectors / "manifest.json").read_text(encoding="utf-8"))
    cases = []
    for c in manifest["cases"]:
        packet = (vectors / c["file"]).read_bytes()
        try:
            tenso.loads(packet)
        except Exception as e:  # noqa: BLE001 -- not every golden case is meant to decode
            print(f"skip golden {c['name']}: our tenso does not decode it ({type(e).__name__})")
            continue
        by_bytes = c["version"] == 4 and not c["compressed"]
        cases.append(Case("golden " + c["name"], packet, by_bytes))
    return cases


def fresh_cases() -> List[Case]:
    rng = np.random.default_rng(20240605)
    cases: List[Case] = []

    def add(name: str, obj: Any, **opts: Any) -> None:
        packet = bytes(tenso.dumps(obj, **opts))
        cases.append(Case(f"fresh {name} {opts}", packet, not opts.get("compress", False)))

    dtypes = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64", "bool", "complex64", "complex128"]
    for dt in dtypes:
        a = (rng.standard_normal((3, 5)) * 100).astype(dt)
        add(dt, a)
        add(dt, a, check_integrity=True, alignment=16)
    try:
        import ml_dtypes

        add("bfloat16", rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16))
    except ImportError:
        pass
    big = rng.standard_normal((256, 257)).astype(np.float32)
    for align in (1, 8, 64, 128, 4096):
        add(f"f32 256x257 align {align}", big, alignment=align)
    add("scalar", np.array(3.5, dtype=np.float64))
    add("empty", np.zeros((0, 7), dtype=np.int32))
    add("compressible", np.arange(100_000, dtype=np.int64) % 7, compress=True)
    add("compressible+integrity", np.zeros((64, 64), np.float32), compress=True, check_integrity=True)

    bundle = {
        "w": big[:8],
        "b": np.arange(8, dtype=np.float64),
        "nested": {"ids": np.arange(5, dtype=np.int32), "mask": np.array([True, False])},
        "empty": {},
    }
    add("bundle", bundle)
    add("bundle", bundle, check_integrity=True, alignment=128)
    add("bundle", bundle, compress=True)
    add("bundle of 255", {f"k{i}": np.full(i % 5, i, np.uint8) for i in range(255)})

    x = rng.standard_normal((16, 32)).astype(np.float32)
    add("qint8 per_tensor", QuantizedTensor.quantize(x, "qint8"))
    add("quint4 per_group", QuantizedTensor.quantize(x, "quint4", "per_group", group_size=8))
    add("qint4 per_channel", QuantizedTensor.quantize(x, "qint4", "per_channel", axis=1))
    add("strings", tenso.StringTensor(["alpha", "", "ünïcode ✓", "x" * 1000]))
    add("ragged", tenso.RaggedArray([np.arange(3, dtype=np.float32), np.zeros(0, np.float32),
                                     np.arange(7, dtype=np.float32)]))
    add("bundle of composites", {"q": QuantizedTensor.quantize(x, "qint8"),
                                 "s": tenso.StringTensor(["a", "bc"]), "d": np.arange(3)})
    try:
        import scipy.sparse as sp

        m = sp.random(20, 30, density=0.1, format="coo", dtype=np.float64, random_state=7)
        add("sparse coo", m)
        add("sparse csr", m.tocsr())
        add("sparse csc", m.tocsc())
        add("bundle with sparse", {"m": m.tocsr(), "v": np.arange(4.0)})
    except ImportError:
        print("skip sparse: no scipy")

    # Written with write_stream straight into the socket (vectored, from the arrays' memory).
    for name, obj, integrity in (("write_stream array", big, False),
                                 ("write_stream array+integrity", big[:3], True),
                                 ("write_stream bundle", bundle, True)):
        packet = bytes(tenso.dumps(obj, check_integrity=integrity))
        cases.append(Case(f"fresh {name}", packet, True,
                          send=lambda s, o=obj, i=integrity: tenso.write_stream(o, s, check_integrity=i)))
    return cases


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b)
                and all(same_value(a[k], b[k]) for k in a))
    # Composite kinds: equal when they encode to the same (uncompressed) packet.
    return bytes(tenso.dumps(a)) == bytes(tenso.dumps(b))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=Path, required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--rust", required=True)
    ap.add_argument("--c", required=True)
    args = ap.parse_args()

    cases = golden_cases(args.vectors) + fresh_cases()

    py_out, go_in = socket.socketpair()
    c_out, py_in = socket.socketpair()
    go = subprocess.Popen([args.go], stdin=go_in, stdout=subprocess.PIPE)
    rust = subprocess.Popen([args.rust], stdin=go.stdout, stdout=subprocess.PIPE)
    c = subprocess.Popen([args.c], stdin=rust.stdout, stdout=c_out)
    # The children hold these ends now; closing ours lets end of stream travel down the chain.
    for end in (go_in, c_out):
        end.close()
    go.stdout.close()
    rust.stdout.close()

    send_error: List[BaseException] = []

    def writer() -> None:
        try:
            for case in cases:
                if case.send is not None:
                    case.send(py_out)
                else:
                    py_out.sendall(case.packet)
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            send_error.append(e)
        finally:
            py_out.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=writer)
    thread.start()

    passed = failed = 0
    tap = Tap(py_in)
    for case in cases:
        start = len(tap.seen)
        try:
            got = tenso.read_stream(tap)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {case.name}: read_stream raised {type(e).__name__}: {e}")
            failed += 1
            break
        if got is None:
            print(f"FAIL {case.name}: the stream ended early")
            failed += 1
            break
        back = bytes(tap.seen[start:])
        if case.by_bytes:
            ok = back == case.packet
            if not ok:
                at = next((i for i, (x, y) in enumerate(zip(back, case.packet)) if x != y),
                          min(len(back), len(case.packet)))
                print(f"FAIL {case.name}: {len(back)} bytes back for {len(case.packet)} sent, "
                      f"first difference at byte {at}")
        else:
            ok = same_value(tenso.loads(case.packet), got)
            if not ok:
                print(f"FAIL {case.name}: decodes to another value")
        passed += ok
        failed += not ok
    else:
        extra = tenso.read_stream(tap)
        if extra is not None:
            print("FAIL end of stream: a packet more than was sent came back")
            failed += 1
        else:
            passed += 1  # the clean end of stream
    py_in.close()
    thread.join()
    py_out.close()
    for name, proc in (("go", go), ("rust", rust), ("c", c)):
        rc = proc.wait(timeout=60)
        if rc != 0:
            print(f"FAIL the {name} relay exited with status {rc}")
            failed += 1
    if send_error:
        print(f"FAIL writing: {send_error[0]!r}")
        failed += 1
    print(f"{len(cases)} packets through Python -> Go -> Rust -> C -> Python")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed == len(cases) + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
