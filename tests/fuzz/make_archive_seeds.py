#!/usr/bin/env python3
"""Seed corpora for fuzz_archive, fuzz_safetensors and fuzz_bintensors.

    python3 tests/fuzz/make_archive_seeds.py BUILD_DIR/libtenso.so

Writes small valid files with tenso's own writers (through the C ABI, ctypes) into
corpus/{archive,safetensors,bintensors}/, and copies the reference packages' files from
tests/vectors/archive/ into the safetensors and bintensors corpora.
"""

import ctypes as C
import hashlib
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "vectors", "archive")


class Tensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("nbytes", C.c_uint64),
        ("shape", C.POINTER(C.c_uint64)),
        ("ndim", C.c_uint32),
        ("dtype", C.c_int32),
    ]


class Encode(C.Structure):
    _fields_ = [("version", C.c_uint32), ("flags", C.c_uint32), ("alignment", C.c_uint32), ("level", C.c_int32)]


class WriteOpts(C.Structure):
    _fields_ = [
        ("version", C.c_uint32),
        ("flags", C.c_uint32),
        ("format", C.c_int32),
        ("alignment", C.c_uint32),
        ("encode", Encode),
    ]


def main():
    lib = C.CDLL(sys.argv[1])
    lib.tenso_last_error.restype = C.c_char_p

    def ok(st):
        if st != 0:
            raise RuntimeError(lib.tenso_last_error().decode())

    keep = []

    def value(dtype, shape, itemsize, seed):
        n = itemsize
        for d in shape:
            n *= d
        buf = C.create_string_buffer(bytes((i * 31 + seed) % 256 for i in range(n)), n)
        sh = (C.c_uint64 * max(1, len(shape)))(*shape)
        t = Tensor(C.cast(buf, C.c_void_p), n, sh, len(shape), dtype)
        v = C.c_void_p()
        ok(lib.tenso_value_new_tensor(C.byref(v), C.byref(t)))
        keep.extend([buf, sh])
        return v

    def write(path, fmt, alignment=0, flags=0, enc_flags=0, tensors=(), meta=()):
        o = WriteOpts(1, flags, fmt, alignment, Encode(1, enc_flags, 0, 0))
        w = C.c_void_p()
        ok(lib.tenso_archive_writer_open(C.byref(w), path.encode(), C.byref(o)))
        for name, v in tensors:
            n = name.encode()
            ok(lib.tenso_archive_writer_add(w, n, len(n), v))
        for k, val in meta:
            k, val = k.encode(), val.encode()
            ok(lib.tenso_archive_writer_set_metadata(w, k, len(k), val, len(val)))
        ok(lib.tenso_archive_writer_finish(w))
        lib.tenso_archive_writer_free(w)

    f32 = value(1, [2, 3], 4, 1)
    i16 = value(10, [4], 2, 2)
    u8 = value(5, [5], 1, 3)
    scalar = value(3, [], 8, 4)
    empty = value(2, [0, 2], 4, 5)
    bundle = C.c_void_p()
    ok(lib.tenso_value_new_bundle(C.byref(bundle)))
    ok(lib.tenso_bundle_insert(bundle, b"a", 1, f32))
    ok(lib.tenso_bundle_insert(bundle, b"b", 1, u8))
    cases = {
        "archive": [
            dict(fmt=1, tensors=[("w", f32), ("b", i16)], meta=[("format", "pt")]),
            dict(fmt=1, alignment=4096, tensors=[("x", u8)]),
            dict(fmt=1, tensors=[("s", scalar), ("e", empty), ("bundle", bundle)], enc_flags=1),
            dict(fmt=1, tensors=[("z", f32)], enc_flags=2, flags=1),
            dict(fmt=1),
        ],
        "safetensors": [
            dict(fmt=2, tensors=[("w", f32), ("b", i16), ("u", u8), ("s", scalar), ("e", empty)], meta=[("k", "v")]),
            dict(fmt=2),
        ],
        "bintensors": [
            dict(fmt=3, tensors=[("w", f32), ("b", i16), ("u", u8), ("s", scalar), ("e", empty)], meta=[("k", "v")]),
            dict(fmt=3),
        ],
    }
    tmp = tempfile.mkdtemp()
    try:
        for target, runs in cases.items():
            out = os.path.join(HERE, "corpus", target)
            os.makedirs(out, exist_ok=True)
            files = []
            for k, kw in enumerate(runs):
                p = os.path.join(tmp, "%s%d" % (target, k))
                write(p, **kw)
                files.append(p)
            ext = {"safetensors": ".safetensors", "bintensors": ".bt"}.get(target)
            if ext:
                files += [os.path.join(VECTORS, n) for n in sorted(os.listdir(VECTORS)) if n.endswith(ext)]
            for p in files:
                data = open(p, "rb").read()
                with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
                    f.write(data)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
