"""A JSON description of tenso values, shared by this SDK's tests and the upstream helper
process (tests/upstream_server.py, which runs under the pinned upstream package).

``describe(obj)`` turns anything ``loads`` returns (or ``dumps`` accepts) into plain JSON: exact
bytes as hex, dtypes by numpy name. ``build(desc, tenso)`` goes back, with the given tenso
module's classes. Both sides use the same functions, so a packet decodes "the same" exactly when
the descriptions are equal. This module imports neither tenso: it works with either.
"""

import numpy as np

try:  # bfloat16 by name
    import ml_dtypes  # noqa: F401
except ImportError:  # pragma: no cover
    ml_dtypes = None


def _dtype(name):
    return np.dtype(name)


def describe(obj):
    if isinstance(obj, np.ndarray):
        return {
            "kind": "dense",
            "dtype": obj.dtype.name,
            "shape": list(obj.shape),
            "hex": np.ascontiguousarray(obj).tobytes().hex(),
        }
    if isinstance(obj, dict):
        return {"kind": "bundle", "entries": [[k, describe(v)] for k, v in obj.items()]}
    cls = type(obj).__name__
    if cls == "QuantizedTensor":
        return {
            "kind": "quantized",
            "dtype_code": int(obj.dtype_code),
            "scheme": int(obj.quant_scheme),
            "axis": int(obj.axis),
            "group_size": int(obj.group_size),
            "shape": [int(d) for d in obj.shape],
            "data": bytes(np.ascontiguousarray(obj.data)).hex(),
            "scales": np.asarray(obj.scales, np.float32).tobytes().hex(),
            "zero_points": np.asarray(obj.zero_points, np.float32).tobytes().hex(),
        }
    if cls == "StringTensor":
        return {"kind": "string", "strings": obj.to_list()}
    if cls == "RaggedArray":
        return {
            "kind": "ragged",
            "dtype": obj.dtype.name,
            "rows": [np.ascontiguousarray(r).tobytes().hex() for r in obj.to_list()],
        }
    fmt = getattr(obj, "format", None)
    if fmt in ("coo", "csr", "csc"):
        if fmt == "coo":
            parts = (obj.data, obj.row, obj.col)
        else:
            parts = (obj.data, obj.indices, obj.indptr)
        return {
            "kind": "sparse_" + fmt,
            "shape": [int(d) for d in obj.shape],
            "components": [describe(np.asarray(p)) for p in parts],
        }
    raise TypeError(f"cannot describe {type(obj).__name__}")


def _array(desc):
    dt = _dtype(desc["dtype"])
    return np.frombuffer(bytes.fromhex(desc["hex"]), dtype=dt).reshape(desc["shape"]).copy()


def build(desc, tenso):
    """The object a description stands for, built with `tenso`'s classes (and scipy's)."""
    kind = desc["kind"]
    if kind == "dense":
        return _array(desc)
    if kind == "bundle":
        return {k: build(v, tenso) for k, v in desc["entries"]}
    if kind == "quantized":
        return tenso.QuantizedTensor(
            data=np.frombuffer(bytes.fromhex(desc["data"]), np.uint8).copy(),
            scales=np.frombuffer(bytes.fromhex(desc["scales"]), np.float32).copy(),
            zero_points=np.frombuffer(bytes.fromhex(desc["zero_points"]), np.float32).copy(),
            shape=tuple(desc["shape"]),
            dtype_code=desc["dtype_code"],
            quant_scheme=desc["scheme"],
            group_size=desc["group_size"],
            axis=desc["axis"],
        )
    if kind == "string":
        return tenso.StringTensor(desc["strings"])
    if kind == "ragged":
        dt = _dtype(desc["dtype"])
        rows = [np.frombuffer(bytes.fromhex(h), dtype=dt).copy() for h in desc["rows"]]
        return tenso.RaggedArray(rows)
    if kind.startswith("sparse_"):
        import scipy.sparse as sp

        a, b, c = (_array(p) for p in desc["components"])
        shape = tuple(desc["shape"])
        # Build, then set the components, so their dtypes are exactly the described ones
        # (scipy's constructors may narrow index arrays).
        if kind == "sparse_coo":
            m = sp.coo_array((a, (b, c)), shape=shape)
            m.data = a
            m.coords = (b, c)
        elif kind == "sparse_csr":
            m = sp.csr_array((a, b, c), shape=shape)
            m.data, m.indices, m.indptr = a, b, c
        else:
            m = sp.csc_array((a, b, c), shape=shape)
            m.data, m.indices, m.indptr = a, b, c
        return m
    raise ValueError(f"unknown kind {kind!r}")


def dumps_with(tenso, desc, options):
    """Encode a description the way a user of `tenso` would: strings and ragged arrays through
    their own dumps(), everything else through tenso.dumps."""
    kind = desc["kind"]
    obj = build(desc, tenso)
    if kind in ("string", "ragged"):
        return bytes(obj.dumps(check_integrity=options.get("check_integrity", False)))
    return bytes(tenso.dumps(obj, **options))


def loads_with(tenso, packet):
    """Decode with `tenso`, turning the result into a description."""
    return describe(tenso.loads(packet))
