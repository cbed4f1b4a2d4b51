"""Type stubs for tenso._tenso, the pybind11 extension over libtenso's C ABI (tenso/tenso.h).

Internal: use the functions of the ``tenso`` package. Every function raises the
``tenso.errors`` class that matches the libtenso status (ValueError/EOFError/... subclasses).
"""

from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
from numpy.typing import NDArray
from typing_extensions import TypeAlias

_Buffer: TypeAlias = Any  # any object with the buffer protocol (bytes, bytearray, memoryview, mmap, ndarray)

class _pybind11_type(type):
    """pybind11's metaclass of every class below (``pybind11_builtins.pybind11_type`` at run time)."""

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
def dtype_itemsize(code: int) -> int: ...
def dtype_from_name(name: str) -> int: ...
def _set_factories(quantized: Callable[..., Any], strings: Callable[..., Any], sparse: Callable[..., Any]) -> None: ...

# ---- encoding ----
class PacketBuffer(metaclass=_pybind11_type):
    """A large packet in libtenso's memory (what dumps' memoryview points into from 32 MiB on);
    its pages are kept for the next packet when it goes."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

@overload
def dumps_array(
    array: NDArray[Any],
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
    pad: Literal[True] = True,
    threads: int = 0,
) -> memoryview: ...
@overload
def dumps_array(
    array: NDArray[Any],
    strict: bool,
    check_integrity: bool,
    compress: bool,
    alignment: int,
    pad: Literal[False],
    threads: int = 0,
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

class Piece(metaclass=_pybind11_type):
    """A body piece of Value.pieces(): the array memory, kept alive while exported."""

    def __buffer__(self, flags: int) -> memoryview: ...

class Value(metaclass=_pybind11_type):
    """A tenso_value (something to encode); keeps the objects whose memory it borrows alive."""

    @staticmethod
    def tensor(array: NDArray[Any], strict: bool = False) -> Value: ...
    @staticmethod
    def bundle() -> Value: ...
    @staticmethod
    def sparse(kind: int, shape: Sequence[int], a: NDArray[Any], b: NDArray[Any], c: NDArray[Any]) -> Value: ...
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
    ) -> Value: ...
    @staticmethod
    def quantize(array: NDArray[Any], qdtype: int, scheme: int, axis: int, group_size: int) -> Value: ...
    @staticmethod
    def strings(offsets: NDArray[np.uint64], payload: _Buffer) -> Value: ...
    @staticmethod
    def ragged(flat: NDArray[Any], count: int, offsets: NDArray[np.uint64]) -> Value: ...
    @staticmethod
    def packet(data: _Buffer) -> Value: ...
    def insert(self, key: str, child: Value) -> None: ...
    def __len__(self) -> int: ...
    def quantized_parts(
        self,
    ) -> Tuple[NDArray[np.uint8], NDArray[np.float32], NDArray[np.float32], Tuple[int, ...], int, int, int, int]: ...
    @overload
    def dumps(
        self,
        check_integrity: bool = False,
        compress: bool = False,
        alignment: int = 64,
        pad: Literal[True] = True,
        threads: int = 0,
    ) -> memoryview: ...
    @overload
    def dumps(
        self, check_integrity: bool, compress: bool, alignment: int, pad: Literal[False], threads: int = 0
    ) -> bytes: ...
    def write_fd(self, fd: _Fd, check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> int: ...
    def pieces(
        self, check_integrity: bool = False, compress: bool = False, alignment: int = 64
    ) -> List[Union[bytes, memoryview]]: ...
    def save_file(
        self, path: Union[str, bytes], check_integrity: bool = False, compress: bool = False, alignment: int = 64
    ) -> None: ...

# ---- decoding ----
class Packet(metaclass=_pybind11_type):
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

_OptionFields: TypeAlias = Optional[Tuple[int, int, int, int, int, int, int, int, int, int]]

def loads(data: _Buffer, copy: bool = False, align: bool = False, options: _OptionFields = None) -> Any: ...
def read_fd(fd: _Fd, copy: bool = False, options: _OptionFields = None, align: bool = False) -> Optional[Any]: ...

class Decoder(metaclass=_pybind11_type):
    """libtenso's stream decoder (tenso_decoder)."""

    def __init__(
        self,
        options: _OptionFields = None,
        read_ahead: bool = False,
        copy: bool = False,
        align: bool = False,
        writeable: bool = False,
    ) -> None: ...
    def buffer(self) -> memoryview: ...
    def commit(self, n: int) -> Optional[Any]: ...
    def feed(self, data: _Buffer) -> Tuple[int, Optional[Any]]: ...
    def read_fd(self, fd: _Fd) -> Optional[Any]: ...
    def finish(self) -> None: ...
    def reset(self) -> None: ...
    @property
    def needed(self) -> int: ...
    @property
    def idle(self) -> bool: ...

def load_file(path: Union[str, bytes], mmap: bool = True, copy: bool = False) -> Any: ...
def loads_ragged(data: _Buffer, copy: bool = False) -> Tuple[NDArray[Any], NDArray[np.uint64]]: ...
def inspect(data: _Buffer) -> Dict[str, Any]: ...
def packet_length(data: _Buffer) -> Tuple[bool, int]: ...

# ---- DLPack ----
class _DLPackTensor(metaclass=_pybind11_type):
    """What TensorView and DeviceTensor share (stub-only base): properties and DLPack."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
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

class TensorView(_DLPackTensor):
    """A decoded dense tensor (zero-copy, read-only) that exports through DLPack."""

    @property
    def owns_data(self) -> bool: ...
    @property
    def packet(self) -> Packet: ...
    def numpy(self) -> NDArray[Any]: ...

def view(data: _Buffer) -> Union[TensorView, Dict[str, Any], Any]: ...

# ---- shared memory and the cache (tenso/shm.h) ----
class Shm(metaclass=_pybind11_type):
    """A mapping of one shared-memory segment; exports its bytes through the buffer protocol
    (read-only unless created or opened writable). close() raises BufferError while an export is
    alive, as mmap.close() does; arrays from get() keep the mapping themselves."""

    @staticmethod
    def create(name: str, size: int, replace: bool = False) -> Shm: ...
    @staticmethod
    def open(name: str, writable: bool = True, any_owner: bool = False) -> Shm: ...
    @staticmethod
    def create_for(
        name: str,
        value: Value,
        check_integrity: bool = False,
        compress: bool = False,
        alignment: int = 64,
        replace: bool = False,
    ) -> Tuple[Shm, int]: ...
    @staticmethod
    def unlink(name: str) -> None: ...
    def put(self, value: Value, check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> int: ...
    def get(self, copy: bool = False) -> Any: ...
    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Unmap. BufferError while a memoryview (or np.frombuffer array) of it is alive."""
    def __buffer__(self, flags: int) -> memoryview: ...

class Cache(metaclass=_pybind11_type):
    """An attached tensor cache pool; gets are pinned zero-copy views."""

    @staticmethod
    def create(
        name: str,
        size: int = 0,
        max_entries: int = 0,
        max_clients: int = 0,
        max_pins: int = 0,
        lock_timeout_ms: int = 0,
        replace: bool = False,
    ) -> Cache: ...
    @staticmethod
    def open(name: str, lock_timeout_ms: int = 0, any_owner: bool = False) -> Cache: ...
    @staticmethod
    def unlink(name: str) -> None: ...
    @property
    def name(self) -> str: ...
    def put(
        self,
        key: str,
        value: Value,
        ttl: float = 0.0,
        check_integrity: bool = False,
        compress: bool = False,
        alignment: int = 64,
    ) -> int: ...
    def get(self, key: str, copy: bool = False) -> Optional[Any]: ...
    def delete(self, key: str) -> bool: ...
    def info(self, key: str) -> Optional[Dict[str, Any]]: ...
    def contains(self, key: str) -> bool: ...
    def keys(self) -> list[str]: ...
    def clear(self) -> None: ...
    def stats(self) -> Dict[str, int]: ...
    def check(self) -> None: ...
    def close(self) -> None:
        """Detach. Arrays from get() keep their entries pinned and mapped until they go."""

# ---- archives (tenso/archive.h) ----
def format_name(format: int) -> str: ...

class Archive(metaclass=_pybind11_type):
    """An open tenso archive, safetensors or bintensors file (read-only mapping)."""

    @staticmethod
    def open(
        path: Union[str, bytes], format: int = 0, verify_all: bool = False, no_verify: bool = False
    ) -> Archive: ...
    @property
    def format(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    def __len__(self) -> int: ...
    def entry(self, index: int) -> Dict[str, Any]: ...
    def names(self) -> list[str]: ...
    def find(self, name: str) -> int: ...
    def get(self, index: int, copy: bool = False) -> Any: ...
    def read(self, index: int, offset: int, dst: _Buffer) -> None: ...
    def metadata(self) -> Dict[str, str]: ...
    def verify(self) -> None: ...
    def close(self) -> None:
        """Close the file. Arrays from get() keep the mapping until they go."""

class ArchiveWriter(metaclass=_pybind11_type):
    """An archive being written into a temporary file, renamed over the target by finish()."""

    @staticmethod
    def open(
        path: Union[str, bytes],
        format: int = 0,
        alignment: int = 64,
        hash: bool = True,
        check_integrity: bool = False,
        compress: bool = False,
    ) -> ArchiveWriter: ...
    def add(self, name: str, value: Value) -> None: ...
    def set_metadata(self, key: str, value: str) -> None: ...
    def finish(self) -> None: ...
    def abort(self) -> None: ...

# ---- GPU (tenso/gpu.h; see tenso.gpu) ----
class DeviceTensor(_DLPackTensor):
    """Dense device memory owned by libtenso (tenso_gpu_tensor), exported through DLPack."""

    @property
    def device(self) -> int: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def transfer_path(self) -> Literal["staged", "gds", "gds_compat", "ipc", "none"]: ...
    def to_numpy(self) -> NDArray[Any]: ...

_DeviceValue: TypeAlias = Union[DeviceTensor, Dict[str, Any]]

def gpu_select_backend(name: Literal["cuda", "host"]) -> None: ...
def gpu_backend() -> Literal["cuda", "host", "none"]: ...
def gpu_check() -> None: ...
def gpu_device_count() -> int: ...
def gpu_device_info(device: int = 0) -> Dict[str, Any]: ...
def gpu_loads(
    data: _Buffer,
    *,
    device: int = 0,
    dequantize_to: int = 0,
    no_gds: bool = False,
    chunk_bytes: int = 0,
    staging_buffers: int = 0,
    stream: int = 0,
    options: _OptionFields = None,
) -> _DeviceValue: ...
def gpu_read_fd(
    fd: _Fd,
    *,
    device: int = 0,
    dequantize_to: int = 0,
    no_gds: bool = False,
    chunk_bytes: int = 0,
    staging_buffers: int = 0,
    stream: int = 0,
    options: _OptionFields = None,
) -> Optional[_DeviceValue]: ...
def gpu_load_file(
    path: str,
    *,
    device: int = 0,
    dequantize_to: int = 0,
    no_gds: bool = False,
    chunk_bytes: int = 0,
    staging_buffers: int = 0,
    stream: int = 0,
    options: _OptionFields = None,
) -> _DeviceValue: ...
def gpu_dumps(
    tensor: DeviceTensor, check_integrity: bool = False, compress: bool = False, alignment: int = 64
) -> bytes: ...
def gpu_write_fd(
    tensor: DeviceTensor, fd: _Fd, check_integrity: bool = False, compress: bool = False, alignment: int = 64
) -> int: ...
def gpu_upload(array: NDArray[Any], device: int = 0) -> DeviceTensor: ...
def gpu_from_dlpack(obj: Any) -> DeviceTensor: ...
def gpu_ipc_export(tensor: DeviceTensor) -> bytes: ...
def gpu_ipc_open(packet: _Buffer, dtype: Any, shape: Sequence[int]) -> DeviceTensor: ...
def gpu_dequantize(packet: _Buffer, dtype: Any, device: int = 0) -> DeviceTensor: ...
def gpu_pool_stats() -> Dict[str, int]: ...
def gpu_pool_set_limit(limit_bytes: int) -> None: ...

# ---- nodes (tenso/net.h, 1.4) ----
NODE_ALLOW_PLAINTEXT: int
NODE_NO_FD_PASSING: int
NODE_NO_LISTEN: int

class Cancel(metaclass=_pybind11_type):
    """A cancel token (tenso_cancel)."""

    def __init__(self) -> None: ...
    def trigger(self) -> None: ...
    @property
    def triggered(self) -> bool: ...

class Node(metaclass=_pybind11_type):
    """A libtenso node (tenso_node); tenso.net.TensorNode is the API. Timeouts in seconds
    (None: the node's io_timeout; for receive, no deadline)."""

    def __init__(
        self,
        listen: Optional[str] = None,
        flags: int = 0,
        cert_pem: Optional[str] = None,
        key_pem: Optional[str] = None,
        ca_pem: Optional[str] = None,
        pinned_keys: Sequence[str] = ...,
        threads: int = 0,
        max_packet_bytes: int = 0,
        max_name_bytes: int = 0,
        max_queued: int = 0,
        max_queued_bytes: int = 0,
        max_connections: int = 0,
        max_pool_per_peer: int = 0,
        idle_timeout_ms: int = 0,
        io_timeout_ms: int = 0,
        fd_passing_min_bytes: int = 0,
    ) -> None: ...
    def addrs(self) -> list[str]: ...
    def id(self) -> str: ...
    def send(
        self, addr: str, name: str, value: Value, timeout: Optional[float] = None, cancel: Optional[Cancel] = None
    ) -> None: ...
    def post(
        self, addr: str, name: str, value: Value, timeout: Optional[float] = None, cancel: Optional[Cancel] = None
    ) -> None: ...
    def post_array(
        self,
        addr: str,
        name: str,
        array: NDArray[Any],
        strict: bool = False,
        timeout: Optional[float] = None,
        cancel: Optional[Cancel] = None,
    ) -> None: ...
    def post_many(
        self,
        addr: str,
        items: Iterable[Tuple[str, Union[NDArray[Any], Value]]],
        strict: bool = False,
        timeout: Optional[float] = None,
        cancel: Optional[Cancel] = None,
    ) -> None: ...
    def flush(self, addr: str, timeout: Optional[float] = None, cancel: Optional[Cancel] = None) -> None: ...
    def send_packet(
        self, addr: str, name: str, packet: _Buffer, timeout: Optional[float] = None, cancel: Optional[Cancel] = None
    ) -> None: ...
    def receive(
        self, timeout: Optional[float] = None, cancel: Optional[Cancel] = None
    ) -> Optional[Tuple[str, str, Any]]: ...
    def receive_fd(self) -> int: ...
    def publish(self, name: str, value: Value) -> None: ...
    def unpublish(self, name: str) -> None: ...
    def set_access(self, fn: Optional[Callable[[str, str, str], bool]]) -> None: ...
    def request(
        self, addr: str, name: str, timeout: Optional[float] = None, cancel: Optional[Cancel] = None
    ) -> Any: ...
    def stats(self) -> Dict[str, int]: ...
    def shutdown(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
