"""
GPU transfers for Tenso: packets straight into device memory and back (libtenso's tenso_gpu_*).

Upstream 0.24's names and behaviour: :func:`read_to_device`, :func:`write_from_device`,
:class:`GPUDirectTransfer` and :data:`BACKEND` (the array framework results are handed to:
"cupy", "torch", "jax", or None). The transfers are libtenso's: packets are decoded into
device memory through pinned, double-buffered staging (GPUDirect Storage for files where cuFile
is present), bundles member by member, quantized packets dequantized on the device.

What comes back. With a framework installed (:data:`BACKEND`), its tensor, handed over through
DLPack without a copy. Without one, a :class:`DeviceTensor`: tenso's own device tensor, with
``shape``, ``dtype``, ``device``, ``data_ptr``, ``to_numpy()`` (a host copy) and the DLPack
protocol (``__dlpack__`` / ``__dlpack_device__``), so any framework can take it later. Bundles
come back as dicts of them. Pass ``framework=None`` to always get DeviceTensor objects.

Backends. libtenso drives CUDA devices (the default) or, for tests and machines without a GPU,
an emulated device in host memory: ``TENSO_GPU_BACKEND=host`` in the environment, or
:func:`select_backend` before the first GPU call. Without a usable device every call raises
:class:`~tenso.errors.TensoNotAvailableError` with the reason.

Example::

    import numpy as np, tenso, tenso.gpu

    packet = tenso.dumps(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = tenso.gpu.read_to_device(packet, framework=None)   # a DeviceTensor on device 0
    assert t.shape == (2, 3) and (t.to_numpy() == np.arange(6).reshape(2, 3)).all()
    again = tenso.gpu.dumps(t)                             # the same packet, from the device
"""

import mmap
import os
from typing import Any, Dict, Literal, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tenso
from .core import _read_fd_of, _read_some, _resync, _write_all, _write_fd_of, write_stream
from .errors import TensoNotAvailableError, TensoTruncatedError
from .options import DecodeOptions, _merge

DeviceTensor = _tenso.DeviceTensor

# --- framework detection (as upstream: cupy, then torch, then jax) ---
BACKEND: Optional[str] = None
try:
    import cupy as cp

    HAS_CUPY = True
except ImportError:
    cp = None
    HAS_CUPY = False

try:
    import torch

    HAS_TORCH = True
except ImportError:
    torch = None
    HAS_TORCH = False

try:
    import jax

    HAS_JAX = True
except ImportError:
    jax = None
    HAS_JAX = False

if HAS_CUPY:
    BACKEND = "cupy"
elif HAS_TORCH:
    BACKEND = "torch"
elif HAS_JAX:
    BACKEND = "jax"

_AUTO = "auto"
_DLPACK_CPU = 1  # kDLCPU


# ---------------------------------------------------------------------------------------------
# Devices and backends
# ---------------------------------------------------------------------------------------------


def select_backend(name: Literal["cuda", "host"]) -> None:
    """Choose libtenso's device backend, "cuda" or "host" (an emulated device in host memory),
    before the first GPU call (TensoValueError after it, for a different one)."""
    _tenso.gpu_select_backend(name)


def device_backend() -> str:
    """libtenso's device backend: "cuda", "host", or "none" before the first GPU call."""
    return _tenso.gpu_backend()


def available() -> bool:
    """True when a device is usable; :func:`check_available` says why not."""
    try:
        _tenso.gpu_check()
    except TensoNotAvailableError:
        return False
    return True


def check_available() -> None:
    """Raise :class:`~tenso.errors.TensoNotAvailableError` with the reason (the CUDA runtime's
    own message where it got that far) unless a device is usable."""
    _tenso.gpu_check()


def device_count() -> int:
    """The number of devices (TensoNotAvailableError when there are none)."""
    return _tenso.gpu_device_count()


def device_info(device_id: int = 0) -> Dict[str, Any]:
    """A device's properties: ``name``, ``uuid`` (16 bytes), ``total_memory``,
    ``compute_capability``, ``multiprocessors``, ``pci``, ``backend``, ``gds``, ``ipc``."""
    return _tenso.gpu_device_info(device_id)


def pool_stats() -> Dict[str, int]:
    """The pinned staging pool: ``buffers``, ``bytes``, ``hits``, ``misses``, ``limit_bytes``."""
    return _tenso.gpu_pool_stats()


def set_pool_limit(limit_bytes: int) -> None:
    """How many bytes of pinned buffers the pool keeps (default 256 MiB); 0 unpins the idle ones."""
    _tenso.gpu_pool_set_limit(limit_bytes)


# ---------------------------------------------------------------------------------------------
# Frameworks
# ---------------------------------------------------------------------------------------------


def _framework_tensor(t: Any, framework: Optional[str]) -> Any:
    """A DeviceTensor (or a dict of them) handed to `framework` through DLPack, no copy."""
    if isinstance(t, dict):
        return {k: _framework_tensor(v, framework) for k, v in t.items()}
    if t is None or framework is None:
        return t
    if framework == "cupy":
        return cp.from_dlpack(t)
    if framework == "torch":
        return torch.from_dlpack(t)
    if framework == "jax":
        return jax.dlpack.from_dlpack(t)
    raise ValueError(f"Unsupported framework: {framework!r}. Supported: 'cupy', 'torch', 'jax', None.")


def _resolve(framework: Optional[str]) -> Optional[str]:
    return BACKEND if framework == _AUTO else framework


def from_dlpack(tensor: Any) -> DeviceTensor:
    """A DeviceTensor over any DLPack producer's memory (torch, cupy, jax; under the host
    backend also numpy), without copying. It keeps the producer's memory alive."""
    return _tenso.gpu_from_dlpack(tensor)


def to_device(array: Any, device_id: int = 0, *, framework: Optional[str] = _AUTO) -> Any:
    """A host array copied to the device (through the pinned pool); dicts element by element."""
    if isinstance(array, dict):
        return {k: to_device(v, device_id, framework=framework) for k, v in array.items()}
    return _framework_tensor(_tenso.gpu_upload(np.asarray(array), device_id), _resolve(framework))


# ---------------------------------------------------------------------------------------------
# Packets -> device
# ---------------------------------------------------------------------------------------------


def _dtype_code(dtype: Any) -> int:
    if dtype is None:
        return 0
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    return _tenso.dtype_from_name(name)


def _read_packet_bytes(source: Any) -> Optional[bytearray]:
    """One whole packet from an object without a usable descriptor (BytesIO, buffered files):
    exactly the bytes its headers frame, so nothing past it is consumed. None at a clean end."""
    buf = bytearray(8)
    got = 0
    while True:
        with memoryview(buf) as view:  # released before buf grows
            while got < len(buf):
                n = _read_some(source, view[got:])
                if not n:
                    if got == 0:
                        return None
                    raise TensoTruncatedError(f"Stream ended inside a packet after {got} bytes")
                got += n
        done, need = _tenso.packet_length(buf)
        if done:
            return buf
        buf.extend(bytes(need - len(buf)))


def read_to_device(
    source: Any,
    device_id: int = 0,
    *,
    framework: Optional[str] = _AUTO,
    dequantize_to: Any = None,
    options: Optional[DecodeOptions] = None,
) -> Any:
    """
    Read one Tenso packet straight into device memory.

    Parameters
    ----------
    source : Any
        A packet in memory (bytes, bytearray, memoryview, numpy array, mmap), a file descriptor
        (int), a socket, a file object (raw files and sockets are read by libtenso with the
        GIL released, overlapping reads with host -> device copies), or any object with
        ``readinto``/``read``/``recv``.
    device_id : int, default 0
        The target device.
    framework : str or None, keyword-only
        "cupy", "torch", "jax" or None (a :class:`DeviceTensor`); default :data:`BACKEND`.
    dequantize_to : dtype, keyword-only
        For quantized packets: float32, float16 or bfloat16, dequantized on the device. Without
        it they raise TensoUnsupportedError.
    options : DecodeOptions, keyword-only
        Limits for the packet.

    Returns
    -------
    The device tensor (a dict of them for bundles); None when the stream ends cleanly before a
    packet. An IPC reference packet is opened (its bytes, uint8; see :func:`open_ipc`).

    Raises
    ------
    TensoNotAvailableError
        No usable device (no CUDA runtime, driver or device).
    ValueError, EOFError
        The packet is invalid or the stream ends inside it.
    """
    fields = _merge(options)
    kw: Dict[str, Any] = dict(device=device_id, dequantize_to=_dtype_code(dequantize_to), options=fields)
    out: Optional[Union[DeviceTensor, Dict[str, Any]]]
    if isinstance(source, (bytes, bytearray, memoryview, np.ndarray, mmap.mmap)):
        out = _tenso.gpu_loads(source, **kw)
    elif isinstance(source, (str, os.PathLike)):
        out = _tenso.gpu_load_file(os.fspath(source), **kw)
    else:
        fd = _read_fd_of(source)
        if fd is not None:
            out = _tenso.gpu_read_fd(fd, **kw)
        else:
            packet = _read_packet_bytes(source)
            out = None if packet is None else _tenso.gpu_loads(packet, **kw)
    return _framework_tensor(out, _resolve(framework))


def load_file(path: Union[str, "os.PathLike[str]"], device_id: int = 0, *, no_gds: bool = False, **kw: Any) -> Any:
    """A packet file into device memory: GPUDirect Storage where cuFile is present and the
    packet allows it, else staged (``DeviceTensor.transfer_path`` says which). Keywords as
    :func:`read_to_device`."""
    framework = kw.pop("framework", _AUTO)
    dq = _dtype_code(kw.pop("dequantize_to", None))
    fields = _merge(kw.pop("options", None))
    if kw:
        raise TypeError(f"unexpected keyword arguments: {sorted(kw)}")
    out = _tenso.gpu_load_file(os.fspath(path), device=device_id, dequantize_to=dq, no_gds=no_gds, options=fields)
    return _framework_tensor(out, _resolve(framework))


def dequantize(packet: Any, dtype: Any = np.float32, device_id: int = 0, *, framework: Optional[str] = _AUTO) -> Any:
    """A quantized packet (``tenso.dumps(QuantizedTensor)``) dequantized on the device into
    float32 / float16 / bfloat16, bit-exact with :meth:`QuantizedTensor.dequantize` for float32."""
    return _framework_tensor(_tenso.gpu_dequantize(packet, dtype, device_id), _resolve(framework))


# ---------------------------------------------------------------------------------------------
# Device -> packets
# ---------------------------------------------------------------------------------------------


def _device_tensor(tensor: Any) -> Optional[DeviceTensor]:
    """`tensor` as a DeviceTensor without copying, or None for host memory the device backend
    cannot take (a CPU tensor while libtenso drives CUDA): that goes through the host encoder."""
    if isinstance(tensor, DeviceTensor):
        return tensor
    dev = getattr(tensor, "__dlpack_device__", None)
    if dev is None:
        return None
    if dev()[0] == _DLPACK_CPU:
        if device_backend() == "none":
            available()  # picks the backend
        if device_backend() != "host":
            return None
    return from_dlpack(tensor)


def dumps(tensor: Any, check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> bytes:
    """The packet of a device tensor (DeviceTensor or any DLPack producer), downloaded through
    pinned staging; the same bytes ``tenso.dumps`` gives for its host copy."""
    dt = _device_tensor(tensor)
    if dt is None:
        from .core import _dumps_bytes

        return _dumps_bytes(np.asarray(tensor), False, check_integrity, compress, alignment)
    return _tenso.gpu_dumps(dt, check_integrity, compress, alignment)


def write_from_device(tensor: Any, dest: Any, check_integrity: bool = False) -> int:
    """
    Serialize a device tensor to a destination, overlapping device -> host copies with writes.

    Parameters
    ----------
    tensor : Any
        A :class:`DeviceTensor`, or a CuPy / PyTorch / JAX array (taken through DLPack, no
        copy). Host arrays are encoded on the host, as upstream does.
    dest : Any
        A file descriptor, socket, file object, or anything with ``.write()``/``.sendall()``.
    check_integrity : bool, default False
        Include the XXH3 checksum footer.

    Returns
    -------
    int
        Number of bytes written.
    """
    dt = _device_tensor(tensor)
    if dt is None:
        return write_stream(np.asarray(tensor), dest, check_integrity=check_integrity)
    fd = _write_fd_of(dest)
    if fd is not None:
        written = _tenso.gpu_write_fd(dt, fd, check_integrity)
        _resync(dest)
        return int(written)
    write_method = getattr(dest, "sendall", None) or getattr(dest, "write", None)
    if write_method is None:
        raise AttributeError(f"Destination {type(dest)} has no '.write' or '.sendall' method.")
    packet = _tenso.gpu_dumps(dt, check_integrity)
    _write_all(write_method, memoryview(packet))
    return len(packet)


# ---------------------------------------------------------------------------------------------
# IPC between processes
# ---------------------------------------------------------------------------------------------


def export_ipc(tensor: Any) -> bytes:
    """The 106-byte GPU IPC reference packet for a tensor whose memory tenso allocated (from
    :func:`read_to_device` / :func:`to_device` with ``framework=None``). Keep the tensor alive
    while other processes use the reference."""
    return _tenso.gpu_ipc_export(tensor)


def open_ipc(packet: Any, dtype: Any, shape: Sequence[int], *, framework: Optional[str] = _AUTO) -> Any:
    """Another process's device memory, from its IPC reference packet, as a tensor of `dtype`
    and `shape` (their size must equal the reference's nbytes). No copy; closed when freed."""
    return _framework_tensor(_tenso.gpu_ipc_open(packet, dtype, tuple(shape)), _resolve(framework))


# ---------------------------------------------------------------------------------------------
# GPU Direct Storage / RDMA abstraction (upstream's class)
# ---------------------------------------------------------------------------------------------


class GPUDirectTransfer:
    """
    Reads into device memory: GPUDirect Storage (cuFile) for packet files where libtenso finds
    it, pinned staging otherwise.

    Example::

        gdt = GPUDirectTransfer(device_id=0)
        tensor = gdt.read_from_fd(fd, shape=(1, 3, 224, 224), dtype=np.float32)  # raw bytes
        tensor = gdt.read_packet(packet_bytes)                                     # a packet
    """

    def __init__(self, device_id: int = 0):
        self.device_id = device_id
        self._backend = BACKEND

    @property
    def gds_available(self) -> bool:
        """True when GPUDirect Storage (cuFile) can reach this device."""
        try:
            return bool(device_info(self.device_id)["gds"])
        except TensoNotAvailableError:
            return False

    def read_from_fd(self, fd: int, shape: Tuple[int, ...], dtype: Any, offset: int = 0) -> Any:
        """Raw tensor bytes (not a packet) at `offset` of a file descriptor into device memory,
        through the pinned pool. EOFError on a short file."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        host = np.empty(nbytes, dtype=np.uint8)
        mv = host.data
        pos = 0
        while pos < nbytes:
            n = os.preadv(fd, [mv[pos:]], offset + pos)
            if n == 0:
                raise EOFError(f"Short read: expected {nbytes}, got {pos}")
            pos += n
        return to_device(host.view(dtype).reshape(shape), self.device_id, framework=self._backend)

    def read_packet(self, source: Any, device_id: Optional[int] = None) -> Any:
        """Read a Tenso packet and transfer it to the device (:func:`read_to_device`)."""
        did = device_id if device_id is not None else self.device_id
        return read_to_device(source, device_id=did, framework=self._backend)

    def read_file(self, path: Union[str, "os.PathLike[str]"]) -> Any:
        """A packet file into device memory (GPUDirect Storage when available)."""
        return load_file(path, self.device_id, framework=self._backend)

    def __repr__(self) -> str:
        gds = "GDS" if self.gds_available else "staged"
        return f"GPUDirectTransfer(device={self.device_id}, mode={gds}, backend={self._backend})"


__all__ = [
    "BACKEND",
    "DeviceTensor",
    "GPUDirectTransfer",
    "available",
    "check_available",
    "dequantize",
    "device_backend",
    "device_count",
    "device_info",
    "dumps",
    "export_ipc",
    "from_dlpack",
    "load_file",
    "open_ipc",
    "pool_stats",
    "read_to_device",
    "select_backend",
    "set_pool_limit",
    "to_device",
    "write_from_device",
]
