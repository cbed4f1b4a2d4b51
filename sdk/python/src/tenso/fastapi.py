"""FastAPI integration: stream tensors out of endpoints and read Tenso request bodies.

Upstream ``tenso.fastapi`` 0.24's names and behaviour, on libtenso:

- :class:`TensoResponse` sends the packet from the array's own memory: libtenso builds the
  header (and the XXH3 footer, reading the body once), the body goes to the server in slices of
  the array, never copied; upstream copies the body twice (``dumps``, then ``bytes``). So, as
  with any zero-copy send, do not modify the array until the response has been sent.
- :func:`get_tenso_data` decodes the body with libtenso's stream decoder as it arrives (no joined
  copy of the body) and refuses what is not a packet with a 4xx status, never a 500: 400 for a
  wrong content type, 413 for a body over the limit (checked against ``Content-Length`` and the
  packet's header before anything is allocated) or a packet that decodes to more than the
  decode limits allow, 422 for a malformed or truncated packet.

What a client can cost. A body of N bytes is held once, in the decoder's buffer (which grows as
the bytes arrive, whatever the header claims), and the arrays are views of it: writeable, shared
with nothing else, never copied. Decoding may add LZ4 bodies of at most :data:`MAX_INFLATION`
x max(N, 4 MiB) (16 x) and at most :data:`MAX_DECODED_BYTES` in all (libtenso applies both
before it allocates), so a request holds at most N + 16 x max(N, 4 MiB) for tensors (a bundle's
decoded tree adds at most 24 x N more, for bundles of empty bundles). A body over
:data:`DECODE_OFFLOAD_BYTES` is fed to the decoder on a worker thread, with the GIL released,
so that its decode (LZ4, checksums) never stalls the event loop and other requests.

Needs the ``fastapi`` extra (``pip install libtenso[fastapi]``).
"""

import asyncio
from typing import Any, Callable, Coroutine, List, Optional

from fastapi import HTTPException, Request
from fastapi.responses import StreamingResponse

from . import _tenso
from .core import _aslices, _ended_inside_packet, _pieces
from .errors import TensoMemoryError, _over_size_limit
from .options import UNTRUSTED_MAX_DECODED_BYTES, UNTRUSTED_MAX_INFLATION, DecodeOptions, _untrusted

__all__ = [
    "TensoResponse",
    "get_tenso_data",
    "tenso_data",
    "MAX_BODY_BYTES",
    "MAX_DECODED_BYTES",
    "MAX_INFLATION",
    "DECODE_OFFLOAD_BYTES",
    "CHUNK_BYTES",
]

#: The largest request body :func:`get_tenso_data` accepts (2 GiB); upstream has no limit, so
#: this is sized well above any tensor upstream serves in practice. Change it here, or make a
#: dependency with its own limit with :func:`tenso_data`.
MAX_BODY_BYTES: int = 2 << 30

#: The default decoded-size limit: all that decoding one body may allocate (2 GiB; a request's
#: ``DecodeOptions.max_decoded_bytes`` replaces it). 413 above it. Not in upstream.
MAX_DECODED_BYTES: int = UNTRUSTED_MAX_DECODED_BYTES

#: LZ4 bodies decompress to at most this many times the body's size, counted as at least 4 MiB
#: (16, so any body may inflate to 64 MiB; a request's ``DecodeOptions.max_inflation`` replaces
#: it; LZ4 itself allows 255 x). 413 above it. Not in upstream.
MAX_INFLATION: int = UNTRUSTED_MAX_INFLATION

#: Bodies larger than this (16 KiB) are fed to the decoder on a worker thread of the event
#: loop's default executor (in batches of 1 MiB), with the GIL released, so their decode never
#: runs on the event loop; smaller ones decode in place: LZ4 inflates at most 255 x, so that is
#: at most 4 MiB of output, about a millisecond. Not in upstream.
DECODE_OFFLOAD_BYTES: int = 16 << 10

_OFFLOAD_BATCH = 1 << 20

#: Size of the slices a :class:`TensoResponse` hands to the server: large enough that the
#: per-slice cost vanishes, small enough that a slow client does not make the server buffer
#: much of the body.
CHUNK_BYTES: int = 1 << 20

_MEDIA_TYPE = "application/octet-stream"


class TensoResponse(StreamingResponse):
    """
    FastAPI response that streams one Tenso packet (``application/octet-stream``).

    Parameters
    ----------
    tensor : Any
        What to send: a numpy array, a dict of arrays (a bundle), a scipy.sparse matrix, a
        QuantizedTensor, ... (anything :func:`tenso.dumps` takes).
    filename : str, optional
        Adds ``Content-Disposition: attachment; filename="..."``.
    strict : bool, default False
        Refuse (ValueError) a non-C-contiguous array instead of copying it.
    check_integrity : bool, default False
        Append the XXH3 integrity footer.
    **kwargs
        Passed to ``StreamingResponse`` (``status_code``, ``headers``, ``background``).

    Headers: ``X-Tenso-Version: 4``, ``X-Tenso-Shape`` and ``X-Tenso-Dtype`` (as upstream, for
    objects that have them) and ``Content-Length``.

    Examples
    --------
    >>> from fastapi import FastAPI
    >>> import numpy as np
    >>> from tenso.fastapi import TensoResponse
    >>> app = FastAPI()
    >>> @app.get("/tensor")
    ... async def get_tensor():
    ...     return TensoResponse(np.ones((1024, 1024), dtype=np.float32))
    """

    def __init__(
        self,
        tensor: Any,
        filename: Optional[str] = None,
        strict: bool = False,
        check_integrity: bool = False,
        **kwargs: Any,
    ) -> None:
        # The packet's pieces: headers from libtenso, bodies as views of the arrays (no copy).
        pieces = _pieces(tensor, strict, check_integrity)
        super().__init__(_aslices(pieces, CHUNK_BYTES), media_type=_MEDIA_TYPE, **kwargs)
        self.headers["Content-Length"] = str(sum(len(p) for p in pieces))
        self.headers["X-Tenso-Version"] = "4"
        if hasattr(tensor, "shape"):
            self.headers["X-Tenso-Shape"] = str(tensor.shape)
        if hasattr(tensor, "dtype"):
            self.headers["X-Tenso-Dtype"] = str(tensor.dtype)
        if filename:
            self.headers["Content-Disposition"] = f'attachment; filename="{filename}"'


def _content_type_ok(value: Optional[str]) -> bool:
    # Upstream compares the header verbatim; parameters (";charset=...") and case are
    # accepted here too, since they do not change what the body is.
    return value is not None and value.split(";", 1)[0].strip().lower() == _MEDIA_TYPE


def _too_large(size: int, limit: int) -> HTTPException:
    return HTTPException(
        status_code=413, detail=f"Invalid Tenso packet: the body of {size} bytes exceeds the limit of {limit} bytes."
    )


def _feed(decoder: Any, chunks: Any) -> Any:
    """Feeds ``chunks`` until the packet completes; the object, else None. Bytes after the
    packet are ignored, as loads() ignores them."""
    for chunk in chunks:
        data = memoryview(chunk)
        while len(data):
            consumed, obj = decoder.feed(data)
            if obj is not None:
                return obj
            data = data[consumed:]
    return None


async def _read_packet(request: Request, limit: int, options: Optional[DecodeOptions]) -> Any:
    if not _content_type_ok(request.headers.get("content-type")):
        raise HTTPException(status_code=400, detail="Expected application/octet-stream content type.")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    # The decoder checks the packet's declared size against the limit before allocating, and
    # the decode limits (decoded bytes, inflation) before decoding.
    fields = _untrusted(options, limit, MAX_DECODED_BYTES, MAX_INFLATION)._fields()
    # Writeable views of the decoder's own buffer: the handler may modify its arrays, and the
    # body is never copied a second time.
    decoder = _tenso.Decoder(fields, False, False, False, True)
    received = 0
    obj = None
    batch: List[bytes] = []
    batched = 0
    loop = asyncio.get_running_loop()
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise _too_large(received, limit)
            if obj is not None or not chunk:
                continue  # after the packet: still counted against the limit
            if received <= DECODE_OFFLOAD_BYTES:
                obj = _feed(decoder, (chunk,))
                continue
            batch.append(chunk)
            batched += len(chunk)
            if batched >= _OFFLOAD_BATCH:
                obj = await loop.run_in_executor(None, _feed, decoder, batch)
                batch, batched = [], 0
        if obj is None and batch:
            obj = await loop.run_in_executor(None, _feed, decoder, batch)
        if obj is None:
            if received == 0:
                raise HTTPException(status_code=422, detail="Invalid Tenso packet: Packet too short (empty body).")
            _ended_inside_packet(decoder, received)  # raises TensoTruncatedError
            raise HTTPException(status_code=422, detail="Invalid Tenso packet: the body ended inside the packet.")
    except (ValueError, EOFError, TypeError, TensoMemoryError) as e:
        # Over a size limit the server set (body, decoded bytes, inflation): 413. Past the
        # protocol's own limits (dimensions, elements) the packet is malformed: 422, as upstream
        # answers.
        if _over_size_limit(e):
            raise HTTPException(status_code=413, detail=f"Invalid Tenso packet: {e}") from None
        raise HTTPException(status_code=422, detail=f"Invalid Tenso packet: {e}") from None
    return obj


async def get_tenso_data(request: Request) -> Any:
    """
    FastAPI dependency: the request body decoded as a Tenso packet.

    Use it as ``data = Depends(get_tenso_data)``. Arrays are writeable and share memory with
    nothing else (views of the decoder's own buffer, not copies).

    Raises
    ------
    HTTPException
        400 when the content type is not ``application/octet-stream``; 413 when the body is over
        :data:`MAX_BODY_BYTES` or decodes to more than :data:`MAX_DECODED_BYTES` or
        :data:`MAX_INFLATION` times its size; 422 when the body is not a complete, valid packet
        (the detail starts with ``Invalid Tenso packet:`` and says what is wrong).
    """
    return await _read_packet(request, MAX_BODY_BYTES, None)


def tenso_data(
    max_body_bytes: Optional[int] = None, options: Optional[DecodeOptions] = None
) -> Callable[[Request], Coroutine[Any, Any, Any]]:
    """
    A dependency like :func:`get_tenso_data` with its own body limit and decode limits. Not in
    upstream.

    Parameters
    ----------
    max_body_bytes : int, optional
        The largest body accepted (413 above it); default :data:`MAX_BODY_BYTES`.
    options : DecodeOptions, optional
        Decode limits (dimensions, elements, entries, decoded bytes, inflation); any exceeded
        gives 413. ``max_decoded_bytes`` and ``max_inflation`` left at 0 take
        :data:`MAX_DECODED_BYTES` and :data:`MAX_INFLATION`.

    Examples
    --------
    >>> from fastapi import Depends, FastAPI
    >>> from tenso.fastapi import TensoResponse, tenso_data
    >>> app = FastAPI()
    >>> @app.post("/small")
    ... async def small(x=Depends(tenso_data(max_body_bytes=1 << 20))):
    ...     return TensoResponse(x)
    """
    limit = MAX_BODY_BYTES if max_body_bytes is None else int(max_body_bytes)
    if limit <= 0:
        raise ValueError("max_body_bytes must be positive")

    async def dependency(request: Request) -> Any:
        return await _read_packet(request, limit, options)

    return dependency
