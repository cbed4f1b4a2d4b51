"""asyncio support: read and write Tenso packets over ``asyncio.StreamReader`` /
``asyncio.StreamWriter`` (upstream ``tenso.async_core``'s names and signatures)."""

import asyncio
from typing import Any, Optional

from . import _tenso
from .core import _FIRST_READ, _GROW_STEP, _aligned_buffer, dumps


async def _aread_full_packet(reader: asyncio.StreamReader) -> Optional[Any]:
    """Exactly one packet's bytes, framed with tenso_packet_length, in a 64-byte aligned
    buffer; None on a clean end of stream before the first byte."""
    buf = _aligned_buffer(64)
    have = 0
    need = _FIRST_READ
    while True:
        while have < need:
            # Bounded steps, as in the synchronous reader: memory follows the bytes received.
            step = min(need - have, max(have, _GROW_STEP))
            try:
                chunk = await reader.readexactly(step)
            except asyncio.IncompleteReadError as e:
                if have == 0 and not e.partial:
                    return None
                raise  # an EOFError, as upstream
            if have + step > len(buf):
                grown = _aligned_buffer(max(have + step, min(need, 2 * len(buf))))
                grown[:have] = buf[:have]
                buf = grown
            buf[have : have + step] = memoryview(chunk)
            have += step
        complete, length = _tenso.packet_length(buf[:have])
        if complete:
            return buf[:length]
        need = length


async def aread_stream(reader: asyncio.StreamReader) -> Optional[Any]:
    """
    Asynchronously read and deserialize one Tenso packet from a StreamReader.

    Every packet kind is supported (compressed ones too). The arrays are zero-copy views of the
    packet buffer.

    Returns
    -------
    The decoded object, or None if the stream ended before any byte of a packet.

    Raises
    ------
    asyncio.IncompleteReadError
        (an EOFError) when the stream ends inside a packet, as upstream.
    ValueError
        The bytes are not a valid packet.
    """
    packet = await _aread_full_packet(reader)
    if packet is None:
        return None
    return _tenso.loads(packet)


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
