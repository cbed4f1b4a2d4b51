"""The cross-language chain: Python writes packets into a Unix socket whose other end is the
Go relay's stdin; the Go relay pipes into the Rust relay, the Rust relay into the C relay, and
the C relay writes into a second socket that Python reads back:

    Python -(socket)-> Go -(pipe)-> Rust -(pipe)-> C -(socket)-> Python

Each relay decodes every packet, builds every kind again from its decoded parts with its
language's public API and encodes it with the options it was written with, so a packet must
come back byte for byte (uncompressed cases) or, where LZ4 frames may differ between encoders
or a legacy v1-v3 packet is rewritten as v4, decode to the same value. The packets: every
golden vector of tests/vectors, plus packets freshly encoded here (dense arrays of every dtype
under several options, bundles, quantized, strings, ragged, sparse and bundles of them), some
written with tenso.write_stream straight into the socket. Python reads them back with
tenso.read_stream, in order, then expects a clean end of stream and every relay to exit 0.

A golden vector that Python's loads refuses still travels the chain when it is listed in
FRAMED_ONLY (the relays decode and rebuild it; Python frames it, then checks the bytes). Any
other golden vector that Python does not decode fails the run, as does a listed one that it
decodes after all: the lists are exact.

A relay that forwarded a packet as it came would pass the byte comparison, so for one golden
vector of each kind (DIRTY) a copy with a byte the decoder ignores set (a padding byte) goes
in too, and the clean vector must come back: only a relay that rebuilt it writes that. As
only the first relay of the chain sees those copies, the same packets then go through each
relay alone (Python -> relay -> Python) as well.

Usage: chain.py --vectors DIR --go BIN --rust BIN --c BIN.  Prints "N passed, M failed" for
each path; exit status 0 when every path passed.
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
from typing import Any, Callable, List, Optional, Tuple

import ml_dtypes
import numpy as np
import scipy.sparse as sp

import tenso
from tenso.quantize import QuantizedTensor

# Golden vectors Python's loads refuses, and why. They still go through every relay.
FRAMED_ONLY = {
    "gpu_ipc_ref": "Python refuses GPU IPC references, like upstream: they are decoded on the device",
}
# One golden vector of each kind, sent again with a padding byte set (see the docstring).
DIRTY = [
    "dense_f32_vec",
    "bundle_mixed",
    "sparse_coo_f32",
    "sparse_csc_f32",
    "quantized_qint4_per_group_short_last",
    "string_mixed_utf8",
    "ragged_f32",
    "bundle_quantized_sparse",
    "bundle_quantized_align128_integrity",
]


@dataclass
class Case:
    name: str
    packet: bytes  # what goes into the chain, and (by_bytes) what must come back
    by_bytes: bool
    send: Optional[Callable[[socket.socket], None]] = None  # default: sendall(packet)
    framed_only: bool = False  # Python frames it but refuses to decode it (FRAMED_ONLY)
    back: Optional[bytes] = None  # by_bytes: what must come back, when not the packet itself


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
        framed_only = c["name"] in FRAMED_ONLY
        try:
            tenso.loads(packet)
            if framed_only:
                raise SystemExit(f"golden {c['name']} decodes now: remove it from FRAMED_ONLY")
        except tenso.TensoUnsupportedError:
            if not framed_only:
                raise
        by_bytes = c["version"] == 4 and not c["compressed"]
        cases.append(Case("golden " + c["name"], packet, by_bytes, framed_only=framed_only))
    missing = (set(FRAMED_ONLY) | set(DIRTY)) - {c["name"] for c in manifest["cases"]}
    if missing:
        raise SystemExit(f"FRAMED_ONLY or DIRTY names no golden vector: {sorted(missing)}")
    for case in [c for c in cases if c.name.removeprefix("golden ") in DIRTY]:
        cases.append(Case(case.name + " with a padding byte set", dirty(case.packet), True, back=case.packet))
    return cases


def dirty(packet: bytes) -> bytes:
    """The packet with its first zero byte past the header that the decoder ignores (the same
    value decodes, the integrity footer passes) set to 0x55."""
    want = tenso.loads(packet)
    for at in range(10, len(packet)):
        if packet[at] != 0:
            continue
        q = packet[:at] + b"\x55" + packet[at + 1 :]
        try:
            if same_value(tenso.loads(q), want):
                return q
        except tenso.TensoError:
            pass
    raise SystemExit("no ignored byte found")


def fresh_cases() -> List[Case]:
    rng = np.random.default_rng(20240605)
    cases: List[Case] = []

    def add(name: str, obj: Any, **opts: Any) -> None:
        packet = bytes(tenso.dumps(obj, **opts))
        cases.append(Case(f"fresh {name} {opts}", packet, not opts.get("compress", False)))

    dtypes = [
        "float32",
        "float64",
        "float16",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "complex64",
        "complex128",
    ]
    for dt in dtypes:
        a = (rng.standard_normal((3, 5)) * 100).astype(dt)
        add(dt, a)
        add(dt, a, check_integrity=True, alignment=16)
    add("bfloat16", rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16))
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
    add(
        "ragged",
        tenso.RaggedArray([np.arange(3, dtype=np.float32), np.zeros(0, np.float32), np.arange(7, dtype=np.float32)]),
    )
    q8 = QuantizedTensor.quantize(x, "qint8")
    strings = tenso.StringTensor(["a", "bc", "ünïcode"])
    ragged = tenso.RaggedArray([np.arange(4, dtype=np.int64), np.arange(2, dtype=np.int64)])
    add("bundle of composites", {"q": q8, "s": strings, "d": np.arange(3)})
    m = sp.random(20, 30, density=0.1, format="coo", dtype=np.float64, random_state=7)
    add("sparse coo", m)
    add("sparse csr", m.tocsr())
    add("sparse csc", m.tocsc())
    add("bundle with sparse", {"m": m.tocsr(), "v": np.arange(4.0)})
    everything = {
        "q4": QuantizedTensor.quantize(x, "quint4", "per_group", group_size=8),
        "q8": q8,
        "s": strings,
        "r": ragged,
        "coo": m,
        "csc": m.tocsc(),
        "inner": {"csr": m.tocsr(), "r": ragged, "s": strings, "d": x[:2]},
    }
    add("bundle of every kind", everything)
    add("bundle of every kind", everything, check_integrity=True, alignment=128)
    add("bundle of every kind", everything, compress=True)
    add("bundle of every kind", everything, compress=True, check_integrity=True)

    # Written with write_stream straight into the socket (vectored, from the arrays' memory).
    for name, obj, integrity in (
        ("write_stream array", big, False),
        ("write_stream array+integrity", big[:3], True),
        ("write_stream bundle", bundle, True),
    ):
        packet = bytes(tenso.dumps(obj, check_integrity=integrity))
        cases.append(
            Case(
                f"fresh {name}",
                packet,
                True,
                send=lambda s, o=obj, i=integrity: tenso.write_stream(o, s, check_integrity=i),
            )
        )
    return cases


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and list(a) == list(b)
            and all(same_value(a[k], b[k]) for k in a)
        )
    # Composite kinds: equal when they encode to the same (uncompressed) packet.
    return bytes(tenso.dumps(a)) == bytes(tenso.dumps(b))


def run(cases: List[Case], relays: List[Tuple[str, str]]) -> bool:
    """Sends every case through the relays, piped one into the next, and checks what comes
    back; prints a FAIL line for each failure and a summary. True when all passed."""
    py_out, first_in = socket.socketpair()
    last_out, py_in = socket.socketpair()
    procs = []
    stdin: Any = first_in
    for i, (_, binary) in enumerate(relays):
        stdout = last_out if i == len(relays) - 1 else subprocess.PIPE
        procs.append(subprocess.Popen([binary], stdin=stdin, stdout=stdout))
        stdin = procs[-1].stdout
    # The children hold these ends now; closing ours lets end of stream travel down the chain.
    for end in (first_in, last_out):
        end.close()
    for proc in procs[:-1]:
        proc.stdout.close()

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

    path = " -> ".join(["Python"] + [name for name, _ in relays] + ["Python"])
    passed = failed = 0
    tap = Tap(py_in)
    for case in cases:
        start = len(tap.seen)
        refused = False
        try:
            got = tenso.read_stream(tap)
        except tenso.TensoUnsupportedError as e:
            if not case.framed_only:
                print(f"FAIL {path}: {case.name}: read_stream raised {type(e).__name__}: {e}")
                failed += 1
                break
            got, refused = None, True  # framed, then refused: its bytes are checked below
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {path}: {case.name}: read_stream raised {type(e).__name__}: {e}")
            failed += 1
            break
        if got is None and not refused:
            print(f"FAIL {path}: {case.name}: the stream ended early")
            failed += 1
            break
        back = bytes(tap.seen[start:])
        if case.framed_only and not refused:
            print(f"FAIL {path}: {case.name}: read_stream decoded a packet Python refuses")
            ok = False
        elif case.by_bytes:
            want = case.packet if case.back is None else case.back
            ok = back == want
            if not ok:
                at = next((i for i, (x, y) in enumerate(zip(back, want)) if x != y), min(len(back), len(want)))
                print(
                    f"FAIL {path}: {case.name}: {len(back)} bytes back for {len(want)} "
                    f"expected, first difference at byte {at}"
                )
        else:
            ok = same_value(tenso.loads(case.packet), got)
            if not ok:
                print(f"FAIL {path}: {case.name}: decodes to another value")
        passed += ok
        failed += not ok
    else:
        extra = tenso.read_stream(tap)
        if extra is not None:
            print(f"FAIL {path}: a packet more than was sent came back")
            failed += 1
        else:
            passed += 1  # the clean end of stream
    py_in.close()
    thread.join()
    py_out.close()
    for (name, _), proc in zip(relays, procs):
        rc = proc.wait(timeout=60)
        if rc != 0:
            print(f"FAIL {path}: the {name} relay exited with status {rc}")
            failed += 1
    if send_error:
        print(f"FAIL {path}: writing: {send_error[0]!r}")
        failed += 1
    print(f"{path}: {len(cases)} packets, {passed} passed, {failed} failed")
    return failed == 0 and passed == len(cases) + 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", type=Path, required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--rust", required=True)
    ap.add_argument("--c", required=True)
    args = ap.parse_args()

    cases = golden_cases(args.vectors) + fresh_cases()
    relays = [("Go", args.go), ("Rust", args.rust), ("C", args.c)]
    # The chain, then each relay alone: in the chain only the first one sees the DIRTY copies.
    results = [run(cases, relays)] + [run(cases, [relay]) for relay in relays]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
