"""Interop with the JavaScript SDK, run by sdk/js/test/interop.test.js under the Python SDK's
venv (our tenso) and the upstream venv (PyPI tenso 0.24.0) - the same API, so one script:

    python interop.py write DIR   packets from this tenso: <name>.tenso, and <name>.json with
                                  the value in the golden manifest's form (tests/vectors)
    python interop.py read DIR    packets from JavaScript (<name>.tenso + <name>.json): each
                                  must decode to its value, and re-encode to the same bytes
                                  unless compressed (LZ4 encoders may differ)

`read` closes with "N passed, M failed" and exits 1 on any failure.
"""

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import tenso
from tenso import QuantizedTensor, RaggedArray, StringTensor

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def describe(obj):
    """The manifest form of a decoded value."""
    if isinstance(obj, np.ndarray):
        arr = obj if obj.flags.c_contiguous else obj.copy()  # (ascontiguousarray makes 0-d arrays 1-d)
        return {"kind": "dense", "dtype": arr.dtype.name, "shape": list(arr.shape), "body_hex": arr.tobytes().hex()}
    if isinstance(obj, dict):
        return {"kind": "bundle", "entries": [{"key": k, "value": describe(v)} for k, v in obj.items()]}
    if sp.issparse(obj):
        fmt = obj.format
        parts = (obj.data, obj.row, obj.col) if fmt == "coo" else (obj.data, obj.indices, obj.indptr)
        return {
            "kind": f"sparse_{fmt}",
            "shape": list(obj.shape),
            "components": [describe(np.asarray(p)) for p in parts],
        }
    if isinstance(obj, QuantizedTensor):
        scheme = ["per_tensor", "per_channel", "per_group"][int(obj.quant_scheme)]
        return {
            "kind": "quantized",
            "dtype": obj.dtype_name,
            "shape": list(obj.shape),
            "scheme": scheme,
            "axis": int(obj.axis) if scheme == "per_channel" else 0,
            "group_size": int(obj.group_size) if scheme == "per_group" else 0,
            "body_hex": np.asarray(obj.data, dtype=np.uint8).tobytes().hex(),
            "scales_hex": np.asarray(obj.scales, dtype=np.float32).tobytes().hex(),
            "zero_points_hex": np.asarray(obj.zero_points, dtype=np.float32).tobytes().hex(),
            "dequant_hex": np.asarray(obj.dequantize(), dtype=np.float32).tobytes().hex(),
        }
    if isinstance(obj, StringTensor):
        strings = list(obj.to_list())
        return {"kind": "string", "shape": [len(strings)], "strings": strings}
    if isinstance(obj, RaggedArray):
        rows = [np.ascontiguousarray(r) for r in obj.to_list()]
        return {
            "kind": "ragged",
            "dtype": np.dtype(obj.dtype).name,
            "row_lengths": [len(r) for r in rows],
            "rows_hex": [r.tobytes().hex() for r in rows],
        }
    raise TypeError(f"cannot describe {type(obj).__name__}")


def cases():
    rng = np.random.default_rng(26)
    out = {}
    for dt in [
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
    ]:
        x = (rng.standard_normal((3, 5)) * 100).astype(dt) if dt != "bool" else rng.random((3, 5)) > 0.5
        if dt.startswith("complex"):
            x = x + 1j * x[::-1]
            x = x.astype(dt)
        out[f"dense_{dt}"] = (x, {})
    if ml_dtypes is not None:
        out["dense_bfloat16"] = (rng.standard_normal((4, 2)).astype(ml_dtypes.bfloat16), {})
    big = rng.standard_normal(70000).astype(np.float32)
    out["dense_f32_scalar"] = (np.array(3.5, np.float32), {})
    out["dense_f32_empty"] = (np.zeros((2, 0, 3), np.float32), {})
    out["dense_f32_integrity"] = (big, {"check_integrity": True})
    out["dense_f64_align128"] = (rng.standard_normal((7, 7)), {"alignment": 128})
    out["compressed_f32"] = (np.tile(np.arange(1000, dtype=np.float32), 70), {"compress": True})
    out["bundle"] = ({"w": big[:100].reshape(10, 10), "meta": {"step": np.array([7], np.int64)}}, {})
    out["bundle_integrity"] = ({"a": big[:33], "b": np.arange(5, dtype=np.uint16)}, {"check_integrity": True})
    m = sp.random(20, 30, density=0.1, format="coo", random_state=26, dtype=np.float32)
    out["sparse_coo"] = (m, {})
    out["sparse_csr"] = (m.tocsr(), {})
    out["sparse_csc"] = (m.tocsc(), {})
    x = rng.standard_normal((8, 6)).astype(np.float32)
    out["quantized_qint8"] = (QuantizedTensor.quantize(x, dtype="qint8"), {})
    out["quantized_quint4_channel"] = (QuantizedTensor.quantize(x, dtype="quint4", scheme="per_channel", axis=1), {})
    out["quantized_qint4_group"] = (QuantizedTensor.quantize(x, dtype="qint4", scheme="per_group", group_size=5), {})
    out["string"] = (StringTensor(["", "tenso", "wörld", "日本語 🎉"]), {})
    out["ragged"] = (RaggedArray([np.arange(3, dtype=np.float32), np.zeros(0, np.float32), np.ones(4, np.float32)]), {})
    return out


def dumps(obj, options):
    if isinstance(obj, (StringTensor, RaggedArray)):
        return bytes(obj.dumps(**({"check_integrity": True} if options.get("check_integrity") else {})))
    return bytes(tenso.dumps(obj, **options))


def loads(data, kind):
    if kind == "string":
        return StringTensor.loads(data)
    if kind == "ragged":
        return RaggedArray.loads(data)
    return tenso.loads(data)


def write(out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, (obj, options) in cases().items():
        (out_dir / f"{name}.tenso").write_bytes(dumps(obj, options))
        (out_dir / f"{name}.json").write_text(
            json.dumps({"value": describe(obj), "options": options, "compressed": bool(options.get("compress"))})
        )
    print(f"wrote {len(cases())} packets with tenso {tenso.__version__}")
    return 0


def same(got, want, where):
    if got != want:
        raise AssertionError(f"{where}: got {json.dumps(got)[:300]}, want {json.dumps(want)[:300]}")


def has_sparse(want):
    if want["kind"].startswith("sparse_"):
        return True
    return want["kind"] == "bundle" and any(has_sparse(e["value"]) for e in want["entries"])


def check(desc, want, where):
    """desc (of what this tenso decoded) against want (the writer's value): every field both have."""
    same(desc["kind"], want["kind"], where + ": kind")
    if want["kind"] == "bundle":
        same([e["key"] for e in desc["entries"]], [e["key"] for e in want["entries"]], where + " keys")
        for g, w in zip(desc["entries"], want["entries"]):
            check(g["value"], w["value"], f"{where}.{w['key']}")
    elif want["kind"].startswith("sparse_"):
        same(desc["shape"], want["shape"], where + ": shape")
        for i, (g, w) in enumerate(zip(desc["components"], want["components"])):
            # scipy may hold indices in another integer width than the wire: compare values.
            if i and g["dtype"] != w["dtype"]:
                g = describe(np.frombuffer(bytes.fromhex(g["body_hex"]), g["dtype"]).astype(w["dtype"]))
            check(g, w, f"{where}[{i}]")
    else:
        for key in desc:
            if key in want:
                same(desc[key], want[key], f"{where}: {key}")


def read(in_dir: Path) -> int:
    passed = failed = 0
    for spec_path in sorted(in_dir.glob("*.json")):
        name = spec_path.stem
        spec = json.loads(spec_path.read_text())
        data = (in_dir / f"{name}.tenso").read_bytes()
        want = spec["value"]
        try:
            obj = loads(data, want["kind"])
            check(describe(obj), want, name)
            # Re-encoded by this tenso, the same bytes (not for LZ4, whose encoders differ, nor
            # for sparse matrices, whose index width scipy may change on decode).
            if not spec["compressed"] and not has_sparse(want):
                again = dumps(obj, spec["options"])
                if again != data:
                    raise AssertionError(f"{name}: re-encoded bytes differ ({len(again)} vs {len(data)} bytes)")
            passed += 1
            print(f"ok   {name}")
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        sys.exit(__doc__)
    sys.exit(write(Path(sys.argv[2])) if sys.argv[1] == "write" else read(Path(sys.argv[2])))
