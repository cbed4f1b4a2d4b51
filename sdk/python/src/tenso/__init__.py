"""
tenso: zero-copy tensor serialization and streaming (Tenso protocol v4).

A drop-in for the upstream ``tenso`` package (0.24) over libtenso's C ABI: the same functions,
arguments, return types and exceptions, the same bytes on the wire.

Main API:
    - dumps, loads, dump, load: serialization to and from memory and files.
    - read_stream, write_stream, iter_dumps: packets over sockets, pipes and file objects.
    - aread_stream, awrite_stream: the same over asyncio streams.
    - iter_stream, aiter_stream: every packet of a stream (libtenso's decoder, read-ahead).
    - DecodeOptions: limits (packet size, memory, entries, dims, elements) and a deadline.
    - get_packet_info, is_aligned: packet inspection.
    - QuantizedTensor, StringTensor, RaggedArray: the composite kinds.
    - TensoShm, TensoCache: tensors in shared memory; a multi-process tensor cache.
    - save_file, load_file, safe_open, ArchiveWriter: files of named tensors (tenso archives,
      safetensors, bintensors), safetensors' API.

Beyond upstream: ``view`` (DLPack-exportable TensorView objects), the archive functions, the
exception classes in ``tenso.errors``, and strings and ragged arrays inside bundles.
"""

# isort: off
from . import errors  # noqa: F401  (first: the extension looks its exception classes up at import)
from . import _tenso

# isort: on
from .archive import ArchiveWriter, load_file, safe_open, save_file
from .async_core import aiter_stream, aread_stream, awrite_stream
from .core import (
    _make_sparse,
    dump,
    dumps,
    iter_dumps,
    iter_stream,
    load,
    loads,
    read_stream,
    view,
    write_stream,
)
from .errors import (
    TensoAuthError,
    TensoCancelledError,
    TensoChecksumError,
    TensoConnectionError,
    TensoCorruptError,
    TensoEOFError,
    TensoError,
    TensoExistsError,
    TensoFullError,
    TensoGPUError,
    TensoInternalError,
    TensoIOError,
    TensoLimitError,
    TensoMemoryError,
    TensoNotAvailableError,
    TensoNotFoundError,
    TensoShutdownError,
    TensoTimeoutError,
    TensoTruncatedError,
    TensoTypeError,
    TensoUnsupportedError,
    TensoValueError,
)

# GPU transfers (tenso.gpu): libtenso's tenso_gpu_*, results handed to cupy/torch/jax when installed.
from .gpu import read_to_device
from .options import DecodeOptions
from .quantize import QuantizedTensor
from .ragged import RaggedArray, StringTensor
from .shm import TensoCache, TensoShm
from .utils import get_packet_info, is_aligned

_tenso._set_factories(QuantizedTensor._from_wire, StringTensor._from_raw, _make_sparse)

TensorView = _tenso.TensorView
Packet = _tenso.Packet


try:
    from importlib.metadata import version as _version

    __version__ = _version("libtenso")
except Exception:  # pragma: no cover - not installed as a distribution
    __version__ = _tenso.library_version

#: The libtenso this package runs on: its version and the file it was loaded from.
library_version: str = _tenso.library_version
library_path: str = _tenso.library_path

__all__ = [
    "dumps",
    "loads",
    "dump",
    "load",
    "read_stream",
    "write_stream",
    "aread_stream",
    "awrite_stream",
    "iter_stream",
    "aiter_stream",
    "DecodeOptions",
    "read_to_device",
    "get_packet_info",
    "is_aligned",
    "iter_dumps",
    "QuantizedTensor",
    "StringTensor",
    "RaggedArray",
    "TensoShm",
    "TensoCache",
    "view",
    "save_file",
    "load_file",
    "safe_open",
    "ArchiveWriter",
    "TensorView",
    "Packet",
    "TensoError",
    "TensoValueError",
    "TensoCorruptError",
    "TensoTruncatedError",
    "TensoChecksumError",
    "TensoUnsupportedError",
    "TensoLimitError",
    "TensoTypeError",
    "TensoEOFError",
    "TensoIOError",
    "TensoMemoryError",
    "TensoNotAvailableError",
    "TensoInternalError",
    "TensoNotFoundError",
    "TensoExistsError",
    "TensoFullError",
    "TensoTimeoutError",
    "TensoGPUError",
    "TensoShutdownError",
    "TensoConnectionError",
    "TensoAuthError",
    "TensoCancelledError",
]
