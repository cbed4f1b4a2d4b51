"""DLPack: TensorView exports libtenso's DLManagedTensorVersioned ("dltensor_versioned") or the
legacy DLManagedTensor ("dltensor") capsule; numpy (and torch, when installed) consume it
without a copy; the deleter runs exactly once and releases the source."""

import ctypes
import gc
import weakref

import numpy as np
import pytest

import tenso
from conftest import TORCH_MISSING

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]
PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.restype = ctypes.c_int
PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


def src_and_view(a, **opts):
    src = np.frombuffer(bytes(tenso.dumps(a, **opts)), np.uint8).copy()  # weak-referenceable
    return src, tenso.view(src)


def test_numpy_from_dlpack_is_zero_copy_and_readonly():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    src, tv = src_and_view(a)
    assert isinstance(tv, tenso.TensorView)
    assert tv.shape == (2, 3, 4) and tv.dtype == np.float32 and tv.ndim == 3 and tv.nbytes == 96
    assert tv.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(tv)
    assert np.array_equal(a, b)
    assert np.shares_memory(b, src)
    assert not b.flags.writeable  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert np.asarray(tv).base is not None and np.array_equal(np.asarray(tv), a)


@pytest.mark.parametrize(
    "dtype",
    [
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
        "complex64",
        "complex128",
        "bool",
    ],
)
def test_numpy_from_dlpack_every_dtype(dtype):
    a = (np.arange(6) % 2).astype(dtype).reshape(3, 2)
    _, tv = src_and_view(a)
    b = np.from_dlpack(tv)
    assert b.dtype == a.dtype and np.array_equal(a, b)


def test_versioned_capsule_fields():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    src, tv = src_and_view(a)
    cap = tv.__dlpack__(max_version=(1, 0))
    assert PyCapsule_GetName(cap) == b"dltensor_versioned"
    m = DLManagedTensorVersioned.from_address(PyCapsule_GetPointer(cap, b"dltensor_versioned"))
    assert (m.version.major, m.version.minor) >= (1, 0)
    assert m.flags & 1  # READ_ONLY
    t = m.dl_tensor
    assert t.device.device_type == 1 and t.ndim == 2 and [t.shape[0], t.shape[1]] == [2, 3]
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (0, 64, 1)  # kDLInt
    assert t.data == np.frombuffer(src, np.uint8).ctypes.data + 64
    del cap  # never consumed: the capsule destructor calls the deleter


def test_legacy_capsule_for_old_consumers():
    a = np.arange(5, dtype=np.uint16)
    src, tv = src_and_view(a)
    cap = tv.__dlpack__()
    assert PyCapsule_GetName(cap) == b"dltensor"
    m = DLManagedTensor.from_address(PyCapsule_GetPointer(cap, b"dltensor"))
    assert m.dl_tensor.ndim == 1 and m.dl_tensor.shape[0] == 5

    class LegacyOnly:  # a producer without max_version: numpy falls back to the legacy capsule
        def __dlpack__(self, stream=None):
            return tv.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return tv.__dlpack_device__()

    b = np.from_dlpack(LegacyOnly())
    assert np.array_equal(a, b) and np.shares_memory(b, src)


def test_deleter_releases_the_source_exactly_once():
    a = np.arange(100, dtype=np.float64)
    src, tv = src_and_view(a)
    ref = weakref.ref(src)
    del src
    caps = [tv.__dlpack__(max_version=(1, 0)), tv.__dlpack__()]  # unconsumed
    consumed = np.from_dlpack(tv)  # consumed by numpy: renamed, deleted when the array goes
    del tv
    gc.collect()
    assert ref() is not None
    del caps
    gc.collect()
    assert ref() is not None  # the numpy array still holds its DLPack tensor
    assert consumed.sum() == sum(range(100))
    del consumed
    gc.collect()
    assert ref() is None  # every export released its reference


def test_exports_outlive_the_view_and_packet_for_owned_data():
    """A decompressed body belongs to the view; the export keeps it alive by itself."""
    a = np.arange(10_000, dtype=np.float32)
    tv = tenso.view(bytes(tenso.dumps(a, compress=True)))
    assert tv.owns_data
    b = np.from_dlpack(tv)
    del tv
    gc.collect()
    assert np.array_equal(a, b)


def test_bundles_give_dicts_of_views():
    value = {
        "a": np.arange(3, dtype=np.int8),
        "b": {"c": np.ones((2, 2))},
        "q": tenso.QuantizedTensor.quantize(np.ones(4, np.float32), "qint8"),
    }
    views = tenso.view(tenso.dumps(value))
    assert isinstance(views["a"], tenso.TensorView) and isinstance(views["b"]["c"], tenso.TensorView)
    assert isinstance(views["q"], tenso.QuantizedTensor)  # not dense: decoded as loads() would
    assert np.array_equal(np.from_dlpack(views["b"]["c"]), np.ones((2, 2)))


def test_dlpack_arguments():
    _, tv = src_and_view(np.arange(4, dtype=np.int32))
    with pytest.raises(BufferError):
        tv.__dlpack__(max_version=(1, 0), dl_device=(2, 0))  # CUDA
    with pytest.raises(ValueError):
        tv.__dlpack__(stream=5)
    tv.__dlpack__(stream=-1, max_version=(1, 0), dl_device=(1, 0))
    copy = np.from_dlpack(tv, copy=True)
    assert copy.flags.writeable and not np.shares_memory(copy, tv.numpy())


def test_loads_arrays_speak_dlpack_too():
    """Arrays from loads are numpy arrays: their own __dlpack__ works (read-only flag kept)."""
    out = tenso.loads(tenso.dumps(np.arange(6, dtype=np.float32)))
    b = np.from_dlpack(out)
    assert np.shares_memory(out, b) and not b.flags.writeable


def test_torch_interop():
    torch = pytest.importorskip("torch", reason=TORCH_MISSING)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    src, tv = src_and_view(a)
    t = torch.from_dlpack(tv)
    assert t.shape == (3, 4) and t.dtype == torch.float32
    assert np.array_equal(t.numpy(), a)
    assert bytes(tenso.dumps(t)) == bytes(tenso.dumps(a))  # and back, through __dlpack__
