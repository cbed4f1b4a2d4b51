"""Exceptions raised by tenso.

Every exception tenso raises for bad data or bad arguments is a :class:`TensoError` and *also*
the builtin that upstream ``tenso`` 0.24 raises in the same situation, so code written for
upstream (``except ValueError``, ``except EOFError``) keeps working:

==========================  ===========================  =========================================
class                       also a                       libtenso status (``.status``)
==========================  ===========================  =========================================
TensoValueError             ValueError                   TENSO_E_INVALID_ARGUMENT, BUFFER_TOO_SMALL
TensoCorruptError           ValueError                   BAD_MAGIC, MALFORMED, BAD_BUNDLE, COMPRESSION
TensoTruncatedError         ValueError **and** EOFError  TRUNCATED (packet or stream ends early)
TensoChecksumError          ValueError                   CHECKSUM (XXH3 footer mismatch)
TensoUnsupportedError       ValueError                   UNSUPPORTED_VERSION, BAD_DTYPE, UNSUPPORTED_KIND
TensoLimitError             ValueError                   TOO_MANY_DIMS, TOO_MANY_ELEMENTS, LIMIT
TensoTypeError              TypeError                    (an object tenso cannot serialize)
TensoEOFError               EOFError                     END_OF_STREAM (``load`` of an empty stream)
TensoIOError                OSError                      IO (the message carries errno's text)
TensoMemoryError            MemoryError                  NO_MEMORY
TensoNotAvailableError      RuntimeError                 NOT_AVAILABLE
TensoInternalError          RuntimeError                 USER, INTERNAL (a bug: please report it)
TensoNotFoundError          FileNotFoundError, KeyError  NOT_FOUND (no such segment, file, key, name)
TensoExistsError            FileExistsError              EXISTS (a segment or pool of that name exists)
TensoFullError              MemoryError                  FULL (a pool or segment has no room left)
TensoTimeoutError           TimeoutError                 TIMEOUT (a shared lock was not obtained)
TensoCorruptError           ValueError                   CORRUPT, BAD_OFFSET (pool or archive index)
TensoValueError             ValueError                   DUPLICATE_KEY, BAD_UTF8
TensoNotAvailableError      RuntimeError                 GPU_UNAVAILABLE (no CUDA runtime/driver/device)
TensoGPUError               RuntimeError                 GPU (a CUDA call failed)
TensoShutdownError          RuntimeError                 SHUTDOWN (the node was shut down)
TensoConnectionError        ConnectionError              CONNECTION (peer unreachable, reset, gone)
TensoAuthError              ConnectionError              AUTH (TLS / pinned key refused)
TensoValueError             ValueError                   BAD_ADDRESS (unparsable address/ticket)
TensoCancelledError         RuntimeError                 CANCELLED (the call was cancelled)
==========================  ===========================  =========================================

The last rows are ABI 1.1's statuses (shared memory, the cache, archives). Each class is also the
builtin upstream raises there: ``SharedMemory`` raises FileNotFoundError / FileExistsError, a full
``TensoCache`` MemoryError, a foreign pool ValueError, a lock timeout TimeoutError.

This module must not import the rest of the package: the native extension imports it while the
package is being initialised.
"""

from typing import Dict, Type

# Status codes (tenso/errors.h). Pinned by the C ABI: never renumbered.
TENSO_OK = 0
TENSO_E_INVALID_ARGUMENT = -1
TENSO_E_BUFFER_TOO_SMALL = -2
TENSO_E_TRUNCATED = -3
TENSO_E_BAD_MAGIC = -4
TENSO_E_UNSUPPORTED_VERSION = -5
TENSO_E_BAD_DTYPE = -6
TENSO_E_TOO_MANY_DIMS = -7
TENSO_E_TOO_MANY_ELEMENTS = -8
TENSO_E_CHECKSUM = -9
TENSO_E_COMPRESSION = -10
TENSO_E_BAD_BUNDLE = -11
TENSO_E_MALFORMED = -12
TENSO_E_LIMIT = -13
TENSO_E_UNSUPPORTED_KIND = -14
TENSO_E_NO_MEMORY = -15
TENSO_E_IO = -16
TENSO_E_END_OF_STREAM = -17
TENSO_E_NOT_AVAILABLE = -18
TENSO_E_USER = -19
TENSO_E_INTERNAL = -20
# ABI 1.1
TENSO_E_NOT_FOUND = -21
TENSO_E_EXISTS = -22
TENSO_E_FULL = -23
TENSO_E_CORRUPT = -24
TENSO_E_TIMEOUT = -25
TENSO_E_BAD_OFFSET = -26
TENSO_E_DUPLICATE_KEY = -27
TENSO_E_BAD_UTF8 = -28
# ABI 1.4
TENSO_E_GPU_UNAVAILABLE = -29
TENSO_E_GPU = -30
TENSO_E_SHUTDOWN = -31
TENSO_E_CONNECTION = -32
TENSO_E_AUTH = -33
TENSO_E_BAD_ADDRESS = -34
TENSO_E_CANCELLED = -35


class TensoError(Exception):
    """Base class of every tenso exception. ``status`` is the libtenso status code (a negative
    ``TENSO_E_*`` value) when the error came from libtenso, else the closest one."""

    status: int = TENSO_E_INTERNAL


class TensoValueError(TensoError, ValueError):
    """Invalid argument or invalid packet (upstream raises ValueError)."""

    status = TENSO_E_INVALID_ARGUMENT


class TensoCorruptError(TensoValueError):
    """The bytes are not a well-formed Tenso packet."""

    status = TENSO_E_MALFORMED


class TensoTruncatedError(TensoCorruptError, EOFError):
    """The packet (or the stream) ends before the packet does. A ValueError, as upstream's
    ``loads`` raises for short input, and an EOFError, as upstream's ``read_stream`` raises for a
    stream cut inside a packet."""

    status = TENSO_E_TRUNCATED


class TensoChecksumError(TensoCorruptError):
    """The XXH3-64 integrity footer does not match the bytes it covers."""

    status = TENSO_E_CHECKSUM


class TensoUnsupportedError(TensoValueError):
    """A valid packet this build cannot return (protocol version, dtype or kind)."""

    status = TENSO_E_UNSUPPORTED_KIND


class TensoLimitError(TensoValueError):
    """A safety limit was exceeded: dimensions, elements, nesting depth, packet size."""

    status = TENSO_E_LIMIT


class TensoTypeError(TensoError, TypeError):
    """An object of a type tenso cannot serialize."""

    status = TENSO_E_INVALID_ARGUMENT


class TensoEOFError(TensoError, EOFError):
    """A stream ended cleanly where a packet was required."""

    status = TENSO_E_END_OF_STREAM


class TensoIOError(TensoError, OSError):
    """A system call failed while reading or writing (the message carries errno's text)."""

    status = TENSO_E_IO


class TensoMemoryError(TensoError, MemoryError):
    """libtenso could not allocate memory."""

    status = TENSO_E_NO_MEMORY


class TensoNotAvailableError(TensoError, RuntimeError):
    """The feature or device is not available in this build or on this machine."""

    status = TENSO_E_NOT_AVAILABLE


class TensoInternalError(TensoError, RuntimeError):
    """A bug in tenso (an unexpected internal failure). Please report it."""

    status = TENSO_E_INTERNAL


class TensoNotFoundError(TensoError, FileNotFoundError, KeyError):
    """No such shared-memory segment, pool, file, archive entry or metadata key. A
    FileNotFoundError (what ``SharedMemory`` and ``open`` raise) and a KeyError (what a mapping
    raises for a missing name)."""

    status = TENSO_E_NOT_FOUND

    # OSError's str() is the message; KeyError's would quote it.
    __str__ = OSError.__str__


class TensoExistsError(TensoError, FileExistsError):
    """A segment or pool of that name exists already."""

    status = TENSO_E_EXISTS


class TensoFullError(TensoError, MemoryError):
    """A segment, or a cache pool after expiry and eviction, has no room for the packet (or no
    free entry slot, or no client slot). A MemoryError, as upstream's TensoShm and TensoCache
    raise."""

    status = TENSO_E_FULL


class TensoTimeoutError(TensoError, TimeoutError):
    """A cache's process-shared lock was not obtained in time."""

    status = TENSO_E_TIMEOUT


class TensoGPUError(TensoError, RuntimeError):
    """A CUDA call failed on a device that is present (the message names the call)."""

    status = TENSO_E_GPU


class TensoShutdownError(TensoError, RuntimeError):
    """The node was shut down while the call was pending, or before it was made."""

    status = TENSO_E_SHUTDOWN


class TensoConnectionError(TensoError, ConnectionError):
    """A peer could not be reached, refused or reset the connection, or went away."""

    status = TENSO_E_CONNECTION


class TensoCancelledError(TensoError, RuntimeError):
    """The call was cancelled (asyncio cancellation reaches libtenso as this)."""

    status = TENSO_E_CANCELLED


class TensoAuthError(TensoConnectionError):
    """A peer failed authentication: TLS handshake, certificate chain or pinned key."""

    status = TENSO_E_AUTH


#: The class raised for each libtenso status. Read by the native extension at import.
_BY_STATUS: Dict[int, Type[TensoError]] = {
    TENSO_E_INVALID_ARGUMENT: TensoValueError,
    TENSO_E_BUFFER_TOO_SMALL: TensoValueError,
    TENSO_E_TRUNCATED: TensoTruncatedError,
    TENSO_E_BAD_MAGIC: TensoCorruptError,
    TENSO_E_UNSUPPORTED_VERSION: TensoUnsupportedError,
    TENSO_E_BAD_DTYPE: TensoUnsupportedError,
    TENSO_E_TOO_MANY_DIMS: TensoLimitError,
    TENSO_E_TOO_MANY_ELEMENTS: TensoLimitError,
    TENSO_E_CHECKSUM: TensoChecksumError,
    TENSO_E_COMPRESSION: TensoCorruptError,
    TENSO_E_BAD_BUNDLE: TensoCorruptError,
    TENSO_E_MALFORMED: TensoCorruptError,
    TENSO_E_LIMIT: TensoLimitError,
    TENSO_E_UNSUPPORTED_KIND: TensoUnsupportedError,
    TENSO_E_NO_MEMORY: TensoMemoryError,
    TENSO_E_IO: TensoIOError,
    TENSO_E_END_OF_STREAM: TensoEOFError,
    TENSO_E_NOT_AVAILABLE: TensoNotAvailableError,
    TENSO_E_USER: TensoInternalError,
    TENSO_E_INTERNAL: TensoInternalError,
    TENSO_E_NOT_FOUND: TensoNotFoundError,
    TENSO_E_EXISTS: TensoExistsError,
    TENSO_E_FULL: TensoFullError,
    TENSO_E_CORRUPT: TensoCorruptError,
    TENSO_E_TIMEOUT: TensoTimeoutError,
    TENSO_E_BAD_OFFSET: TensoCorruptError,
    # A duplicate name or invalid UTF-8 is a bad argument when writing and a bad file when
    # reading: both ValueError.
    TENSO_E_DUPLICATE_KEY: TensoValueError,
    TENSO_E_BAD_UTF8: TensoValueError,
    # ABI 1.4: GPUs and nodes. No device is "not available", as for other optional parts.
    TENSO_E_GPU_UNAVAILABLE: TensoNotAvailableError,
    TENSO_E_GPU: TensoGPUError,
    TENSO_E_SHUTDOWN: TensoShutdownError,
    TENSO_E_CONNECTION: TensoConnectionError,
    TENSO_E_AUTH: TensoAuthError,
    TENSO_E_BAD_ADDRESS: TensoValueError,
    TENSO_E_CANCELLED: TensoCancelledError,
}

# Upstream's words for packet faults (tenso 0.24), which users match on; ours follow them as
# detail. Streams cut inside a packet get upstream's "Stream ended during ..." from libtenso's
# decoder itself.
_UPSTREAM_WORDS: Dict[int, str] = {
    TENSO_E_CHECKSUM: "Integrity check failed",
    TENSO_E_TRUNCATED: "Packet too short",
    TENSO_E_BAD_MAGIC: "Invalid tenso packet",
    TENSO_E_TOO_MANY_DIMS: "Packet exceeds maximum dimensions",
    TENSO_E_TOO_MANY_ELEMENTS: "Packet exceeds maximum elements",
}


def _in_upstream_words(e: TensoError) -> TensoError:
    """``e`` with upstream's words for its status in front of its message (same class and
    status); ``e`` itself when upstream has none or the message has them already."""
    words = _UPSTREAM_WORDS.get(getattr(e, "status", 0))
    message = str(e)
    if words is None or message.startswith((words, "Stream ended")):
        return e
    out = type(e)(f"{words}: {message}")
    out.status = e.status
    return out


def _over_size_limit(e: BaseException) -> bool:
    """True for a refusal by a size limit the caller set (packet, decoded bytes, inflation) or
    memory running out: what a server answers with "too large" (HTTP 413, gRPC
    RESOURCE_EXHAUSTED), rather than "malformed"."""
    if isinstance(e, TensoMemoryError):
        return True
    return isinstance(e, TensoLimitError) and getattr(e, "status", 0) == TENSO_E_LIMIT


__all__ = [
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
