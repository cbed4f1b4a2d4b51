//! Streams and files: [`Packet`] (an owning decoded packet), readers and file loading.
use std::fmt;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;
use std::ptr;

use tenso_sys as sys;

use crate::decoder::Decoder;
use crate::encode::path_cstring;
use crate::error::{Error, ErrorKind, Result};
use crate::options::DecodeOptions;
use crate::view::{View, ViewRef};

/// A decoded packet that owns its memory: read from a stream or a file (mapped or read into
/// an aligned buffer). Dereferences to [`ViewRef`] for everything about the packet; its
/// bodies are aligned in memory as the packet declares (top-level bodies; bundle entries
/// follow their sub-packets).
///
/// `Send` and `Sync`, and `'static`: it can be moved to and shared between threads freely.
pub struct Packet {
    // Field order matters: the view (which may point into `_buf`) is dropped first.
    view: View<'static>,
    _buf: Option<Vec<u8>>,
}

/// The elements copied out, as [`ViewRef::to_vec`].
impl<T: crate::Element> TryFrom<&Packet> for Vec<T> {
    type Error = Error;
    fn try_from(p: &Packet) -> Result<Vec<T>> {
        p.to_vec()
    }
}

impl Deref for Packet {
    type Target = ViewRef;
    fn deref(&self) -> &ViewRef {
        &self.view
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Packet").field(&**self).finish()
    }
}

impl Packet {
    /// SAFETY: `p` is a root view that owns its data (stream and file readers of libtenso).
    pub(crate) unsafe fn from_owning_view(p: *mut sys::tenso_view) -> Result<Packet> {
        Ok(Packet { view: View::from_raw(p, &[])?, _buf: None })
    }

    /// Decodes a packet from bytes already in memory, copying them into a 64-byte aligned
    /// buffer the packet owns (through a [`Decoder`], so the result is `'static` and its
    /// top-level body is aligned). Trailing bytes after the packet are not kept;
    /// [`ErrorKind::Truncated`](crate::ErrorKind::Truncated) when `bytes` ends inside it.
    pub fn from_bytes(bytes: &[u8], opts: &DecodeOptions) -> Result<Packet> {
        let mut d = Decoder::new(opts)?;
        match d.feed(bytes)? {
            (_, Some(p)) => Ok(p),
            (_, None) => d.finish().and_then(|()| Err(Error::new(ErrorKind::Internal, "the decoder is idle"))),
        }
    }

    /// Decodes the packet at the start of `bytes` and keeps the vector in the packet: zero
    /// copy, and the result is `'static`, so it can live in a struct or move to another
    /// thread with its buffer. Bodies are aligned in memory as far as the vector's heap
    /// block is (the allocator's 16 bytes at least on common platforms, enough for every
    /// element type); [`values`](ViewRef::values) copies where they are not.
    ///
    /// ```
    /// struct Model {
    ///     weights: tenso::Packet,
    /// }
    /// let bytes: Vec<u8> = tenso::dumps(&tenso::Tensor::new(&[0.5f32; 4], &[2, 2])?)?;
    /// let at = bytes.as_ptr() as usize;
    /// let model = Model { weights: tenso::Packet::from_vec(bytes, &Default::default())? };
    /// assert_eq!(model.weights.shape(), &[2, 2]);
    /// let w = model.weights.values::<f32>()?;
    /// assert_eq!(&*w, &[0.5; 4]);
    /// assert_eq!(w.as_ptr() as usize, at + 64); // no copy: the body inside the vector
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn from_vec(buf: Vec<u8>, opts: &DecodeOptions) -> Result<Packet> {
        let view = opts.loads(&buf)?;
        // SAFETY: the view borrows the heap block of `buf` (which does not move when the Vec
        // is moved into the Packet), which the Packet keeps unchanged and drops after the
        // view; the 'static view is never handed out.
        let view: View<'static> = unsafe { std::mem::transmute::<View<'_>, View<'static>>(view) };
        Ok(Packet { view, _buf: Some(buf) })
    }
}

/// How [`load_with`] reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Map the file read-only: O(1) in the file size without integrity checking, and works
    /// for files larger than memory.
    #[default]
    Mmap,
    /// Read the packet into an aligned buffer.
    Read,
}

/// Loads the first packet of the file at `path` by mapping it ([`LoadMode::Mmap`]).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tenso-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("w.tenso");
/// let w = [0.5f32; 1024];
/// tenso::save(&path, &tenso::Tensor::new(&w, &[32, 32])?)?;   // atomic
/// let p = tenso::load(&path)?;
/// assert_eq!(p.shape(), &[32, 32]);
/// assert_eq!(p.as_slice::<f32>()?, &w[..]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<Packet> {
    DecodeOptions::default().load(path)
}

/// Loads the first packet of the file at `path` in the given mode.
pub fn load_with(path: impl AsRef<Path>, mode: LoadMode, opts: &DecodeOptions) -> Result<Packet> {
    let c = path_cstring(path.as_ref())?;
    let mode = match mode {
        LoadMode::Mmap => sys::TENSO_LOAD_MMAP,
        LoadMode::Read => sys::TENSO_LOAD_READ,
    };
    let mut out = ptr::null_mut();
    // SAFETY: valid pointers; the view owns the mapping or buffer.
    crate::error::check(unsafe { sys::tenso_load_file(&mut out, c.as_ptr(), mode, opts.ptr()) })?;
    unsafe { Packet::from_owning_view(out) }
}

/// Reads exactly one packet from a file descriptor (socket, pipe, file) with libtenso's
/// reader: the header is checked against the limits before one aligned buffer is allocated
/// and filled; nothing past the packet is consumed. `Ok(None)` when the stream ends cleanly
/// before a packet; [`ErrorKind::Truncated`] when it ends inside one.
///
/// ```
/// use std::os::unix::net::UnixStream;
/// let (a, b) = UnixStream::pair().unwrap();
/// let x = [1u32, 2, 3];
/// tenso::write_fd(&a, &tenso::Tensor::from_slice(&x))?;   // vectored, body not copied
/// drop(a);
/// let p = tenso::read_fd(&b)?.expect("a packet");
/// assert_eq!(p.as_slice::<u32>()?, &x);
/// assert!(tenso::read_fd(&b)?.is_none());                 // clean end of stream
/// # Ok::<(), tenso::Error>(())
/// ```
#[cfg(unix)]
pub fn read_fd(fd: impl std::os::fd::AsFd) -> Result<Option<Packet>> {
    DecodeOptions::default().read_fd(fd)
}

/// Reads exactly one packet from any `Read`; see [`DecodeOptions::read_from`].
///
/// ```
/// let a = tenso::dumps(&tenso::Tensor::from_slice(&[1i8, 2]))?;
/// let b = tenso::dumps(&tenso::Tensor::from_slice(&[3.0f64]))?;
/// let stream = [a, b].concat();
/// let mut r = &stream[..];
/// assert_eq!(tenso::read_from(&mut r)?.unwrap().to_vec::<i8>()?, vec![1, 2]);
/// assert_eq!(tenso::read_from(&mut r)?.unwrap().to_vec::<f64>()?, vec![3.0]);
/// assert!(tenso::read_from(&mut r)?.is_none());
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn read_from<R: Read + ?Sized>(r: &mut R) -> Result<Option<Packet>> {
    DecodeOptions::default().read_from(r)
}

impl DecodeOptions {
    /// Loads the first packet of a file by mapping it; see [`load`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Packet> {
        load_with(path, LoadMode::Mmap, self)
    }

    /// Reads one packet from a file descriptor under these options; see [`read_fd`].
    #[cfg(unix)]
    pub fn read_fd(&self, fd: impl std::os::fd::AsFd) -> Result<Option<Packet>> {
        use std::os::fd::AsRawFd;
        let fd = fd.as_fd();
        let mut out = ptr::null_mut();
        // SAFETY: a borrowed, open fd; valid pointers.
        let st = unsafe { sys::tenso_read_fd(&mut out, fd.as_raw_fd(), self.ptr()) };
        if st == sys::TENSO_E_END_OF_STREAM {
            unsafe { sys::tenso_error_clear() };
            return Ok(None);
        }
        crate::error::check(st)?;
        // SAFETY: the stream reader's view owns its buffer.
        unsafe { Packet::from_owning_view(out) }.map(Some)
    }

    /// Reads exactly one packet from any `Read` (a TCP stream, a pipe, a decompressor...)
    /// through a [`Decoder`]: the bytes go straight from `r` into a 64-byte aligned buffer
    /// of the packet's exact length, which the [`Packet`] owns; `r` is asked for exactly what
    /// the decoder needs next, so nothing past the packet is read.
    ///
    /// `Ok(None)` when the stream ends cleanly before a packet; [`ErrorKind::Truncated`] when
    /// it ends inside one; [`ErrorKind::Limit`] when the headers claim more than
    /// [`max_packet_bytes`](DecodeOptions::max_packet_bytes) or
    /// [`max_decoded_bytes`](DecodeOptions::max_decoded_bytes) (before anything that size is
    /// allocated); [`ErrorKind::Timeout`] when `r` times out (a socket's read timeout; the
    /// partial packet is lost here, a [`Packets`] iterator or a [`Decoder`] keeps it);
    /// [`ErrorKind::Io`] for `r`'s other errors (the `io::Error` is the
    /// [`source`](std::error::Error::source)).
    pub fn read_from<R: Read + ?Sized>(&self, r: &mut R) -> Result<Option<Packet>> {
        Decoder::new(self)?.read_from(r)
    }
}

/// Iterates over the packets of a `Read` until it ends cleanly.
///
/// ```
/// let stream: Vec<u8> = (0..3u8)
///     .map(|i| tenso::dumps(&tenso::Tensor::from_slice(&[i])).unwrap())
///     .collect::<Vec<_>>()
///     .concat();
/// let got: Vec<u8> = tenso::Packets::new(&stream[..])
///     .map(|p| p.unwrap().to_vec::<u8>().unwrap()[0])
///     .collect();
/// assert_eq!(got, [0, 1, 2]);
/// ```
#[derive(Debug)]
pub struct Packets<R> {
    reader: R,
    decoder: Option<Decoder>,
    opts: DecodeOptions,
    done: bool,
}

impl<R: Read> Packets<R> {
    /// Packets of `reader` with the default decode options.
    pub fn new(reader: R) -> Packets<R> {
        Packets::with_options(reader, DecodeOptions::default())
    }
    /// Packets of `reader` under `opts`.
    pub fn with_options(reader: R, opts: DecodeOptions) -> Packets<R> {
        Packets { reader, decoder: None, opts, done: false }
    }
    /// The reader back.
    pub fn into_inner(self) -> R {
        self.reader
    }

    fn read_one(&mut self) -> Result<Option<Packet>> {
        let d = match &mut self.decoder {
            Some(d) => d,
            None => self.decoder.insert(Decoder::new(&self.opts)?),
        };
        d.read_from(&mut self.reader)
    }
}

/// Yields each packet, then `None` at a clean end. After an error it yields `None`, except
/// after [`ErrorKind::Timeout`]: the decoder keeps the partial packet and the next call goes
/// on reading it (a socket's read timeout becomes a poll).
impl<R: Read> Iterator for Packets<R> {
    type Item = Result<Packet>;
    fn next(&mut self) -> Option<Result<Packet>> {
        if self.done {
            return None;
        }
        match self.read_one() {
            Ok(Some(p)) => Some(Ok(p)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                // The stream position is unknown after any other error.
                self.done = e.kind() != ErrorKind::Timeout;
                Some(Err(e))
            }
        }
    }
}
