"""Hypothesis strategies for tenso values: arrays of every wire dtype (arbitrary bit patterns,
NaN payloads included), nested bundles with arbitrary UTF-8 keys, encode options."""

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

DTYPES = [
    np.dtype(n)
    for n in (
        "float32",
        "int32",
        "float64",
        "int64",
        "uint8",
        "uint16",
        "bool",
        "float16",
        "int8",
        "int16",
        "uint32",
        "uint64",
        "complex64",
        "complex128",
    )
] + [np.dtype(ml_dtypes.bfloat16)]

ALIGNMENTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 4096]

shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)


@st.composite
def arrays(draw, dtypes=st.sampled_from(DTYPES), shape=shapes):
    dt = draw(dtypes)
    shp = draw(shape)
    n = int(np.prod(shp, dtype=np.int64))
    if dt == np.bool_:
        raw = bytes(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    else:
        raw = draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    return np.frombuffer(raw, dtype=dt).reshape(shp).copy()


keys = st.text(max_size=12)


def bundles(leaves, max_depth=3):
    return st.recursive(
        leaves,
        lambda children: st.dictionaries(keys, children, max_size=5),
        max_leaves=12,
    ).filter(lambda v: isinstance(v, dict))


options = st.fixed_dictionaries(
    {
        "check_integrity": st.booleans(),
        "compress": st.booleans(),
        "alignment": st.sampled_from(ALIGNMENTS),
    }
)


@st.composite
def float_arrays(draw, min_size=1):
    """Finite float32 inputs for quantization (upstream's numpy min/max/round semantics)."""
    shp = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
    n = int(np.prod(shp))
    vals = draw(
        st.lists(
            st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32),
            min_size=n,
            max_size=n,
        )
    )
    return np.array(vals, dtype=np.float32).reshape(shp)
