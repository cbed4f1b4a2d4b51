//! [`Error`]: a libtenso status plus the message that went with it.
use std::ffi::CStr;
use std::fmt;

use tenso_sys as sys;

/// The result type of every fallible call of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, one variant per libtenso status (`TENSO_E_*`), plus
/// [`Misaligned`](ErrorKind::Misaligned) for a typed borrow the memory cannot support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `TENSO_E_INVALID_ARGUMENT`: a bad argument (shape/length mismatch, option, index...).
    InvalidArgument,
    /// `TENSO_E_BUFFER_TOO_SMALL`: see [`Error::needed`] for the size required.
    BufferTooSmall,
    /// `TENSO_E_TRUNCATED`: the input (or stream) ends inside the packet.
    Truncated,
    /// `TENSO_E_BAD_MAGIC`: the bytes do not start with `TNSO`.
    BadMagic,
    /// `TENSO_E_UNSUPPORTED_VERSION`: a protocol version other than 1 to 4.
    UnsupportedVersion,
    /// `TENSO_E_BAD_DTYPE`: an unknown dtype, or not the one asked for.
    BadDtype,
    /// `TENSO_E_TOO_MANY_DIMS`: more than 32 dimensions (or the decode limit).
    TooManyDims,
    /// `TENSO_E_TOO_MANY_ELEMENTS`: more elements than allowed.
    TooManyElements,
    /// `TENSO_E_CHECKSUM`: the XXH3-64 integrity footer does not match.
    Checksum,
    /// `TENSO_E_COMPRESSION`: an invalid LZ4 frame, or one of the wrong size.
    Compression,
    /// `TENSO_E_BAD_BUNDLE`: an invalid bundle (key UTF-8, entry lengths).
    BadBundle,
    /// `TENSO_E_MALFORMED`: a structurally invalid packet.
    Malformed,
    /// `TENSO_E_LIMIT`: nesting depth or `max_packet_bytes` exceeded.
    Limit,
    /// `TENSO_E_UNSUPPORTED_KIND`: a valid packet of another kind than the call handles.
    UnsupportedKind,
    /// `TENSO_E_NO_MEMORY`: an allocation failed.
    NoMemory,
    /// `TENSO_E_IO`, or an error of a Rust `Read`/`Write` (see [`std::error::Error::source`]).
    Io,
    /// `TENSO_E_END_OF_STREAM`: the stream ended cleanly before a packet.
    EndOfStream,
    /// `TENSO_E_NOT_AVAILABLE`: not available in this build or on this machine.
    NotAvailable,
    /// `TENSO_E_USER`: a callback aborted the operation.
    User,
    /// `TENSO_E_INTERNAL`: a bug in libtenso.
    Internal,
    /// `TENSO_E_NOT_FOUND`: no such key, tensor name or shared-memory segment (or it
    /// expired).
    NotFound,
    /// `TENSO_E_EXISTS`: the segment or file to be created exists already.
    Exists,
    /// `TENSO_E_FULL`: a cache pool with no room left after expiry and eviction (or no free
    /// entry slot).
    Full,
    /// `TENSO_E_CORRUPT`: a pool or file whose own structure is invalid or foreign.
    Corrupt,
    /// `TENSO_E_TIMEOUT`: a lock was not obtained in time, or a stream read or write timed
    /// out (the socket's timeout, or a `Read`'s `TimedOut` / `WouldBlock`).
    Timeout,
    /// `TENSO_E_BAD_OFFSET`: a tensor's byte range is outside the file, overlaps another, is
    /// misaligned or leaves a hole the format forbids.
    BadOffset,
    /// `TENSO_E_DUPLICATE_KEY`: a name that occurs twice where names must be unique.
    DuplicateKey,
    /// `TENSO_E_BAD_UTF8`: a name, key or metadata string that is not UTF-8.
    BadUtf8,
    /// `TENSO_E_GPU_UNAVAILABLE`: no CUDA runtime, driver or device could be used.
    GpuUnavailable,
    /// `TENSO_E_GPU`: a CUDA call failed on a device that is present.
    Gpu,
    /// `TENSO_E_SHUTDOWN`: the node was shut down while the call was pending, or before it.
    Shutdown,
    /// `TENSO_E_CONNECTION`: a peer could not be reached, refused or reset the connection, or
    /// went away mid-transfer.
    Connection,
    /// `TENSO_E_AUTH`: a peer failed authentication (TLS handshake, CA chain, pinned key).
    Auth,
    /// `TENSO_E_BAD_ADDRESS`: an address or node ticket that cannot be parsed or resolved.
    BadAddress,
    /// `TENSO_E_CANCELLED`: the call was cancelled through its cancel token.
    Cancelled,
    /// The data is not aligned for the element type asked for (bundle entries can sit at
    /// any address): copy it with `to_vec` instead. Raised by this crate, not by libtenso.
    Misaligned,
    /// A status this version of the crate does not know.
    Unknown,
}

impl ErrorKind {
    /// The kind of a libtenso status code.
    pub fn from_status(status: i32) -> ErrorKind {
        use ErrorKind::*;
        match status {
            sys::TENSO_E_INVALID_ARGUMENT => InvalidArgument,
            sys::TENSO_E_BUFFER_TOO_SMALL => BufferTooSmall,
            sys::TENSO_E_TRUNCATED => Truncated,
            sys::TENSO_E_BAD_MAGIC => BadMagic,
            sys::TENSO_E_UNSUPPORTED_VERSION => UnsupportedVersion,
            sys::TENSO_E_BAD_DTYPE => BadDtype,
            sys::TENSO_E_TOO_MANY_DIMS => TooManyDims,
            sys::TENSO_E_TOO_MANY_ELEMENTS => TooManyElements,
            sys::TENSO_E_CHECKSUM => Checksum,
            sys::TENSO_E_COMPRESSION => Compression,
            sys::TENSO_E_BAD_BUNDLE => BadBundle,
            sys::TENSO_E_MALFORMED => Malformed,
            sys::TENSO_E_LIMIT => Limit,
            sys::TENSO_E_UNSUPPORTED_KIND => UnsupportedKind,
            sys::TENSO_E_NO_MEMORY => NoMemory,
            sys::TENSO_E_IO => Io,
            sys::TENSO_E_END_OF_STREAM => EndOfStream,
            sys::TENSO_E_NOT_AVAILABLE => NotAvailable,
            sys::TENSO_E_USER => User,
            sys::TENSO_E_INTERNAL => Internal,
            sys::TENSO_E_NOT_FOUND => NotFound,
            sys::TENSO_E_EXISTS => Exists,
            sys::TENSO_E_FULL => Full,
            sys::TENSO_E_CORRUPT => Corrupt,
            sys::TENSO_E_TIMEOUT => Timeout,
            sys::TENSO_E_BAD_OFFSET => BadOffset,
            sys::TENSO_E_DUPLICATE_KEY => DuplicateKey,
            sys::TENSO_E_BAD_UTF8 => BadUtf8,
            sys::TENSO_E_GPU_UNAVAILABLE => GpuUnavailable,
            sys::TENSO_E_GPU => Gpu,
            sys::TENSO_E_SHUTDOWN => Shutdown,
            sys::TENSO_E_CONNECTION => Connection,
            sys::TENSO_E_AUTH => Auth,
            sys::TENSO_E_BAD_ADDRESS => BadAddress,
            sys::TENSO_E_CANCELLED => Cancelled,
            _ => Unknown,
        }
    }

    /// The libtenso status of this kind (`TENSO_E_INVALID_ARGUMENT` for `Misaligned`, whose
    /// cause is the caller's memory; `TENSO_E_INTERNAL` for `Unknown`).
    pub fn status(self) -> i32 {
        use ErrorKind::*;
        match self {
            InvalidArgument | Misaligned => sys::TENSO_E_INVALID_ARGUMENT,
            BufferTooSmall => sys::TENSO_E_BUFFER_TOO_SMALL,
            Truncated => sys::TENSO_E_TRUNCATED,
            BadMagic => sys::TENSO_E_BAD_MAGIC,
            UnsupportedVersion => sys::TENSO_E_UNSUPPORTED_VERSION,
            BadDtype => sys::TENSO_E_BAD_DTYPE,
            TooManyDims => sys::TENSO_E_TOO_MANY_DIMS,
            TooManyElements => sys::TENSO_E_TOO_MANY_ELEMENTS,
            Checksum => sys::TENSO_E_CHECKSUM,
            Compression => sys::TENSO_E_COMPRESSION,
            BadBundle => sys::TENSO_E_BAD_BUNDLE,
            Malformed => sys::TENSO_E_MALFORMED,
            Limit => sys::TENSO_E_LIMIT,
            UnsupportedKind => sys::TENSO_E_UNSUPPORTED_KIND,
            NoMemory => sys::TENSO_E_NO_MEMORY,
            Io => sys::TENSO_E_IO,
            EndOfStream => sys::TENSO_E_END_OF_STREAM,
            NotAvailable => sys::TENSO_E_NOT_AVAILABLE,
            User => sys::TENSO_E_USER,
            Internal | Unknown => sys::TENSO_E_INTERNAL,
            NotFound => sys::TENSO_E_NOT_FOUND,
            Exists => sys::TENSO_E_EXISTS,
            Full => sys::TENSO_E_FULL,
            Corrupt => sys::TENSO_E_CORRUPT,
            Timeout => sys::TENSO_E_TIMEOUT,
            BadOffset => sys::TENSO_E_BAD_OFFSET,
            DuplicateKey => sys::TENSO_E_DUPLICATE_KEY,
            BadUtf8 => sys::TENSO_E_BAD_UTF8,
            GpuUnavailable => sys::TENSO_E_GPU_UNAVAILABLE,
            Gpu => sys::TENSO_E_GPU,
            Shutdown => sys::TENSO_E_SHUTDOWN,
            Connection => sys::TENSO_E_CONNECTION,
            Auth => sys::TENSO_E_AUTH,
            BadAddress => sys::TENSO_E_BAD_ADDRESS,
            Cancelled => sys::TENSO_E_CANCELLED,
        }
    }
}

/// A failure: its [`ErrorKind`], the libtenso status code and a message for humans.
///
/// Errors raised by libtenso carry the text of `tenso_last_error()`, copied on the calling
/// thread right after the failing call (and the thread's message is then cleared), so it can
/// be read later from any thread.
///
/// ```
/// let err = tenso::loads(b"NOPE and more bytes").unwrap_err();
/// assert_eq!(err.kind(), tenso::ErrorKind::BadMagic);
/// assert_eq!(err.status(), -4);
/// assert_eq!(err.status_name(), "TENSO_E_BAD_MAGIC");
/// assert!(!err.message().is_empty());
/// ```
pub struct Error {
    kind: ErrorKind,
    status: i32,
    message: String,
    needed: Option<u64>,
    index: Option<u64>,
    source: Option<std::io::Error>,
}

impl Error {
    /// Builds the error for a failed libtenso call: must run on the calling thread right after
    /// the call, before any other tenso call.
    #[cold]
    pub(crate) fn last(status: i32) -> Error {
        // SAFETY: tenso_last_error never returns NULL; the string is valid until the next
        // tenso call on this thread, and is copied before that.
        let message = unsafe { CStr::from_ptr(sys::tenso_last_error()) }.to_string_lossy().into_owned();
        unsafe { sys::tenso_error_clear() };
        Error { kind: ErrorKind::from_status(status), status, message, needed: None, index: None, source: None }
    }

    /// An error raised by this crate (never by libtenso).
    #[cold]
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, status: kind.status(), message: message.into(), needed: None, index: None, source: None }
    }

    /// An error of a Rust `Read`/`Write`/file call: [`ErrorKind::Timeout`] for a read or write
    /// timeout (`TimedOut`, and the `WouldBlock` a socket with `set_read_timeout` returns),
    /// [`ErrorKind::Io`] otherwise; the `io::Error` is kept as the source.
    #[cold]
    pub(crate) fn io(err: std::io::Error, what: &str) -> Error {
        let kind = match err.kind() {
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ErrorKind::Timeout,
            _ => ErrorKind::Io,
        };
        Error {
            kind,
            status: kind.status(),
            message: format!("{what}: {err}"),
            needed: None,
            index: None,
            source: Some(err),
        }
    }

    pub(crate) fn with_needed(mut self, needed: u64) -> Error {
        self.needed = Some(needed);
        self
    }

    pub(crate) fn with_index(mut self, index: u64) -> Error {
        self.index = Some(index);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The libtenso status code (`TENSO_E_*`, negative).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The symbolic name of [`status`](Error::status), e.g. `"TENSO_E_CHECKSUM"`.
    pub fn status_name(&self) -> &'static str {
        // SAFETY: tenso_status_name returns a static, NUL-terminated ASCII string.
        unsafe { CStr::from_ptr(sys::tenso_status_name(self.status)) }.to_str().unwrap_or("TENSO_E_UNKNOWN")
    }

    /// The message: libtenso's `tenso_last_error()` text, or this crate's.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// With [`ErrorKind::BufferTooSmall`], the bytes the destination needs.
    pub fn needed(&self) -> Option<u64> {
        self.needed
    }

    /// The tensor a failure concerns, where the call reports one: the first tensor that
    /// failed [`Archive::verify`](crate::Archive::verify).
    pub fn index(&self) -> Option<u64> {
        self.index
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("status", &self.status).field("message", &self.message);
        if let Some(n) = self.needed {
            d.field("needed", &n);
        }
        if let Some(i) = self.index {
            d.field("index", &i);
        }
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status_name())
        } else {
            write!(f, "{} ({})", self.message, self.status_name())
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        use std::io::ErrorKind as Io;
        let kind = match e.kind {
            ErrorKind::Io => return e.source.unwrap_or_else(|| std::io::Error::other(e.message)),
            ErrorKind::Truncated | ErrorKind::EndOfStream => Io::UnexpectedEof,
            ErrorKind::InvalidArgument | ErrorKind::Misaligned | ErrorKind::BufferTooSmall => Io::InvalidInput,
            ErrorKind::NoMemory => Io::OutOfMemory,
            ErrorKind::NotAvailable => Io::Unsupported,
            ErrorKind::NotFound => Io::NotFound,
            ErrorKind::Exists => Io::AlreadyExists,
            ErrorKind::Timeout => Io::TimedOut,
            ErrorKind::Full | ErrorKind::User => Io::Other,
            _ => Io::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}

/// `?` on `std::fs::read`, `File::open` and other `std::io` calls in functions returning
/// [`tenso::Result`](Result): [`ErrorKind::Io`] (or [`ErrorKind::Timeout`] for a read or write
/// timeout), with the `io::Error` as the [`source`](std::error::Error::source).
///
/// ```
/// fn first_tensor(path: &std::path::Path) -> tenso::Result<Vec<f32>> {
///     let bytes = std::fs::read(path)?;
///     let values = tenso::loads(&bytes)?.to_vec();
///     values
/// }
/// let err = first_tensor(std::path::Path::new("/nonexistent/x.tenso")).unwrap_err();
/// assert_eq!(err.kind(), tenso::ErrorKind::Io);
/// assert_eq!(err.status_name(), "TENSO_E_IO");
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
/// ```
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::io(e, "I/O error")
    }
}

/// A name or key for libtenso as a NUL-terminated string ([`ErrorKind::InvalidArgument`]
/// for an interior NUL, which C would silently cut the name at).
pub(crate) fn c_name(name: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(name)
        .map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("{what} {name:?} contains a NUL byte")))
}

/// `Ok(())` for `TENSO_OK`, otherwise the error with the thread's message.
#[inline]
pub(crate) fn check(status: i32) -> Result<()> {
    if status == sys::TENSO_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}
