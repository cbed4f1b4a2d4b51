"""Composite kinds: QuantizedTensor, scipy.sparse, StringTensor, RaggedArray, alone and inside
bundles."""

import numpy as np
import pytest
import scipy.sparse as sp

import tenso
from interop_codec import describe

# ---- QuantizedTensor --------------------------------------------------------------------------


def test_quantized_properties_and_repr():
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
    q = tenso.QuantizedTensor.quantize(x, "qint4", "per_channel", axis=1)
    assert q.dtype_name == "qint4" and q.is_4bit and q.is_signed
    assert q.dtype_code == 18 and q.quant_scheme == 1 and q.axis == 1 and q.group_size == 0
    assert q.shape == (3, 5) and q.nbytes == 8 and q.data.dtype == np.uint8 and len(q.data) == 8
    assert q.scales.dtype == np.float32 and q.scales.shape == (5,)
    assert repr(q) == "QuantizedTensor(dtype=qint4, shape=(3, 5), scheme=1, nbytes=8)"
    u = tenso.QuantizedTensor.quantize(x, "quint8")
    assert not u.is_4bit and not u.is_signed and u.nbytes == 15


def test_quantized_round_trip_and_error():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    for dtype, tol in (("qint8", 0.02), ("quint8", 0.02), ("qint4", 0.4), ("quint4", 0.4)):
        for scheme, kw in (("per_tensor", {}), ("per_channel", {"axis": 0}), ("per_group", {"group_size": 16})):
            q = tenso.QuantizedTensor.quantize(x, dtype, scheme, **kw)
            back = tenso.loads(tenso.dumps(q, check_integrity=True))
            assert isinstance(back, tenso.QuantizedTensor)
            assert describe(back) == describe(q)
            assert np.abs(back.dequantize() - x).max() < tol * np.abs(x).max()
            assert np.array_equal(back.dequantize(), q.dequantize())


def test_quantized_decoded_arrays_are_views():
    q = tenso.QuantizedTensor.quantize(np.arange(64, dtype=np.float32), "qint8")
    src = bytearray(tenso.dumps(q))
    back = tenso.loads(src)
    assert np.shares_memory(back.data, np.frombuffer(src, np.uint8))
    assert not back.data.flags.writeable
    assert tenso.loads(src, copy=True).data.flags.writeable


def test_quantized_errors_like_upstream():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(KeyError):
        tenso.QuantizedTensor.quantize(x, "qint9")
    with pytest.raises(KeyError):
        tenso.QuantizedTensor.quantize(x, "qint8", "per_row")
    with pytest.raises(ValueError, match="group_size must be > 0 for per_group scheme"):
        tenso.QuantizedTensor.quantize(x, "qint8", "per_group")
    with pytest.raises(IndexError):
        tenso.QuantizedTensor.quantize(x, "qint8", "per_channel", axis=5)
    with pytest.raises(ValueError):
        tenso.QuantizedTensor.quantize(np.zeros(0, np.float32), "qint8")


def test_quantize_converts_inputs_like_upstream():
    """Upstream quantizes x.astype(float32): float64, float16, ints and bfloat16 inputs too."""
    import ml_dtypes

    base = np.linspace(-3, 3, 20)
    ref = tenso.QuantizedTensor.quantize(base.astype(np.float32), "qint8")
    for dt in (np.float64, np.float16, ml_dtypes.bfloat16):
        x = base.astype(dt)
        q = tenso.QuantizedTensor.quantize(x, "qint8")
        r = tenso.QuantizedTensor.quantize(x.astype(np.float32), "qint8")
        assert describe(q) == describe(r)
    assert describe(tenso.QuantizedTensor.quantize(np.arange(10), "quint8")) == describe(
        tenso.QuantizedTensor.quantize(np.arange(10, dtype=np.float32), "quint8")
    )
    assert ref.shape == (20,)


def test_negative_channel_axis_is_normalised_on_the_wire():
    """Upstream writes axis -1 as the byte 255 and cannot dequantize its own packet; libtenso
    writes the normalised axis, so the packet decodes and dequantizes."""
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    q = tenso.QuantizedTensor.quantize(x, "qint8", "per_channel", axis=-1)
    assert q.axis == -1  # the object keeps what it was given, as upstream
    back = tenso.loads(tenso.dumps(q))
    assert back.axis == 1
    assert np.array_equal(back.dequantize(), q.dequantize())


def test_quantized_inside_bundles():
    q = tenso.QuantizedTensor.quantize(np.linspace(0, 1, 10, dtype=np.float32), "quint4")
    value = {"q": q, "nested": {"q2": q, "x": np.arange(2)}}
    out = tenso.loads(tenso.dumps(value, compress=True, alignment=128))
    assert describe(out) == describe(value)


# ---- sparse --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
@pytest.mark.parametrize("cls", ["matrix", "array"])
def test_sparse_in_and_out(fmt, cls):
    dense = np.array([[0, 1.5, 0], [2.0, 0, 0], [0, 0, -3.0], [0, 0, 0]], dtype=np.float64)
    m = getattr(sp, f"{fmt}_{cls}")(dense)
    out = tenso.loads(tenso.dumps(m))
    assert type(out).__name__ == f"{fmt}_matrix"  # upstream returns *_matrix for both
    assert out.shape == dense.shape
    assert np.array_equal(out.toarray(), dense)
    assert not out.data.flags.writeable


def test_sparse_inside_bundles_and_options_ignored():
    m = sp.random(20, 30, density=0.1, format="csr", random_state=1, dtype=np.float32)
    plain = bytes(tenso.dumps(m))
    assert bytes(tenso.dumps(m, alignment=128, check_integrity=True, compress=True)) == plain
    out = tenso.loads(tenso.dumps({"m": m, "c": m.tocsc(), "o": m.tocoo()}))
    for k in ("m", "c", "o"):
        assert np.array_equal(out[k].toarray(), m.toarray())


def test_unknown_sparse_format():
    m = sp.lil_matrix(np.eye(3))
    with pytest.raises(ValueError, match="Unknown sparse format"):
        tenso.dumps(m)


def test_corrupt_sparse_structure_refused():
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    m.indices = m.indices.copy()
    m.indices[0] = 99  # outside the shape
    with pytest.raises(ValueError):
        tenso.dumps(m)


# ---- StringTensor --------------------------------------------------------------------------------


def test_string_tensor_api():
    st = tenso.StringTensor(["hello", "", "wörld", b"raw", "🙂"])
    assert len(st) == 5 and st.shape == (5,)
    assert st[0] == "hello" and st[-1] == "🙂" and st[3] == "raw"
    with pytest.raises(IndexError, match="index 5 out of range for StringTensor of size 5"):
        st[5]
    assert st.nbytes == len("hellowörldraw🙂".encode())
    assert repr(st) == "StringTensor(['hello', '', 'wörld'], ..., count=5)"
    back = tenso.StringTensor.loads(st.dumps(check_integrity=True))
    assert back.to_list() == st.to_list() and back == st
    assert tenso.loads(st.dumps()).to_list() == st.to_list()
    with pytest.raises(ValueError, match="Not a StringTensor packet"):
        tenso.StringTensor.loads(tenso.dumps(np.zeros(2)))


def test_string_payload_is_a_view():
    src = bytearray(tenso.StringTensor(["abc", "de"]).dumps())
    st = tenso.loads(src)
    assert isinstance(st._data, memoryview) and st._data.readonly
    assert np.shares_memory(np.frombuffer(st._data, np.uint8), np.frombuffer(src, np.uint8))
    copied = tenso.loads(src, copy=True)
    assert isinstance(copied._data, bytes) and copied.to_list() == ["abc", "de"]


def test_strings_and_ragged_inside_bundles():
    """Upstream cannot put these in bundles; libtenso can (and dumps() takes them alone)."""
    st = tenso.StringTensor(["a", "bé"])
    ra = tenso.RaggedArray([np.array([1, 2, 3]), np.array([4])])
    value = {"s": st, "r": ra, "x": np.arange(3)}
    out = tenso.loads(tenso.dumps(value, check_integrity=True))
    assert out["s"].to_list() == ["a", "bé"]
    assert describe(tenso.RaggedArray.loads(out["r"])) == describe(ra)
    assert bytes(tenso.dumps(st)) == bytes(st.dumps())
    assert bytes(tenso.dumps(ra)) == bytes(ra.dumps())


def test_invalid_utf8_payload_refused():
    with pytest.raises(ValueError):
        tenso.StringTensor([b"\xff\xfe"]).dumps()


# ---- RaggedArray --------------------------------------------------------------------------------


def test_ragged_api():
    ra = tenso.RaggedArray([np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0]), np.array([6.0])])
    assert len(ra) == 3 and ra.dtype == np.float64
    assert ra[1].tolist() == [4.0, 5.0] and ra[-1].tolist() == [6.0]
    assert ra.row_splits.tolist() == [0, 3, 5, 6] and ra.flat_values.tolist() == [1, 2, 3, 4, 5, 6]
    with pytest.raises(IndexError):
        ra[3]
    packet = ra.dumps(check_integrity=True)
    as_dict = tenso.loads(packet)
    assert list(as_dict) == ["__ragged_offsets__", "__ragged_flat__", "__ragged_count__"]
    back = tenso.RaggedArray.loads(packet)
    assert [r.tolist() for r in back.to_list()] == [[1, 2, 3], [4, 5], [6]]
    assert describe(tenso.RaggedArray.loads(as_dict)) == describe(ra)
    assert repr(back) == "RaggedArray(count=3, dtype=float64, total_elements=6)"
    empty = tenso.RaggedArray([])
    assert len(tenso.RaggedArray.loads(empty.dumps())) == 0


def test_ragged_loads_refuses_other_packets():
    with pytest.raises(ValueError, match="Not a valid RaggedArray packet"):
        tenso.RaggedArray.loads(tenso.dumps({"a": np.zeros(1)}))
    with pytest.raises(ValueError, match="Not a valid RaggedArray packet"):
        tenso.RaggedArray.loads(tenso.dumps(np.zeros(1)))
