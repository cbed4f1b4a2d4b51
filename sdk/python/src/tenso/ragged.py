"""String tensors and ragged arrays, with upstream ``tenso.ragged``'s classes and methods.

String tensor packet (dtype 20): header, shape [count], padding to 64, then count + 1 uint64
offsets and the packed UTF-8 bytes, optionally an XXH3 footer. A ragged array is an ordinary
bundle of ``__ragged_offsets__`` (uint64, count + 1), ``__ragged_flat__`` and
``__ragged_count__`` (uint64 [count]); :func:`tenso.loads` returns it as that dict, and
:meth:`RaggedArray.loads` turns the dict (or the packet) back into a RaggedArray.

Unlike upstream, both also travel inside bundles and streams (``tenso.dumps({"s": st})``).
"""

from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from . import _tenso
from .errors import TensoUnsupportedError, TensoValueError

BytesLike = Union[bytes, bytearray, memoryview]


class StringTensor:
    """A batch of variable-length strings stored as packed UTF-8 with offsets.

    Example::

        st = StringTensor(["hello", "world", "foo"])
        packet = st.dumps()
        restored = StringTensor.loads(packet)
        assert restored[0] == "hello"
        assert len(restored) == 3

    A decoded StringTensor reads its strings straight from the packet (``_data`` is then a
    read-only memoryview of it; upstream holds a bytes copy).
    """

    __slots__ = ("_offsets", "_data", "_count")

    def __init__(self, strings: Sequence[Union[str, bytes]]):
        parts = []
        offsets = [0]
        for s in strings:
            encoded = s.encode("utf-8") if isinstance(s, str) else s
            parts.append(encoded)
            offsets.append(offsets[-1] + len(encoded))
        self._offsets = np.array(offsets, dtype=np.uint64)
        self._data = b"".join(parts)
        self._count = len(strings)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, idx: int) -> str:
        if idx < 0:
            idx += self._count
        if idx < 0 or idx >= self._count:
            raise IndexError(f"index {idx} out of range for StringTensor of size {self._count}")
        start = int(self._offsets[idx])
        end = int(self._offsets[idx + 1])
        return str(self._data[start:end], "utf-8")

    def to_list(self) -> List[str]:
        """All strings, decoded."""
        offs = self._offsets.tolist()
        data = self._data
        return [str(data[offs[i] : offs[i + 1]], "utf-8") for i in range(self._count)]

    @property
    def nbytes(self) -> int:
        """Bytes of packed UTF-8."""
        return len(self._data)

    @property
    def shape(self) -> Tuple[int]:
        return (self._count,)

    def dumps(self, check_integrity: bool = False) -> memoryview:
        """Serialize to a Tenso v4 string packet (always 64-aligned, as upstream)."""
        return self._to_value().dumps(check_integrity, False, 64, True)

    @classmethod
    def loads(cls, data: BytesLike) -> "StringTensor":
        """Deserialize a StringTensor packet. ValueError when it holds something else."""
        from .core import loads as _core_loads

        obj = _core_loads(data)
        if not isinstance(obj, cls):
            raise ValueError("Not a StringTensor packet")
        return obj

    def _to_value(self) -> _tenso.Value:
        return _tenso.Value.strings(self._offsets, self._data)

    @classmethod
    def _from_raw(cls, offsets: Any, data: Any, count: int) -> "StringTensor":
        """Reconstruct from already-parsed fields (used by the decoder)."""
        obj = object.__new__(cls)
        obj._offsets = np.asarray(offsets, dtype=np.uint64)
        obj._data = data
        obj._count = int(count)
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StringTensor):
            return NotImplemented
        return (
            self._count == other._count
            and bytes(self._data) == bytes(other._data)
            and bool(np.array_equal(self._offsets, other._offsets))
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-ish container: not hashable

    def __repr__(self) -> str:
        preview = self.to_list()[:3]
        suffix = ", ..." if self._count > 3 else ""
        return f"StringTensor({preview}{suffix}, count={self._count})"


class RaggedArray:
    """A ragged (jagged) array: a sequence of variable-length 1-D arrays stored without padding.

    Example::

        ra = RaggedArray([
            np.array([1.0, 2.0, 3.0]),
            np.array([4.0, 5.0]),
            np.array([6.0]),
        ])
        packet = ra.dumps()
        restored = RaggedArray.loads(packet)
        assert len(restored) == 3
        assert list(restored[1]) == [4.0, 5.0]
    """

    __slots__ = ("_offsets", "_flat", "_count")

    def __init__(self, arrays: Sequence[np.ndarray]):
        if not arrays:
            self._offsets = np.array([0], dtype=np.uint64)
            self._flat = np.array([], dtype=np.float32)
            self._count = 0
            return

        dtype = arrays[0].dtype
        offsets = [0]
        parts = []
        for arr in arrays:
            arr = np.asarray(arr).ravel()
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            parts.append(arr)
            offsets.append(offsets[-1] + len(arr))

        self._offsets = np.array(offsets, dtype=np.uint64)
        self._flat = np.concatenate(parts)
        self._count = len(arrays)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, idx: int) -> np.ndarray:
        if idx < 0:
            idx += self._count
        if idx < 0 or idx >= self._count:
            raise IndexError(f"index {idx} out of range for RaggedArray of size {self._count}")
        start = int(self._offsets[idx])
        end = int(self._offsets[idx + 1])
        return self._flat[start:end].copy()

    @property
    def dtype(self) -> np.dtype:
        return self._flat.dtype

    @property
    def flat_values(self) -> np.ndarray:
        return self._flat

    @property
    def row_splits(self) -> np.ndarray:
        return self._offsets

    def to_list(self) -> List[np.ndarray]:
        return [self._flat[int(self._offsets[i]) : int(self._offsets[i + 1])].copy() for i in range(self._count)]

    def dumps(self, check_integrity: bool = False) -> memoryview:
        """Serialize to a Tenso packet (a bundle, byte-identical to upstream's)."""
        return self._to_value().dumps(check_integrity, False, 64, True)

    def _to_value(self) -> _tenso.Value:
        return _tenso.Value.ragged(np.ascontiguousarray(self._flat), self._count, self._offsets)

    @classmethod
    def loads(cls, data: Union[BytesLike, Dict[str, Any]]) -> "RaggedArray":
        """Deserialize from a Tenso packet or an already-deserialized dict.

        Raises ValueError ("Not a valid RaggedArray packet") for anything else, and for
        offsets that do not fit the flat values.
        """
        if not isinstance(data, dict):
            # libtenso checks the form (keys, dtypes, offsets) and returns zero-copy views.
            try:
                flat, offsets = _tenso.loads_ragged(data)
            except TensoUnsupportedError:
                raise TensoValueError("Not a valid RaggedArray packet") from None
            return cls._from_parts(flat, offsets, len(offsets) - 1)

        if not all(k in data for k in ("__ragged_offsets__", "__ragged_flat__", "__ragged_count__")):
            raise TensoValueError("Not a valid RaggedArray packet")

        offsets = np.asarray(data["__ragged_offsets__"], dtype=np.uint64)
        flat = np.asarray(data["__ragged_flat__"])
        count_arr = np.asarray(data["__ragged_count__"]).ravel()
        if count_arr.size != 1 or flat.ndim != 1 or offsets.ndim != 1:
            raise TensoValueError("Not a valid RaggedArray packet")
        count = int(count_arr[0])

        if len(offsets) != count + 1:
            raise TensoValueError(f"Offsets length {len(offsets)} != count+1 ({count + 1})")
        if len(flat) > 0 and int(offsets[-1]) != len(flat):
            raise TensoValueError(f"Last offset {int(offsets[-1])} != flat length {len(flat)}")
        if not np.all(np.diff(offsets.astype(np.int64)) >= 0):
            raise TensoValueError("Offsets are not monotonically non-decreasing")
        return cls._from_parts(flat, offsets, count)

    @classmethod
    def _from_parts(cls, flat: np.ndarray, offsets: np.ndarray, count: int) -> "RaggedArray":
        obj = object.__new__(cls)
        obj._offsets = offsets
        obj._flat = flat
        obj._count = count
        return obj

    def __repr__(self) -> str:
        return f"RaggedArray(count={self._count}, dtype={self._flat.dtype}, total_elements={len(self._flat)})"
