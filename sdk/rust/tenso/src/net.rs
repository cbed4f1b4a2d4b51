//! Nodes that push and pull named values between peers ([`Node`]), over `tenso/net.h`.
use std::ffi::{c_char, c_void, CStr, CString};
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::Duration;

use tenso_sys as sys;

use crate::encode::{Buffer, Encode};
use crate::error::{c_name, check, Error, ErrorKind, Result};
use crate::io::Packet;
use crate::options::Options;
use crate::value::with_value;

/// tenso_node_send and tenso_node_post.
type PushFn = unsafe extern "C" fn(
    *mut sys::tenso_node,
    *const c_char,
    *const c_char,
    usize,
    *const sys::tenso_value,
    u64,
    *mut sys::tenso_cancel,
) -> sys::tenso_status;

/// How a [`Node`] starts; `Default` is libtenso's defaults: a TLS 1.3 listener on 127.0.0.1
/// (a free port) with an ephemeral key, accepting any dialer that proves a key.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Listen addresses (`"tls://127.0.0.1:0"`, `"tcp://[::1]:0"`, `"unix:///run/x.sock"`);
    /// empty: `"tls://127.0.0.1:0"`. `tcp://` and `unix://` need `allow_plaintext`.
    pub listen: Vec<String>,
    /// Allow `tcp://` and `unix://` listeners and peers (no TLS).
    pub allow_plaintext: bool,
    /// Never pass descriptors over Unix sockets.
    pub no_fd_passing: bool,
    /// A node that only dials.
    pub no_listen: bool,
    /// No busy polling: a send waiting for its acknowledgement, or a request for its value,
    /// sleeps at once instead of polling its socket for up to 100 µs first, and so does the
    /// node's event loop between requests. Less CPU, more latency (a sleeping thread wakes
    /// through an idle CPU, 30-80 µs on a virtual machine).
    pub no_busy_poll: bool,
    /// This node's certificate chain and key (PEM); `None`: an ephemeral P-256 key.
    pub cert_pem: Option<String>,
    /// The private key of `cert_pem` (PEM).
    pub key_pem: Option<String>,
    /// Trust dialers whose chain ends at this CA (PEM).
    pub ca_pem: Option<String>,
    /// Trust dialers with these key fingerprints (64 hex each).
    pub pinned_keys: Vec<String>,
    /// Event-loop threads; 0 = 1.
    pub threads: u32,
    /// The largest packet accepted from a peer (0 = libtenso's default, 16 GiB; the limits
    /// below also take 0 for the defaults of `tenso/net.h`).
    pub max_packet_bytes: u64,
    /// The longest value name (0: 4096).
    pub max_name_bytes: u32,
    /// Received pushes waiting to be taken (0: 1024).
    pub max_queued: u32,
    /// Their total bytes; a full queue stops reading from the pushing peers (0: 1 GiB).
    pub max_queued_bytes: u64,
    /// Inbound connections, and pooled ones per peer (0: 64).
    pub max_connections: u32,
    /// Idle pooled connections kept per peer (0: 4).
    pub max_pool_per_peer: u32,
    /// A pooled connection idle this long is closed (`None`: 5 minutes).
    pub idle_timeout: Option<Duration>,
    /// The deadline of calls given no timeout (`None`: 60 s).
    pub io_timeout: Option<Duration>,
    /// Unix peers: packets this large travel as a descriptor (0: 1 MiB).
    pub fd_passing_min_bytes: u64,
}

pub(crate) fn millis(d: Duration) -> u64 {
    // Round up: a positive timeout below a millisecond still waits.
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

fn c_opt(s: &Option<String>, what: &str) -> Result<Option<CString>> {
    s.as_deref().map(|s| c_name(s, what)).transpose()
}

fn c_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// A cancel token (`tenso_cancel`): [`CancelToken::cancel`] ends the calls given it with
/// [`ErrorKind::Cancelled`], from any thread.
pub struct CancelToken {
    raw: NonNull<sys::tenso_cancel>,
}

// SAFETY: tenso_cancel_trigger and _triggered are thread-safe; the token is freed only by Drop.
unsafe impl Send for CancelToken {}
unsafe impl Sync for CancelToken {}

impl CancelToken {
    /// A new, untriggered token.
    pub fn new() -> Result<CancelToken> {
        let mut out = ptr::null_mut();
        // SAFETY: out-pointer.
        check(unsafe { sys::tenso_cancel_new(&mut out) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL token"))?;
        Ok(CancelToken { raw })
    }

    /// Cancels every call waiting on the token now and any later call given it.
    pub fn cancel(&self) {
        // SAFETY: live token.
        unsafe { sys::tenso_cancel_trigger(self.raw.as_ptr()) }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        // SAFETY: live token.
        unsafe { sys::tenso_cancel_triggered(self.raw.as_ptr()) != 0 }
    }
}

impl Drop for CancelToken {
    fn drop(&mut self) {
        // SAFETY: no call borrows the token any more (they borrow &self).
        unsafe { sys::tenso_cancel_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

fn cancel_ptr(c: Option<&CancelToken>) -> *mut sys::tenso_cancel {
    c.map_or(ptr::null_mut(), |c| c.raw.as_ptr())
}

/// A received push: its name, its sender (the peer's key fingerprint over TLS, else
/// `"tcp://host:port"` or `"unix:"`) and the value, a [`Packet`] that owns its aligned memory.
#[derive(Debug)]
pub struct Message {
    /// The name it was pushed under.
    pub name: String,
    /// Who pushed it.
    pub sender: String,
    /// The decoded value.
    pub value: Packet,
}

/// A node's counters (`tenso_node_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Outbound connections held in the pool (idle or busy).
    pub pool_size: u32,
    /// Connections peers opened to this node, open now.
    pub inbound_connections: u32,
    /// Received pushes waiting.
    pub queued: u32,
    /// Their packet bytes.
    pub queued_bytes: u64,
    /// Bytes written to peers so far.
    pub bytes_sent: u64,
    /// Bytes read from peers so far.
    pub bytes_received: u64,
    /// Outbound dials so far (pool misses).
    pub connections_opened: u64,
    /// Outbound calls served by a pooled connection.
    pub connections_reused: u64,
    /// Inbound peers refused (auth, limits, hostile frames).
    pub refused: u64,
    /// TLS connections (dialed and accepted) whose records the kernel encrypts (kTLS, used
    /// where the kernel offers it).
    pub tls_kernel: u64,
    /// TLS connections whose records OpenSSL handles in this process (the fallback).
    pub tls_user: u64,
    /// Waits for a peer's answer that busy polled first (see [`NodeOptions::no_busy_poll`]).
    pub busy_polls: u64,
    /// Those whose answer came while polling.
    pub busy_poll_hits: u64,
}

/// A tenso node (`tenso_node`): listens for pushes and pulls, dials peers by address, pools
/// connections. Every method takes `&self` and may run on many threads at once (`Send +
/// Sync`); blocking calls take a timeout (`None`: the node's `io_timeout`) and, in their
/// `_with` forms, a [`CancelToken`].
///
/// ```
/// use tenso::{Node, NodeOptions, Tensor};
///
/// let receiver = Node::new(&NodeOptions::default())?; // TLS 1.3 on 127.0.0.1
/// let sender = Node::new(&NodeOptions { no_listen: true, ..Default::default() })?;
/// let addr = receiver.addr()?; // "tls://<key fingerprint>@127.0.0.1:<port>"
///
/// sender.send(&addr, "weights", &Tensor::from_slice(&[1.0f32, 2.0, 3.0]), None)?;
/// let msg = receiver.receive(None)?.expect("no deadline: a message");
/// assert_eq!(msg.name, "weights");
/// assert_eq!(msg.value.as_slice::<f32>()?, &[1.0, 2.0, 3.0]);
///
/// receiver.publish("bias", &Tensor::from_slice(&[7i64]))?;
/// let bias = sender.request(&addr, "bias", None)?;
/// assert_eq!(bias.as_slice::<i64>()?, &[7]);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Node {
    raw: NonNull<sys::tenso_node>,
    // The access hook's closure (boxed twice: the C side holds a thin pointer). Dropped after
    // the node is freed (fields drop after Drop::drop), so no call of it outlives it.
    access: std::sync::Mutex<Option<Box<AccessHook>>>,
}

/// What a peer asks of a node's access hook ([`Node::set_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessOp {
    /// The peer pulls a published value.
    Get,
    /// The peer pushes a value.
    Push,
}

type AccessHook = Box<dyn Fn(AccessOp, &str, &str) -> bool + Send + Sync>;

/// libtenso's side of the hook: runs the closure; a panic refuses (it must not unwind into C).
unsafe extern "C" fn access_trampoline(
    user: *mut c_void,
    op: std::ffi::c_int,
    peer: *const c_char,
    name: *const c_char,
    name_len: usize,
) -> std::ffi::c_int {
    let run = || {
        // SAFETY: `user` is the AccessHook set_access handed over, alive while the node may
        // call it; peer is NUL-terminated and name has name_len bytes, for the call.
        let hook = unsafe { &*(user as *const AccessHook) };
        let peer = unsafe { CStr::from_ptr(peer) }.to_string_lossy();
        let name = String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(name.cast::<u8>(), name_len) });
        let op = if op == sys::TENSO_NODE_ACCESS_GET { AccessOp::Get } else { AccessOp::Push };
        hook(op, &peer, &name)
    };
    std::ffi::c_int::from(std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or(false))
}

// SAFETY: net.h: every call is thread-safe; the node is freed only by Drop (no borrows left).
unsafe impl Send for Node {}
unsafe impl Sync for Node {}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node").field("id", &self.id().unwrap_or_default()).finish_non_exhaustive()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: we own the node; shuts down if needed, then frees.
        unsafe { sys::tenso_node_free(self.raw.as_ptr()) }
    }
}

/// A [`Message`] from a received push, which it frees.
///
/// # Safety
/// `m` is a live message the caller owns.
pub(crate) unsafe fn message_from_raw(m: *mut sys::tenso_node_message) -> Result<Message> {
    struct Msg(*mut sys::tenso_node_message);
    impl Drop for Msg {
        fn drop(&mut self) {
            // SAFETY: we own the message.
            unsafe { sys::tenso_node_message_free(self.0) }
        }
    }
    let m = Msg(m);
    let mut len = 0usize;
    // SAFETY: live message; name is len bytes, sender NUL-terminated, both owned by it.
    let (name, sender) = unsafe {
        let p = sys::tenso_node_message_name(m.0, &mut len);
        let name = String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned();
        (name, CStr::from_ptr(sys::tenso_node_message_sender(m.0)).to_string_lossy().into_owned())
    };
    let mut v = ptr::null_mut();
    // SAFETY: out-pointer; the view moves out of the message.
    check(unsafe { sys::tenso_node_message_take_view(&mut v, m.0) })?;
    // SAFETY: the view owns its memory.
    let value = unsafe { Packet::from_owning_view(v) }?;
    Ok(Message { name, sender, value })
}

/// Drops the node's reference to a published [`Buffer`] when the node releases it.
unsafe extern "C" fn drop_buffer(user: *mut c_void) {
    // SAFETY: `user` is the Arc<Buffer> reference that publish_buffer handed to the node.
    drop(unsafe { Arc::from_raw(user.cast::<Buffer>()) });
}

impl Node {
    /// Starts a node: binds its listeners and starts its event loop. Errors:
    /// [`ErrorKind::BadAddress`], [`ErrorKind::Io`] (binding), [`ErrorKind::Auth`] (certificate
    /// or key), [`ErrorKind::InvalidArgument`] (plaintext without `allow_plaintext`).
    pub fn new(o: &NodeOptions) -> Result<Node> {
        // SAFETY: zeroed is a valid bit pattern for this plain C struct; init then sets it.
        let mut co: sys::tenso_node_options = unsafe { std::mem::zeroed() };
        // SAFETY: out-pointer to a struct of the version passed.
        check(unsafe { sys::tenso_node_options_init(&mut co, sys::TENSO_NODE_OPTIONS_VERSION) })?;
        let listen = if o.listen.is_empty() { None } else { Some(c_name(&o.listen.join(","), "listen address")?) };
        let cert = c_opt(&o.cert_pem, "certificate")?;
        let key = c_opt(&o.key_pem, "key")?;
        let ca = c_opt(&o.ca_pem, "CA")?;
        let pins: Vec<CString> = o.pinned_keys.iter().map(|k| c_name(k, "pinned key")).collect::<Result<_>>()?;
        let pin_ptrs: Vec<*const c_char> = pins.iter().map(|c| c.as_ptr()).collect();
        co.flags = (if o.allow_plaintext { sys::TENSO_NODE_ALLOW_PLAINTEXT } else { 0 })
            | (if o.no_fd_passing { sys::TENSO_NODE_NO_FD_PASSING } else { 0 })
            | (if o.no_listen { sys::TENSO_NODE_NO_LISTEN } else { 0 })
            | (if o.no_busy_poll { sys::TENSO_NODE_NO_BUSY_POLL } else { 0 });
        co.listen = c_ptr(&listen);
        co.cert_pem = c_ptr(&cert);
        co.key_pem = c_ptr(&key);
        co.ca_pem = c_ptr(&ca);
        co.pinned_keys = if pin_ptrs.is_empty() { ptr::null() } else { pin_ptrs.as_ptr() };
        co.pinned_key_count = u32::try_from(pin_ptrs.len())
            .map_err(|_| Error::new(ErrorKind::InvalidArgument, "too many pinned keys"))?;
        co.threads = o.threads;
        co.max_packet_bytes = o.max_packet_bytes;
        co.max_name_bytes = o.max_name_bytes;
        co.max_queued = o.max_queued;
        co.max_queued_bytes = o.max_queued_bytes;
        co.max_connections = o.max_connections;
        co.max_pool_per_peer = o.max_pool_per_peer;
        co.idle_timeout_ms = o.idle_timeout.map_or(0, millis);
        co.io_timeout_ms = o.io_timeout.map_or(0, millis);
        co.fd_passing_min_bytes = o.fd_passing_min_bytes;
        let mut out = ptr::null_mut();
        // SAFETY: every pointer in `co` lives until the call returns (the node copies them).
        check(unsafe { sys::tenso_node_new(&mut out, &co) })?;
        // libtenso keeps no copy of the key's text; neither does this call (the caller's String
        // is the caller's).
        if let Some(k) = key {
            let mut bytes = k.into_bytes();
            for b in bytes.iter_mut() {
                // SAFETY: a valid byte of a buffer we own; volatile so the wipe is not elided.
                unsafe { ptr::write_volatile(b, 0) };
            }
        }
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL node"))?;
        Ok(Node { raw, access: std::sync::Mutex::new(None) })
    }

    pub(crate) fn ptr(&self) -> *mut sys::tenso_node {
        self.raw.as_ptr()
    }

    /// Every address a peer can dial, in listen order.
    pub fn addrs(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 256];
        let mut index = 0u32;
        loop {
            let mut len = 0usize;
            // SAFETY: buf is writable for its length.
            let st = unsafe { sys::tenso_node_addr(buf.as_mut_ptr().cast(), buf.len(), &mut len, self.ptr(), index) };
            match st {
                sys::TENSO_E_NOT_FOUND => return Ok(out),
                sys::TENSO_E_BUFFER_TOO_SMALL => buf.resize(len + 1, 0),
                _ => {
                    check(st)?;
                    out.push(String::from_utf8_lossy(&buf[..len]).into_owned());
                    index += 1;
                }
            }
        }
    }

    /// The first address a peer can dial (a `tls://<fingerprint>@host:port` ticket by default).
    pub fn addr(&self) -> Result<String> {
        self.addrs()?.into_iter().next().ok_or_else(|| Error::new(ErrorKind::NotFound, "the node does not listen"))
    }

    /// This node's key fingerprint (64 hex).
    pub fn id(&self) -> Result<String> {
        let mut buf = [0 as c_char; 65];
        // SAFETY: buf holds 65 bytes.
        check(unsafe { sys::tenso_node_id(buf.as_mut_ptr(), self.ptr()) })?;
        // SAFETY: NUL-terminated by tenso_node_id.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// Sends `value` under `name` to the node at `addr`; returns once the peer has queued it
    /// (a full peer queue blocks: backpressure). Dense bodies are sent from their memory.
    /// Errors: [`ErrorKind::BadAddress`], [`ErrorKind::Connection`], [`ErrorKind::Auth`],
    /// [`ErrorKind::Timeout`], [`ErrorKind::Shutdown`], [`ErrorKind::Limit`].
    pub fn send<'a, E: Encode<'a> + ?Sized>(
        &self,
        addr: &str,
        name: &str,
        value: &E,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.send_with(addr, name, value, timeout, None)
    }

    /// [`send`](Self::send) with a cancel token.
    pub fn send_with<'a, E: Encode<'a> + ?Sized>(
        &self,
        addr: &str,
        name: &str,
        value: &E,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<()> {
        self.push(sys::tenso_node_send, addr, name, value, timeout, cancel)
    }

    /// [`send`](Self::send) or [`post`](Self::post): the same arguments.
    fn push<'a, E: Encode<'a> + ?Sized>(
        &self,
        f: PushFn,
        addr: &str,
        name: &str,
        value: &E,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<()> {
        let a = c_name(addr, "address")?;
        let ms = timeout.map_or(0, millis);
        let st = with_value(value, |v| {
            // SAFETY: v and the name live for the call.
            unsafe { f(self.ptr(), a.as_ptr(), name.as_ptr().cast(), name.len(), v, ms, cancel_ptr(cancel)) }
        })?;
        check(st)
    }

    /// A pipelined [`send`](Self::send): returns once `value` is written to the connection to
    /// `addr`, or, for a small value, copied into the node's buffer for `addr` (written with
    /// others within about 1 ms, without a [`flush`](Self::flush)), without waiting for the peer's
    /// acknowledgement (its memory is not used after the call). Posts to one peer arrive in
    /// order; [`flush`](Self::flush) waits for them and returns the first failure among them.
    /// Blocks while the node's `max_queued` posts to `addr` are unacknowledged.
    ///
    /// ```
    /// use tenso::{Node, NodeOptions, Tensor};
    /// let rx = Node::new(&NodeOptions::default())?;
    /// let tx = Node::new(&NodeOptions { no_listen: true, ..Default::default() })?;
    /// let addr = rx.addr()?;
    /// for i in 0..3i64 {
    ///     tx.post(&addr, "step", &Tensor::from_slice(&[i]), None)?;
    /// }
    /// tx.flush(&addr, None)?;
    /// assert_eq!(rx.receive(None)?.unwrap().name, "step");
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn post<'a, E: Encode<'a> + ?Sized>(
        &self,
        addr: &str,
        name: &str,
        value: &E,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.push(sys::tenso_node_post, addr, name, value, timeout, None)
    }

    /// Waits until every [`post`](Self::post) to `addr` is acknowledged; returns the first
    /// failure among the posts since the previous flush (e.g. [`ErrorKind::Limit`]).
    pub fn flush(&self, addr: &str, timeout: Option<Duration>) -> Result<()> {
        let a = c_name(addr, "address")?;
        // SAFETY: live node; the address lives for the call.
        check(unsafe { sys::tenso_node_flush(self.ptr(), a.as_ptr(), timeout.map_or(0, millis), ptr::null_mut()) })
    }

    /// Sends an encoded packet (checked by libtenso before anything is sent) under `name`.
    pub fn send_packet(&self, addr: &str, name: &str, packet: &[u8], timeout: Option<Duration>) -> Result<()> {
        let a = c_name(addr, "address")?;
        // SAFETY: packet and name live for the call.
        check(unsafe {
            sys::tenso_node_send_packet(
                self.ptr(),
                a.as_ptr(),
                name.as_ptr().cast(),
                name.len(),
                packet.as_ptr().cast(),
                packet.len(),
                timeout.map_or(0, millis),
                ptr::null_mut(),
            )
        })
    }

    /// The oldest received push, waiting up to `timeout` (`None`: no deadline;
    /// `Some(Duration::ZERO)`: only what is waiting now). `Ok(None)` when none arrived in time.
    pub fn receive(&self, timeout: Option<Duration>) -> Result<Option<Message>> {
        self.receive_with(timeout, None)
    }

    /// [`receive`](Self::receive) with a cancel token.
    pub fn receive_with(&self, timeout: Option<Duration>, cancel: Option<&CancelToken>) -> Result<Option<Message>> {
        let ms = timeout.map_or(u64::MAX, millis);
        let mut m = ptr::null_mut();
        // SAFETY: out-pointer.
        let st = unsafe { sys::tenso_node_receive(&mut m, self.ptr(), ms, cancel_ptr(cancel)) };
        if st == sys::TENSO_E_TIMEOUT {
            return Ok(None);
        }
        check(st)?;
        // SAFETY: a message tenso_node_receive handed us.
        unsafe { message_from_raw(m) }.map(Some)
    }

    /// The descriptor that is readable while received pushes wait (for poll/epoll); owned by
    /// the node.
    pub fn receive_fd(&self) -> i32 {
        // SAFETY: live node.
        unsafe { sys::tenso_node_receive_fd(self.ptr()) }
    }

    /// Publishes `value` under `name` (replacing any value of that name) for peers to
    /// [`request`](Self::request). It is encoded once, into memory the node owns.
    pub fn publish<'a, E: Encode<'a> + ?Sized>(&self, name: &str, value: &E) -> Result<()> {
        self.publish_buffer(name, Options::default().dumps_buffer(value)?)
    }

    /// Publishes an encoded packet (as [`Options::dumps_buffer`] makes) without copying it.
    pub fn publish_buffer(&self, name: &str, packet: Buffer) -> Result<()> {
        let mut v = ptr::null_mut();
        // SAFETY: the packet's bytes stay alive in the box until drop_buffer.
        check(unsafe { sys::tenso_value_new_packet(&mut v, packet.as_ptr().cast(), packet.len()) })?;
        // One reference for the node, dropped by drop_buffer once it is done with the value.
        let user = Arc::into_raw(Arc::new(packet));
        // SAFETY: on success the node owns `v` and calls drop_buffer(user) once; on failure it
        // takes neither (net.h).
        let st = unsafe {
            sys::tenso_node_publish(
                self.ptr(),
                name.as_ptr().cast(),
                name.len(),
                v,
                Some(drop_buffer),
                user as *mut c_void,
            )
        };
        if st != sys::TENSO_OK {
            // SAFETY: not taken: the value and the node's reference are still ours; the value
            // borrows the packet, so it goes first.
            unsafe { sys::tenso_value_free(v) };
            drop(unsafe { Arc::from_raw(user) });
        }
        check(st)
    }

    /// Stops serving `name` ([`ErrorKind::NotFound`] when nothing of that name is published).
    pub fn unpublish(&self, name: &str) -> Result<()> {
        // SAFETY: name lives for the call.
        check(unsafe { sys::tenso_node_unpublish(self.ptr(), name.as_ptr().cast(), name.len()) })
    }

    /// Installs a per-peer access policy (`None` removes it: every trusted peer may get and push
    /// everything, the default). `f(op, peer, name)` runs on the node's event loop threads for
    /// every get and push, before the value is read or served; `peer` is the sender name (the
    /// key fingerprint over TLS). `false` refuses: the peer gets [`ErrorKind::Auth`]. Keep it
    /// quick and do not call this node's methods from it; a panic refuses. When this returns no
    /// call of the previous policy is running.
    ///
    /// ```
    /// use tenso::{AccessOp, Node, NodeOptions};
    /// let node = Node::new(&NodeOptions::default())?;
    /// node.set_access(Some(|op: AccessOp, _peer: &str, name: &str| op == AccessOp::Push || name != "secret"))?;
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn set_access<F>(&self, f: Option<F>) -> Result<()>
    where
        F: Fn(AccessOp, &str, &str) -> bool + Send + Sync + 'static,
    {
        let mut slot = self.access.lock().unwrap_or_else(|e| e.into_inner());
        let hook: Option<Box<AccessHook>> = f.map(|f| Box::new(Box::new(f) as AccessHook));
        let user = hook.as_ref().map_or(ptr::null_mut(), |h| (&**h as *const AccessHook).cast_mut().cast::<c_void>());
        let fp: sys::tenso_node_access_fn = if hook.is_some() { Some(access_trampoline) } else { None };
        // SAFETY: `user` stays valid until replaced here or the node is freed; the call returns
        // once no call of the previous hook runs, so that one may be dropped after it.
        check(unsafe { sys::tenso_node_set_access(self.ptr(), fp, user) })?;
        *slot = hook;
        Ok(())
    }

    /// Pulls the value the node at `addr` publishes as `name` ([`ErrorKind::NotFound`] when it
    /// publishes nothing of that name; the errors of [`send`](Self::send) otherwise).
    pub fn request(&self, addr: &str, name: &str, timeout: Option<Duration>) -> Result<Packet> {
        self.request_with(addr, name, timeout, None)
    }

    /// [`request`](Self::request) with a cancel token.
    pub fn request_with(
        &self,
        addr: &str,
        name: &str,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
    ) -> Result<Packet> {
        let a = c_name(addr, "address")?;
        let mut v = ptr::null_mut();
        // SAFETY: out-pointer; name and address live for the call.
        check(unsafe {
            sys::tenso_node_request(
                &mut v,
                self.ptr(),
                a.as_ptr(),
                name.as_ptr().cast(),
                name.len(),
                timeout.map_or(0, millis),
                cancel_ptr(cancel),
            )
        })?;
        // SAFETY: the view owns its memory.
        unsafe { Packet::from_owning_view(v) }
    }

    /// The node's counters.
    pub fn stats(&self) -> Result<NodeStats> {
        let mut s = sys::tenso_node_stats { version: sys::TENSO_NODE_STATS_VERSION, ..Default::default() };
        // SAFETY: out-pointer to a struct of the version set.
        check(unsafe { sys::tenso_node_stats_get(&mut s, self.ptr()) })?;
        Ok(NodeStats {
            pool_size: s.pool_size,
            inbound_connections: s.inbound_connections,
            queued: s.queued,
            queued_bytes: s.queued_bytes,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            connections_opened: s.connections_opened,
            connections_reused: s.connections_reused,
            refused: s.refused,
            tls_kernel: s.tls_kernel,
            tls_user: s.tls_user,
            busy_polls: s.busy_polls,
            busy_poll_hits: s.busy_poll_hits,
        })
    }

    /// Outbound connections held in the pool.
    pub fn pool_size(&self) -> Result<u32> {
        Ok(self.stats()?.pool_size)
    }

    /// Stops the node: closes every connection and fails pending and later calls with
    /// [`ErrorKind::Shutdown`]. Idempotent; [`Drop`] also does it.
    pub fn shutdown(&self) {
        // SAFETY: live node; thread-safe.
        unsafe { sys::tenso_node_shutdown(self.ptr()) }
    }
}
