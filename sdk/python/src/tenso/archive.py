"""Files of many named tensors: tenso archives (``.tenso``), safetensors (``.safetensors``) and
bintensors (``.bt``) through one reader and one writer (libtenso's ``tenso/archive.h``).

The API follows safetensors: :func:`save_file`, :func:`load_file` and :func:`safe_open`, plus a
streaming :class:`ArchiveWriter`. Reading maps the file: opening reads only the header and
index, and ``get_tensor`` returns a read-only array that points into the mapping (zero copy;
the mapping lives as long as any such array). Writing goes to a temporary file that is renamed
over the target only when complete, so a failed or interrupted save leaves the old file.
"""

import operator
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

import numpy as np

from . import _tenso, core
from .config import _MAGIC, KIND_DENSE
from .core import _to_value

__all__ = ["save_file", "load_file", "safe_open", "ArchiveWriter"]

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

#: Format names accepted by ``format=``: tenso_format codes (tenso/archive.h).
_FORMATS = {None: 0, "auto": 0, "tenso": 1, "archive": 1, "safetensors": 2, "bintensors": 3, "packet": 4}

#: safetensors' dtype names, by numpy dtype name (C128 has no safetensors code: tenso's own).
_ST_DTYPES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16", "float16": "F16",
    "bfloat16": "BF16", "uint32": "U32", "int32": "I32", "float32": "F32", "uint64": "U64",
    "int64": "I64", "float64": "F64", "complex64": "C64", "complex128": "C128",
}  # fmt: skip


def _format_code(format: Optional[str]) -> int:
    try:
        return _FORMATS[format.lower() if isinstance(format, str) else format]
    except (KeyError, AttributeError):
        raise ValueError(f"unknown format {format!r}; expected one of 'tenso', 'safetensors', 'bintensors'") from None


def _is_path(obj: Any) -> bool:
    return isinstance(obj, (str, bytes, os.PathLike))


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


class ArchiveWriter:
    """
    Writes an archive one tensor at a time (memory stays bounded by the index).

    Used as a context manager it commits on a clean exit and discards the file on an exception;
    :meth:`finish` and :meth:`abort` do the same explicitly. Until the commit, ``path`` is
    untouched (the data goes to a temporary file next to it).

    Example::

        with tenso.ArchiveWriter("model.tenso", {"step": "1000"}) as w:
            for name, array in layers():
                w.add(name, array)

    Parameters
    ----------
    path : str, bytes or os.PathLike
    metadata : dict of str to str, optional
    format : {'tenso', 'safetensors', 'bintensors'}, optional
        None: from the extension (``.safetensors``, ``.bt``), else a tenso archive.
    alignment : int, default 64
        Tenso archives: file offset alignment of every packet and body, 64 or 4096 (O_DIRECT,
        GPUDirect Storage).
    check_integrity, compress : bool, default False
        Tenso archives: packet options (XXH3 footers, LZ4 bodies).
    hash : bool, default True
        Tenso archives: store an XXH3-64 of every tensor in the index (verified on first read).
    """

    def __init__(
        self,
        path: PathLike,
        metadata: Optional[Mapping[str, str]] = None,
        *,
        format: Optional[str] = None,
        alignment: int = 64,
        check_integrity: bool = False,
        compress: bool = False,
        hash: bool = True,
    ) -> None:
        self._w: Optional[_tenso.ArchiveWriter] = _tenso.ArchiveWriter.open(
            os.fsencode(path), _format_code(format), alignment, hash, check_integrity, compress
        )
        try:
            for key, value in (metadata or {}).items():
                self.set_metadata(key, value)
        except BaseException:
            self.abort()
            raise

    def _handle(self) -> _tenso.ArchiveWriter:
        if self._w is None:
            raise ValueError("the archive writer is finished or aborted")
        return self._w

    def add(self, name: str, tensor: Any) -> None:
        """
        Append a tensor (its bytes are written before this returns, with the GIL released).
        Tenso archives take anything :func:`tenso.dumps` accepts; safetensors and bintensors
        dense arrays only.

        Raises
        ------
        ValueError
            A name already added, or a dtype/kind the format cannot store.
        """
        self._handle().add(name, _to_value(tensor, False))

    def set_metadata(self, key: str, value: str) -> None:
        """Add a metadata pair (both str; a key set twice keeps the last value)."""
        self._handle().set_metadata(key, value)

    def finish(self) -> None:
        """Write the index, flush the file to disk and rename it over the target."""
        w, self._w = self._handle(), None
        w.finish()

    def abort(self) -> None:
        """Discard the temporary file; the target is untouched. No-op after finish()."""
        w, self._w = self._w, None
        if w is not None:
            w.abort()

    def __enter__(self) -> "ArchiveWriter":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], *exc: object) -> None:
        if exc_type is None and self._w is not None:
            self.finish()
        else:
            self.abort()


def save_file(
    tensors: Any,
    filename: Any,
    metadata: Optional[Mapping[str, str]] = None,
    *,
    format: Optional[str] = None,
    alignment: int = 64,
    check_integrity: bool = False,
    compress: bool = False,
    hash: bool = True,
    strict: bool = False,
) -> None:
    """
    Save named tensors to ``filename`` atomically, as ``safetensors.numpy.save_file`` does:
    a tenso archive, or safetensors / bintensors by extension or ``format``. See
    :class:`ArchiveWriter` for the options.

    The earlier form ``save_file(path, obj, strict=..., check_integrity=..., compress=...,
    alignment=...)`` (path first) still writes ``obj`` as one Tenso packet, atomically.
    """
    if _is_path(tensors):
        if metadata is not None or format is not None:
            raise TypeError("save_file(path, obj) writes one packet: it takes no metadata or format")
        core.save_file(tensors, filename, strict, check_integrity, compress, alignment)
        return
    if not isinstance(tensors, Mapping):
        raise TypeError(f"save_file expects a dict of name -> tensor, not {type(tensors).__name__}")
    with ArchiveWriter(
        filename,
        metadata,
        format=format,
        alignment=alignment,
        check_integrity=check_integrity,
        compress=compress,
        hash=hash,
    ) as w:
        for name, tensor in tensors.items():
            w.add(name, tensor)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def _open(filename: PathLike, format: Optional[str] = None, **flags: bool) -> Any:
    return _tenso.Archive.open(os.fsencode(filename), _format_code(format), **flags)


def _load_all(archive: Any, copy: bool) -> Dict[str, Any]:
    return {archive.entry(i)["name"]: archive.get(i, copy) for i in range(len(archive))}


class TensorSlice:
    """A tensor's shape and dtype, and basic-index slicing that reads only the bytes needed
    (what ``safe_open(...).get_slice(name)`` returns, as in safetensors)."""

    def __init__(self, owner: "safe_open", index: int, entry: Dict[str, Any]) -> None:
        self._owner = owner
        self._index = index
        self._entry = entry
        self._dtype: np.dtype = _tenso.numpy_dtype(entry["dtype_code"])

    def get_shape(self) -> List[int]:
        """The tensor's shape."""
        return list(self._entry["shape"])

    def get_dtype(self) -> str:
        """safetensors' dtype name: "F32", "BF16", "I64", ... ("C128" for complex128)."""
        return _ST_DTYPES[self._dtype.name]

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._entry["shape"])

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def __len__(self) -> int:
        shape = self._entry["shape"]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return int(shape[0])

    def __getitem__(self, index: Any) -> Any:
        """A writeable copy of ``tensor[index]`` for basic indices (ints, slices with any
        step, ``...``, None). Tensors stored raw are read with pread(2): only the byte span that
        holds the selected elements (per selected row when rows lie 64 KiB or more apart, as in
        ``x[:, :16]`` of a wide matrix), without mapping the rest. The tensor's stored XXH3
        covers the whole packet, so a slice is not checked against it: use ``get_tensor`` or
        ``verify()`` for that."""
        entry = self._entry
        _normalize_index(index, len(entry["shape"]))  # basic indexing only, on either path
        if not entry["data_offset"]:
            # Stored compressed: decode it (one view), then copy the selection.
            whole = self._owner._archive().get(self._index, False)
            return np.array(whole[index])
        return _read_selection(self._owner._archive(), self._index, tuple(entry["shape"]), self._dtype, index)

    def __repr__(self) -> str:
        return f"TensorSlice(name={self._entry['name']!r}, shape={self.get_shape()}, dtype={self.get_dtype()})"


def _normalize_index(index: Any, ndim: int) -> List[Any]:
    """Basic indices, one per dimension (plus None entries), Ellipsis expanded."""
    items = list(index) if isinstance(index, tuple) else [index]
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, slice)):
            try:
                operator.index(item)
            except TypeError:
                raise TypeError(
                    f"get_slice supports basic indexing only (ints, slices, ..., None), not {type(item).__name__}"
                ) from None
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    real = sum(1 for item in items if item is not None and item is not Ellipsis)
    if real > ndim:
        raise IndexError(f"too many indices: tensor is {ndim}-dimensional, but {real} were indexed")
    if Ellipsis not in items:
        items.append(Ellipsis)
    at = items.index(Ellipsis)
    return items[:at] + [slice(None)] * (ndim - real) + items[at + 1 :]


# Selected rows at least this far apart are read one by one: skipping a smaller gap costs less
# than another pread(2) call would save.
_SPLIT_GAP_BYTES = 64 << 10


def _read_selection(archive: Any, entry_index: int, shape: Tuple[int, ...], dtype: np.dtype, index: Any) -> np.ndarray:
    items = _normalize_index(index, len(shape))
    # C-order element strides of the stored tensor.
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    split = _split_rows(items, shape, strides, dtype.itemsize)
    if split is not None:
        # x[:, :16] of a wide matrix: each selected row is read on its own, not the whole span.
        pos, out_dim, rows = split
        parts = [
            _read_selection(archive, entry_index, shape, dtype, tuple(items[:pos] + [i] + items[pos + 1 :]))
            for i in rows
        ]
        return np.stack(parts, axis=out_dim)
    out_shape: List[int] = []
    out_strides: List[int] = []
    first = lo = hi = 0  # element offsets: the selection's first element, lowest, highest
    empty = False
    dim = 0
    for item in items:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        size, stride = shape[dim], strides[dim]
        dim += 1
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            n = len(range(start, stop, step))
            out_shape.append(n)
            out_strides.append(step * stride * dtype.itemsize)
            if n == 0:
                empty = True
                continue
            last = start + (n - 1) * step
            first += start * stride
            lo += min(start, last) * stride
            hi += max(start, last) * stride
        else:
            i = operator.index(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {dim - 1} with size {size}")
            i %= size
            first += i * stride
            lo += i * stride
            hi += i * stride
    if empty:
        return np.empty(out_shape, dtype)
    span = np.empty((hi - lo + 1) * dtype.itemsize, np.uint8)
    archive.read(entry_index, lo * dtype.itemsize, span)
    view = np.ndarray(out_shape, dtype, buffer=span, offset=(first - lo) * dtype.itemsize, strides=out_strides)
    # A contiguous selection is the whole span already (fresh memory): no second copy.
    return view if view.flags.c_contiguous else view.copy()


def _split_rows(
    items: List[Any], shape: Tuple[int, ...], strides: List[int], itemsize: int
) -> Optional[Tuple[int, int, range]]:
    """(item position, output axis, selected indices) of the outermost dimension with several
    selected rows when the bytes between one row's selection and the next are many; None to
    read the selection's whole span at once."""
    dim = out_dim = 0
    for pos, item in enumerate(items):
        if item is None:
            out_dim += 1
            continue
        if isinstance(item, slice):
            rows = range(*item.indices(shape[dim]))
            if len(rows) == 0:
                return None
            if len(rows) > 1:
                lo, hi = _inner_span(items[pos + 1 :], shape[dim + 1 :], strides[dim + 1 :])
                gap = (abs(rows.step) * strides[dim] - (hi - lo + 1)) * itemsize
                return (pos, out_dim, rows) if gap >= _SPLIT_GAP_BYTES else None
            out_dim += 1
        dim += 1
    return None


def _inner_span(items: List[Any], shape: Tuple[int, ...], strides: List[int]) -> Tuple[int, int]:
    """Lowest and highest element offset (within one row) that `items` select."""
    lo = hi = dim = 0
    for item in items:
        if item is None:
            continue
        if isinstance(item, slice):
            rows = range(*item.indices(shape[dim]))
            if len(rows):
                lo += min(rows[0], rows[-1]) * strides[dim]
                hi += max(rows[0], rows[-1]) * strides[dim]
        else:
            i = operator.index(item) % shape[dim] if shape[dim] else 0
            lo += i * strides[dim]
            hi += i * strides[dim]
        dim += 1
    return lo, hi


class safe_open:  # noqa: N801  (safetensors' name)
    """
    Open a tenso archive, safetensors or bintensors file for reading, as
    ``safetensors.safe_open``: only the header and index are read; tensors come from the
    read-only mapping.

    Example::

        with tenso.safe_open("model.safetensors", framework="np") as f:
            for name in f.keys():
                w = f.get_tensor(name)                  # zero copy
            rows = f.get_slice("embed")[0:16]           # reads 16 rows

    Parameters
    ----------
    filename : str, bytes or os.PathLike
    framework : {"np", "numpy", "pt", "torch"}, default "np"
        "np": numpy arrays. "pt": torch tensors (torch must be installed; they are copies, as
        torch refuses read-only memory).
    device : str, default "cpu"
        "cpu" (numpy); for "pt", any torch device.
    format : str, optional, keyword-only
        Force a format instead of detecting it from the first bytes.
    verify : {"lazy", "all", "never"}, keyword-only
        Stored XXH3 hashes (tenso archives): check each tensor on its first read (default),
        all of them now, or never.
    """

    def __init__(
        self,
        filename: PathLike,
        framework: str = "np",
        device: str = "cpu",
        *,
        format: Optional[str] = None,
        verify: str = "lazy",
    ) -> None:
        fw = str(framework).lower()
        if fw in ("np", "numpy"):
            if str(device) != "cpu":
                raise ValueError(f"framework 'np' supports device 'cpu' only, not {device!r}")
            self._torch = None
        elif fw in ("pt", "torch", "pytorch"):
            import torch  # optional: only this framework needs it

            self._torch = torch
        else:
            raise ValueError(f"unsupported framework {framework!r}: use 'np' (or 'pt' with torch installed)")
        if verify not in ("lazy", "all", "never"):
            raise ValueError(f"verify must be 'lazy', 'all' or 'never', not {verify!r}")
        self._device = device
        self._a: Optional[_tenso.Archive] = _open(
            filename, format, verify_all=verify == "all", no_verify=verify == "never"
        )
        self._entries: Optional[List[Dict[str, Any]]] = None

    def _archive(self) -> _tenso.Archive:
        if self._a is None:
            raise ValueError("the file is closed")
        return self._a

    def _all_entries(self) -> List[Dict[str, Any]]:
        if self._entries is None:
            a = self._archive()
            self._entries = [a.entry(i) for i in range(len(a))]
        return self._entries

    def _convert(self, obj: Any) -> Any:
        if self._torch is None:
            return obj
        t = self._torch.from_numpy(np.array(obj))
        return t if self._device == "cpu" else t.to(self._device)

    @property
    def format(self) -> str:
        """The format opened: "tenso", "safetensors", "bintensors" or "packet"."""
        return _tenso.format_name(self._archive().format)

    @property
    def alignment(self) -> int:
        """A tenso archive's alignment (64, or 4096 for O_DIRECT / GPUDirect Storage): every
        tensor's packet starts at a multiple of it in the file. 0 for the other formats."""
        return int(self._archive().alignment)

    def keys(self) -> List[str]:
        """Tensor names, sorted (as safetensors)."""
        return sorted(self._archive().names())

    def offset_keys(self) -> List[str]:
        """Tensor names in file order."""
        return self._archive().names()

    def metadata(self) -> Optional[Dict[str, str]]:
        """The string metadata; None when the file has none (as safetensors)."""
        return self._archive().metadata() or None

    def get_tensor(self, name: str) -> Any:
        """
        The tensor ``name``: a read-only numpy view into the mapping (its base keeps the mapping
        alive after close). Tenso archives may also hold quantized, sparse, string tensors or
        bundles, returned as :func:`tenso.loads` returns them.

        Raises
        ------
        KeyError
            No tensor of that name (TensoNotFoundError).
        ValueError
            The tensor's stored hash does not match (TensoChecksumError) or it does not decode.
        """
        a = self._archive()
        return self._convert(a.get(a.find(name), False))

    def get_slice(self, name: str) -> TensorSlice:
        """A :class:`TensorSlice` for the dense tensor ``name``: shape, dtype and slicing."""
        a = self._archive()
        i = a.find(name)
        entry = self._all_entries()[i]
        if entry["kind"] != KIND_DENSE:
            raise ValueError(f"get_slice needs a dense tensor; {name!r} is of kind {entry['kind']}")
        return TensorSlice(self, i, entry)

    def verify(self) -> None:
        """Check every stored hash (and, for tenso archives, that every packet decodes), with
        the GIL released. Raises TensoChecksumError (a ValueError) naming the first bad tensor."""
        self._archive().verify()

    def close(self) -> None:
        """Close the file; arrays already returned keep the mapping alive."""
        a, self._a = self._a, None
        if a is not None:
            a.close()

    def __len__(self) -> int:
        return len(self._archive())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self._archive().find(name)
            return True
        except KeyError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_file(filename: PathLike, mmap: bool = True, copy: bool = False) -> Any:
    """
    Load a file: for a tenso archive, safetensors or bintensors file, a dict of every tensor in
    file order (as ``safetensors.numpy.load_file``; read-only views into the mapping, or
    writeable copies with ``copy=True``). For a file holding one Tenso packet (as
    :func:`save_file` writes with a path first, or :func:`tenso.dump`), that packet's value:
    mapped (``mmap=True``) or read.
    """
    path = os.fsencode(filename)
    try:
        archive = _tenso.Archive.open(path)
    except ValueError:
        if _starts_like_packet(path):
            return core.load_file(path, mmap, copy)  # a damaged packet: its own error
        raise
    try:
        if _tenso.format_name(archive.format) == "packet":
            return core.load_file(path, mmap, copy)
        return _load_all(archive, copy)
    finally:
        archive.close()


def _starts_like_packet(path: bytes) -> bool:
    """True for an empty file or one that starts with the packet magic."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head in (b"", _MAGIC)
