"""Files: dump/load (read and mmap), several packets per file, save_file/load_file."""

import io
import os

import numpy as np
import pytest

import tenso
from interop_codec import describe


def test_dump_load(tmp_path):
    path = tmp_path / "a.tenso"
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    with open(path, "wb") as f:
        assert tenso.dump(a, f, check_integrity=True) is None
    with open(path, "rb") as f:
        b = tenso.load(f)
    assert np.array_equal(a, b) and not b.flags.writeable
    with open(path, "rb") as f:
        c = tenso.load(f, copy=True)
    assert c.flags.writeable and np.array_equal(a, c)
    assert path.read_bytes() == bytes(tenso.dumps(a, check_integrity=True))


def test_load_mmap_is_zero_copy(tmp_path):
    path = tmp_path / "m.tenso"
    value = {"x": np.arange(1 << 16, dtype=np.int64), "y": np.ones(3)}
    with open(path, "wb") as f:
        tenso.dump(value, f)
    with open(path, "rb") as f:
        out = tenso.load(f, mmap_mode=True, align=False)  # bundle members stay views
    # The file is closed; the arrays point into the mapping, which the Packet keeps.
    import mmap

    mm = out["x"].base.source
    assert isinstance(mm, mmap.mmap)
    assert np.shares_memory(out["x"], np.frombuffer(mm, np.uint8))
    assert describe(out) == describe(value)
    with open(path, "rb") as f:
        copied = tenso.load(f, mmap_mode=True, copy=True)
    assert copied["x"].flags.writeable


def test_several_packets_in_one_file(tmp_path):
    path = tmp_path / "many.tenso"
    values = [np.full(i + 1, i, np.int32) for i in range(5)]
    with open(path, "wb") as f:
        for v in values:
            tenso.dump(v, f)
    with open(path, "rb") as f:
        for v in values:
            assert np.array_equal(tenso.load(f), v)
        with pytest.raises(EOFError):
            tenso.load(f)


def test_dump_to_bytesio_and_non_file_objects():
    buf = io.BytesIO()
    tenso.dump({"a": np.arange(3)}, buf)
    buf.seek(0)
    assert tenso.load(buf)["a"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("mmap_", [True, False])
def test_save_file_load_file(tmp_path, mmap_):
    path = tmp_path / "s.tenso"
    value = {
        "w": np.arange(10.0),
        "q": tenso.QuantizedTensor.quantize(np.linspace(-1, 1, 8, dtype=np.float32), "qint8"),
    }
    tenso.save_file(path, value, check_integrity=True)
    out = tenso.load_file(path, mmap=mmap_)
    assert describe(out) == describe(value)
    assert out["w"].base.owns_data  # the mapping / read buffer belongs to the packet
    # Atomic replacement: a new save replaces the whole file, no temporary left behind.
    tenso.save_file(str(path), np.zeros(2))
    assert np.array_equal(tenso.load_file(path), np.zeros(2))
    assert os.listdir(tmp_path) == ["s.tenso"]


def test_load_file_errors(tmp_path):
    with pytest.raises(OSError):
        tenso.load_file(tmp_path / "missing.tenso")
    empty = tmp_path / "empty.tenso"
    empty.write_bytes(b"")
    with pytest.raises(EOFError):
        tenso.load_file(empty)
    with pytest.raises(EOFError):
        tenso.load_file(empty, mmap=False)
    bad = tmp_path / "bad.tenso"
    bad.write_bytes(b"not a tenso packet at all")
    with pytest.raises(ValueError):
        tenso.load_file(bad)
    cut = tmp_path / "cut.tenso"
    cut.write_bytes(bytes(tenso.dumps(np.arange(100)))[:-1])
    with pytest.raises(EOFError):
        tenso.load_file(cut, mmap=False)
    with pytest.raises(ValueError):
        tenso.load_file(cut)


def test_save_file_refuses_unserializable(tmp_path):
    with pytest.raises(TypeError):
        tenso.save_file(tmp_path / "x", [1, 2])
    assert os.listdir(tmp_path) == []


def test_file_names_that_are_not_utf8(tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"\xff\xfe.tenso")
    tenso.save_file(path, np.arange(3))
    assert tenso.load_file(path).tolist() == [0, 1, 2]
    assert tenso.load_file(os.fsdecode(path), mmap=False).tolist() == [0, 1, 2]
