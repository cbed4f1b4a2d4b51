"""Decode options: the limits and switches of libtenso's ``tenso_decode_options``, as the Go
(``DecodeOptions``) and Rust (``DecodeOptions``) SDKs have them. Not in upstream 0.24."""

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple

# tenso_decode_options as the extension takes it (see DecodeOptions._fields).
_DecodeFields = Tuple[int, int, int, int, int, int, int, int, int, int]

# tenso_decode_options.flags (tenso.h)
_DECODE_SKIP_CHECKSUM = 0x1
_DECODE_VALIDATE_UTF8 = 0x2


@dataclass(frozen=True)
class DecodeOptions:
    """Limits for decoding untrusted packets (``loads``, ``read_stream``, ``aread_stream``,
    ``load``, ``iter_stream``).

    Every limit defaults to 0, which means the protocol's own limit, i.e. exactly what upstream
    0.24 accepts: 32 dimensions, 10**9 elements per tensor, bundles nested 64 deep, no bound on
    a packet's size. A limit can only make decoding stricter. Exceeding one raises
    :class:`tenso.TensoLimitError` (a ValueError); stream readers check ``max_packet_bytes`` and
    ``max_decoded_bytes`` against a packet's header before allocating its buffer.

    Attributes
    ----------
    max_packet_bytes : int
        The whole packet, in bytes (also bounds what LZ4 bodies inflate to, unless
        ``max_decoded_bytes`` is set). 0: no limit.
    max_decoded_bytes : int
        All that decoding one packet may allocate (the decoded tree, copied offsets and scales,
        decompressed bodies). 0: no limit.
    max_entries : int
        Packets in one tree (the top one, bundle values, sparse components). 0: no limit.
    max_ndim : int
        Dimensions per tensor. 0: 32.
    max_elements : int
        Elements per tensor. 0: 10**9.
    max_depth : int
        Bundle and sparse nesting. 0: 64.
    timeout : float or None
        Stream reads only: the most, in seconds, that reading one packet may wait for the
        peer in total (TensoTimeoutError, a TimeoutError, when it expires). None: no deadline
        of ours (a socket's own timeout still applies).
    skip_checksum : bool
        Do not verify XXH3 integrity footers (they are still framed).
    validate_utf8 : bool
        Check that string tensors' payloads are UTF-8.
    threads : int
        LZ4 bodies are decompressed on this many threads (their 4 MiB blocks are independent).
        0: every core; 1: the calling thread only. The decoded values do not depend on it.
        (Since 1.4.)
    max_inflation : int
        What LZ4 bodies may decompress to, in all, as a multiple of the packet's size (counted
        as at least 4 MiB): a packet of N bytes then costs at most max(N, 4 MiB) x max_inflation
        in bodies, whatever its header claims. 0: no such bound. (Since 1.5; libtenso applies
        it.)

    Examples
    --------
    >>> import numpy as np, tenso
    >>> packet = tenso.dumps(np.zeros(1000, np.float32))
    >>> tenso.loads(packet, options=tenso.DecodeOptions(max_packet_bytes=1 << 20)).shape
    (1000,)
    >>> tenso.loads(packet, options=tenso.DecodeOptions(max_packet_bytes=1024))
    Traceback (most recent call last):
    ...
    tenso.errors.TensoLimitError: ...
    """

    max_packet_bytes: int = 0
    max_decoded_bytes: int = 0
    max_entries: int = 0
    max_ndim: int = 0
    max_elements: int = 0
    max_depth: int = 0
    timeout: Optional[float] = None
    skip_checksum: bool = False
    validate_utf8: bool = False
    threads: int = 0
    max_inflation: int = 0

    def __post_init__(self) -> None:
        for field in ("max_packet_bytes", "max_decoded_bytes", "max_entries", "max_ndim", "max_elements", "max_depth"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
                raise ValueError(f"DecodeOptions.{field} must be an integer from 0 to 2**64-1, got {value!r}")
        for field in ("max_ndim", "max_depth"):
            if getattr(self, field) >= 1 << 32:
                raise ValueError(f"DecodeOptions.{field} must be below 2**32, got {getattr(self, field)!r}")
        for field in ("threads", "max_inflation"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
                raise ValueError(f"DecodeOptions.{field} must be an integer from 0 to 2**32-1, got {value!r}")
        if self.timeout is not None and not (self.timeout >= 0):  # also refuses NaN
            raise ValueError(f"DecodeOptions.timeout must be None or >= 0 seconds, got {self.timeout!r}")

    def replace(self, **changes: object) -> "DecodeOptions":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def _fields(self) -> "_DecodeFields":
        """The C struct's fields, for the extension: (flags, max_ndim, max_depth, max_elements,
        max_packet_bytes, max_decoded_bytes, max_entries, timeout_ms, threads, max_inflation)."""
        flags = (_DECODE_SKIP_CHECKSUM if self.skip_checksum else 0) | (
            _DECODE_VALIDATE_UTF8 if self.validate_utf8 else 0
        )
        # A deadline shorter than a millisecond still is one: never round it down to "none" (0).
        timeout_ms = 0 if self.timeout is None else max(1, int(-(-self.timeout * 1000 // 1)))
        return (
            flags,
            self.max_ndim,
            self.max_depth,
            self.max_elements,
            self.max_packet_bytes,
            self.max_decoded_bytes,
            self.max_entries,
            timeout_ms,
            self.threads,
            self.max_inflation,
        )


#: What a server decodes from a client by default (:mod:`tenso.fastapi`, :mod:`tenso.serve`,
#: :func:`tenso.grpc.request_tensor`): LZ4 bodies inflate to at most this many times the bytes
#: the client sent, counted as at least 4 MiB (LZ4 itself allows 255 x), so a body of N bytes
#: costs the server at most N + 16 x max(N, 4 MiB) for tensors. Not in upstream.
UNTRUSTED_MAX_INFLATION: int = 16

#: ... and at most this much in all that decoding one body allocates (2 GiB). Not in upstream.
UNTRUSTED_MAX_DECODED_BYTES: int = 2 << 30


def _untrusted(
    options: Optional[DecodeOptions],
    max_packet_bytes: int,
    max_decoded_bytes: int = UNTRUSTED_MAX_DECODED_BYTES,
    max_inflation: int = UNTRUSTED_MAX_INFLATION,
) -> DecodeOptions:
    """``options`` (or the defaults) for bytes from a network client: the packet within
    ``max_packet_bytes``; ``max_decoded_bytes`` (at least the packet, whose buffer it bounds too)
    and ``max_inflation`` where the caller left them at 0."""
    options = options or DecodeOptions()
    if not isinstance(options, DecodeOptions):
        raise TypeError(f"options must be a tenso.DecodeOptions, not {type(options).__name__}")
    current = options.max_packet_bytes
    packet = max_packet_bytes if not current else min(current, max_packet_bytes)
    return dataclasses.replace(
        options,
        max_packet_bytes=packet,
        max_decoded_bytes=options.max_decoded_bytes or max(max_decoded_bytes, packet),
        max_inflation=options.max_inflation or max_inflation,
    )


def _merge(
    options: Optional[DecodeOptions], max_decoded_bytes: int = 0, max_entries: int = 0, threads: int = 0
) -> Optional[_DecodeFields]:
    """The extension's options tuple (None: the defaults) from an options object and the
    keywords loads() takes (limits since 1.2, threads since 1.4; a keyword given wins)."""
    if options is None and not max_decoded_bytes and not max_entries and not threads:
        return None
    if options is None:
        options = DecodeOptions()
    elif not isinstance(options, DecodeOptions):
        raise TypeError(f"options must be a tenso.DecodeOptions, not {type(options).__name__}")
    if max_decoded_bytes or max_entries or threads:
        options = options.replace(
            max_decoded_bytes=max_decoded_bytes or options.max_decoded_bytes,
            max_entries=max_entries or options.max_entries,
            threads=threads or options.threads,
        )
    return options._fields()
