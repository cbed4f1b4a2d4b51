//! Encoding: the [`Encode`] trait and the entry points that write packets.
use std::borrow::Cow;
use std::ops::Deref;
use std::path::Path;

use tenso_sys as sys;

use crate::error::{check, Error, Result};
use crate::options::Options;
use crate::tensor::Tensor;
use crate::value::{Bundle, Value};

pub(crate) mod private {
    use super::*;

    /// What an encodable value is to libtenso: a dense tensor or a value handle.
    // A short-lived stack value made once per encode call: boxing the large variant would
    // allocate on every call instead.
    #[allow(clippy::large_enum_variant)]
    #[derive(Debug)]
    pub enum Source<'s> {
        /// A dense tensor. The flag says whether its elements are borrowed for the trait's
        /// `'a` (a [`Tensor`]) rather than only for the borrow of `self` (users' types, whose
        /// elements a [`Bundle`] therefore copies). A [`Tensor`] lends itself: copying its
        /// 32-dim shape array was a sixth of a small encode.
        Tensor(Cow<'s, Tensor<'s>>, bool),
        Value(&'s Value<'s>),
        /// A value that owns a copy of the elements (a non-contiguous array, copied once).
        Owned(Value<'static>),
    }
}
use private::Source;

/// Something that can be encoded as one packet: a [`Tensor`], a [`Bundle`] or a [`Value`]
/// (a composite kind or a pre-encoded packet), a reference to one, or a tensor type of your
/// own.
///
/// `'a` is the lifetime of the memory the value borrows; a [`Bundle<'a>`](Bundle) takes any
/// child whose borrows outlive `'a`.
///
/// The trait is open, like the `safetensors` crate's `View`: implement
/// [`tensor`](Encode::tensor) for your own type, describing its elements (borrowed, C order,
/// little-endian) as a [`Tensor`], and every encoding call takes it. Encoding reads the
/// elements in place, except [`Bundle::insert`], which copies the elements of such a type
/// (its borrow of `self` ends with the call).
///
/// ```
/// use tenso::{Encode, Tensor};
///
/// /// A user's own matrix type.
/// struct Matrix {
///     rows: usize,
///     cols: usize,
///     data: Vec<f32>,
/// }
///
/// impl Encode<'_> for Matrix {
///     fn tensor(&self) -> tenso::Result<Tensor<'_>> {
///         Tensor::new(&self.data, &[self.rows, self.cols])
///     }
/// }
///
/// let m = Matrix { rows: 2, cols: 2, data: vec![1.0, 2.0, 3.0, 4.0] };
/// let packet = tenso::dumps(&m)?;
/// assert_eq!(packet, tenso::dumps(&Tensor::new(&m.data, &[2, 2])?)?);
/// let bundle = tenso::Bundle::new().with("m", &m)?;
/// assert_eq!(tenso::loads(&tenso::dumps(&bundle)?)?.get("m").unwrap().shape(), &[2, 2]);
/// # Ok::<(), tenso::Error>(())
/// ```
pub trait Encode<'a> {
    /// The dense tensor to encode: dtype, shape and elements borrowed from `self`.
    /// [`Value`] and [`Bundle`] are not plain tensors and return
    /// [`ErrorKind::UnsupportedKind`](crate::ErrorKind::UnsupportedKind) (they encode
    /// through libtenso value handles instead).
    fn tensor(&self) -> Result<Tensor<'_>>;

    #[doc(hidden)]
    fn source(&self) -> Result<Source<'_>> {
        Ok(Source::Tensor(Cow::Owned(self.tensor()?), false))
    }
}

impl<'a, 'b: 'a> Encode<'a> for Tensor<'b> {
    fn tensor(&self) -> Result<Tensor<'_>> {
        Ok(*self)
    }
    fn source(&self) -> Result<Source<'_>> {
        Ok(Source::Tensor(Cow::Borrowed(self), true))
    }
}

fn not_a_tensor(what: &str) -> Error {
    Error::new(crate::ErrorKind::UnsupportedKind, format!("a {what} is not a plain dense tensor"))
}

impl<'a, 'b: 'a> Encode<'a> for Value<'b> {
    fn tensor(&self) -> Result<Tensor<'_>> {
        Err(not_a_tensor("Value"))
    }
    fn source(&self) -> Result<Source<'_>> {
        Ok(Source::Value(self))
    }
}

impl<'a, 'b: 'a> Encode<'a> for Bundle<'b> {
    fn tensor(&self) -> Result<Tensor<'_>> {
        Err(not_a_tensor("Bundle"))
    }
    fn source(&self) -> Result<Source<'_>> {
        Ok(Source::Value(self.as_value()))
    }
}

impl<'a, T: Encode<'a> + ?Sized> Encode<'a> for &T {
    fn tensor(&self) -> Result<Tensor<'_>> {
        (**self).tensor()
    }
    fn source(&self) -> Result<Source<'_>> {
        (**self).source()
    }
}

/// Runs one of the paired tensor/value entry points of the C API.
macro_rules! dispatch {
    ($src:expr, |$t:ident| $tensor_call:expr, |$v:ident| $value_call:expr) => {
        match $src {
            Source::Tensor(tensor, _) => {
                let raw = tensor.raw();
                let $t: *const sys::tenso_tensor = &raw;
                // SAFETY: the description points into a live Tensor (shape) and its
                // borrowed data, both alive for this call.
                unsafe { $tensor_call }
            }
            Source::Value(value) => {
                let $v = value.as_ptr();
                // SAFETY: a live value handle; what it borrows outlives the value.
                unsafe { $value_call }
            }
            Source::Owned(value) => {
                let $v = value.as_ptr();
                // SAFETY: a live value handle; what it borrows outlives the value.
                unsafe { $value_call }
            }
        }
    };
}

/// A packet in memory that libtenso allocated, 64-byte aligned (so bodies in it are aligned
/// in memory as well as in the packet). Dereferences to the bytes.
///
/// ```
/// let buf = tenso::Options::new().dumps_buffer(&tenso::Tensor::from_slice(&[1.5f64, 2.5]))?;
/// assert_eq!(buf.as_ptr() as usize % 64, 0);
/// assert_eq!(tenso::loads(&buf)?.as_slice::<f64>()?, &[1.5, 2.5]);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Buffer {
    raw: sys::tenso_buffer,
}

// SAFETY: the buffer exclusively owns plain heap bytes.
unsafe impl Send for Buffer {}
// SAFETY: only read through &self.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// An empty buffer (TENSO_BUFFER_INIT) for libtenso calls that fill one.
    pub(crate) fn empty() -> Buffer {
        Buffer { raw: sys::TENSO_BUFFER_INIT }
    }
    /// The C struct, for a libtenso call to fill.
    pub(crate) fn raw_mut(&mut self) -> *mut sys::tenso_buffer {
        &mut self.raw
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.raw.data.is_null() {
            &[]
        } else {
            // SAFETY: data..data+size is the packet libtenso wrote and we own.
            unsafe { std::slice::from_raw_parts(self.raw.data, self.raw.size) }
        }
    }
}

impl AsRef<[u8]> for Buffer {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: a buffer libtenso filled (or TENSO_BUFFER_INIT).
        unsafe { sys::tenso_buffer_dispose(&mut self.raw) }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("len", &self.len()).finish()
    }
}

pub(crate) fn path_cstring(path: &Path) -> Result<std::ffi::CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or_else(|| Error::new(crate::ErrorKind::InvalidArgument, "path is not UTF-8"))?
        .as_bytes()
        .to_vec();
    std::ffi::CString::new(bytes).map_err(|_| Error::new(crate::ErrorKind::InvalidArgument, "path contains a NUL byte"))
}

impl Options {
    /// An upper bound of the packet size of `value` (exact without compression).
    pub fn bound<'a, E: Encode<'a> + ?Sized>(&self, value: &E) -> Result<usize> {
        let mut n = 0usize;
        let o = &self.raw;
        check(dispatch!(value.source()?, |t| sys::tenso_dumps_bound(&mut n, t, o), |v| sys::tenso_value_dumps_bound(
            &mut n, v, o
        )))?;
        Ok(n)
    }

    /// Encodes `value` into a new `Vec<u8>`: one pass over every body (copy, hashing it when
    /// integrity is on), no intermediate buffer.
    pub fn dumps<'a, E: Encode<'a> + ?Sized>(&self, value: &E) -> Result<Vec<u8>> {
        // An uncompressed dense packet is at most header + shape + exponent byte + padding +
        // body + footer: encode straight into that (one planning pass instead of two); every
        // other case, or a guess that falls short, asks libtenso for the bound.
        let guess = match value.source()? {
            Source::Tensor(tensor, _) if !self.has_compression() => {
                let raw = tensor.raw();
                let align = if self.raw.alignment == 0 { 64 } else { self.raw.alignment as u64 };
                (raw.nbytes + 10 + 4 * raw.ndim as u64 + 1 + align + 8).try_into().ok()
            }
            _ => None,
        };
        let capacity = match guess {
            Some(g) => g,
            None => self.bound(value)?,
        };
        let mut out = Vec::with_capacity(capacity);
        let n = match self.encode_into(value, out.as_mut_ptr(), out.capacity()) {
            Ok(n) => n,
            Err(e) if e.kind() == crate::ErrorKind::BufferTooSmall && guess.is_some() => {
                out.reserve_exact(self.bound(value)?);
                self.encode_into(value, out.as_mut_ptr(), out.capacity())?
            }
            Err(e) => return Err(e),
        };
        // SAFETY: libtenso initialised the first n <= capacity bytes.
        unsafe { out.set_len(n) };
        Ok(out)
    }

    /// Encodes `value` into `dst`, returning the packet length. With
    /// [`ErrorKind::BufferTooSmall`](crate::ErrorKind::BufferTooSmall),
    /// [`Error::needed`] says how many bytes it takes (an upper bound when compressing).
    pub fn dumps_into<'a, E: Encode<'a> + ?Sized>(&self, value: &E, dst: &mut [u8]) -> Result<usize> {
        self.encode_into(value, dst.as_mut_ptr(), dst.len())
    }

    #[inline]
    fn encode_into<'a, E: Encode<'a> + ?Sized>(&self, value: &E, dst: *mut u8, cap: usize) -> Result<usize> {
        let mut n = 0usize;
        let o = self.ptr();
        let dst = dst.cast::<std::ffi::c_void>();
        let st = dispatch!(value.source()?, |t| sys::tenso_dumps_into(dst, cap, &mut n, t, o), |v| {
            sys::tenso_value_dumps_into(dst, cap, &mut n, v, o)
        });
        match check(st) {
            Ok(()) => Ok(n),
            Err(e) if e.kind() == crate::ErrorKind::BufferTooSmall => Err(e.with_needed(n as u64)),
            Err(e) => Err(e),
        }
    }

    /// Encodes `value` into a [`Buffer`] libtenso allocates, 64-byte aligned.
    pub fn dumps_buffer<'a, E: Encode<'a> + ?Sized>(&self, value: &E) -> Result<Buffer> {
        let mut buf = Buffer::empty();
        let o = &self.raw;
        let out: *mut sys::tenso_buffer = &mut buf.raw;
        check(dispatch!(value.source()?, |t| sys::tenso_dumps(out, t, o), |v| sys::tenso_value_dumps(out, v, o)))?;
        Ok(buf)
    }

    /// Saves the packet for `value` at `path` atomically: written to a temporary file in the
    /// same directory, flushed, renamed over `path`. On failure the old file is intact.
    pub fn save<'a, E: Encode<'a> + ?Sized>(&self, path: impl AsRef<Path>, value: &E) -> Result<()> {
        let c = path_cstring(path.as_ref())?;
        let o = &self.raw;
        let p = c.as_ptr();
        check(dispatch!(value.source()?, |t| sys::tenso_save_file(p, t, o), |v| sys::tenso_value_save_file(p, v, o)))
    }

    /// Writes the packet for `value` to a file descriptor (socket, pipe, file) with vectored
    /// I/O: bodies go from the caller's memory to the kernel, never copied. Returns the
    /// bytes written.
    #[cfg(unix)]
    pub fn write_fd<'a, E: Encode<'a> + ?Sized>(&self, fd: impl std::os::fd::AsFd, value: &E) -> Result<u64> {
        use std::os::fd::AsRawFd;
        let fd = fd.as_fd();
        let raw = fd.as_raw_fd();
        let mut n = 0u64;
        let o = &self.raw;
        check(dispatch!(value.source()?, |t| sys::tenso_write_fd(&mut n, raw, t, o), |v| sys::tenso_value_write_fd(
            &mut n, raw, v, o
        )))?;
        Ok(n)
    }

    /// Writes the packet for `value` to any `Write` (encoded into memory, then `write_all`).
    /// For files and sockets [`write_fd`](Options::write_fd) avoids the copy.
    pub fn write_to<'a, W: std::io::Write + ?Sized, E: Encode<'a> + ?Sized>(
        &self,
        w: &mut W,
        value: &E,
    ) -> Result<u64> {
        let bytes = self.dumps(value)?;
        w.write_all(&bytes).map_err(|e| Error::io(e, "writing a packet"))?;
        Ok(bytes.len() as u64)
    }
}

/// Encodes `value` with the default options into a new `Vec<u8>` (the bytes of upstream
/// `tenso.dumps`).
///
/// ```
/// let data: Vec<f32> = (0..6).map(|i| i as f32).collect();
/// let packet = tenso::dumps(&tenso::Tensor::new(&data, &[2, 3])?)?;
/// assert_eq!(&packet[..4], b"TNSO");
/// assert_eq!(packet.len(), 64 + 24); // header + shape, padded to 64, then the body
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn dumps<'a, E: Encode<'a> + ?Sized>(value: &E) -> Result<Vec<u8>> {
    Options::default().dumps(value)
}

/// Encodes `value` with the default options into `dst`; see [`Options::dumps_into`].
///
/// ```
/// let mut buf = [0u8; 256];
/// let n = tenso::dumps_into(&tenso::Tensor::from_slice(&[7i32; 4]), &mut buf)?;
/// // A stack array is only byte-aligned: copy the elements out rather than borrow them.
/// assert_eq!(tenso::loads(&buf[..n])?.to_vec::<i32>()?, vec![7; 4]);
/// let err = tenso::dumps_into(&tenso::Tensor::from_slice(&[7i32; 4]), &mut buf[..10]).unwrap_err();
/// assert_eq!(err.needed(), Some(n as u64));
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn dumps_into<'a, E: Encode<'a> + ?Sized>(value: &E, dst: &mut [u8]) -> Result<usize> {
    Options::default().dumps_into(value, dst)
}

/// Saves `value` at `path` atomically with the default options; see [`Options::save`].
pub fn save<'a, E: Encode<'a> + ?Sized>(path: impl AsRef<Path>, value: &E) -> Result<()> {
    Options::default().save(path, value)
}

/// Writes `value` to a file descriptor with the default options; see [`Options::write_fd`].
#[cfg(unix)]
pub fn write_fd<'a, E: Encode<'a> + ?Sized>(fd: impl std::os::fd::AsFd, value: &E) -> Result<u64> {
    Options::default().write_fd(fd, value)
}

/// Writes `value` to a `Write` with the default options; see [`Options::write_to`].
pub fn write_to<'a, W: std::io::Write + ?Sized, E: Encode<'a> + ?Sized>(w: &mut W, value: &E) -> Result<u64> {
    Options::default().write_to(w, value)
}
