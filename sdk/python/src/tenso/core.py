"""Core serialization: numpy arrays, dicts (bundles), scipy.sparse matrices, quantized tensors,
string tensors and ragged arrays to Tenso packets and back.

The functions have upstream ``tenso.core``'s names, arguments and return types (0.24). The
wire work is libtenso's (through the ``tenso._tenso`` extension):

* ``loads`` is zero-copy: arrays are read-only views into the given buffer, whose exported
  buffer stays held (and the object alive) for as long as any of them exists. ``copy=True``
  gives writeable copies.
* Writing to a socket, a pipe or a file with a file descriptor goes through ``tenso_write_fd`` /
  ``tenso_value_write_fd``: vectored I/O straight from the arrays' memory, never copied into a
  packet buffer. Large encodes, decodes, hashes and all I/O run with the GIL released.
* Streams are read through libtenso's decoder (``tenso_decoder``, ``_tenso.Decoder``): it frames,
  checks limits and decodes; Python only moves bytes into the memory it names (the packet's own
  buffer), so any readable object works and ``read_stream`` consumes nothing past the packet.
"""

import io
import mmap
import select
import socket
import sys
from typing import Any, AsyncIterator, BinaryIO, Generator, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _tenso
from .config import (
    KIND_SPARSE_COO,
    KIND_SPARSE_CSC,
    KIND_SPARSE_CSR,
    MAX_BUNDLE_ENTRIES,
    MAX_DEPTH,
)
from .errors import TensoEOFError, TensoError, TensoLimitError, TensoTypeError, TensoValueError, _in_upstream_words
from .options import DecodeOptions, _DecodeFields, _merge
from .quantize import QuantizedTensor
from .ragged import RaggedArray, StringTensor

BytesLike = Union[bytes, bytearray, memoryview, np.ndarray, mmap.mmap]

#: LZ4 compression (``compress=True``) is available: libtenso always links liblz4, so this is
#: always True (upstream: whether the ``lz4`` Python package imports).
HAS_LZ4: bool = True

#: The compiled core is present. Upstream's is a Rust crate and the flag is always True there;
#: here the core is libtenso (C++, through the ``tenso._tenso`` extension), also always present
#: (there is no pure-Python codec), so code that branches on it takes its compiled-core path.
HAS_RUST: bool = True

#: The host is little-endian. Packets are little-endian; the extension refuses to build on a
#: big-endian host, so this is True wherever this package imports.
IS_LITTLE_ENDIAN: bool = sys.byteorder == "little"

_SPARSE_KINDS = {"coo": KIND_SPARSE_COO, "csr": KIND_SPARSE_CSR, "csc": KIND_SPARSE_CSC}

# iter_stream over objects without a descriptor: what one read asks for while the decoder
# needs less (it owns the stream, so it may read ahead; the rest is fed to the next packet).
_CHUNK = 1 << 16


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def _check_alignment(alignment: int) -> None:
    if not (alignment > 0 and (alignment & (alignment - 1)) == 0):
        raise TensoValueError("Alignment must be a power of two")


def _check_threads(threads: int) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads < 1 << 32:
        raise TensoValueError(f"threads must be an integer from 0 to 2**32-1, got {threads!r}")


def _sparse_value(obj: Any) -> _tenso.Value:
    fmt = getattr(obj, "format", None)
    kind = _SPARSE_KINDS.get(fmt) if isinstance(fmt, str) else None
    if kind is None:
        raise TensoValueError("Unknown sparse format")
    if kind == KIND_SPARSE_COO:
        parts = (obj.data, obj.row, obj.col)
    else:
        parts = (obj.data, obj.indices, obj.indptr)
    return _tenso.Value.sparse(kind, tuple(obj.shape), *parts)


def _to_value(obj: Any, strict: bool, depth: int = 0) -> _tenso.Value:
    """The tenso_value for anything dumps() accepts; it borrows the arrays' memory."""
    if isinstance(obj, np.ndarray):
        return _tenso.Value.tensor(obj, strict)
    if isinstance(obj, dict):
        if depth >= MAX_DEPTH:
            raise TensoLimitError(f"Bundles nest deeper than {MAX_DEPTH} levels")
        if len(obj) > MAX_BUNDLE_ENTRIES:
            raise TensoValueError(
                f"Bundle has {len(obj)} entries; the wire format encodes the entry count in a single "
                "byte, so at most 255 entries are supported"
            )
        bundle = _tenso.Value.bundle()
        for key, value in obj.items():
            bundle.insert(key, _to_value(value, strict, depth + 1))
        return bundle
    if isinstance(obj, (QuantizedTensor, StringTensor, RaggedArray)):
        return obj._to_value()
    if hasattr(obj, "format") and hasattr(obj, "tocoo"):  # scipy.sparse matrix or array
        return _sparse_value(obj)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (np.generic, bytes, bytearray, memoryview)):
        # Any CPU DLPack producer (torch, jax, cupy-on-host, our own TensorView): zero-copy.
        return _tenso.Value.tensor(np.from_dlpack(obj), strict)
    raise TensoTypeError(f"Cannot serialize object of type {type(obj).__name__!r}")


def dumps(
    tensor: Any,
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
    *,
    threads: int = 0,
) -> memoryview:
    """
    Serialize an object (array, sparse matrix, dict, QuantizedTensor, ...) to a Tenso packet.

    Parameters
    ----------
    tensor : Any
        A numpy array, a dict of serializable values (a bundle, nesting allowed), a
        scipy.sparse COO/CSR/CSC matrix or array, a QuantizedTensor, a StringTensor or a
        RaggedArray (the last two also inside dicts, which upstream cannot do).
    strict : bool, default False
        If True, raise ValueError for non-C-contiguous arrays instead of copying them.
    check_integrity : bool, default False
        Append an XXH3-64 footer to every body.
    compress : bool, default False
        LZ4-frame-compress dense bodies (sparse, quantized and string bodies are never
        compressed, as upstream).
    alignment : int, default 64
        Body alignment, a power of two (at most 2**20).
    threads : int, default 0
        With compress: LZ4 blocks (4 MiB, independent) are compressed on this many threads;
        0: every core, 1: the calling thread only. The packet's bytes do not depend on it.
        Not in upstream 0.24 (since 1.4).

    Returns
    -------
    memoryview
        A read-only view of exactly the packet. Its bytes object starts the packet at a 64-byte
        (or ``alignment``-byte, up to 4096) boundary, so ``loads`` of it gives aligned arrays.
        From 32 MiB on, the view is of a ``tenso._tenso.PacketBuffer`` instead of a bytes
        object: memory whose pages are kept for the next large packet when the last view of
        this one goes (no page faults for a packet of the same size; since 1.4).

    Raises
    ------
    ValueError
        Bad alignment, unsupported dtype or byte order, non-contiguous input with strict,
        limits (dims, elements, 255 bundle entries).
    TypeError
        An object tenso cannot serialize.
    """
    _check_threads(threads)
    if isinstance(tensor, np.ndarray):
        return _tenso.dumps_array(tensor, strict, check_integrity, compress, alignment, True, threads)
    _check_alignment(alignment)
    return _to_value(tensor, strict).dumps(check_integrity, compress, alignment, True, threads)


def _dumps_bytes(
    tensor: Any, strict: bool, check_integrity: bool, compress: bool = False, alignment: int = 64
) -> bytes:
    """As dumps(), as a bytes object holding exactly the packet."""
    if isinstance(tensor, np.ndarray):
        return _tenso.dumps_array(tensor, strict, check_integrity, compress, alignment, False)
    _check_alignment(alignment)
    return _to_value(tensor, strict).dumps(check_integrity, compress, alignment, False)


def _pieces(tensor: Any, strict: bool, check_integrity: bool, compress: bool = False) -> List[Union[bytes, memoryview]]:
    """The packet for ``tensor`` as pieces that concatenate to ``dumps(tensor)``: small bytes
    objects for headers, padding, footers (and compressed bodies), read-only memoryviews of the
    arrays' own memory for their bodies (libtenso's ``tenso_value_write_cb``; nothing is
    copied). The arrays must not change until the pieces are sent."""
    value = _tenso.Value.tensor(tensor, strict) if isinstance(tensor, np.ndarray) else _to_value(tensor, strict)
    return value.pieces(check_integrity, compress, 64)


def _slices(pieces: List[Union[bytes, memoryview]], size: int) -> Iterator[Union[bytes, memoryview]]:
    """The pieces with the large ones cut into ``size``-byte views: what an HTTP sender queues at
    a time (a slow peer makes it buffer at most one slice, never the body)."""
    for piece in pieces:
        if len(piece) <= size:
            yield piece
            continue
        view = memoryview(piece)
        for start in range(0, len(view), size):
            yield view[start : start + size]


async def _aslices(pieces: List[Union[bytes, memoryview]], size: int) -> AsyncIterator[Union[bytes, memoryview]]:
    """:func:`_slices` as an async iterator (what httpx.AsyncClient and Starlette stream from
    the event loop, without a thread hop per slice)."""
    for piece in _slices(pieces, size):
        yield piece


def loads(
    data: BytesLike,
    copy: bool = False,
    align: bool = True,
    *,
    max_decoded_bytes: int = 0,
    max_entries: int = 0,
    options: Optional[DecodeOptions] = None,
    threads: int = 0,
) -> Any:
    """
    Deserialize a Tenso packet into its Python object.

    Parameters
    ----------
    data : bytes, bytearray, memoryview, mmap.mmap, numpy array or any C-contiguous buffer
        The packet (trailing bytes after it are ignored).
    copy : bool, default False
        False: zero-copy read-only views into ``data`` (their ``.base`` is a
        :class:`tenso._tenso.Packet` that holds ``data``'s buffer). True: writeable copies,
        aligned to the packet's alignment (at least 64).
    align : bool, default True
        With copy=False, an array whose address in ``data`` does not meet the alignment its
        packet declares (64 by default; 128, 4096, ... for custom alignments; each bundle
        member its own) is returned as an aligned read-only copy, as upstream does. Aligned
        buffers, the normal case (``dumps`` output, files, streams, shared memory), are never
        copied. ``align=False``: always the zero-copy view, at whatever address the buffer
        puts it (numpy handles misaligned arrays, more slowly). Not in upstream.
    max_decoded_bytes : int, default 0
        At most this many bytes allocated by the decode (the decoded tree, decompressed
        bodies; ``tenso_decode_options`` in tenso.h); 0: no limit.
    max_entries : int, default 0
        At most this many packets in the tree (the top one, bundle values, sparse
        components); 0: no limit.
    options : DecodeOptions, optional
        All the decode limits (:class:`tenso.DecodeOptions`); ``max_decoded_bytes``,
        ``max_entries`` and ``threads`` given as keywords override its fields. None: upstream's
        limits.
    threads : int, default 0
        LZ4 bodies are decompressed on this many threads; 0: every core (or
        ``options.threads``), 1: the calling thread only. Since 1.4.

    Returns
    -------
    numpy.ndarray, dict, scipy.sparse matrix, QuantizedTensor or StringTensor
        Sparse packets come back as ``coo_matrix`` / ``csr_matrix`` / ``csc_matrix`` (as upstream);
        ragged arrays as their dict (use ``RaggedArray.loads``).

    Raises
    ------
    ValueError
        Corrupt, truncated (also an EOFError), checksum-failing or unsupported packets; GPU IPC
        references (decoded on the device, as upstream).
    TypeError
        ``data`` does not support the buffer protocol.
    """
    _check_threads(threads)
    try:
        return _tenso.loads(data, copy, align, _merge(options, max_decoded_bytes, max_entries, threads))
    except TensoError as e:
        raise _in_upstream_words(e) from None


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


def _wait_readable(source: Any) -> None:
    fileno = getattr(source, "fileno", None)
    if fileno is not None:
        try:
            select.select([fileno()], [], [])
            return
        except (OSError, ValueError, io.UnsupportedOperation):
            pass


def _read_some(source: Any, view: memoryview) -> int:
    """Reads at most len(view) bytes into view; 0 at end of stream. Tries readinto, recv_into,
    recv, read, in upstream's order."""
    readinto = getattr(source, "readinto", None)
    if readinto is not None:
        while True:
            n: Optional[int] = readinto(view)
            if n is not None:
                return n
            _wait_readable(source)  # a non-blocking raw stream with nothing to read yet
    recv_into = getattr(source, "recv_into", None)
    if recv_into is not None:
        while True:
            try:
                got: int = recv_into(view)
                return got
            except BlockingIOError:
                _wait_readable(source)
    recv = getattr(source, "recv", None)
    read = recv if recv is not None else getattr(source, "read", None)
    if read is None:
        raise AttributeError(f"Source {type(source)} has no readinto, recv_into, recv or read method")
    chunk = read(len(view))
    if not chunk:
        return 0
    n = len(chunk)
    view[:n] = chunk
    return n


def _ended_inside_packet(decoder: Any, got: int) -> None:
    """The stream ended after `got` bytes of a packet: raises the decoder's TensoTruncatedError
    (an EOFError), which libtenso words as upstream does ("Stream ended during header read.
    Expected 8 bytes, got 3"). `got` is kept for callers that count what they fed."""
    del got
    decoder.finish()


def _read_with(source: Any, decoder: Any) -> Optional[Any]:
    """One packet from any readable object: each read goes straight into the memory the decoder
    names (exactly what it still needs, so nothing past the packet is read)."""
    got = 0
    while True:
        view = decoder.buffer()
        n = _read_some(source, view)
        if not n:
            if got == 0:
                return None
            decoder.finish()  # TensoTruncatedError (an EOFError), in upstream's words
        got += n
        obj = decoder.commit(n)
        if obj is not None:
            return obj


def _read_fd_of(source: Any) -> Optional[int]:
    """A file descriptor libtenso may read from directly: one with no Python-level buffer in
    front of it (ints, sockets, raw files)."""
    if isinstance(source, int) and not isinstance(source, bool):
        return source
    if isinstance(source, socket.socket):
        return source.fileno() if source.fileno() >= 0 else None
    if type(source) is io.FileIO and not source.closed and source.readable():
        return source.fileno()
    return None


def _stream_options(source: Any, options: Optional[DecodeOptions]) -> Optional[_DecodeFields]:
    """The decoder's options for reading `source`: a socket's own timeout (Python keeps its fd
    non-blocking and waits itself) becomes the decoder's deadline, the shorter one winning."""
    timeout = source.gettimeout() if isinstance(source, socket.socket) else None
    if timeout:  # None: blocking; 0.0: non-blocking, read as blocking (we wait for readiness)
        if options is None:
            options = DecodeOptions(timeout=timeout)
        elif options.timeout is None or timeout < options.timeout:
            options = options.replace(timeout=timeout)
    return _merge(options)


def _write_fd_of(dest: Any) -> Optional[int]:
    """A file descriptor write_stream/dump may write to directly (tenso_write_fd, vectored):
    blocking sockets, raw files, and buffered files once flushed."""
    if isinstance(dest, int) and not isinstance(dest, bool):
        return dest
    if isinstance(dest, socket.socket):
        return dest.fileno() if dest.gettimeout() is None and dest.fileno() >= 0 else None
    if type(dest) is io.FileIO and not dest.closed and dest.writable():
        return dest.fileno()
    if type(dest) is io.BufferedWriter and type(dest.raw) is io.FileIO and not dest.closed:
        dest.flush()  # what is buffered goes first
        return dest.raw.fileno()
    return None


def _resync(dest: Any) -> None:
    """After writing to a buffered file's descriptor behind its back, let it learn the new
    position (BufferedWriter caches it; seek(0, SEEK_CUR) asks the OS again)."""
    if type(dest) is io.BufferedWriter and dest.seekable():
        dest.seek(0, io.SEEK_CUR)


def _write_all(write_method: Any, data: memoryview) -> None:
    view = memoryview(data)
    while len(view):
        n = write_method(view)
        if n is None or n >= len(view):  # sendall/buffered writes return None or everything
            return
        view = view[n:]


def read_stream(source: Any, *, options: Optional[DecodeOptions] = None) -> Optional[Any]:
    """Read and deserialize one Tenso packet from a synchronous stream.

    ``source`` may be a socket, a file or pipe object, a file descriptor (int), or any object
    with ``readinto``, ``recv_into``, ``recv`` or ``read``. Every packet kind is supported,
    compressed ones included (upstream cannot stream those). Nothing past the packet is read.
    Sockets, raw files and file descriptors are read by libtenso directly, with the GIL
    released; other objects receive straight into the packet's buffer.

    Parameters
    ----------
    source : socket, file object, int or duck-typed reader
        The stream.
    options : DecodeOptions, optional
        Limits (checked against the header before the packet's buffer is allocated) and a
        deadline for the whole packet. A socket's own timeout (``settimeout``) is the deadline
        for the whole packet too, not for each read; the shorter of the two wins.

    Returns
    -------
    The decoded object, or None if the stream ended before the packet's first byte.

    Raises
    ------
    EOFError
        The stream ended inside a packet (a TensoTruncatedError, also a ValueError).
    ValueError
        The bytes are not a valid packet, or a limit was exceeded (TensoLimitError).
    TimeoutError
        The socket's timeout or ``options.timeout`` expired (TensoTimeoutError).
    """
    if options is None and type(source) is socket.socket and source.gettimeout() is None:
        # The common case in one step (a blocking socket, default limits): what _read_packet
        # does for it, without its checks of every other kind of source.
        fd = source.fileno()
        if fd >= 0:
            try:
                return _tenso.thread_read_fd(fd, False, True)
            except TensoError as e:
                raise _in_upstream_words(e) from None
    return _read_one(source, options, False, True)


def _read_one(source: Any, options: Optional[DecodeOptions], copy: bool, align: bool) -> Optional[Any]:
    try:
        return _read_packet(source, options, copy, align)
    except TensoError as e:
        raise _in_upstream_words(e) from None


def _read_packet(source: Any, options: Optional[DecodeOptions], copy: bool, align: bool) -> Optional[Any]:
    fd = _read_fd_of(source)
    if fd is not None:
        fields = _stream_options(source, options)
        if fields is not None:
            return _tenso.read_fd(fd, copy, fields, align)  # tenso_read_fd: no read-ahead
        # The thread's decoder for (copy, align), which reuses the previous packet's buffer;
        # no read-ahead either: nothing past the packet is read.
        return _tenso.thread_read_fd(fd, copy, align)
    return _read_with(source, _tenso.Decoder(_merge(options), False, copy, align))


def iter_stream(source: Any, *, options: Optional[DecodeOptions] = None, copy: bool = False) -> Iterator[Any]:
    """Yield every packet of a stream, decoded, until it ends cleanly. Not in upstream.

    The iterator owns the stream: it reads ahead (many small packets per system call), so no
    other code may read ``source`` while it runs, and bytes past the last packet it yielded may
    have been consumed. ``source``, ``options`` and the exceptions are as for
    :func:`read_stream`; ``copy=True`` gives writeable arrays.

    Examples
    --------
    >>> import io, numpy as np, tenso
    >>> buf = io.BytesIO()
    >>> for i in range(3):
    ...     _ = tenso.write_stream(np.full(2, i), buf)
    >>> _ = buf.seek(0)
    >>> [a.tolist() for a in tenso.iter_stream(buf)]
    [[0, 0], [1, 1], [2, 2]]
    """
    fd = _read_fd_of(source)
    if fd is not None:
        decoder = _tenso.Decoder(_stream_options(source, options), True, copy)
        while (obj := decoder.read_fd(fd)) is not None:
            yield obj
        return
    decoder = _tenso.Decoder(_merge(options), False, copy)
    chunk = memoryview(bytearray(_CHUNK))
    got = 0  # bytes of the current packet
    while True:
        if decoder.needed >= _CHUNK:
            # A large remainder: receive it in place, no copy through the chunk.
            view = decoder.buffer()
            n = _read_some(source, view)
            if not n:
                decoder.finish()  # TensoTruncatedError (an EOFError), in upstream's words
            got += n
            obj = decoder.commit(n)
            if obj is not None:
                got = 0
                yield obj
            continue
        n = _read_some(source, chunk)
        if not n:
            if got:
                decoder.finish()  # TensoTruncatedError (an EOFError), in upstream's words
            return
        data = chunk[:n]
        while len(data):
            consumed, obj = decoder.feed(data)
            got += consumed
            data = data[consumed:]
            if obj is not None:
                got = 0
                yield obj


def iter_dumps(
    tensor: Any, strict: bool = False, check_integrity: bool = False
) -> Generator[Union[bytes, memoryview], None, None]:
    """Yield the Tenso packet for ``tensor`` (one bytes object, as upstream 0.24)."""
    yield _dumps_bytes(tensor, strict, check_integrity)


def write_stream(tensor: Any, dest: Any, strict: bool = False, check_integrity: bool = False) -> int:
    """
    Write one packet to a destination: a socket, a file or pipe object, a file descriptor (int),
    or any object with ``sendall`` or ``write``.

    Sockets (blocking), raw and buffered files and file descriptors are written with vectored
    I/O straight from the arrays' memory (no packet buffer), with the GIL released.

    Returns
    -------
    int
        The number of bytes written.
    """
    if type(dest) is socket.socket and type(tensor) is np.ndarray and dest.gettimeout() is None:
        # The common case in one step: one array to a blocking socket.
        sock_fd = dest.fileno()
        if sock_fd >= 0:
            return _tenso.write_array_fd(tensor, sock_fd, strict, check_integrity)
    fd = _write_fd_of(dest)
    if fd is not None:
        if isinstance(tensor, np.ndarray):
            written = _tenso.write_array_fd(tensor, fd, strict, check_integrity)
        else:
            written = _to_value(tensor, strict).write_fd(fd, check_integrity)
        _resync(dest)
        return written
    write_method = getattr(dest, "sendall", None) or getattr(dest, "write", None)
    if write_method is None:
        raise AttributeError(f"Destination {type(dest)} has no '.write' or '.sendall' method.")
    packet = dumps(tensor, strict=strict, check_integrity=check_integrity)
    _write_all(write_method, packet)
    return len(packet)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def dump(tensor: Any, fp: BinaryIO, strict: bool = False, check_integrity: bool = False) -> None:
    """
    Serialize an object and write it to an open binary file (or socket, pipe, fd).

    Files with a descriptor are written with vectored I/O from the arrays' memory; anything else
    gets one ``write`` of the packet.
    """
    write_stream(tensor, fp, strict=strict, check_integrity=check_integrity)


def load(
    fp: BinaryIO,
    mmap_mode: bool = False,
    copy: bool = False,
    align: bool = True,
    *,
    options: Optional[DecodeOptions] = None,
) -> Any:
    """
    Deserialize an object from an open binary file.

    Parameters
    ----------
    fp : BinaryIO
        Open binary file object (for mmap_mode, one with ``fileno()``).
    mmap_mode : bool, default False
        Map the whole file read-only and decode its first packet in place: zero-copy, the arrays
        keep the mapping alive.
    copy : bool, default False
        Return writeable copies.
    align : bool, default True
        As in :func:`loads`: arrays meet their packet's declared alignment (a copy only when the
        memory does not); False keeps every view zero-copy.
    options : DecodeOptions, optional
        Decode limits, as for :func:`read_stream`.

    Raises
    ------
    EOFError
        The file is empty (or at its end).
    """
    if mmap_mode:
        mm = mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ)
        return loads(mm, copy=copy, align=align, options=options)
    result = _read_one(fp, options, copy, align)
    if result is None:
        raise TensoEOFError("Empty file or stream")
    return result


def save_file(
    path: Any,
    tensor: Any,
    strict: bool = False,
    check_integrity: bool = False,
    compress: bool = False,
    alignment: int = 64,
) -> None:
    """Write ``tensor``'s packet to ``path`` atomically (temporary file, fsync, rename): the
    file is either the old one or the complete new one. Not in upstream."""
    import os

    path = os.fsencode(path)  # bytes: any file name the OS accepts
    if isinstance(tensor, np.ndarray):
        _tenso.save_array_file(path, tensor, strict, check_integrity, compress, alignment)
        return
    _check_alignment(alignment)
    _to_value(tensor, strict).save_file(path, check_integrity, compress, alignment)


def load_file(path: Any, mmap: bool = True, copy: bool = False) -> Any:
    """Load the first packet of the file at ``path``. With mmap (the default) the file is mapped
    read-only and the arrays point into the mapping (O(1) in the file size without integrity
    footers). Not in upstream."""
    import os

    return _tenso.load_file(os.fsencode(path), mmap, copy)


def view(data: BytesLike) -> Any:
    """Decode a packet into :class:`tenso.TensorView` objects (a dict of them for bundles):
    zero-copy, read-only tensors that export through DLPack (``numpy.from_dlpack(v)``,
    ``torch.from_dlpack(v)``). Not in upstream."""
    return _tenso.view(data)


# ---------------------------------------------------------------------------------------------
# Decoder callbacks (registered with the extension in tenso/__init__.py)
# ---------------------------------------------------------------------------------------------


def _make_sparse(kind: int, shape: Tuple[int, int], a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Any:
    """scipy.sparse matrix for a decoded sparse packet (``*_matrix`` types, as upstream)."""
    import scipy.sparse as sp

    if kind == KIND_SPARSE_COO:
        return sp.coo_matrix((a, (b, c)), shape=shape)
    if kind == KIND_SPARSE_CSR:
        return sp.csr_matrix((a, b, c), shape=shape)
    return sp.csc_matrix((a, b, c), shape=shape)
