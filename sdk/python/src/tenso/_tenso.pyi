"""Type stubs for tenso._tenso, the pybind11 extension over libtenso's C ABI (tenso/tenso.h).

Internal: use the functions of the ``tenso`` package. Every function raises the
``tenso.errors`` class that matches the libtenso status (ValueError/EOFError/... subclasses).
"""

from typing import Any, Callable, Dict, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
from numpy.typing import NDArray

_Buffer = Any  # any object with the buffer protocol (bytes, bytearray, memoryview, mmap, ndarray)
_Fd = int

library_path: str
library_version: str
library_version_number: int
compiled_version: str
compiled_version_number: int
protocol_version: int

def status_name(status: int) -> str: ...
def dtype_code(dtype: Any) -> int: ...
def numpy_dtype(code: int) -> np.dtype: ...
def dtype_name(code: int) -> str: ...
def _set_factories(quantized: Callable[..., Any], strings: Callable[..., Any], sparse: Callable[..., Any]) -> None: ...

# ---- encoding ----
@overload
def dumps_array(
    array: NDArray[Any],
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
    pad: Literal[True] = True,
) -> memoryview: ...
@overload
def dumps_array(
    array: NDArray[Any],
    strict: bool,
    check_integrity: bool,
    compress: bool,
    alignment: int,
    pad: Literal[False],
) -> bytes: ...
def write_array_fd(
    array: NDArray[Any],
    fd: _Fd,
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
) -> int: ...
def save_array_file(
    path: Union[str, bytes],
    array: NDArray[Any],
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
) -> None: ...
def dequantize(
    data: _Buffer,
    scales: NDArray[np.float32],
    zero_points: NDArray[np.float32],
    shape: Sequence[int],
    dtype_code: int,
    scheme: int,
    axis: int,
    group_size: int,
) -> NDArray[np.float32]: ...

class Value:
    """A tenso_value (something to encode); keeps the objects whose memory it borrows alive."""

    @staticmethod
    def tensor(array: NDArray[Any], strict: bool = False) -> "Value": ...
    @staticmethod
    def bundle() -> "Value": ...
    @staticmethod
    def sparse(kind: int, shape: Sequence[int], a: NDArray[Any], b: NDArray[Any], c: NDArray[Any]) -> "Value": ...
    @staticmethod
    def quantized(
        data: _Buffer,
        scales: NDArray[np.float32],
        zero_points: NDArray[np.float32],
        shape: Sequence[int],
        dtype_code: int,
        scheme: int,
        axis: int,
        group_size: int,
    ) -> "Value": ...
    @staticmethod
    def quantize(array: NDArray[Any], qdtype: int, scheme: int, axis: int, group_size: int) -> "Value": ...
    @staticmethod
    def strings(offsets: NDArray[np.uint64], payload: _Buffer) -> "Value": ...
    @staticmethod
    def ragged(flat: NDArray[Any], count: int, offsets: NDArray[np.uint64]) -> "Value": ...
    @staticmethod
    def packet(data: _Buffer) -> "Value": ...
    def insert(self, key: str, child: "Value") -> None: ...
    def __len__(self) -> int: ...
    def quantized_parts(
        self,
    ) -> Tuple[NDArray[np.uint8], NDArray[np.float32], NDArray[np.float32], Tuple[int, ...], int, int, int, int]: ...
    @overload
    def dumps(
        self, check_integrity: bool = False, compress: bool = False, alignment: int = 64, pad: Literal[True] = True
    ) -> memoryview: ...
    @overload
    def dumps(self, check_integrity: bool, compress: bool, alignment: int, pad: Literal[False]) -> bytes: ...
    def write_fd(self, fd: _Fd, check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> int: ...
    def save_file(self, path: Union[str, bytes], check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> None: ...

# ---- decoding ----
class Packet:
    """A decoded packet: the numpy ``base`` of every array decoded from it."""

    @property
    def source(self) -> Optional[Any]: ...
    @property
    def owns_data(self) -> bool: ...
    @property
    def packet_size(self) -> int: ...
    @property
    def kind(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def flags(self) -> int: ...

def loads(data: _Buffer, copy: bool = False, align: bool = False) -> Any: ...
def read_fd(fd: _Fd, copy: bool = False) -> Optional[Any]: ...
def load_file(path: Union[str, bytes], mmap: bool = True, copy: bool = False) -> Any: ...
def loads_ragged(data: _Buffer, copy: bool = False) -> Tuple[NDArray[Any], NDArray[np.uint64]]: ...
def inspect(data: _Buffer) -> Dict[str, Any]: ...
def packet_length(data: _Buffer) -> Tuple[bool, int]: ...

# ---- DLPack ----
class TensorView:
    """A decoded dense tensor (zero-copy, read-only) that exports through DLPack."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def owns_data(self) -> bool: ...
    @property
    def packet(self) -> Packet: ...
    def numpy(self) -> NDArray[Any]: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> NDArray[Any]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

def view(data: _Buffer) -> Union[TensorView, Dict[str, Any], Any]: ...
