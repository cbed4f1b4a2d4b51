"""Packet inspection helpers, with upstream ``tenso.utils``'s names and results."""

from typing import Any, Dict

import numpy as np

from . import _tenso
from .config import _QDTYPE_NAMES, _REV_DTYPE_MAP, FLAG_ALIGNED, FLAG_BUNDLE, FLAG_INTEGRITY
from .errors import TensoError, _in_upstream_words


def is_aligned(data: Any, alignment: int = 64) -> bool:
    """True if the first byte of ``data`` (any buffer) sits at a multiple of ``alignment``."""
    mv = memoryview(data)
    if mv.nbytes == 0:
        return True
    # np.frombuffer is zero-copy: .ctypes.data is the caller's own address.
    addr = np.frombuffer(mv, dtype=np.uint8).ctypes.data
    return (addr % alignment) == 0


def get_packet_info(data: Any) -> Dict[str, Any]:
    """
    Read a packet's header without decoding its body (``tenso_inspect``).

    Returns the same dict as upstream 0.24: ``version``, ``flags``, ``dtype_code``, ``ndim``
    (the entry count for bundles), ``aligned``, ``integrity_protected``, ``entry_count``
    (bundles only), ``shape``, ``total_elements``, ``dtype`` (a numpy dtype, a quantized dtype
    name, or None), ``quantized`` (quantized packets only) and ``data_size_bytes``.

    Raises
    ------
    ValueError
        The header is truncated (TensoTruncatedError) or invalid.
    """
    try:
        return _packet_info(_tenso.inspect(data))
    except TensoError as e:
        raise _in_upstream_words(e) from None


#: The compiled core answers get_packet_info (see tenso.core.HAS_RUST): always True here.
HAS_RUST: bool = True


def get_packet_info_rs(data: Any) -> Dict[str, Any]:
    """
    Upstream's compiled header reader, by its name: the header fields without the numpy dtype.

    Returns ``version``, ``flags``, ``dtype_code``, ``ndim``, ``aligned``,
    ``integrity_protected``, ``total_elements`` and ``shape``; bundles have ``entry_count`` and
    ``ndim`` is the entry count, as upstream's. :func:`get_packet_info` adds ``dtype`` and
    ``data_size_bytes``.

    Raises
    ------
    ValueError
        As :func:`get_packet_info`.
    """
    info = get_packet_info(data)
    keys = ["version", "flags", "dtype_code", "ndim", "aligned", "integrity_protected"]
    keys += ["entry_count", "shape", "total_elements"] if "entry_count" in info else ["total_elements", "shape"]
    return {k: info[k] for k in keys}


def _packet_info(raw: Dict[str, Any]) -> Dict[str, Any]:
    """Upstream's get_packet_info dict from libtenso's header fields (``_tenso.inspect``, or
    a cache entry's stored header)."""
    flags = raw["flags"]
    info: Dict[str, Any] = {
        "version": raw["version"],
        "flags": flags,
        "dtype_code": raw["dtype_code"],
        "ndim": raw["ndim"],
        "aligned": bool(flags & FLAG_ALIGNED),
        "integrity_protected": bool(flags & FLAG_INTEGRITY),
    }
    if flags & FLAG_BUNDLE:
        # Upstream reports the header's count byte as ndim too.
        info["ndim"] = raw["entry_count"]
        info["entry_count"] = raw["entry_count"]
        info["shape"] = ()
        info["total_elements"] = 0
        info["dtype"] = None
        info["data_size_bytes"] = 0
        return info
    shape = tuple(raw["shape"])
    total = 1
    for d in shape:
        total *= d
    code = raw["dtype_code"]
    info["total_elements"] = total
    info["shape"] = shape
    if code in _QDTYPE_NAMES:
        info["dtype"] = _QDTYPE_NAMES[code]
        info["quantized"] = True
        info["data_size_bytes"] = (total + 1) // 2 if code in (18, 19) else total
        return info
    dtype = _REV_DTYPE_MAP.get(code)
    info["dtype"] = dtype
    info["data_size_bytes"] = total * dtype.itemsize if dtype is not None else 0
    return info
