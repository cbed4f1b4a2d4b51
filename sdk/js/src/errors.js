// errors.js - the exceptions tenso throws: one class per family of libtenso statuses, as the
// Python SDK has them (tenso.errors). Each error carries the C status name (`statusName`, e.g.
// "TENSO_E_TRUNCATED"), its code (`status`) and the engine's message.

/** Base class of every tenso error. An error raised by the JavaScript layer itself (an option,
 *  a value it cannot take) carries its class's `defaultStatus`. */
export class TensoError extends Error {
  static defaultStatus = 'TENSO_E_INTERNAL';
  constructor(message, statusName = new.target.defaultStatus, status = undefined) {
    super(message);
    this.name = new.target.name;
    /** The libtenso status name ("TENSO_E_CHECKSUM", ...). */
    this.statusName = statusName;
    /** The libtenso status code (negative), when the error came from the engine. */
    this.status = status;
  }
}
/** Invalid argument or invalid packet (INVALID_ARGUMENT, BUFFER_TOO_SMALL, DUPLICATE_KEY, BAD_UTF8). */
export class TensoValueError extends TensoError {}
/** The bytes are not a well-formed packet (BAD_MAGIC, MALFORMED, BAD_BUNDLE, COMPRESSION, CORRUPT). */
export class TensoCorruptError extends TensoValueError {}
/** The packet or the stream ends before the packet does (TRUNCATED). */
export class TensoTruncatedError extends TensoCorruptError {}
/** The XXH3-64 integrity footer does not match (CHECKSUM). */
export class TensoChecksumError extends TensoCorruptError {}
/** A valid packet this build cannot return (UNSUPPORTED_VERSION, BAD_DTYPE, UNSUPPORTED_KIND). */
export class TensoUnsupportedError extends TensoValueError {}
/** A safety limit was exceeded (TOO_MANY_DIMS, TOO_MANY_ELEMENTS, LIMIT). */
export class TensoLimitError extends TensoValueError {}
/** A value tenso cannot serialize. */
export class TensoTypeError extends TensoError {}
/** A stream ended cleanly where a packet was required (END_OF_STREAM). */
export class TensoEOFError extends TensoError {}
/** The engine could not allocate memory (NO_MEMORY). */
export class TensoMemoryError extends TensoError {}
/** A bug in tenso (USER, INTERNAL, anything unexpected): please report it. */
export class TensoInternalError extends TensoError {}
/** An HTTP exchange failed: `httpStatus` and the server's `detail`. */
export class TensoHTTPError extends TensoError {
  constructor(httpStatus, detail) {
    super(`HTTP ${httpStatus}: ${detail}`, 'TENSO_E_IO');
    this.httpStatus = httpStatus;
    this.detail = detail;
  }
}

// What an error of each class raised by the JavaScript layer itself names as its status.
for (const [Cls, statusName] of [
  [TensoValueError, 'TENSO_E_INVALID_ARGUMENT'], [TensoCorruptError, 'TENSO_E_MALFORMED'],
  [TensoTruncatedError, 'TENSO_E_TRUNCATED'], [TensoChecksumError, 'TENSO_E_CHECKSUM'],
  [TensoUnsupportedError, 'TENSO_E_UNSUPPORTED_KIND'], [TensoLimitError, 'TENSO_E_LIMIT'],
  [TensoTypeError, 'TENSO_E_INVALID_ARGUMENT'], [TensoEOFError, 'TENSO_E_END_OF_STREAM'],
  [TensoMemoryError, 'TENSO_E_NO_MEMORY'],
]) {
  Cls.defaultStatus = statusName;
}

const byStatus = {
  TENSO_E_INVALID_ARGUMENT: TensoValueError,
  TENSO_E_BUFFER_TOO_SMALL: TensoValueError,
  TENSO_E_DUPLICATE_KEY: TensoValueError,
  TENSO_E_BAD_UTF8: TensoValueError,
  TENSO_E_TRUNCATED: TensoTruncatedError,
  TENSO_E_BAD_MAGIC: TensoCorruptError,
  TENSO_E_MALFORMED: TensoCorruptError,
  TENSO_E_BAD_BUNDLE: TensoCorruptError,
  TENSO_E_COMPRESSION: TensoCorruptError,
  TENSO_E_CORRUPT: TensoCorruptError,
  TENSO_E_CHECKSUM: TensoChecksumError,
  TENSO_E_UNSUPPORTED_VERSION: TensoUnsupportedError,
  TENSO_E_BAD_DTYPE: TensoUnsupportedError,
  TENSO_E_UNSUPPORTED_KIND: TensoUnsupportedError,
  TENSO_E_TOO_MANY_DIMS: TensoLimitError,
  TENSO_E_TOO_MANY_ELEMENTS: TensoLimitError,
  TENSO_E_LIMIT: TensoLimitError,
  TENSO_E_END_OF_STREAM: TensoEOFError,
  TENSO_E_NO_MEMORY: TensoMemoryError,
};

/** The error for a libtenso status name and message. */
export function errorFor(statusName, message, status = undefined) {
  const Cls = byStatus[statusName] || TensoInternalError;
  return new Cls(message || statusName, statusName, status);
}
