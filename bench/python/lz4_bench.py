"""
LZ4 against upstream (issue 18), side by side in one process: upstream tenso 0.24.0's
dumps(compress=True) and libtenso's tenso_dumps_into (through ctypes) on threads=1 and threads=0
(every core), over 64 MiB float32 data sets: a repeating 16 KiB pattern, small integers stored
as float32, random bytes, all zeros. Prints sizes, best-of-3 times, and the ratios the issue
asks for (size vs upstream, one thread vs upstream, all cores vs one thread).

Run with the upstream venv's python (it has upstream tenso and numpy):
    build/venv-upstream/bin/python bench/python/lz4_bench.py build/libtenso.so
"""

import ctypes
import sys
import time

import numpy as np

import tenso  # upstream's package: this runs in build/venv-upstream

TENSO_DTYPE_FLOAT32 = 1
TENSO_ENCODE_COMPRESS = 0x2


class Tensor(ctypes.Structure):  # tenso_tensor
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("ndim", ctypes.c_uint32),
        ("dtype", ctypes.c_int),
    ]


class EncodeOptions(ctypes.Structure):  # tenso_encode_options, version 2
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("alignment", ctypes.c_uint32),
        ("compression_level", ctypes.c_int32),
        ("threads", ctypes.c_uint32),
    ]


def best(f, k=3):
    b, r = float("inf"), None
    for _ in range(k):
        t = time.perf_counter()
        r = f()
        b = min(b, time.perf_counter() - t)
    return b, r


def main():
    lib = ctypes.CDLL(sys.argv[1])
    n = 64 * 1024 * 1024 // 4
    rng = np.random.default_rng(1)
    sets = {
        "pattern": np.resize(rng.standard_normal(4096).astype(np.float32), n),
        "small ints": rng.integers(0, 256, n).astype(np.float32),
        "random": np.frombuffer(rng.bytes(4 * n), dtype=np.float32).copy(),
        "zeros": np.zeros(n, np.float32),
    }
    for name, a in sets.items():
        shape = (ctypes.c_uint64 * 1)(n)
        t = Tensor(a.ctypes.data, a.nbytes, shape, 1, TENSO_DTYPE_FLOAT32)
        out = np.empty(a.nbytes + (1 << 20), np.uint8)
        out.fill(0)  # pre-faulted: the rows compare compression, not page faults
        ours = {}
        for threads in (1, 0):
            o = EncodeOptions(2, TENSO_ENCODE_COMPRESS, 0, 0, threads)
            w = ctypes.c_size_t(0)

            def enc():
                st = lib.tenso_dumps_into(
                    ctypes.c_void_p(out.ctypes.data),
                    ctypes.c_size_t(out.size),
                    ctypes.byref(w),
                    ctypes.byref(t),
                    ctypes.byref(o),
                )
                assert st == 0, st
                return w.value

            ours[threads] = best(enc)
        up = best(lambda: len(tenso.dumps(a, compress=True)))
        size = ours[1][1]
        print(
            f"{name:10s} upstream {up[1]:>10d} B {up[0] * 1e3:7.1f} ms | ours {size:>10d} B "
            f"({size / up[1]:.3f}x size), 1 thread {ours[1][0] * 1e3:7.1f} ms "
            f"({ours[1][0] / up[0]:.2f}x upstream's time), "
            f"all cores {ours[0][0] * 1e3:7.1f} ms ({ours[1][0] / ours[0][0]:.2f}x one thread's speed)"
        )
        assert tenso.loads(bytes(out[:size])).tobytes() == a.tobytes()  # upstream decodes ours


if __name__ == "__main__":
    main()
