"""Hostile bytes: truncations and mutations of every golden packet are refused with a decode
status, raised as exactly the class tenso.errors maps it to; never a crash, a hang, a bare
ValueError or a failed allocation, through every decoding entry point."""

import io
import socket

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenso
from conftest import CASES, golden_bytes
from interop_codec import describe
from tenso import errors

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
        except tenso.TensoValueError:
            pass  # scales that do not fit the mutated shape


# The statuses hostile bytes may be answered with. Not NO_MEMORY (no claimed size may reach an
# allocation), not INTERNAL, not a numpy or Python error leaking through.
DECODE_STATUSES = frozenset({
    errors.TENSO_E_TRUNCATED, errors.TENSO_E_BAD_MAGIC, errors.TENSO_E_UNSUPPORTED_VERSION,
    errors.TENSO_E_BAD_DTYPE, errors.TENSO_E_TOO_MANY_DIMS, errors.TENSO_E_TOO_MANY_ELEMENTS,
    errors.TENSO_E_CHECKSUM, errors.TENSO_E_COMPRESSION, errors.TENSO_E_BAD_BUNDLE,
    errors.TENSO_E_MALFORMED, errors.TENSO_E_LIMIT, errors.TENSO_E_UNSUPPORTED_KIND,
})  # fmt: skip


def assert_refused(e, also=frozenset()):
    """`e` is a decode refusal: a status of DECODE_STATUSES (or `also`), raised as exactly the
    class errors._BY_STATUS gives for it."""
    assert isinstance(e, tenso.TensoError), f"not a TensoError: {type(e).__name__}: {e}"
    assert e.status in DECODE_STATUSES | also, f"{tenso._tenso.status_name(e.status)}: {e}"
    assert type(e) is errors._BY_STATUS[e.status], f"{type(e).__name__} for {tenso._tenso.status_name(e.status)}"


def decode_all_ways(data):
    """Every decoder on `data`: each must return, or refuse it (assert_refused)."""
    for fn, also in (
        (lambda: tenso.loads(data), ()),
        (lambda: tenso.loads(data, copy=True), ()),
        (lambda: tenso.loads(data, align=True), ()),
        (lambda: tenso.read_stream(io.BytesIO(data)), ()),
        (lambda: (tenso.get_packet_info(data), None)[1], ()),
        (lambda: tenso.view(data), ()),
        # RaggedArray's own "Not a valid RaggedArray packet" for valid packets of other shapes.
        (lambda: tenso.RaggedArray.loads(data), {errors.TENSO_E_INVALID_ARGUMENT}),
    ):
        try:
            touch(fn())
        except Exception as e:
            assert_refused(e, frozenset(also))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_truncation_fails_cleanly(case):
    packet = golden_bytes(case)
    cuts = (
        range(len(packet))
        if len(packet) <= 400
        else sorted(set(range(0, 400)) | set(range(400, len(packet), 997)) | {len(packet) - 1})
    )
    for cut in cuts:
        data = packet[:cut]
        with pytest.raises(tenso.TensoTruncatedError) as e:
            tenso.loads(data)
        assert e.value.status == errors.TENSO_E_TRUNCATED
        if cut == 0:
            assert tenso.read_stream(io.BytesIO(data)) is None
        else:
            with pytest.raises(tenso.TensoTruncatedError) as e:  # an EOFError too, as upstream
                tenso.read_stream(io.BytesIO(data))
            assert e.value.status == errors.TENSO_E_TRUNCATED


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, len(PACKETS) - 1),
    edits=st.lists(
        st.tuples(st.integers(0, 1 << 20), st.integers(0, 255), st.sampled_from(["set", "xor", "insert", "delete"])),
        min_size=1,
        max_size=6,
    ),
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
            except Exception as e:
                assert_refused(e)


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
    def status_of(packet, cls):
        with pytest.raises(cls) as e:
            tenso.loads(packet)
        return e.value.status

    # ndim 33
    ndim33 = b"TNSO\x04\x01\x00\x01\x21\x00" + b"\x01\x00\x00\x00" * 33 + b"\x00" * 64
    assert status_of(ndim33, tenso.TensoLimitError) == errors.TENSO_E_TOO_MANY_DIMS
    # 2^32-1 x 2^32-1 elements
    huge = b"TNSO\x04\x01\x00\x01\x02\x00" + b"\xff\xff\xff\xff" * 2 + b"\x00" * 64
    assert status_of(huge, tenso.TensoLimitError) == errors.TENSO_E_TOO_MANY_ELEMENTS
    # 1e9 float64 elements claimed, 64 bytes given: truncated, not an 8 GB allocation
    claim = b"TNSO\x04\x01\x00\x03\x01\x00" + (10**9).to_bytes(4, "little") + b"\x00" * 64
    assert status_of(claim, tenso.TensoTruncatedError) == errors.TENSO_E_TRUNCATED
    # unknown dtype code
    dtype99 = b"TNSO\x04\x01\x00\x63\x01\x00" + (1).to_bytes(4, "little") + b"\x00" * 64
    assert status_of(dtype99, tenso.TensoUnsupportedError) == errors.TENSO_E_BAD_DTYPE


def test_bundle_depth_bomb():
    """Bundles nested far deeper than 64 levels are refused, not recursed into."""
    inner = b"TNSO\x04\x10\x00\x00\x00\x00"
    for _ in range(200):
        inner = (
            b"TNSO\x04\x10\x00\x00\x01\x00"
            + (1).to_bytes(4, "little")
            + b"k"
            + len(inner).to_bytes(4, "little")
            + inner
        )
    for decode in (tenso.loads, lambda b: tenso.read_stream(io.BytesIO(b))):
        with pytest.raises(tenso.TensoLimitError, match="nest deeper") as e:
            decode(inner)
        assert e.value.status == errors.TENSO_E_LIMIT
