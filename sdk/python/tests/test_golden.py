"""Golden vectors (tests/vectors, written by the real upstream tenso 0.24.0): every packet decodes
to its manifest value, and every uncompressed upstream packet is re-encoded byte for byte."""

import numpy as np
import pytest

import tenso
from conftest import CASES, golden_bytes
from interop_codec import build, describe

QDTYPES = {"qint8": 16, "quint8": 17, "qint4": 18, "quint4": 19}
SCHEMES = {"per_tensor": 0, "per_channel": 1, "per_group": 2}


def manifest_desc(value):
    """A manifest VALUE as an interop_codec description."""
    kind = value["kind"]
    if kind == "dense":
        return {"kind": "dense", "dtype": value["dtype"], "shape": value["shape"], "hex": value["body_hex"]}
    if kind == "bundle":
        return {"kind": "bundle", "entries": [[e["key"], manifest_desc(e["value"])] for e in value["entries"]]}
    if kind.startswith("sparse_"):
        return {"kind": kind, "shape": value["shape"], "components": [manifest_desc(c) for c in value["components"]]}
    if kind == "quantized":
        return {
            "kind": "quantized",
            "dtype_code": QDTYPES[value["dtype"]],
            "scheme": SCHEMES[value["scheme"]],
            "axis": value["axis"],
            "group_size": value["group_size"],
            "shape": value["shape"],
            "data": value["body_hex"],
            "scales": value["scales_hex"],
            "zero_points": value["zero_points_hex"],
        }
    if kind == "string":
        return {"kind": "string", "strings": value["strings"]}
    if kind == "ragged":
        return {"kind": "ragged", "dtype": value["dtype"], "rows": value["rows_hex"]}
    raise ValueError(kind)


def widen_sparse_indices(desc):
    """scipy's *_matrix classes (what loads returns, as upstream) narrow small index arrays to
    int32: compare sparse index components by value."""
    if desc["kind"] == "bundle":
        return {**desc, "entries": [[k, widen_sparse_indices(v)] for k, v in desc["entries"]]}
    if desc["kind"].startswith("sparse_"):
        comps = [desc["components"][0]]
        for c in desc["components"][1:]:
            arr = np.frombuffer(bytes.fromhex(c["hex"]), dtype=c["dtype"]).astype(np.int64)
            comps.append({**c, "dtype": "int64", "hex": arr.tobytes().hex()})
        return {**desc, "components": comps}
    return desc


def ids(cases):
    return [c["name"] for c in cases]


def test_manifest_has_every_kind():
    kinds = {c["value"]["kind"] for c in CASES}
    assert kinds == {
        "dense",
        "bundle",
        "sparse_coo",
        "sparse_csr",
        "sparse_csc",
        "quantized",
        "string",
        "ragged",
        "gpu_ipc_ref",
    }
    assert len(CASES) >= 90


DECODABLE = [c for c in CASES if c["value"]["kind"] != "gpu_ipc_ref"]


@pytest.mark.parametrize("case", DECODABLE, ids=ids(DECODABLE))
def test_decode(case):
    packet = golden_bytes(case)
    assert len(packet) == case["size"]
    value = case["value"]
    obj = tenso.loads(packet)
    if value["kind"] == "ragged":
        # A ragged array is a bundle on the wire: loads gives the dict, RaggedArray.loads the rows.
        assert describe(obj) == manifest_desc(value["bundle"])
        ra = tenso.RaggedArray.loads(packet)
        assert describe(ra) == manifest_desc(value)
        assert [len(r) for r in ra.to_list()] == value["row_lengths"]
        return
    assert widen_sparse_indices(describe(obj)) == widen_sparse_indices(manifest_desc(value))
    if value["kind"] == "string":
        assert obj.shape == tuple(value["shape"])
        assert tenso.StringTensor.loads(packet).to_list() == value["strings"]


@pytest.mark.parametrize("case", DECODABLE, ids=ids(DECODABLE))
def test_decode_copy_equals_view(case):
    packet = golden_bytes(case)
    assert describe(tenso.loads(packet, copy=True)) == describe(tenso.loads(packet))
    assert describe(tenso.loads(packet, align=True)) == describe(tenso.loads(packet))


QUANTIZED = [c for c in CASES if c["value"]["kind"] == "quantized"]


@pytest.mark.parametrize("case", QUANTIZED, ids=ids(QUANTIZED))
def test_dequantize_bit_exact(case):
    value = case["value"]
    q = tenso.loads(golden_bytes(case))
    out = q.dequantize()
    assert out.dtype == np.float32 and out.shape == tuple(value["shape"])
    assert out.tobytes().hex() == value["dequant_hex"]


@pytest.mark.parametrize("case", QUANTIZED, ids=ids(QUANTIZED))
def test_quantize_bit_exact(case):
    """QuantizedTensor.quantize (libtenso's tenso_quantize) reproduces upstream's codes, scales
    and zero points from the same input, and the packet byte for byte."""
    value = case["value"]
    x = np.frombuffer(bytes.fromhex(value["input_hex"]), dtype=value["input_dtype"]).reshape(value["shape"])
    q = tenso.QuantizedTensor.quantize(
        x, value["dtype"], value["scheme"], group_size=value["group_size"], axis=value["axis"]
    )
    assert bytes(q.data).hex() == value["body_hex"]
    assert q.scales.tobytes().hex() == value["scales_hex"]
    assert q.zero_points.tobytes().hex() == value["zero_points_hex"]
    opts = case["options"]
    assert bytes(tenso.dumps(q, **opts)) == golden_bytes(case)


def reencodable(case):
    return case["producer"] == "upstream" and not case["compressed"] and case["version"] == 4


REENCODE = [c for c in CASES if reencodable(c)]


@pytest.mark.parametrize("case", REENCODE, ids=ids(REENCODE))
def test_reencode_byte_identical(case):
    value = case["value"]
    opts = case["options"]
    desc = manifest_desc(value)
    obj = build(desc, tenso)
    if value["kind"] in ("string", "ragged"):
        packet = obj.dumps(check_integrity=opts["check_integrity"])
    else:
        packet = tenso.dumps(obj, **opts)
    assert isinstance(packet, memoryview)
    assert bytes(packet) == golden_bytes(case)
    # The same bytes through the other writers: iter_dumps, write_stream to a file object.
    if value["kind"] not in ("string", "ragged"):
        assert b"".join(tenso.iter_dumps(obj, check_integrity=opts["check_integrity"])) == bytes(
            tenso.dumps(obj, check_integrity=opts["check_integrity"])
        )


COMPRESSED = [c for c in CASES if c["compressed"]]


@pytest.mark.parametrize("case", COMPRESSED, ids=ids(COMPRESSED))
def test_compressed_reencode_round_trips(case):
    """Compressed bytes legitimately differ between LZ4 encoders: ours must decode to the value."""
    desc = manifest_desc(case["value"])
    packet = tenso.dumps(build(desc, tenso), **case["options"])
    assert describe(tenso.loads(packet)) == describe(tenso.loads(golden_bytes(case)))


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_stream_framing(case):
    """Every golden packet frames exactly through read_stream (compressed ones too), with a
    second packet right behind it."""
    import io

    packet = golden_bytes(case)
    src = io.BytesIO(packet + packet)
    if case["value"]["kind"] == "gpu_ipc_ref":
        with pytest.raises(ValueError, match="Unsupported tenso packet"):
            tenso.read_stream(src)
        assert src.tell() == len(packet)  # framed exactly, then refused
        return
    first = tenso.read_stream(src)
    assert src.tell() == len(packet)
    second = tenso.read_stream(src)
    assert describe(first) == describe(second) == describe(tenso.loads(packet))
    assert tenso.read_stream(src) is None


def test_gpu_ipc_ref_refused_like_upstream():
    case = next(c for c in CASES if c["value"]["kind"] == "gpu_ipc_ref")
    with pytest.raises(ValueError) as e:
        tenso.loads(golden_bytes(case))
    assert str(e.value) == (
        "Unsupported tenso packet (e.g. a GPU IPC reference, which is decoded on the device rather than via loads())"
    )
    assert isinstance(e.value, tenso.TensoUnsupportedError)


def test_legacy_v1_v2_are_read():
    """Upstream refuses v1/v2 ('Unsupported protocol version'); libtenso reads v1 to v4."""
    for name in ("legacy_v1_f32", "legacy_v2_f32"):
        case = next(c for c in CASES if c["name"] == name)
        assert case["upstream_reads"] is False
        arr = tenso.loads(golden_bytes(case))
        assert arr.tobytes().hex() == case["value"]["body_hex"]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_packet_info_fields(case):
    packet = golden_bytes(case)
    info = tenso.get_packet_info(packet)
    assert info["version"] == case["version"]
    value = case["value"]
    if value["kind"] in ("bundle", "ragged"):
        entries = value["entries"] if value["kind"] == "bundle" else value["bundle"]["entries"]
        assert info["entry_count"] == info["ndim"] == len(entries)
        assert info["shape"] == ()
    elif value["kind"] in ("dense", "quantized") or value["kind"].startswith("sparse_"):
        assert info["shape"] == tuple(value["shape"])
        assert info["total_elements"] == int(np.prod(value["shape"], dtype=np.int64))
    if value["kind"] == "dense":
        assert info["dtype"] == np.dtype(value["dtype"])
        assert info["data_size_bytes"] == len(bytes.fromhex(value["body_hex"]))
    if value["kind"] == "quantized":
        assert info["dtype"] == value["dtype"] and info["quantized"] is True
        assert info["data_size_bytes"] == len(bytes.fromhex(value["body_hex"]))
