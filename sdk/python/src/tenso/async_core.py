"""asyncio support: read and write Tenso packets over ``asyncio.StreamReader`` /
``asyncio.StreamWriter`` (upstream ``tenso.async_core``'s names and signatures)."""

import asyncio
from typing import Any, AsyncIterator, Optional

from . import _tenso
from .core import dumps
from .errors import TensoTimeoutError, TensoTruncatedError
from .options import DecodeOptions, _merge


async def _aread_with(reader: asyncio.StreamReader, decoder: Any) -> Optional[Any]:
    """One packet through libtenso's decoder, fed what the reader has (at most what the packet
    still needs, so nothing of the next packet is taken from the reader)."""
    got = 0
    while True:
        chunk = await reader.read(decoder.needed)
        if not chunk:
            if got == 0:
                return None
            try:
                decoder.finish()
            except TensoTruncatedError as e:
                # Upstream's exception (an EOFError): readexactly's, for the bytes still missing.
                raise asyncio.IncompleteReadError(b"", decoder.needed) from e
        got += len(chunk)
        _, obj = decoder.feed(chunk)  # never more than the packet needs: all of it is consumed
        if obj is not None:
            return obj


async def aread_stream(reader: asyncio.StreamReader, *, options: Optional[DecodeOptions] = None) -> Optional[Any]:
    """
    Asynchronously read and deserialize one Tenso packet from a StreamReader.

    Every packet kind is supported (compressed ones too). The arrays are zero-copy views of the
    packet's own (64-byte aligned) buffer, into which libtenso's decoder copies the bytes the
    reader holds; nothing of the next packet is taken from the reader.

    Parameters
    ----------
    reader : asyncio.StreamReader
        The stream.
    options : DecodeOptions, optional
        Decode limits (checked against the header before the packet's buffer is allocated)
        and ``timeout``, the most seconds the whole packet may take.

    Returns
    -------
    The decoded object, or None if the stream ended before any byte of a packet.

    Raises
    ------
    asyncio.IncompleteReadError
        (an EOFError) when the stream ends inside a packet, as upstream.
    ValueError
        The bytes are not a valid packet, or a limit was exceeded.
    TimeoutError
        ``options.timeout`` expired (TensoTimeoutError); the bytes of the packet read so far
        are gone from the reader.
    """
    return await _deadline(_aread_with(reader, _tenso.Decoder(_merge(options), False, False)), options)


async def _deadline(read: Any, options: Optional[DecodeOptions]) -> Optional[Any]:
    """Awaits one packet's read within options.timeout, as a TensoTimeoutError on expiry."""
    if options is None or options.timeout is None:
        return await read
    try:
        return await asyncio.wait_for(read, options.timeout)
    except asyncio.TimeoutError:
        raise TensoTimeoutError(f"no complete packet within {options.timeout} s") from None


async def aiter_stream(
    reader: asyncio.StreamReader, *, options: Optional[DecodeOptions] = None, copy: bool = False
) -> AsyncIterator[Any]:
    """Yield every packet from a StreamReader until it ends cleanly (one decoder for the whole
    stream). Not in upstream. Arguments and exceptions as for :func:`aread_stream` (the
    timeout is per packet); ``copy=True`` gives writeable arrays."""
    decoder = _tenso.Decoder(_merge(options), False, copy)
    while (obj := await _deadline(_aread_with(reader, decoder), options)) is not None:
        yield obj


async def awrite_stream(
    tensor: Any,
    writer: asyncio.StreamWriter,
    strict: bool = False,
    check_integrity: bool = False,
) -> None:
    """
    Asynchronously write one packet to a StreamWriter and wait for it to drain.

    Parameters
    ----------
    tensor : Any
        Anything :func:`tenso.dumps` accepts.
    writer : asyncio.StreamWriter
        The destination.
    strict : bool, default False
        Refuse non-contiguous arrays instead of copying them.
    check_integrity : bool, default False
        Append XXH3-64 footers.
    """
    writer.write(dumps(tensor, strict=strict, check_integrity=check_integrity))
    await writer.drain()
