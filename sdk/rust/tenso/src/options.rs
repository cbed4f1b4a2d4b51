//! [`Options`] (how to encode) and [`DecodeOptions`] (limits and switches for decoding).
use tenso_sys as sys;

/// How to encode: integrity footer, LZ4 compression, body alignment. The default writes what
/// upstream `tenso.dumps(x)` writes (64-byte alignment, no footer, no compression).
///
/// Every encoding entry point is also a method here, so options read as a builder:
///
/// ```
/// let data = [0.5f64; 16];
/// let t = tenso::Tensor::from_slice(&data);
/// let packet = tenso::Options::new().integrity(true).alignment(128).dumps(&t)?;
/// let view = tenso::loads(&packet)?;          // the footer is verified here
/// assert_eq!(view.alignment(), 128);
/// assert_eq!(view.as_slice::<f64>()?.len(), 16);
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub(crate) raw: sys::tenso_encode_options,
}

impl Default for Options {
    fn default() -> Options {
        Options { raw: sys::TENSO_ENCODE_OPTIONS_INIT }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Options {
        Options::default()
    }

    /// The options for a call: NULL for the defaults (libtenso then reads no struct).
    #[inline]
    pub(crate) fn ptr(&self) -> *const sys::tenso_encode_options {
        if self.raw == sys::TENSO_ENCODE_OPTIONS_INIT {
            std::ptr::null()
        } else {
            &self.raw
        }
    }

    /// Appends an XXH3-64 footer to every body (verified by every reader).
    pub fn integrity(mut self, on: bool) -> Options {
        self.set(sys::TENSO_ENCODE_INTEGRITY, on);
        self
    }

    /// LZ4-frame-compresses dense bodies (ignored for other kinds). The decoded view then owns
    /// a decompressed copy instead of pointing into the packet.
    pub fn compress(mut self, on: bool) -> Options {
        self.set(sys::TENSO_ENCODE_COMPRESS, on);
        self
    }

    /// The LZ4 frame level; 0 is the fast default.
    pub fn compression_level(mut self, level: i32) -> Options {
        self.raw.compression_level = level;
        self
    }

    /// Compresses the LZ4 blocks (4 MiB, independent) of a large body on this many threads;
    /// 0 (the default): every core, 1: the calling thread only. The packet's bytes do not
    /// depend on it. Since 1.4.
    ///
    /// ```
    /// let data: Vec<u8> = (0..9u32 << 20).map(|i| (i % 251) as u8).collect();
    /// let t = tenso::Tensor::from_slice(&data);
    /// let one = tenso::Options::new().compress(true).threads(1).dumps(&t)?;
    /// let all = tenso::Options::new().compress(true).threads(0).dumps(&t)?;
    /// assert_eq!(one, all);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn threads(mut self, n: u32) -> Options {
        self.raw.threads = n;
        self
    }

    /// Body alignment relative to the packet start: a power of two up to 2^20; 0 means 64.
    /// Checked by the encode call.
    pub fn alignment(mut self, alignment: u32) -> Options {
        self.raw.alignment = alignment;
        self
    }

    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.raw.flags |= bit;
        } else {
            self.raw.flags &= !bit;
        }
    }

    /// Whether integrity footers are written.
    pub fn has_integrity(&self) -> bool {
        self.raw.flags & sys::TENSO_ENCODE_INTEGRITY != 0
    }
    /// Whether dense bodies are compressed.
    pub fn has_compression(&self) -> bool {
        self.raw.flags & sys::TENSO_ENCODE_COMPRESS != 0
    }
    /// The alignment asked for (0: the default 64).
    pub fn get_alignment(&self) -> u32 {
        self.raw.alignment
    }
}

/// Limits and switches for decoding. Limits can only be tightened below the protocol's own
/// (32 dimensions, 10^9 elements per tensor, nesting depth 64); `max_packet_bytes` also
/// bounds what stream readers buffer and, unless `max_decoded_bytes` is set, what compressed
/// bodies decompress to.
///
/// ```
/// let data = [0u8; 100];
/// let packet = tenso::dumps(&tenso::Tensor::from_slice(&data))?;
/// let strict = tenso::DecodeOptions::new().max_elements(10);
/// assert_eq!(strict.loads(&packet).unwrap_err().kind(), tenso::ErrorKind::TooManyElements);
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    pub(crate) raw: sys::tenso_decode_options,
}

impl Default for DecodeOptions {
    fn default() -> DecodeOptions {
        DecodeOptions { raw: sys::TENSO_DECODE_OPTIONS_INIT }
    }
}

impl DecodeOptions {
    /// The defaults: the protocol's limits, footers verified, UTF-8 not checked.
    pub fn new() -> DecodeOptions {
        DecodeOptions::default()
    }

    /// Do not verify integrity footers (they are still framed).
    pub fn skip_checksum(mut self, on: bool) -> DecodeOptions {
        self.set(sys::TENSO_DECODE_SKIP_CHECKSUM, on);
        self
    }

    /// Check that string payloads are UTF-8 while decoding (O(payload)).
    pub fn validate_utf8(mut self, on: bool) -> DecodeOptions {
        self.set(sys::TENSO_DECODE_VALIDATE_UTF8, on);
        self
    }

    /// At most this many dimensions (0: 32).
    pub fn max_ndim(mut self, n: u32) -> DecodeOptions {
        self.raw.max_ndim = n;
        self
    }

    /// At most this deep nesting of bundles and sparse containers (0: 64).
    pub fn max_depth(mut self, n: u32) -> DecodeOptions {
        self.raw.max_depth = n;
        self
    }

    /// At most this many elements per tensor (0: 10^9).
    pub fn max_elements(mut self, n: u64) -> DecodeOptions {
        self.raw.max_elements = n;
        self
    }

    /// At most this many bytes per packet, also what stream readers buffer and (unless
    /// `max_decoded_bytes` is set) what compressed bodies decompress to (0: no limit).
    pub fn max_packet_bytes(mut self, n: u64) -> DecodeOptions {
        self.raw.max_packet_bytes = n;
        self
    }

    /// At most this many bytes allocated by one decode: the decoded tree, copied offsets and
    /// scales, decompressed bodies, and what stream readers buffer (0: no limit; see
    /// `tenso_decode_options` in tenso.h).
    pub fn max_decoded_bytes(mut self, n: u64) -> DecodeOptions {
        self.raw.max_decoded_bytes = n;
        self
    }

    /// At most this many packets in one tree: the top one, bundle values, sparse components
    /// (0: no limit).
    pub fn max_entries(mut self, n: u64) -> DecodeOptions {
        self.raw.max_entries = n;
        self
    }

    /// Decompresses the LZ4 blocks of a large body on this many threads; 0 (the default):
    /// every core, 1: the calling thread only. Since 1.4.
    ///
    /// ```
    /// let data: Vec<u8> = (0..9u32 << 20).map(|i| (i % 251) as u8).collect();
    /// let packet = tenso::Options::new().compress(true).dumps(&tenso::Tensor::from_slice(&data))?;
    /// let view = tenso::DecodeOptions::new().threads(1).loads(&packet)?;
    /// assert_eq!(view.as_ref().as_slice::<u8>()?, &data[..]);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn threads(mut self, n: u32) -> DecodeOptions {
        self.raw.threads = n;
        self
    }

    /// Bounds what LZ4 bodies decompress to, in all, as a multiple of the packet's bytes
    /// (counted as at least 4 MiB): a packet of N bytes then costs at most
    /// max(N, 4 MiB) × `n` in bodies, whatever its header claims (0, the default: no such
    /// bound). Since 1.5.
    ///
    /// ```
    /// // 64 MiB of zeros compresses to a few hundred KiB: more than 4 MiB x 2.
    /// let zeros = vec![0u8; 64 << 20];
    /// let packet = tenso::Options::new().compress(true).dumps(&tenso::Tensor::from_slice(&zeros))?;
    /// let err = tenso::DecodeOptions::new().max_inflation(2).loads(&packet).unwrap_err();
    /// assert_eq!(err.kind(), tenso::ErrorKind::Limit);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn max_inflation(mut self, n: u32) -> DecodeOptions {
        self.raw.max_inflation = n;
        self
    }

    /// A deadline for file-descriptor reads and writes ([`read_fd`](crate::read_fd),
    /// [`Decoder::read_fd`](crate::Decoder::read_fd)): the most one call may wait for the
    /// peer, in total, per packet; expiry is [`ErrorKind::Timeout`](crate::ErrorKind::Timeout).
    /// Rounded up to whole milliseconds; `None` (the default): no deadline of ours (a
    /// socket's own `SO_RCVTIMEO` is honoured either way). `Read`-based readers use the
    /// reader's own timeouts instead (e.g. `UnixStream::set_read_timeout`).
    ///
    /// ```
    /// use std::os::unix::net::UnixStream;
    /// use std::time::Duration;
    /// let (_quiet_peer, b) = UnixStream::pair().unwrap();
    /// let opts = tenso::DecodeOptions::new().timeout(Some(Duration::from_millis(20)));
    /// let err = opts.read_fd(&b).unwrap_err();
    /// assert_eq!(err.kind(), tenso::ErrorKind::Timeout);
    /// assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::TimedOut);
    /// ```
    pub fn timeout(mut self, t: Option<std::time::Duration>) -> DecodeOptions {
        self.raw.timeout_ms = t.map_or(0, |t| {
            let ms = t.as_nanos().div_ceil(1_000_000);
            u64::try_from(ms).unwrap_or(u64::MAX).max(1)
        });
        self
    }

    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.raw.flags |= bit;
        } else {
            self.raw.flags &= !bit;
        }
    }

    /// The `max_packet_bytes` limit (0: none).
    pub fn get_max_packet_bytes(&self) -> u64 {
        self.raw.max_packet_bytes
    }

    /// The C struct for libtenso calls; NULL for the defaults, which libtenso handles without
    /// validating a struct (about 35 instructions of a ~1000-instruction small decode).
    #[inline]
    pub(crate) fn ptr(&self) -> *const sys::tenso_decode_options {
        if self.raw == sys::TENSO_DECODE_OPTIONS_INIT {
            std::ptr::null()
        } else {
            &self.raw
        }
    }
}
