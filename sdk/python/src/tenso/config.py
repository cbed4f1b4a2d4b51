"""Protocol constants, with upstream ``tenso.config``'s names and values (wire facts: they can
never differ from libtenso's, and tests check that they do not). The dtype tables are libtenso's
own (``tenso_dtype_name`` / ``tenso_dtype_itemsize``), asked at import, not restated here."""

from typing import Dict

import numpy as np

from . import _tenso
from .errors import TensoUnsupportedError

_MAGIC = b"TNSO"  #: Magic number at the start of every packet
_VERSION = 4  #: Protocol version written
_HEADER_BASE_V3 = 8  #: v3 header: magic(4) + ver(1) + flags_u8(1) + dtype(1) + ndim(1)
_HEADER_BASE_V4 = 10  #: v4 header: magic(4) + ver(1) + flags_u16(2) + dtype(1) + ndim(1) + reserved(1)
_ALIGNMENT = 64  #: Default body alignment

# --- Security limits ---
MAX_NDIM = 32  #: Maximum number of dimensions
MAX_ELEMENTS = 10**9  #: Maximum elements per tensor
MAX_DEPTH = 64  #: Maximum bundle nesting depth (libtenso)
MAX_BUNDLE_ENTRIES = 255  #: The entry count is one byte on the wire

# --- Protocol flags ---
FLAG_ALIGNED = 1
FLAG_INTEGRITY = 2
FLAG_COMPRESSION = 4
FLAG_SPARSE = 8
FLAG_BUNDLE = 16
FLAG_SPARSE_CSR = 32
FLAG_SPARSE_CSC = 64
FLAG_CUST_ALIGN = 128
FLAG_STRING = 256
FLAG_RAGGED = 512
FLAG_GPU_IPC_REF = 1024

# --- String / ragged dtype codes ---
DTYPE_STRING = 20
DTYPE_BYTES = 21

# --- Quantized dtype codes ---
QDTYPE_QINT8 = 16
QDTYPE_QUINT8 = 17
QDTYPE_QINT4 = 18
QDTYPE_QUINT4 = 19

_QDTYPE_NAMES = {code: _tenso.dtype_name(code) for code in (QDTYPE_QINT8, QDTYPE_QUINT8, QDTYPE_QINT4, QDTYPE_QUINT4)}
_QDTYPE_FROM_NAME = {v: k for k, v in _QDTYPE_NAMES.items()}

# --- Quantization schemes ---
QUANT_PER_TENSOR = 0
QUANT_PER_CHANNEL = 1
QUANT_PER_GROUP = 2

# --- Packet kinds (libtenso's tenso_kind) ---
KIND_DENSE = 1
KIND_BUNDLE = 2
KIND_SPARSE_COO = 3
KIND_SPARSE_CSR = 4
KIND_SPARSE_CSC = 5
KIND_QUANTIZED = 6
KIND_STRING = 7
KIND_RAGGED = 8
KIND_GPU_IPC_REF = 9


# --- Dtype mapping ---
def _dense_dtypes() -> Dict[np.dtype, int]:
    """numpy dtype -> wire code for every dense dtype libtenso knows (a code is one byte on the
    wire). bfloat16 is there when ml_dtypes is installed."""
    out: Dict[np.dtype, int] = {}
    for code in range(1, 256):
        if _tenso.dtype_itemsize(code) == 0:
            continue  # not dense: quantized, string, unknown
        try:
            out[_tenso.numpy_dtype(code)] = code
        except TensoUnsupportedError:  # pragma: no cover - depends on the environment (ml_dtypes)
            pass
    return out


#: ml_dtypes' bfloat16 scalar type (wire code 15) when ml_dtypes is installed, as upstream's
#: config exposes it; absent otherwise (bfloat16 arrays then cannot be made or decoded).
try:
    from ml_dtypes import bfloat16  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    pass

_DTYPE_MAP: Dict[np.dtype, int] = _dense_dtypes()
_REV_DTYPE_MAP: Dict[int, np.dtype] = {v: k for k, v in _DTYPE_MAP.items()}
