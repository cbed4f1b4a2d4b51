"""Hostile bytes: truncations and mutations of every golden packet raise ValueError/EOFError
(TensoError subclasses), never crash, never hang, through every decoding entry point."""

import io
import socket

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenso
from conftest import CASES, golden_bytes
from interop_codec import describe

PACKETS = [golden_bytes(c) for c in CASES]


def unview(obj):
    if isinstance(obj, tenso.TensorView):
        return obj.numpy()
    if isinstance(obj, dict):
        return {k: unview(v) for k, v in obj.items()}
    return obj


def touch(obj):
    """Read every byte of a decoded object (catches views that point outside their packet)."""
    if obj is None:
        return
    obj = unview(obj)
    try:
        describe(obj)
    except UnicodeDecodeError:
        pass  # a mutated string payload; upstream raises the same on access
    if isinstance(obj, tenso.QuantizedTensor):
        try:
            obj.dequantize()
        except ValueError:
            pass


ACCEPTABLE = (ValueError, EOFError)  # TensoError subclasses are both/either


def decode_all_ways(data):
    """Every decoder on `data`: each must return or raise an acceptable error."""
    for fn in (
        lambda: tenso.loads(data),
        lambda: tenso.loads(data, copy=True),
        lambda: tenso.loads(data, align=True),
        lambda: tenso.read_stream(io.BytesIO(data)),
        lambda: (tenso.get_packet_info(data), None)[1],
        lambda: tenso.view(data),
        lambda: tenso.RaggedArray.loads(data),
    ):
        try:
            touch(fn())
        except ACCEPTABLE:
            pass  # TensoError subclasses, or ValueErrors of RaggedArray/scipy/utf-8 checks


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_truncation_fails_cleanly(case):
    packet = golden_bytes(case)
    cuts = range(len(packet)) if len(packet) <= 400 else sorted(set(range(0, 400)) | set(range(400, len(packet), 997)) | {len(packet) - 1})
    for cut in cuts:
        data = packet[:cut]
        with pytest.raises(tenso.TensoError) as e:
            tenso.loads(data)
        assert isinstance(e.value, ValueError)
        if cut == 0:
            assert tenso.read_stream(io.BytesIO(data)) is None
        else:
            with pytest.raises((EOFError, ValueError)):
                tenso.read_stream(io.BytesIO(data))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, len(PACKETS) - 1),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255), st.sampled_from(["set", "xor", "insert", "delete"])), min_size=1, max_size=6),
)
def test_mutations_fail_cleanly(index, edits):
    data = bytearray(PACKETS[index])
    for pos, val, op in edits:
        if not data:
            break
        pos %= len(data)
        if op == "set":
            data[pos] = val
        elif op == "xor":
            data[pos] ^= val or 1
        elif op == "insert":
            data.insert(pos, val)
        else:
            del data[pos]
    decode_all_ways(bytes(data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_fail_cleanly(data):
    decode_all_ways(b"TNSO\x04" + data)
    decode_all_ways(data)


def test_mutations_through_a_socket():
    """The same through libtenso's fd reader (tenso_read_fd)."""
    rng = np.random.default_rng(11)
    for packet in PACKETS[::3]:
        data = bytearray(packet)
        for _ in range(3):
            data[rng.integers(len(data))] = rng.integers(256)
        left, right = socket.socketpair()
        with left, right:
            left.sendall(bytes(data))
            left.close()
            try:
                while (obj := tenso.read_stream(right)) is not None:
                    touch(obj)
            except ACCEPTABLE:
                pass


def test_shapes_numpy_cannot_hold():
    """Zero elements, but 31 dimensions of 2^24: valid on the wire, too big for numpy's size
    type. A TensoLimitError, not numpy's own ValueError."""
    head = b"TNSO\x04\x01\x00\x01\x20\x00" + (1 << 24).to_bytes(4, "little") * 31 + b"\x00" * 4
    packet = head + b"\x00" * ((-len(head)) % 64)
    for copy, align in ((False, False), (True, False), (False, True)):  # views and both copies
        with pytest.raises(tenso.TensoLimitError, match="numpy cannot hold"):
            tenso.loads(packet, copy=copy, align=align)
    assert tenso.get_packet_info(packet)["total_elements"] == 0


def test_huge_claims_are_refused_without_allocating():
    # ndim 33
    with pytest.raises(ValueError):
        tenso.loads(b"TNSO\x04\x01\x00\x01\x21\x00" + b"\x01\x00\x00\x00" * 33 + b"\x00" * 64)
    # 2^32-1 x 2^32-1 elements
    with pytest.raises(tenso.TensoLimitError):
        tenso.loads(b"TNSO\x04\x01\x00\x01\x02\x00" + b"\xff\xff\xff\xff" * 2 + b"\x00" * 64)
    # 1e9 float64 elements claimed, 64 bytes given: truncated, not an 8 GB allocation
    with pytest.raises(tenso.TensoTruncatedError):
        tenso.loads(b"TNSO\x04\x01\x00\x03\x01\x00" + (10**9).to_bytes(4, "little") + b"\x00" * 64)
    # unknown dtype code
    with pytest.raises(ValueError):
        tenso.loads(b"TNSO\x04\x01\x00\x63\x01\x00" + (1).to_bytes(4, "little") + b"\x00" * 64)


def test_bundle_depth_bomb():
    """Bundles nested far deeper than 64 levels are refused, not recursed into."""
    inner = b"TNSO\x04\x10\x00\x00\x00\x00"
    for _ in range(200):
        inner = b"TNSO\x04\x10\x00\x00\x01\x00" + (1).to_bytes(4, "little") + b"k" + len(inner).to_bytes(4, "little") + inner
    with pytest.raises(ValueError):
        tenso.loads(inner)
    with pytest.raises(ValueError):
        tenso.read_stream(io.BytesIO(inner))
