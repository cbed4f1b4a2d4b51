#!/usr/bin/env python3
"""Writes the archive interop vectors with the real safetensors and bintensors packages.

    python3 -m venv venv && venv/bin/pip install numpy==2.4.6 safetensors==0.8.0 bintensors==0.2.0
    venv/bin/python tests/vectors/archive/make_archive_vectors.py

Files (next to this script):
  st_basic.safetensors       seven tensors (scalar, empty, bool ... float64), one metadata key
  st_all_dtypes.safetensors  one tensor of every dtype numpy can hand safetensors (complex64 too)
  bt_basic.bt                bintensors: the st_basic tensors, two metadata keys
  manifest.json              per file: metadata and every tensor's dtype, shape and bytes (hex)
The C suite (tests/capi/CapiArchiveInteropTest.cpp) reads each file and compares it with the
manifest, and checks that tenso's writers produce these exact bytes from the same tensors.
"""

import json
import os

import bintensors
import bintensors.numpy as btn
import numpy as np
import safetensors
import safetensors.numpy as stn

HERE = os.path.dirname(os.path.abspath(__file__))

NAMES = {
    np.dtype(k): v
    for k, v in [
        ("bool", "BOOL"),
        ("uint8", "U8"),
        ("int8", "I8"),
        ("int16", "I16"),
        ("uint16", "U16"),
        ("float16", "F16"),
        ("int32", "I32"),
        ("uint32", "U32"),
        ("float32", "F32"),
        ("complex64", "C64"),
        ("float64", "F64"),
        ("int64", "I64"),
        ("uint64", "U64"),
    ]
}


def values(dtype, shape, seed):
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    raw = (i * 37 + seed * 11) % 251 - 100
    if dtype == np.bool_:
        a = raw % 3 == 0
    elif dtype.kind == "u":
        a = (raw + 100).astype(dtype)
    elif dtype.kind == "c":
        a = (raw / 4).astype(np.float32) + 1j * (raw / 8).astype(np.float32)
    else:
        a = (raw / (4 if dtype.kind == "f" else 1)).astype(dtype)
    return np.asarray(a, dtype=dtype).reshape(shape)


def basic():
    return {
        "weight": values(np.dtype("float32"), (2, 3), 1),
        "bias": values(np.dtype("float16"), (3,), 2),
        "ids": values(np.dtype("int64"), (4,), 3),
        "mask": values(np.dtype("bool"), (3,), 4),
        "scalar": values(np.dtype("float64"), (), 5),
        "empty": values(np.dtype("int32"), (0, 4), 6),
        "layer.0.u8": values(np.dtype("uint8"), (5,), 7),
    }


def describe(tensors, metadata):
    return {
        "metadata": metadata or {},
        "tensors": {
            k: {"dtype": NAMES[v.dtype], "shape": list(v.shape), "hex": np.ascontiguousarray(v).tobytes().hex()}
            for k, v in tensors.items()
        },
    }


def main():
    manifest = {
        "generator": {
            "numpy": np.__version__,
            "safetensors": safetensors.__version__,
            "bintensors": bintensors.__version__,
        },
        "files": {},
    }
    t = basic()
    meta = {"format": "np"}
    stn.save_file(t, os.path.join(HERE, "st_basic.safetensors"), metadata=meta)
    manifest["files"]["st_basic.safetensors"] = describe(t, meta)

    t = {"t_" + str(d): values(d, (2, 2), k) for k, d in enumerate(NAMES)}
    stn.save_file(t, os.path.join(HERE, "st_all_dtypes.safetensors"))
    manifest["files"]["st_all_dtypes.safetensors"] = describe(t, None)

    t = {k: v for k, v in basic().items()}
    meta = {"format": "np", "author": "tenso"}
    btn.save_file(t, os.path.join(HERE, "bt_basic.bt"), metadata=meta)
    manifest["files"]["bt_basic.bt"] = describe(t, meta)

    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
