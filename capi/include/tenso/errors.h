/**
 * @file tenso/errors.h
 * @brief status codes and the thread-local error message.
 *
 * Every fallible function returns a tenso_status: TENSO_OK (0) on success, a negative
 * TENSO_E_* code on failure. The values are pinned: they are part of the ABI and are never
 * renumbered; new codes are only ever appended. Success is decided by the return value alone;
 * the message from tenso_last_error() is detail for humans.
 */
#ifndef TENSO_ERRORS_H
#define TENSO_ERRORS_H

#include "tenso/common.h"

TENSO_BEGIN_DECL

/** A status code. An int32_t, not a C enum, so its size and signedness are fixed. */
typedef int32_t tenso_status;

/** Success. Every other status is negative. */
#define TENSO_OK 0
/** An argument is invalid: a NULL pointer, a bad dtype or alignment, a length mismatch. */
#define TENSO_E_INVALID_ARGUMENT (-1)
/** The destination buffer is too small; the needed size is reported through an out-param. */
#define TENSO_E_BUFFER_TOO_SMALL (-2)
/** The input ends before the packet does (also: a stream that ends inside a packet). */
#define TENSO_E_TRUNCATED (-3)
/** The input does not start with the magic bytes "TNSO". */
#define TENSO_E_BAD_MAGIC (-4)
/** The protocol version byte is not one this library reads (1 to 4). */
#define TENSO_E_UNSUPPORTED_VERSION (-5)
/** An unknown dtype code, or one that the packet kind does not allow. */
#define TENSO_E_BAD_DTYPE (-6)
/** More dimensions than allowed (32, or the decode option's tighter max_ndim). */
#define TENSO_E_TOO_MANY_DIMS (-7)
/** The element count overflows or exceeds the limit (1e9, or max_elements). */
#define TENSO_E_TOO_MANY_ELEMENTS (-8)
/** The XXH3-64 integrity footer does not match the bytes it covers. */
#define TENSO_E_CHECKSUM (-9)
/** The LZ4 frame is invalid, or its decompressed size is not shape x itemsize. */
#define TENSO_E_COMPRESSION (-10)
/** A bundle is invalid: bad key UTF-8, entry lengths that disagree with their packets. */
#define TENSO_E_BAD_BUNDLE (-11)
/** The packet is structurally invalid in a way no more specific code describes. */
#define TENSO_E_MALFORMED (-12)
/** A limit other than ndim/elements was exceeded: nesting depth, max_packet_bytes. */
#define TENSO_E_LIMIT (-13)
/** The packet kind is valid but not what the call handles (e.g. a bundle's dtype). */
#define TENSO_E_UNSUPPORTED_KIND (-14)
/** An allocation failed. */
#define TENSO_E_NO_MEMORY (-15)
/** A system call failed; the message carries errno's text. */
#define TENSO_E_IO (-16)
/** A stream ended cleanly before the first byte of a packet: not a failure of the data. */
#define TENSO_E_END_OF_STREAM (-17)
/** The feature or device is not available in this build or on this machine. */
#define TENSO_E_NOT_AVAILABLE (-18)
/** A user callback returned non-zero and aborted the operation. */
#define TENSO_E_USER (-19)
/** A bug in tenso: an unexpected internal exception. Please report it. */
#define TENSO_E_INTERNAL (-20)
/** A key, tensor name or shared-memory segment that does not exist (or has expired). @since 1.1 */
#define TENSO_E_NOT_FOUND (-21)
/** A shared-memory segment or file to be created exists already. @since 1.1 */
#define TENSO_E_EXISTS (-22)
/** A cache pool with no room left after expiry and eviction (or no free entry slot). @since 1.1 */
#define TENSO_E_FULL (-23)
/** A pool or file whose own structure is invalid or foreign: bad magic, layout version or
 *  header checksum, inconsistent geometry or counts, unparsable header. @since 1.1 */
#define TENSO_E_CORRUPT (-24)
/** A lock was not obtained in time (a live process holds it too long). @since 1.1 */
#define TENSO_E_TIMEOUT (-25)
/** A tensor's byte range is out of the file, overlaps another, is misaligned, or leaves a
 *  hole that the format forbids. @since 1.1 */
#define TENSO_E_BAD_OFFSET (-26)
/** A name that occurs twice where names must be unique. @since 1.1 */
#define TENSO_E_DUPLICATE_KEY (-27)
/** A name, key or metadata string that is not valid UTF-8. @since 1.1 */
#define TENSO_E_BAD_UTF8 (-28)
/** No CUDA runtime, driver or device could be used (tenso_last_error() carries the CUDA
 *  runtime's own message, or what was missing). @since 1.4 */
#define TENSO_E_GPU_UNAVAILABLE (-29)
/** A CUDA call failed on a device that is present (tenso_last_error() names the call and
 *  carries the runtime's message). @since 1.4 */
#define TENSO_E_GPU (-30)
/** The node (or other handle) was shut down: the call was pending then, or came after. @since 1.4 */
#define TENSO_E_SHUTDOWN (-31)
/** A peer could not be reached, refused or reset the connection, or went away mid-transfer.
 *  @since 1.4 */
#define TENSO_E_CONNECTION (-32)
/** A peer failed authentication: TLS handshake, certificate chain or pinned key. @since 1.4 */
#define TENSO_E_AUTH (-33)
/** An address or node ticket that cannot be parsed or resolved. @since 1.4 */
#define TENSO_E_BAD_ADDRESS (-34)
/** The call was cancelled through its tenso_cancel token. @since 1.4 */
#define TENSO_E_CANCELLED (-35)

/**
 * The message for the last failure on the calling thread.
 * @return never NULL; "" when nothing has failed. Library-owned, valid until the next tenso
 *         call on this thread.
 * @since 1.0
 */
TENSO_API const char *tenso_last_error(void);

/** Resets the calling thread's message to "". @since 1.0 */
TENSO_API void tenso_error_clear(void);

/**
 * The symbolic name of a status ("TENSO_E_CHECKSUM"); "TENSO_E_UNKNOWN" for values this
 * version does not know. Static storage, thread-safe. @since 1.0
 */
TENSO_API const char *tenso_status_name(tenso_status status);

TENSO_END_DECL

#endif /* TENSO_ERRORS_H */
