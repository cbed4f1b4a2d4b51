"""Quantized tensors: 8-bit and 4-bit affine quantization, per tensor, per channel or per group.

:class:`QuantizedTensor` has upstream ``tenso.quantize.QuantizedTensor``'s constructor,
attributes, properties and methods. ``quantize`` and ``dequantize`` run in libtenso
(``tenso_quantize`` / ``tenso_dequantize``), bit-exact with upstream's numpy code.
"""

import math
from typing import Tuple

import numpy as np

from . import _tenso
from .config import (
    _QDTYPE_FROM_NAME,
    _QDTYPE_NAMES,
    QDTYPE_QINT4,
    QDTYPE_QINT8,
    QDTYPE_QUINT4,
    QUANT_PER_CHANNEL,
    QUANT_PER_GROUP,
    QUANT_PER_TENSOR,
)
from .errors import TensoValueError

_SCHEMES = {
    "per_tensor": QUANT_PER_TENSOR,
    "per_channel": QUANT_PER_CHANNEL,
    "per_group": QUANT_PER_GROUP,
}


class QuantizedTensor:
    """A quantized tensor with scale/zero_point metadata.

    Attributes (as upstream): ``data`` (packed uint8 codes: one byte per element, or two 4-bit
    codes per byte, even index in the low nibble), ``scales`` and ``zero_points`` (float32, one
    per tensor / channel / group), ``shape``, ``dtype_code`` (16 qint8, 17 quint8, 18 qint4,
    19 quint4), ``quant_scheme`` (0 per tensor, 1 per channel, 2 per group), ``group_size`` and
    ``axis`` (the channel axis).

    A QuantizedTensor decoded by :func:`tenso.loads` holds read-only zero-copy views of the
    packet (upstream holds copies); pass ``copy=True`` to ``loads`` for writeable arrays.
    """

    def __init__(
        self,
        data: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray,
        shape: Tuple[int, ...],
        dtype_code: int,
        quant_scheme: int = QUANT_PER_TENSOR,
        group_size: int = 0,
        axis: int = 0,
    ):
        self.data = data
        self.scales = np.asarray(scales, dtype=np.float32).ravel()
        self.zero_points = np.asarray(zero_points, dtype=np.float32).ravel()
        self.shape = tuple(shape)
        self.dtype_code = dtype_code
        self.quant_scheme = quant_scheme
        self.group_size = group_size
        self.axis = int(axis)

    @property
    def dtype_name(self) -> str:
        """ "qint8", "quint8", "qint4" or "quint4"."""
        return _QDTYPE_NAMES[self.dtype_code]

    @property
    def is_4bit(self) -> bool:
        return self.dtype_code in (QDTYPE_QINT4, QDTYPE_QUINT4)

    @property
    def is_signed(self) -> bool:
        return self.dtype_code in (QDTYPE_QINT8, QDTYPE_QINT4)

    @property
    def nbytes(self) -> int:
        """Bytes of packed data: the element count, or half of it rounded up for 4-bit."""
        n = int(np.prod(self.shape))
        if self.is_4bit:
            return math.ceil(n / 2)
        return n

    @classmethod
    def quantize(
        cls,
        tensor: np.ndarray,
        dtype: str,
        scheme: str = "per_tensor",
        group_size: int = 0,
        axis: int = 0,
    ) -> "QuantizedTensor":
        """Quantize a float tensor (min-max affine, round half to even).

        Parameters
        ----------
        tensor : np.ndarray
            Input tensor (converted to float32 first, as upstream does).
        dtype : str
            Target quantized dtype name: "qint8", "quint8", "qint4", "quint4".
        scheme : str
            Quantization scheme: "per_tensor", "per_channel", "per_group".
        group_size : int
            Elements per group for the per_group scheme (> 0).
        axis : int
            Channel axis for the per_channel scheme (negative counts from the end).

        Raises
        ------
        KeyError
            Unknown ``dtype`` or ``scheme`` name (as upstream).
        IndexError
            ``axis`` out of range for per_channel (as upstream).
        ValueError
            ``group_size <= 0`` for per_group, or an empty tensor.
        """
        dtype_code = _QDTYPE_FROM_NAME[dtype]
        quant_scheme = _SCHEMES[scheme]
        tensor = np.asarray(tensor)
        shape = tensor.shape
        if quant_scheme == QUANT_PER_CHANNEL:
            shape[axis]  # IndexError for an axis out of range, as upstream
        elif quant_scheme == QUANT_PER_GROUP and group_size <= 0:
            raise TensoValueError("group_size must be > 0 for per_group scheme")
        if tensor.size == 0:
            # Upstream fails in numpy's min() with this message.
            raise TensoValueError("zero-size array to reduction operation minimum which has no identity")
        float_data = np.ascontiguousarray(tensor, dtype=np.float32)
        value = _tenso.Value.quantize(
            float_data,
            dtype_code,
            quant_scheme,
            axis if quant_scheme == QUANT_PER_CHANNEL else 0,
            group_size if quant_scheme == QUANT_PER_GROUP else 0,
        )
        data, scales, zero_points, _shape, _dt, _scheme, _axis, _gs = value.quantized_parts()
        return cls(
            data=data,
            scales=scales,
            zero_points=zero_points,
            shape=shape,
            dtype_code=dtype_code,
            quant_scheme=quant_scheme,
            group_size=group_size,
            axis=axis if quant_scheme == QUANT_PER_CHANNEL else 0,
        )

    def dequantize(self) -> np.ndarray:
        """Reconstruct a float32 approximation of the original tensor (``shape``-shaped)."""
        return _tenso.dequantize(
            np.ascontiguousarray(self.data),
            self.scales,
            self.zero_points,
            self.shape,
            self.dtype_code,
            self.quant_scheme,
            self.axis,
            self.group_size,
        )

    def _to_value(self) -> _tenso.Value:
        """The tenso_value that encodes this tensor (borrowing its arrays)."""
        return _tenso.Value.quantized(
            np.ascontiguousarray(self.data),
            self.scales,
            self.zero_points,
            self.shape,
            self.dtype_code,
            self.quant_scheme,
            # Written as they are, like upstream (whose quantize() keeps group_size even for
            # other schemes); libtenso normalises a negative per-channel axis, where upstream
            # writes the byte 255 and cannot dequantize its own packet.
            self.axis,
            self.group_size,
        )

    @classmethod
    def _from_wire(
        cls,
        data: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray,
        shape: Tuple[int, ...],
        dtype_code: int,
        quant_scheme: int,
        group_size: int,
        axis: int,
    ) -> "QuantizedTensor":
        """Used by the decoder: wraps the parts of a decoded quantized packet."""
        obj = object.__new__(cls)
        obj.data = data
        obj.scales = scales
        obj.zero_points = zero_points
        obj.shape = shape
        obj.dtype_code = dtype_code
        obj.quant_scheme = quant_scheme
        obj.group_size = group_size
        obj.axis = axis
        return obj

    def __repr__(self) -> str:
        return (
            f"QuantizedTensor(dtype={self.dtype_name}, shape={self.shape}, "
            f"scheme={self.quant_scheme}, nbytes={self.nbytes})"
        )
