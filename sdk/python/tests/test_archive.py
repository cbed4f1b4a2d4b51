"""Archives (tenso/archive.h): save_file / load_file / safe_open / ArchiveWriter over tenso
archives, safetensors and bintensors files, and interop with the real safetensors and bintensors
packages both ways."""

import json
import os
import struct
import threading

import ml_dtypes
import numpy as np
import pytest

import tenso
from conftest import TORCH_MISSING
from tenso import _tenso

ALL_DTYPES = [
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", ml_dtypes.bfloat16,
]  # fmt: skip
#: What each format can hold (bintensors has no complex types, safetensors no complex128).
FORMAT_DTYPES = {
    "tenso": ALL_DTYPES,
    "safetensors": [d for d in ALL_DTYPES if d != "complex128"],
    "bintensors": [d for d in ALL_DTYPES if d not in ("complex64", "complex128")],
}
EXT = {"tenso": ".tenso", "safetensors": ".safetensors", "bintensors": ".bt"}


def sample(dtype, shape=(3, 5), seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def tensors_for(fmt):
    out = {f"t_{np.dtype(d).name}": sample(d, seed=i) for i, d in enumerate(FORMAT_DTYPES[fmt])}
    out["scalar"] = np.array(3.5, np.float32)
    out["empty"] = np.zeros((0, 4), np.int32)
    out["big.layer/0"] = np.arange(1 << 16, dtype=np.float32).reshape(256, 256)
    return out


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("fmt", sorted(FORMAT_DTYPES))
def test_round_trip_every_dtype(tmp_path, fmt):
    path = tmp_path / ("m" + EXT[fmt])
    tensors = tensors_for(fmt)
    tenso.save_file(tensors, path, metadata={"format": "pt", "step": "12"})
    with tenso.safe_open(path, framework="np") as f:
        assert f.format == fmt
        assert f.keys() == sorted(tensors) and sorted(f.offset_keys()) == sorted(tensors)
        assert len(f) == len(tensors) and "scalar" in f and "nope" not in f
        assert f.metadata() == {"format": "pt", "step": "12"}
        for name, want in tensors.items():
            got = f.get_tensor(name)
            assert_same(got, want)
            assert not got.flags.writeable
            sl = f.get_slice(name)
            assert sl.get_shape() == list(want.shape)
            f.verify()
    loaded = tenso.load_file(path)
    assert list(loaded) == list(tensors) if fmt == "tenso" else sorted(loaded) == sorted(tensors)
    for name, want in tensors.items():
        assert_same(loaded[name], want)
    copied = tenso.load_file(path, copy=True)
    assert copied["scalar"].flags.writeable


def test_close_while_other_threads_read(tmp_path):
    """close() while other threads are inside get_tensor (GIL released for the hash check):
    their calls finish on a live handle, later ones raise ValueError."""
    path = tmp_path / "t.tenso"
    tenso.save_file({f"t{i}": np.full(1 << 16, i, dtype=np.float32) for i in range(64)}, path)
    for _ in range(10):
        f = tenso.safe_open(path)
        errors, started = [], threading.Barrier(5)

        def worker():
            started.wait()
            i = 0
            while True:
                try:
                    out = f.get_tensor(f"t{i % 64}")
                    if out[-1] != i % 64:
                        errors.append("wrong tensor")
                except ValueError as e:
                    if "closed" not in str(e):
                        errors.append(repr(e))
                    return
                i += 1

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        started.wait()
        f.close()
        for t in threads:
            t.join(10)
        assert not errors and not any(t.is_alive() for t in threads)


def test_get_tensor_is_zero_copy_and_outlives_close(tmp_path):
    path = tmp_path / "z.tenso"
    a = np.arange(1 << 20, dtype=np.float64)
    tenso.save_file({"a": a}, path)
    with tenso.safe_open(path) as f:
        out = f.get_tensor("a")
        again = f.get_tensor("a")
    assert out.ctypes.data % 64 == 0 and not out.flags.writeable
    assert again.ctypes.data == out.ctypes.data  # both point into the one mapping: no copy
    assert np.array_equal(out, a)  # after close: the array keeps the mapping
    with pytest.raises(ValueError, match="closed"):
        f.get_tensor("a")
    with pytest.raises(KeyError):
        tenso.safe_open(path).get_tensor("b")


@pytest.mark.parametrize("fmt", ["tenso", "safetensors"])
@pytest.mark.parametrize(
    "index",
    [
        0, -1, slice(1, 3), (slice(None), 2), (Ellipsis, 1), (None, slice(2, 5)), slice(None, None, -1),
        (slice(None, None, 2), slice(1, None, 3)), (1, slice(None, None, -2)), slice(3, 3), (2, 7),
        (Ellipsis,), (slice(-3, None), None, slice(None, 1)),
    ],
)  # fmt: skip
def test_get_slice_matches_numpy(tmp_path, fmt, index):
    path = tmp_path / ("s" + EXT[fmt])
    a = np.arange(6 * 9, dtype=np.int32).reshape(6, 9)
    tenso.save_file({"a": a}, path)
    with tenso.safe_open(path) as f:
        sl = f.get_slice("a")
        assert sl.get_dtype() == "I32" and sl.get_shape() == [6, 9] and len(sl) == 6
        got = sl[index]
    want = a[index]
    assert got.shape == want.shape and np.array_equal(got, want)
    assert got.flags.writeable and got.flags.c_contiguous


def test_get_slice_errors_and_compressed_fallback(tmp_path):
    path = tmp_path / "c.tenso"
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    tenso.save_file({"a": a, "q": tenso.QuantizedTensor.quantize(a, "qint8")}, path, compress=True)
    with tenso.safe_open(path) as f:
        assert np.array_equal(f.get_slice("a")[2:4, ::3], a[2:4, ::3])  # compressed: decoded first
        with pytest.raises(IndexError):
            f.get_slice("a")[10]
        with pytest.raises(IndexError):
            f.get_slice("a")[1, 2, 3]
        with pytest.raises(TypeError):
            f.get_slice("a")[[1, 2]]
        with pytest.raises(ValueError):
            f.get_slice("q")  # not dense
        assert isinstance(f.get_tensor("q"), tenso.QuantizedTensor)


def test_get_slice_reads_only_the_span(tmp_path):
    """A row range of a raw tensor is read with pread: corrupt bytes elsewhere in the tensor
    are never touched (and no hash check of the whole tensor happens)."""
    path = tmp_path / "p.tenso"
    a = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    tenso.save_file({"a": a}, path)
    entry = _tenso.Archive.open(os.fsencode(path)).entry(0)
    assert entry["data_offset"] and entry["hashed"]
    with open(path, "r+b") as fh:
        fh.seek(entry["data_offset"] + 900 * 64 * 4)
        fh.write(b"\xff" * 16)
    with tenso.safe_open(path) as f:
        assert np.array_equal(f.get_slice("a")[10:20], a[10:20])
        with pytest.raises(ValueError):
            f.get_tensor("a")


class _CountingArchive:
    """Stands in for the native archive under tenso.archive._read_selection: serves body bytes
    from an array and records every read."""

    def __init__(self, a):
        self.body = a.tobytes()
        self.reads = []

    def read(self, index, offset, dst):
        self.reads.append((offset, len(dst)))
        dst[:] = np.frombuffer(self.body[offset : offset + len(dst)], np.uint8)


@pytest.mark.parametrize(
    "index, reads",
    [
        ((slice(None), slice(0, 4)), [(r * 160000, 16) for r in range(8)]),
        ((slice(None, None, 3), 5), [(r * 160000 + 20, 4) for r in (0, 3, 6)]),
        ((slice(None, None, -2), slice(10, 20, 3)), [(r * 160000 + 40, 40) for r in (7, 5, 3, 1)]),
        ((None, slice(1, 7), None, slice(None, 2)), [(r * 160000, 8) for r in range(1, 7)]),
        ((slice(None), -1), [(r * 160000 + 159996, 4) for r in range(8)]),
        (3, [(480000, 160000)]),
        (slice(2, 5), [(320000, 480000)]),  # whole rows side by side: one span
        ((slice(None), slice(1, None)), [(4, 1279996)]),  # nearly whole rows: one span
        ((slice(7, 1, -3), Ellipsis), [(1120000, 160000), (640000, 160000)]),  # a row skipped between
        ((slice(None), slice(5, 5)), []),
    ],
)  # fmt: skip
def test_get_slice_reads_rows_far_apart_one_by_one(index, reads):
    """Rows of 160 KB: a narrow column selection reads a few bytes per row, not the span of
    every row in between; the result is still numpy's."""
    from tenso.archive import _read_selection

    a = np.arange(8 * 40000, dtype=np.float32).reshape(8, 40000)
    fake = _CountingArchive(a)
    got = _read_selection(fake, 0, a.shape, a.dtype, index)
    want = a[index]
    assert got.shape == want.shape and np.array_equal(got, want) and got.flags.c_contiguous
    assert fake.reads == reads


def test_alignment_4096(tmp_path):
    path = tmp_path / "a4k.tenso"
    tensors = {f"t{i}": np.full(1000 + i, i, np.int16) for i in range(5)}
    tenso.save_file(tensors, path, alignment=4096)
    arch = _tenso.Archive.open(os.fsencode(path))
    for i in range(len(arch)):
        e = arch.entry(i)
        assert e["offset"] % 4096 == 0 and e["data_offset"] % 4096 == 0
    arch.close()
    with tenso.safe_open(path) as f:
        assert f.alignment == 4096
        for name, want in tensors.items():
            got = f.get_tensor(name)
            assert got.ctypes.data % 4096 == 0 and np.array_equal(got, want)


def test_verify_detects_corruption(tmp_path):
    path = tmp_path / "v.tenso"
    tensors = {"good": np.arange(5000, dtype=np.int64), "bad": np.ones(5000, np.float32)}
    tenso.save_file(tensors, path)
    with tenso.safe_open(path) as f:
        f.verify()
        bad = f._archive().entry(f._archive().find("bad"))
    with open(path, "r+b") as fh:
        fh.seek(bad["data_offset"] + 100)
        fh.write(b"\x00\x00\x00\x7f")
    with tenso.safe_open(path) as f:
        with pytest.raises(tenso.TensoChecksumError, match="bad"):
            f.verify()
        assert np.array_equal(f.get_tensor("good"), tensors["good"])
        with pytest.raises(ValueError):
            f.get_tensor("bad")
    with tenso.safe_open(path, verify="never") as f:
        assert not np.array_equal(f.get_tensor("bad"), tensors["bad"])
    with pytest.raises(ValueError):
        tenso.safe_open(path, verify="all")
    # Without stored hashes there is nothing to check.
    tenso.save_file(tensors, path, hash=False)
    with tenso.safe_open(path) as f:
        f.verify()


def test_writer_commits_or_discards(tmp_path):
    path = tmp_path / "w.tenso"
    tenso.save_file({"old": np.zeros(3)}, path)
    with pytest.raises(RuntimeError):
        with tenso.ArchiveWriter(path, {"k": "v"}) as w:
            w.add("new", np.ones(3))
            raise RuntimeError("interrupted")
    assert list(tenso.load_file(path)) == ["old"]  # untouched
    assert os.listdir(tmp_path) == ["w.tenso"]  # no temporary left
    with tenso.ArchiveWriter(path) as w:
        w.add("a", np.arange(3))
        w.set_metadata("k", "1")
        w.set_metadata("k", "2")
        with pytest.raises(ValueError):
            w.add("a", np.arange(3))  # duplicate name
        with pytest.raises(TypeError):
            w.add(3, np.arange(3))
    with tenso.safe_open(path) as f:
        assert f.keys() == ["a"] and f.metadata() == {"k": "2"}
    w = tenso.ArchiveWriter(tmp_path / "x.safetensors")
    with pytest.raises(ValueError):
        w.add("s", tenso.QuantizedTensor.quantize(np.ones(4, np.float32), "qint8"))  # dense only
    w.abort()
    w.abort()
    with pytest.raises(ValueError):
        w.add("t", np.ones(2))
    assert not (tmp_path / "x.safetensors").exists()


def test_save_file_arguments(tmp_path):
    with pytest.raises(ValueError, match="format"):
        tenso.save_file({"a": np.ones(1)}, tmp_path / "f", format="zip")
    with pytest.raises(TypeError):
        tenso.save_file([np.ones(1)], tmp_path / "f")
    tenso.save_file({"a": np.ones(2)}, tmp_path / "forced.bin", format="safetensors")
    with tenso.safe_open(tmp_path / "forced.bin") as f:
        assert f.format == "safetensors" and f.metadata() is None
    with pytest.raises(ValueError):
        tenso.safe_open(tmp_path / "forced.bin", framework="jax")
    with pytest.raises(ValueError):
        tenso.safe_open(tmp_path / "forced.bin", device="cuda")


def test_framework_pt(tmp_path):
    torch = pytest.importorskip("torch", reason=TORCH_MISSING)
    path = tmp_path / "t.safetensors"
    tenso.save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    with tenso.safe_open(path, framework="pt") as f:
        t = f.get_tensor("a")
    assert isinstance(t, torch.Tensor) and t.shape == (2, 3) and float(t[1, 2]) == 5.0


# ---- hostile files ------------------------------------------------------------------------------


def _safetensors_bytes(header, data=b""):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00" * 7,
        os.urandom(4096),
        struct.pack("<Q", 1 << 60) + b"{}",  # header length past the file
        _safetensors_bytes({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\x00" * 8),
        _safetensors_bytes(
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},  # overlaps a
            },
            b"\x00" * 12,
        ),
        _safetensors_bytes({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\x00" * 8),
        _safetensors_bytes({"a": {"dtype": "Q99", "shape": [1], "data_offsets": [0, 4]}}, b"\x00" * 4),
        _safetensors_bytes({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\x00" * 4),
        b"\x08\x00\x00\x00\x00\x00\x00\x00[1,2,3]",
    ],
)
def test_hostile_files_are_refused(tmp_path, content):
    path = tmp_path / "h.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError):
        with tenso.safe_open(path) as f:
            for k in f.keys():
                f.get_tensor(k)


def test_truncated_archives_are_refused(tmp_path):
    path = tmp_path / "t.tenso"
    tenso.save_file({"a": np.arange(1000), "b": np.ones(10)}, path, metadata={"m": "x"})
    data = path.read_bytes()
    cut = tmp_path / "cut.tenso"
    for n in sorted({1, 9, 64, len(data) // 2, len(data) - 64, len(data) - 1}):
        cut.write_bytes(data[:n])
        with pytest.raises(ValueError):
            tenso.safe_open(cut, format="tenso")


# ---- interop with the real packages -----------------------------------------------------------


@pytest.mark.parametrize("pkg", ["safetensors", "bintensors"])
def test_files_we_write_open_in_the_real_package(tmp_path, pkg):
    numpy_api = pytest.importorskip(f"{pkg}.numpy")
    real = pytest.importorskip(pkg)
    fmt = pkg
    path = tmp_path / ("ours" + EXT[fmt])
    tensors = tensors_for(fmt)
    if pkg == "bintensors":
        tensors.pop("t_bfloat16")  # bintensors' numpy API has no bfloat16 dtype
    tenso.save_file(tensors, path, metadata={"who": "tenso"})
    theirs = numpy_api.load_file(str(path))
    assert sorted(theirs) == sorted(tensors)
    for name, want in tensors.items():
        assert_same(theirs[name], want)
    with real.safe_open(str(path), framework="np") as f:
        assert f.metadata() == {"who": "tenso"}


@pytest.mark.parametrize("pkg", ["safetensors", "bintensors"])
def test_files_the_real_package_writes_open_here(tmp_path, pkg):
    numpy_api = pytest.importorskip(f"{pkg}.numpy")
    path = tmp_path / ("theirs" + EXT[pkg])
    tensors = tensors_for(pkg)
    if pkg == "bintensors":
        tensors.pop("t_bfloat16")
    numpy_api.save_file(tensors, str(path), metadata={"who": pkg})
    with tenso.safe_open(path) as f:
        assert f.format == pkg and f.metadata() == {"who": pkg}
        assert f.keys() == sorted(tensors)
        for name, want in tensors.items():
            assert_same(f.get_tensor(name), want)
            if want.ndim == 2:
                assert np.array_equal(f.get_slice(name)[1:, ::2], want[1:, ::2])
        f.verify()
    loaded = tenso.load_file(path)
    for name, want in tensors.items():
        assert_same(loaded[name], want)
