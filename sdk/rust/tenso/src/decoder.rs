//! [`Decoder`]: libtenso's stream decoder (`tenso_decoder`), the one framing code of the
//! library; every reader of this crate is a byte mover over it.
use std::alloc::Layout;
use std::cell::Cell;
use std::ffi::c_void;
use std::io::Read;
use std::ptr::{self, NonNull};

use tenso_sys as sys;

use crate::error::{check, Error, Result};
use crate::io::Packet;
use crate::options::DecodeOptions;

/// The alignment packet buffers get at least (libtenso asks for the packet's own body
/// alignment, 64 by default).
const MIN_ALIGN: usize = 64;

/// Where the packet buffer being received lies (address, length), so `read_from` knows that
/// memory is initialised (it came zeroed) and needs no clearing before `Read::read`.
struct AllocState {
    current: Cell<(usize, usize)>,
}

/// The alignment of the blocks asked of the global allocator: up to this, a zeroed
/// allocation is `calloc`, whose large blocks are fresh pages the kernel zeroes on first touch
/// (an aligned allocation would be zeroed by writing every byte, committing a hostile header's
/// claimed size at once). Buffers are aligned inside the block by hand.
const BLOCK_ALIGN: usize = 16;

/// Packet memory from Rust's global allocator, zeroed, so `Read` may be handed it, and
/// resident only as data arrives. The release callback is told the size but not the
/// alignment: the buffer's offset in its block and the alignment are stored in the 16 bytes
/// before it.
unsafe extern "C" fn rust_alloc(user: *mut c_void, size: usize, alignment: usize) -> *mut c_void {
    let align = alignment.max(MIN_ALIGN);
    let layout = match size.checked_add(align).map(|total| Layout::from_size_align(total, BLOCK_ALIGN)) {
        Some(Ok(layout)) if alignment.is_power_of_two() => layout,
        _ => return ptr::null_mut(),
    };
    // SAFETY: a non-zero size.
    let base = unsafe { std::alloc::alloc_zeroed(layout) };
    if base.is_null() {
        return ptr::null_mut();
    }
    // The first `align`-aligned address at least 16 bytes into the block: at most `align`
    // bytes in (the block is 16-aligned), so `size` bytes fit after it.
    let offset = ((base as usize + 16).next_multiple_of(align)) - base as usize;
    // SAFETY: offset <= align, inside the block; the two usize slots before `p` are in the
    // block and 8-aligned.
    let p = unsafe { base.add(offset) };
    unsafe {
        p.cast::<usize>().sub(1).write(offset);
        p.cast::<usize>().sub(2).write(align);
    }
    // SAFETY: `user` is the decoder's AllocState, alive while the decoder is (alloc is only
    // called from decoder calls).
    unsafe { &*(user as *const AllocState) }.current.set((p as usize, size));
    p.cast()
}

/// Frees what `rust_alloc` gave out: called when the last view of a packet is freed (possibly
/// after the decoder, so `user` is not touched) or when a partial packet is dropped.
unsafe extern "C" fn rust_release(_user: *mut c_void, p: *mut c_void, size: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from rust_alloc with this size: its block's offset and the alignment
    // are stored before it.
    unsafe {
        let p = p.cast::<u8>();
        let offset = p.cast::<usize>().sub(1).read();
        let align = p.cast::<usize>().sub(2).read();
        std::alloc::dealloc(p.sub(offset), Layout::from_size_align_unchecked(size + align, BLOCK_ALIGN));
    }
}

/// A push-style stream decoder: feed it bytes in whatever pieces a transport delivers, get
/// complete packets back as [`Packet`]s. It never consumes past a packet, checks every limit
/// of its [`DecodeOptions`] before allocating, and works in time linear in the bytes fed.
/// Each packet is received into one buffer of its exact length, aligned as its body asks
/// (64 bytes at least), from Rust's
/// global allocator, which the [`Packet`] owns (it may outlive the decoder).
///
/// ```
/// let a = tenso::dumps(&tenso::Tensor::from_slice(&[1u32, 2]))?;
/// let b = tenso::dumps(&tenso::Tensor::from_slice(&[3u32]))?;
/// let stream = [a, b].concat();
/// let mut d = tenso::Decoder::new(&Default::default())?;
/// let mut got = Vec::new();
/// for chunk in stream.chunks(7) {
///     let mut rest = chunk;
///     while !rest.is_empty() {
///         let (used, packet) = d.feed(rest)?;
///         rest = &rest[used..];
///         got.extend(packet);
///     }
/// }
/// d.finish()?;
/// assert_eq!(got.len(), 2);
/// assert_eq!(got[1].as_slice::<u32>()?, &[3]);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Decoder {
    raw: NonNull<sys::tenso_decoder>,
    // libtenso holds this address for the decoder's life, so it is a raw pointer
    // (Box::into_raw), not a Box: moving a Box (as returning the Decoder does) asserts unique
    // access and would invalidate the pointer libtenso holds. Freed in Drop, after the decoder.
    state: NonNull<AllocState>,
}

// SAFETY: a decoder is used from one thread at a time (&mut self); its allocator state is
// only touched from decoder calls.
unsafe impl Send for Decoder {}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: we own the decoder; packets already handed out stay valid (their release
        // does not touch the state). The state came from Box::into_raw and nothing uses it once
        // the decoder is freed.
        unsafe {
            sys::tenso_decoder_free(self.raw.as_ptr());
            drop(Box::from_raw(self.state.as_ptr()));
        }
    }
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").field("idle", &self.is_idle()).field("needed", &self.needed()).finish()
    }
}

impl Decoder {
    /// A decoder with these limits (and deadline, for [`read_fd`](Decoder::read_fd)).
    pub fn new(opts: &DecodeOptions) -> Result<Decoder> {
        let state = NonNull::from(Box::leak(Box::new(AllocState { current: Cell::new((0, 0)) })));
        // Frees the state if the decoder is not made (Drop frees it otherwise).
        struct Guard(NonNull<AllocState>);
        impl Drop for Guard {
            fn drop(&mut self) {
                // SAFETY: from Box::leak above; libtenso holds no pointer to it (no decoder).
                unsafe { drop(Box::from_raw(self.0.as_ptr())) }
            }
        }
        let guard = Guard(state);
        let raw_opts = sys::tenso_decoder_options {
            version: sys::TENSO_DECODER_OPTIONS_VERSION,
            flags: 0,
            decode: opts.ptr(),
            alloc: Some(rust_alloc),
            release: Some(rust_release),
            alloc_user: state.as_ptr().cast(),
        };
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers; the options are copied; `state` outlives the decoder.
        check(unsafe { sys::tenso_decoder_new(&mut out, &raw_opts) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(crate::ErrorKind::Internal, "NULL decoder"))?;
        std::mem::forget(guard);
        Ok(Decoder { raw, state })
    }

    fn ptr(&self) -> *mut sys::tenso_decoder {
        self.raw.as_ptr()
    }

    /// A view from libtenso as a packet (`NULL`: none yet).
    fn packet(out: *mut sys::tenso_view) -> Result<Option<Packet>> {
        if out.is_null() {
            return Ok(None);
        }
        // SAFETY: a decoder's view owns its buffer.
        unsafe { Packet::from_owning_view(out) }.map(Some)
    }

    /// Pushes bytes: returns how many were consumed (never past the current packet, so fewer
    /// than `bytes.len()` means the rest belongs to the next one: feed it again) and the packet
    /// when it is complete. Errors are those of [`loads`](crate::loads) (and
    /// [`ErrorKind::Limit`](crate::ErrorKind::Limit) for a packet over the limits, before its
    /// buffer is allocated); after one, [`reset`](Decoder::reset) before going on.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(usize, Option<Packet>)> {
        let (mut used, mut out) = (0usize, ptr::null_mut());
        // SAFETY: live decoder, valid input and out pointers.
        check(unsafe { sys::tenso_decoder_feed(self.ptr(), bytes.as_ptr().cast(), bytes.len(), &mut used, &mut out) })?;
        Ok((used, Decoder::packet(out)?))
    }

    /// Bytes still needed before the decoder can make progress (never 0).
    pub fn needed(&self) -> usize {
        // SAFETY: live decoder.
        unsafe { sys::tenso_decoder_needed(self.ptr()) }
    }

    /// Whether the decoder is between packets (holds nothing partial).
    pub fn is_idle(&self) -> bool {
        // SAFETY: live decoder.
        unsafe { sys::tenso_decoder_idle(self.ptr()) != 0 }
    }

    /// End of input: `Ok` between packets, [`ErrorKind::Truncated`](crate::ErrorKind::Truncated)
    /// inside one.
    pub fn finish(&mut self) -> Result<()> {
        // SAFETY: live decoder.
        check(unsafe { sys::tenso_decoder_finish(self.ptr()) })
    }

    /// Drops any partial packet and error.
    pub fn reset(&mut self) {
        // SAFETY: live decoder.
        unsafe { sys::tenso_decoder_reset(self.ptr()) }
    }

    /// Reads one packet from `r`, straight into the packet's buffer (no copy), asking `r` for
    /// exactly what the decoder needs next, so nothing past the packet is read. `Ok(None)`
    /// when `r` ends cleanly before a packet; [`ErrorKind::Truncated`](crate::ErrorKind::Truncated)
    /// when it ends inside one; [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when `r`
    /// times out (a socket's read timeout): the partial packet is kept and the next call goes
    /// on with it; [`ErrorKind::Io`](crate::ErrorKind::Io) for `r`'s other errors.
    pub fn read_from<R: Read + ?Sized>(&mut self, r: &mut R) -> Result<Option<Packet>> {
        loop {
            let (mut dst, mut len) = (ptr::null_mut::<c_void>(), 0usize);
            // SAFETY: live decoder, valid out pointers.
            check(unsafe { sys::tenso_decoder_buffer(self.ptr(), &mut dst, &mut len) })?;
            let dst = dst.cast::<u8>();
            // SAFETY: the state lives as long as self; only shared access (a Cell).
            let (start, size) = unsafe { self.state.as_ref() }.current.get();
            let in_packet_buffer = start != 0 && (dst as usize) >= start && (dst as usize) + len <= start + size;
            if !in_packet_buffer {
                // The decoder's small header area: not known to be initialised, and `Read`
                // needs initialised memory. It grows with the bytes received only.
                // SAFETY: the decoder gave `len` writable bytes at `dst`.
                unsafe { ptr::write_bytes(dst, 0, len) };
            }
            // SAFETY: `len` writable, initialised bytes (zeroed here or by rust_alloc, then
            // only written) that the decoder does not touch until commit.
            let buf = unsafe { std::slice::from_raw_parts_mut(dst, len) };
            let n = match r.read(buf) {
                Ok(0) if self.is_idle() => return Ok(None),
                Ok(0) => return self.finish().map(|()| None),
                Ok(n) => n.min(len),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(e, "reading a packet")),
            };
            let mut out = ptr::null_mut();
            // SAFETY: n <= len bytes were written at the buffer's pointer.
            check(unsafe { sys::tenso_decoder_commit(self.ptr(), n, &mut out) })?;
            if let Some(p) = Decoder::packet(out)? {
                return Ok(Some(p));
            }
        }
    }

    /// Reads one packet from a file descriptor with libtenso's loop (its deadline:
    /// [`DecodeOptions::timeout`]; the socket's `SO_RCVTIMEO`); statuses as
    /// [`read_from`](Decoder::read_from): `Ok(None)` at a clean end, `Truncated`, `Timeout`
    /// (partial packet kept), `Io`.
    #[cfg(unix)]
    pub fn read_fd(&mut self, fd: impl std::os::fd::AsFd) -> Result<Option<Packet>> {
        use std::os::fd::AsRawFd;
        let mut out = ptr::null_mut();
        // SAFETY: a borrowed, open fd; valid pointers.
        let st = unsafe { sys::tenso_decoder_read_fd(&mut out, self.ptr(), fd.as_fd().as_raw_fd()) };
        if st == sys::TENSO_E_END_OF_STREAM {
            // SAFETY: no arguments.
            unsafe { sys::tenso_error_clear() };
            return Ok(None);
        }
        check(st)?;
        Decoder::packet(out)
    }
}
