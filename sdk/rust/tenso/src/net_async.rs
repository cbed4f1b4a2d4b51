//! Nodes for tokio (feature `tokio`): [`AsyncNode`], whose calls are futures over libtenso's
//! completion-based calls (`tenso/net.h`, 1.5), with no thread per call.
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use tenso_sys as sys;

use crate::encode::{private::Source, Encode};
use crate::error::{c_name, check, Error, ErrorKind, Result};
use crate::io::Packet;
use crate::net::{message_from_raw, millis, Message, Node, NodeOptions};
use crate::value::Value;

/// The queue's descriptor, registered with tokio's reactor (owned by the queue, never closed here).
struct QueueFd(RawFd);

impl AsRawFd for QueueFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A node's completion queue and the tasks waiting on it.
struct Shared {
    queue: NonNull<sys::tenso_node_queue>,
    fd: ManuallyDrop<AsyncFd<QueueFd>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The task awaiting each call in flight, by operation.
    wakers: HashMap<usize, Waker>,
    /// Messages taken by receives whose futures were dropped after they completed.
    stash: VecDeque<Message>,
}

// SAFETY: every tenso_node_queue_* / tenso_node_op_* function is thread-safe (net.h); the rest is
// behind the mutex.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: deregistered from the reactor before the queue (and its descriptor) goes; no
        // call refers to the queue any more (each holds an Arc of Shared).
        unsafe {
            ManuallyDrop::drop(&mut self.fd);
            sys::tenso_node_queue_free(self.queue.as_ptr());
        }
    }
}

/// The reactor's waker for the queue's descriptor: wakes one task awaiting a call, which then
/// reaps the queue for everyone (so a dropped future never strands the others).
impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let w = self.lock().wakers.values().next().cloned();
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs the queue's work while its descriptor is readable, waking the tasks whose calls
    /// completed; returns once tokio says it is not (the reactor then wakes a waiting task).
    fn drive(self: &Arc<Self>) -> Result<()> {
        let waker = Waker::from(Arc::clone(self));
        let mut cx = Context::from_waker(&waker);
        loop {
            let mut guard = match self.fd.poll_read_ready(&mut cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Err(e)) => return Err(Error::new(ErrorKind::Io, format!("tokio reactor: {e}"))),
                Poll::Ready(Ok(g)) => g,
            };
            let mut ops = [ptr::null_mut::<sys::tenso_node_op>(); 64];
            loop {
                let mut n = 0usize;
                // SAFETY: ops has room for 64; the queue lives as long as self.
                check(unsafe {
                    sys::tenso_node_queue_reap(ops.as_mut_ptr(), ops.len(), &mut n, self.queue.as_ptr(), 0)
                })?;
                let woken: Vec<Waker> = {
                    let mut st = self.lock();
                    ops[..n].iter().filter_map(|op| st.wakers.remove(&(*op as usize))).collect()
                };
                woken.into_iter().for_each(Waker::wake);
                if n < ops.len() {
                    break;
                }
            }
            // Edge-triggered: drained (a reap returned fewer than asked for), so wait again.
            guard.clear_ready();
        }
    }
}

/// A node whose calls are futures for tokio (feature `tokio`): each call starts libtenso's
/// completion-based call at once (`tenso_node_*_start`), and its future completes with it. The
/// node's completion queue is one descriptor registered with tokio's reactor; the calls' socket
/// work (TLS included) runs in the tasks that poll them, so no thread waits per call.
///
/// Futures are `Send` (spawn them on a multi-threaded runtime). Dropping a future cancels its
/// call if it is still running (a send or request in progress closes its connection, as a
/// timeout does), and waits briefly until libtenso lets go of the value. [`receive`](Self::receive)
/// is cancel-safe: a message its dropped future had taken goes to the next receive. Other calls
/// are not: a dropped send may or may not have been delivered.
///
/// The blocking [`Node`] stays available through [`node`](Self::node) (addresses, publish,
/// statistics, blocking calls).
///
/// ```
/// use tenso::{AsyncNode, NodeOptions, Tensor};
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let rx = AsyncNode::new(&NodeOptions::default())?; // TLS 1.3 on 127.0.0.1
/// let tx = AsyncNode::new(&NodeOptions { no_listen: true, ..Default::default() })?;
/// let addr = rx.node().addr()?;
///
/// let data = [1.0f32, 2.0, 3.0];
/// tx.send(&addr, "weights", &Tensor::from_slice(&data), None).await?;
/// let msg = rx.receive(None).await?.expect("no deadline: a message");
/// assert_eq!(msg.name, "weights");
/// assert_eq!(msg.value.as_slice::<f32>()?, &data);
///
/// rx.node().publish("bias", &Tensor::from_slice(&[7i64]))?;
/// let bias = tx.request(&addr, "bias", None).await?;
/// assert_eq!(bias.as_slice::<i64>()?, &[7]);
/// # Ok::<(), tenso::Error>(())
/// # }).unwrap();
/// ```
pub struct AsyncNode {
    node: Arc<Node>,
    shared: Arc<Shared>,
}

impl fmt::Debug for AsyncNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncNode").field("node", &self.node).finish_non_exhaustive()
    }
}

impl AsyncNode {
    /// Starts a node (as [`Node::new`]) and its completion queue. Must be called within a tokio
    /// runtime with I/O enabled ([`ErrorKind::Io`] otherwise).
    pub fn new(o: &NodeOptions) -> Result<AsyncNode> {
        AsyncNode::from_node(Arc::new(Node::new(o)?))
    }

    /// An async face for a node shared with blocking code (one completion queue of its own).
    pub fn from_node(node: Arc<Node>) -> Result<AsyncNode> {
        let mut q = ptr::null_mut();
        // SAFETY: out-pointer; a live node.
        check(unsafe { sys::tenso_node_queue_new(&mut q, node.ptr(), None) })?;
        let queue = NonNull::new(q).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL queue"))?;
        let fail = |why: String| {
            // SAFETY: ours, never shared.
            unsafe { sys::tenso_node_queue_free(queue.as_ptr()) };
            Err(Error::new(ErrorKind::Io, why))
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return fail("AsyncNode needs a tokio runtime (call it from within one)".into());
        }
        // SAFETY: a live queue.
        let fd = QueueFd(unsafe { sys::tenso_node_queue_fd(queue.as_ptr()) });
        // SAFETY: the descriptor stays open, the same epoll instance, until Shared's drop
        // deregisters it before freeing the queue.
        let fd = match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
            Ok(fd) => fd,
            Err(e) => return fail(format!("registering the queue with tokio: {}", e.into_parts().1)),
        };
        let shared = Arc::new(Shared { queue, fd: ManuallyDrop::new(fd), state: Mutex::new(State::default()) });
        Ok(AsyncNode { node, shared })
    }

    /// The blocking node: addresses, publish, statistics, shutdown and the blocking calls.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Sends `value` under `name` to the node at `addr`; completes once the peer has queued it
    /// (as [`Node::send`]). `value`'s memory is written from directly and stays borrowed until
    /// the future completes or is dropped.
    pub fn send<'a, E: Encode<'a> + ?Sized>(
        &self,
        addr: &str,
        name: &str,
        value: &'a E,
        timeout: Option<Duration>,
    ) -> Completion<'a, ()> {
        self.push(sys::tenso_node_send_start, addr, name, value, timeout)
    }

    /// A pipelined send (as [`Node::post`]): completes once `value` is buffered or written,
    /// usually before this returns (then the future is ready at once). Posts to one peer keep
    /// the order in which they were started, also with the blocking [`Node::post`];
    /// [`flush`](Self::flush) reports their fate.
    ///
    /// ```
    /// use tenso::{AsyncNode, NodeOptions, Tensor};
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let rx = AsyncNode::new(&NodeOptions::default())?;
    /// let tx = AsyncNode::new(&NodeOptions { no_listen: true, ..Default::default() })?;
    /// let addr = rx.node().addr()?;
    /// for i in 0..3i64 {
    ///     tx.post(&addr, "step", &Tensor::from_slice(&[i]), None).await?;
    /// }
    /// tx.flush(&addr, None).await?;
    /// assert_eq!(rx.receive(None).await?.unwrap().value.as_slice::<i64>()?, &[0]);
    /// # Ok::<(), tenso::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn post<'a, E: Encode<'a> + ?Sized>(
        &self,
        addr: &str,
        name: &str,
        value: &'a E,
        timeout: Option<Duration>,
    ) -> Completion<'a, ()> {
        self.push(sys::tenso_node_post_start, addr, name, value, timeout)
    }

    /// Completes once every post to `addr` started before it is acknowledged, with the first
    /// failure among the posts since the previous flush (as [`Node::flush`]).
    pub fn flush(&self, addr: &str, timeout: Option<Duration>) -> Completion<'static, ()> {
        let ms = timeout.map_or(0, millis);
        self.start(None, false, take_unit, |out, q| {
            let a = c_name(addr, "address")?;
            // SAFETY: out-pointer; the address lives for the call.
            Ok(unsafe { sys::tenso_node_flush_start(out, q, a.as_ptr(), ms, ptr::null_mut()) })
        })
    }

    /// Pulls the value the node at `addr` publishes as `name` (as [`Node::request`]).
    pub fn request(&self, addr: &str, name: &str, timeout: Option<Duration>) -> Completion<'static, Packet> {
        let ms = timeout.map_or(0, millis);
        self.start(None, false, take_view, |out, q| {
            let a = c_name(addr, "address")?;
            // SAFETY: out-pointer; address and name live for the call.
            Ok(unsafe {
                sys::tenso_node_request_start(out, q, a.as_ptr(), name.as_ptr().cast(), name.len(), ms, ptr::null_mut())
            })
        })
    }

    /// The oldest received push, waiting up to `timeout` (`None`: no deadline;
    /// `Some(Duration::ZERO)`: only what is waiting now); `Ok(None)` when none came in time.
    /// Cancel-safe: dropping the future never loses a message.
    pub fn receive(&self, timeout: Option<Duration>) -> Completion<'static, Option<Message>> {
        if let Some(m) = self.shared.lock().stash.pop_front() {
            return Completion {
                shared: Arc::clone(&self.shared),
                run: Run::Ready(Ok(Some(m))),
                take: take_message,
                receive: true,
                listed: false,
            };
        }
        let ms = timeout.map_or(u64::MAX, millis);
        self.start(None, true, take_message, |out, q| {
            // SAFETY: out-pointer.
            Ok(unsafe { sys::tenso_node_receive_start(out, q, ms, ptr::null_mut()) })
        })
    }

    fn push<'a, E: Encode<'a> + ?Sized>(
        &self,
        f: PushStart,
        addr: &str,
        name: &str,
        value: &'a E,
        timeout: Option<Duration>,
    ) -> Completion<'a, ()> {
        let ms = timeout.map_or(0, millis);
        // The tenso_value the call reads (a temporary one over a plain tensor's memory), kept
        // with the future; a Value's own handle is borrowed for 'a.
        let (keep, raw): (Option<Value<'a>>, *const sys::tenso_value) = match value.source() {
            Err(e) => return self.failed(e),
            Ok(Source::Tensor(t, _)) => match Value::from_tensor_raw(t.raw()) {
                Ok(v) => {
                    let p = v.as_ptr();
                    (Some(v), p)
                }
                Err(e) => return self.failed(e),
            },
            Ok(Source::Value(v)) => (None, v.as_ptr()),
            Ok(Source::Owned(v)) => {
                let p = v.as_ptr();
                (Some(v), p)
            }
        };
        self.start(keep, false, take_unit, |out, q| {
            let a = c_name(addr, "address")?;
            // SAFETY: out-pointer; the value (kept with the future) outlives the call.
            Ok(unsafe { f(out, q, a.as_ptr(), name.as_ptr().cast(), name.len(), raw, ms, ptr::null_mut()) })
        })
    }

    fn failed<'a, T>(&self, e: Error) -> Completion<'a, T> {
        Completion {
            shared: Arc::clone(&self.shared),
            run: Run::Ready(Err(e)),
            take: |_, _| unreachable!(),
            receive: false,
            listed: false,
        }
    }

    fn start<'a, T>(
        &self,
        keep: Option<Value<'a>>,
        receive: bool,
        take: Take<T>,
        f: impl FnOnce(*mut *mut sys::tenso_node_op, *mut sys::tenso_node_queue) -> Result<sys::tenso_status>,
    ) -> Completion<'a, T> {
        let mut op = ptr::null_mut();
        let started = f(&mut op, self.shared.queue.as_ptr()).and_then(check);
        let run = match (started, NonNull::new(op)) {
            (Err(e), _) => Run::Ready(Err(e)),
            (Ok(()), None) => Run::Ready(Err(Error::new(ErrorKind::Internal, "libtenso returned a NULL operation"))),
            (Ok(()), Some(op)) => Run::Running { op, keep },
        };
        Completion { shared: Arc::clone(&self.shared), run, take, receive, listed: false }
    }
}

type PushStart = unsafe extern "C" fn(
    *mut *mut sys::tenso_node_op,
    *mut sys::tenso_node_queue,
    *const std::ffi::c_char,
    *const std::ffi::c_char,
    usize,
    *const sys::tenso_value,
    u64,
    *mut c_void,
) -> sys::tenso_status;

/// The result of a completed operation, from its status.
type Take<T> = fn(*mut sys::tenso_node_op, sys::tenso_status) -> Result<T>;

fn take_unit(_: *mut sys::tenso_node_op, st: sys::tenso_status) -> Result<()> {
    check(st)
}

fn take_view(op: *mut sys::tenso_node_op, st: sys::tenso_status) -> Result<Packet> {
    check(st)?;
    let mut v = ptr::null_mut();
    // SAFETY: a completed request of ours; the view moves out.
    check(unsafe { sys::tenso_node_op_take_view(&mut v, op) })?;
    // SAFETY: the view owns its memory.
    unsafe { Packet::from_owning_view(v) }
}

fn take_message(op: *mut sys::tenso_node_op, st: sys::tenso_status) -> Result<Option<Message>> {
    if st == sys::TENSO_E_TIMEOUT {
        return Ok(None);
    }
    check(st)?;
    let mut m = ptr::null_mut();
    // SAFETY: a completed receive of ours; the message moves out.
    check(unsafe { sys::tenso_node_op_take_message(&mut m, op) })?;
    // SAFETY: ours now.
    unsafe { message_from_raw(m) }.map(Some)
}

enum Run<'a, T> {
    Ready(Result<T>),
    Running { op: NonNull<sys::tenso_node_op>, keep: Option<Value<'a>> },
    Done,
}

/// A call of an [`AsyncNode`] in flight: a future of its result. `'a` is the borrow of the
/// value a send or post writes from. Dropping it before it completes cancels the call (see
/// [`AsyncNode`]).
#[must_use = "dropping the future cancels the call"]
pub struct Completion<'a, T> {
    shared: Arc<Shared>,
    run: Run<'a, T>,
    take: Take<T>,
    receive: bool,
    /// Its task's waker is in the queue's list (it returned Pending and has not completed).
    listed: bool,
}

// SAFETY: the operation handle is thread-safe (net.h) and owned by this future alone; the value
// it reads is borrowed for 'a from data that is Sync, or owned (Value is Send).
unsafe impl<T: Send> Send for Completion<'_, T> {}

// Nothing in it is pinned: the result is moved out, never polled in place.
impl<T> Unpin for Completion<'_, T> {}

impl<T> fmt::Debug for Completion<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion").field("finished", &self.is_finished()).finish_non_exhaustive()
    }
}

impl<T> Completion<'_, T> {
    /// Whether the call has completed (its result is ready for the next poll). Calls move on
    /// only while a task polls one of the node's futures.
    pub fn is_finished(&self) -> bool {
        match &self.run {
            // SAFETY: a live operation of ours.
            Run::Running { op, .. } => unsafe { sys::tenso_node_op_done(op.as_ptr()) != 0 },
            _ => true,
        }
    }

    /// The result of the completed operation; frees it.
    fn finish(&mut self) -> Result<T> {
        match std::mem::replace(&mut self.run, Run::Done) {
            Run::Ready(r) => r,
            Run::Running { op, keep } => {
                // SAFETY: completed; the operation is freed once its result is taken.
                let st = unsafe { sys::tenso_node_op_result(op.as_ptr()) };
                let r = (self.take)(op.as_ptr(), st);
                // SAFETY: ours, completed.
                unsafe { sys::tenso_node_op_free(op.as_ptr()) };
                drop(keep);
                r
            }
            Run::Done => Err(Error::new(ErrorKind::InvalidArgument, "a tenso Completion polled after it completed")),
        }
    }
}

impl<T> Future for Completion<'_, T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        let op = match &this.run {
            Run::Running { op, .. } => *op,
            _ => return Poll::Ready(this.finish()),
        };
        // Never listed, so no wake of the reactor's was handed to it: done at once.
        if !this.listed && this.is_finished() {
            return Poll::Ready(this.finish());
        }
        let key = op.as_ptr() as usize;
        this.shared.lock().wakers.insert(key, cx.waker().clone());
        this.listed = true;
        // Reaps the queue even when this call is done already (another thread's cancel or the
        // node's shutdown ends calls without a reap): the reactor's wake may have come here on
        // behalf of every call, and only a reap wakes the others.
        let driven = this.shared.drive();
        if driven.is_ok() && !this.is_finished() {
            return Poll::Pending;
        }
        this.shared.lock().wakers.remove(&key);
        this.listed = false;
        // A wake for all that picked this task after the reap above would end here: reap once
        // more now that it is unlisted (the readiness that woke it is still set), so the
        // reactor's next wake goes to a task still waiting.
        let driven = driven.and_then(|()| this.shared.drive());
        Poll::Ready(driven.and_then(|()| this.finish()))
    }
}

impl<T> Drop for Completion<'_, T> {
    fn drop(&mut self) {
        let Run::Running { op, .. } = &self.run else { return };
        let op = op.as_ptr();
        self.shared.lock().wakers.remove(&(op as usize));
        if self.listed {
            // The reactor's wake may have come to this future's task for all of them: hand it
            // on, or the other calls would wait for a readiness that tokio has already reported.
            self.shared.wake_by_ref();
        }
        if self.receive {
            // Cancel-safe: a receive ends at once when cancelled (net.h); a message it took
            // first goes to the next receive.
            // SAFETY: ours.
            unsafe { sys::tenso_node_op_cancel(op) };
            // SAFETY: completed now.
            let st = unsafe { sys::tenso_node_op_result(op) };
            if st == sys::TENSO_OK {
                if let Ok(Some(m)) = take_message(op, st) {
                    self.shared.lock().stash.push_back(m);
                }
            }
        }
        // SAFETY: ours; cancels it if still running and waits until libtenso no longer uses
        // the value, which `keep` (dropped after this) holds.
        unsafe { sys::tenso_node_op_free(op) };
        self.run = Run::Done;
    }
}
