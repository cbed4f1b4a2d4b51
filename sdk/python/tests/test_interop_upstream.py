"""Interop with the pinned upstream package (tenso 0.24.0), which runs in its own venv and
process: packets pass both ways, byte-identical for every uncompressed case, compressed ones
decodable by each side."""

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenso
from conftest import CASES, UpstreamError, golden_bytes
from interop_codec import describe
from strategies import arrays, bundles, float_arrays, options
from test_golden import widen_sparse_indices

pytestmark = pytest.mark.upstream

INTEROP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def info_json(info):
    return {k: (v.name if isinstance(v, np.dtype) else list(v) if isinstance(v, tuple) else v) for k, v in info.items()}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_packet_info(upstream, case):
    packet = golden_bytes(case)
    ours = info_json(tenso.get_packet_info(packet))
    try:
        theirs = upstream.info(packet)
    except UpstreamError as e:
        # Upstream refuses v1/v2 headers; libtenso reads them.
        assert case["version"] in (1, 2) and e.error == "ValueError"
        return
    assert ours == theirs
    assert list(ours) == list(theirs)  # same keys in the same order


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_decoding(upstream, case):
    packet = golden_bytes(case)
    try:
        theirs = upstream.loads(packet)
    except UpstreamError as e:
        assert not case["upstream_reads"], e
        return
    assert describe(tenso.loads(packet)) == theirs


def _check_both_ways(upstream, value, opts, has_compressed_in_bundle=False):
    desc = describe(value)
    ours = bytes(tenso.dumps(value, **opts))
    theirs = upstream.dumps(desc, **opts)
    if not opts.get("compress"):
        assert ours == theirs
    # Each side decodes the other's packet to the value (sparse: both rebuild scipy *_matrix
    # objects, which may narrow index dtypes, so indices compare by value).
    want = widen_sparse_indices(desc)
    assert widen_sparse_indices(describe(tenso.loads(theirs))) == want
    if not has_compressed_in_bundle:
        assert widen_sparse_indices(upstream.loads(ours)) == want


@INTEROP
@given(value=arrays(), opts=options)
def test_dense_both_ways(upstream, value, opts):
    _check_both_ways(upstream, value, opts)


@INTEROP
@given(value=bundles(arrays()), opts=options)
def test_bundles_both_ways(upstream, value, opts):
    # Upstream 0.24 cannot decode bundles holding compressed values (manifest: bundle_compressed).
    _check_both_ways(upstream, value, opts, has_compressed_in_bundle=opts["compress"])


@settings(max_examples=60, deadline=None)
@given(
    x=float_arrays(),
    qdtype=st.sampled_from(["qint8", "quint8", "qint4", "quint4"]),
    scheme=st.sampled_from(["per_tensor", "per_channel", "per_group"]),
    group_size=st.integers(1, 7),
    axis_pick=st.integers(0, 2),
    opts=options,
)
def test_quantize_both_ways(upstream, x, qdtype, scheme, group_size, axis_pick, opts):
    axis = axis_pick % x.ndim
    reply = upstream.call(
        op="quantize",
        input=describe(x),
        dtype=qdtype,
        scheme=scheme,
        group_size=group_size if scheme == "per_group" else 0,
        axis=axis,
    )
    q = tenso.QuantizedTensor.quantize(
        x, qdtype, scheme, group_size=group_size if scheme == "per_group" else 0, axis=axis
    )
    assert describe(q) == reply["value"]
    assert q.dequantize().tobytes().hex() == reply["dequant"]
    opts = {**opts, "compress": False}
    _check_both_ways(upstream, q, opts)
    _check_both_ways(upstream, {"q": q, "x": x}, opts)


@settings(max_examples=60, deadline=None)
@given(strings=st.lists(st.text(max_size=8), max_size=8), integrity=st.booleans())
def test_strings_both_ways(upstream, strings, integrity):
    st_ = tenso.StringTensor(strings)
    ours = bytes(st_.dumps(check_integrity=integrity))
    desc = describe(st_)
    theirs = bytes.fromhex(upstream.call(op="dumps", value=desc, options={"check_integrity": integrity})["packet"])
    assert ours == theirs
    assert upstream.loads(ours) == desc
    assert describe(tenso.loads(theirs)) == desc


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(0, 255), max_size=5), max_size=6),
    dtype=st.sampled_from(["float32", "int64", "uint8", "float64"]),
    integrity=st.booleans(),
)
def test_ragged_both_ways(upstream, rows, dtype, integrity):
    arrays_ = [np.array(r, dtype=dtype) for r in rows]
    ra = tenso.RaggedArray(arrays_)
    desc = describe(ra)
    ours = bytes(ra.dumps(check_integrity=integrity))
    theirs = bytes.fromhex(upstream.call(op="dumps", value=desc, options={"check_integrity": integrity})["packet"])
    assert ours == theirs
    assert upstream.call(op="ragged_loads", packet=ours.hex())["value"] == desc
    assert describe(tenso.RaggedArray.loads(theirs)) == desc


def test_sparse_both_ways(upstream):
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    for fmt in ("coo", "csr", "csc"):
        for index_dtype in (np.int32, np.int64):
            dense = rng.standard_normal((6, 9)).astype(np.float32)
            dense[dense < 0.5] = 0
            m = sp.coo_array(dense).asformat(fmt)
            if fmt == "coo":
                m.coords = tuple(c.astype(index_dtype) for c in m.coords)
            else:
                m.indices = m.indices.astype(index_dtype)
                m.indptr = m.indptr.astype(index_dtype)
            for opts in ({}, {"check_integrity": True, "alignment": 128, "compress": True}):
                _check_both_ways(upstream, m, opts)


def test_streams_both_ways(upstream):
    """Several packets back to back in one stream: written by ours, read by upstream's
    read_stream, and the reverse."""
    values = [
        np.arange(10, dtype=np.float32),
        {"a": np.ones((2, 2), np.int16), "b": {"c": np.zeros(0, np.uint8)}},
        np.full((), 3.5, np.float64),
        tenso.QuantizedTensor.quantize(np.linspace(-1, 1, 9, dtype=np.float32), "qint4"),
    ]
    buf = io.BytesIO()
    for v in values:
        tenso.write_stream(v, buf, check_integrity=True)
    packets = []
    raw = buf.getvalue()
    pos = 0
    while pos < len(raw):
        obj_len = tenso._tenso.packet_length(raw[pos:])[1]
        packets.append(raw[pos : pos + obj_len].hex())
        pos += obj_len
    assert len(packets) == len(values)
    theirs = upstream.call(op="stream", packets=packets)["values"]
    assert theirs == [describe(v) for v in values]
    # Upstream's packets, concatenated, through our read_stream.
    up_stream = io.BytesIO(b"".join(upstream.dumps(describe(v), check_integrity=True) for v in values))
    got = []
    while (obj := tenso.read_stream(up_stream)) is not None:
        got.append(describe(obj))
    assert got == [describe(v) for v in values]


@pytest.mark.parametrize("kind", ["pattern", "small_ints", "random", "zeros"])
def test_upstream_decodes_our_lz4_frames(upstream, kind):
    # Several 4 MiB blocks and a short last one, in upstream's frame shape (FLG 0x60, BD 0x70):
    # each side decodes the other's, and ours are within 5% of upstream's size.
    rng = np.random.default_rng(5)
    n = (9 << 20) // 4 + 3
    x = {
        "pattern": np.resize(rng.standard_normal(4096).astype(np.float32), n),
        "small_ints": rng.integers(0, 256, n).astype(np.float32),
        "random": rng.standard_normal(n).astype(np.float32),
        "zeros": np.zeros(n, np.float32),
    }[kind]
    ours = bytes(tenso.dumps(x, compress=True))
    assert ours[64:71] == bytes.fromhex("04224d18607073")
    theirs = upstream.dumps(describe(x), compress=True)
    assert len(ours) <= len(theirs) * 1.05
    assert describe(tenso.loads(theirs)) == describe(x)
    assert upstream.loads(ours) == describe(x)
