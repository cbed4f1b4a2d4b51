"""
tenso.net: nodes that push and pull named tensors between peers (libtenso's ``tenso_node_*``).

The API of the ``tensor_iroh`` seed, over libtenso's engine (TLS 1.3 by default; plain TCP and
Unix sockets only when asked for)::

    node = TensorNode()
    await node.start()
    addr = await node.get_node_addr()          # "tls://<key fingerprint>@127.0.0.1:<port>"
    await other.send_tensor(addr, "weights", np.ones(4))
    name, array = await node.receive_tensor()  # or None on timeout
    node.publish("bias", np.zeros(3))          # peers pull it with request_tensor
    value = await other.request_tensor(addr, "bias")
    node.shutdown()

Values are anything :func:`tenso.dumps` takes (arrays, dicts of them, sparse matrices, the
composite kinds); arrays are sent straight from their memory, never copied into a packet.

Blocking form: every coroutine method has a blocking twin with the suffix ``_sync``
(``send_tensor_sync``, ``receive_tensor_sync``, ...) that may be called from any thread and
releases the GIL while it waits.

Coroutines run on the running event loop, whichever it is, with no thread per call: each starts
libtenso's completion-based call (``tenso_node_*_start``) on a completion queue the node keeps
for that loop, and awaits a future that the loop resolves when the queue's descriptor is
readable (``loop.add_reader``). The socket work of outbound calls runs on the loop's thread,
with the GIL released. A node may be used from several loops (one queue each).

Cancellation: cancelling the task awaiting a coroutine cancels its libtenso call
(``tenso_node_op_cancel``): a send or request in progress closes its connection, as a timeout
does. A cancel (or a timeout) stops a push only while it is still being handed to the
connection: after that the peer has it, and ``TensoCancelledError`` does not mean it was not
delivered (see net.h). A ``receive_tensor`` cancelled after it took a message hands that
message to the next ``receive_tensor`` on the same loop, so
``asyncio.wait_for(node.receive_tensor(), t)`` loses nothing.

Shutdown: ``shutdown()``, ``close()`` and leaving ``with``/``async with`` end every call waiting
on the node, blocking or awaited (``receive_tensor`` included), with ``TensoShutdownError``.

Access: by default every trusted peer may pull every published name and push any name;
:meth:`TensorNode.set_access` installs a per-peer policy.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from . import _tenso
from .core import _to_value
from .errors import TensoShutdownError, TensoValueError

__all__ = ["TensorNode"]

_T = TypeVar("_T")


class TensorNode:
    """A tenso node: listens for pushes and pulls, dials peers, pools connections.

    Arguments mirror ``tenso_node_options`` (zero or None means libtenso's default):

    - ``listen``: listen addresses, a str (comma-separated) or a sequence; default
      ``"tls://127.0.0.1:0"``. ``tcp://`` and ``unix://`` need ``allow_plaintext=True``.
    - ``allow_plaintext``, ``fd_passing`` (Unix peers: large packets travel as a descriptor),
      ``listen_enabled`` (False: a node that only dials), ``busy_poll`` (False: a send waiting
      for its acknowledgement, or a request for its value, sleeps at once instead of polling
      up to 100 us for it, and so does the node's event loop between requests; see
      ``TENSO_NODE_NO_BUSY_POLL``).
    - ``cert_pem``/``key_pem`` (this node's identity; default an ephemeral key), ``ca_pem`` and
      ``pinned_keys`` (which dialers the listener trusts).
    - ``timeout``: the default deadline of blocking calls in seconds (default 60).
    - limits: ``max_packet_bytes``, ``max_name_bytes``, ``max_queued``, ``max_queued_bytes``,
      ``max_connections``, ``max_pool_per_peer``, ``idle_timeout`` (seconds),
      ``fd_passing_min_bytes``; ``threads`` of the node's event loop.
    - ``receive_timeout``: how long ``receive_tensor`` waits by default, in seconds (None: no
      deadline).
    """

    def __init__(
        self,
        listen: Optional[str | Sequence[str]] = None,
        *,
        allow_plaintext: bool = False,
        fd_passing: bool = True,
        listen_enabled: bool = True,
        busy_poll: bool = True,
        cert_pem: Optional[str] = None,
        key_pem: Optional[str] = None,
        ca_pem: Optional[str] = None,
        pinned_keys: Sequence[str] = (),
        threads: int = 0,
        timeout: Optional[float] = None,
        receive_timeout: Optional[float] = None,
        max_packet_bytes: int = 0,
        max_name_bytes: int = 0,
        max_queued: int = 0,
        max_queued_bytes: int = 0,
        max_connections: int = 0,
        max_pool_per_peer: int = 0,
        idle_timeout: Optional[float] = None,
        fd_passing_min_bytes: int = 0,
    ) -> None:
        if listen is not None and not isinstance(listen, str):
            listen = ",".join(listen)
        flags = 0
        if allow_plaintext:
            flags |= _tenso.NODE_ALLOW_PLAINTEXT
        if not fd_passing:
            flags |= _tenso.NODE_NO_FD_PASSING
        if not listen_enabled:
            flags |= _tenso.NODE_NO_LISTEN
        if not busy_poll:
            flags |= _tenso.NODE_NO_BUSY_POLL
        self._options: Dict[str, Any] = dict(
            listen=listen,
            flags=flags,
            cert_pem=cert_pem,
            key_pem=key_pem,
            ca_pem=ca_pem,
            pinned_keys=list(pinned_keys),
            threads=threads,
            max_packet_bytes=max_packet_bytes,
            max_name_bytes=max_name_bytes,
            max_queued=max_queued,
            max_queued_bytes=max_queued_bytes,
            max_connections=max_connections,
            max_pool_per_peer=max_pool_per_peer,
            idle_timeout_ms=_ms(idle_timeout),
            io_timeout_ms=_ms(timeout),
            fd_passing_min_bytes=fd_passing_min_bytes,
        )
        self.receive_timeout = receive_timeout
        self._node: Optional[_tenso.Node] = None
        self._lock = threading.Lock()
        self._shut = False
        # The completion queue of each event loop the coroutines ran on (see _queue).
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _tenso.Queue] = weakref.WeakKeyDictionary()
        self._last: Tuple[Any, Optional[_tenso.Queue]] = (None, None)

    # ---- lifetime ---------------------------------------------------------------------------

    def start_sync(self) -> None:
        """Binds the listeners and starts the node's event loop (idempotent)."""
        with self._lock:
            if self._shut:
                raise _shutdown_error()
            if self._node is None:
                self._node = _tenso.Node(**self._options)
                # The node keeps no copy of the key's text: neither does this object.
                self._options["key_pem"] = None

    async def start(self) -> None:
        """Coroutine form of :meth:`start_sync` (the binding and key generation run on the
        loop's default executor: milliseconds, once)."""
        await asyncio.get_running_loop().run_in_executor(None, self.start_sync)

    def shutdown(self) -> None:
        """Stops the node: closes every connection and fails pending and later calls with
        ``TensoShutdownError``. Idempotent; may be called from any thread."""
        with self._lock:
            self._shut = True
            node = self._node
        if node is not None:
            node.shutdown()

    def close(self) -> None:
        """Shuts down and frees the node (once no call is using it). Coroutines still awaiting
        it fail with ``TensoShutdownError`` (on their loop's next turn)."""
        self.shutdown()
        with self._lock:
            queues = list(self._queues.items())
            self._queues.clear()
            self._last = (None, None)
        for loop, q in queues:
            _detach(loop, q)
        if self._node is not None:
            self._node.close()

    def __enter__(self) -> TensorNode:
        self.start_sync()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> TensorNode:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ---- addresses --------------------------------------------------------------------------

    def get_node_addr_sync(self) -> str:
        """The first address a peer can dial (a ``tls://fingerprint@host:port`` ticket)."""
        return self._started().addrs()[0]

    async def get_node_addr(self) -> str:
        """Coroutine form of :meth:`get_node_addr_sync`."""
        return self.get_node_addr_sync()

    def addrs(self) -> List[str]:
        """Every address a peer can dial, in listen order."""
        return self._started().addrs()

    @property
    def node_id(self) -> str:
        """This node's key fingerprint (64 hex): the sender other nodes see for it over TLS."""
        return self._started().id()

    # ---- push -------------------------------------------------------------------------------

    def send_tensor_sync(
        self, addr: str, name: str, value: Any, timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """Sends ``value`` under ``name`` to the node at ``addr``; returns once the peer has queued
        it (a full peer queue blocks). ``timeout`` in seconds (None: the node's default)."""
        self._started().send(addr, name, _to_value(value, strict), timeout)

    async def send_tensor(
        self, addr: str, name: str, value: Any, timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """Coroutine form of :meth:`send_tensor_sync`; cancelling it cancels the send."""
        loop, q = self._queue()
        await _completion(q, q.send(loop, addr, name, _arg(value, strict), strict, timeout))

    def post_tensor_sync(
        self, addr: str, name: str, value: Any, timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """A pipelined push: returns once ``value`` is written to the connection to ``addr``,
        without waiting for the peer's acknowledgement (``value`` may change afterwards). Posts
        to one peer arrive in order; :meth:`flush_sync` waits for them and raises the first
        failure among them. Blocks when too many are unacknowledged (the node's max_queued).
        A small value may be buffered with others, and is written within about 1 ms without
        a flush."""
        node = self._started()
        if type(value) is np.ndarray:  # the common case, with no Value object in between
            node.post_array(addr, name, value, strict, timeout)
        else:
            node.post(addr, name, _to_value(value, strict), timeout)

    async def post_tensor(
        self, addr: str, name: str, value: Any, timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """Coroutine form of :meth:`post_tensor_sync`: usually done without suspending (the
        value is buffered or written); it waits (on the loop) only where the blocking form
        would block. Posts started by coroutines and by the blocking form keep their order."""
        loop, q = self._queue()
        fut = q.post(loop, addr, name, _arg(value, strict), strict, timeout)
        if fut is not None:
            await _completion(q, fut)

    def post_many_sync(
        self, addr: str, items: Iterable[Tuple[str, Any]], timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """:meth:`post_tensor_sync` of every ``(name, value)`` pair, in order, in one call (for
        many small values, the per-call cost is paid once per few hundred). Raises the first
        failure: the pairs before it were posted, those after it were not."""
        node = self._started()
        node.post_many(
            addr, ((n, v if type(v) is np.ndarray else _to_value(v, strict)) for n, v in items), strict, timeout
        )

    async def post_many(
        self, addr: str, items: Iterable[Tuple[str, Any]], timeout: Optional[float] = None, *, strict: bool = False
    ) -> None:
        """Coroutine form of :meth:`post_many_sync` (one post after the other, each awaited only
        when it must wait)."""
        loop, q = self._queue()
        for n, v in items:
            fut = q.post(loop, addr, n, _arg(v, strict), strict, timeout)
            if fut is not None:
                await _completion(q, fut)

    def flush_sync(self, addr: str, timeout: Optional[float] = None) -> None:
        """Waits until every post to ``addr`` is acknowledged; raises the first failure among
        the posts since the previous flush."""
        self._started().flush(addr, timeout)

    async def flush(self, addr: str, timeout: Optional[float] = None) -> None:
        """Coroutine form of :meth:`flush_sync`; cancelling it cancels the wait."""
        loop, q = self._queue()
        await _completion(q, q.flush(loop, addr, timeout))

    def receive_tensor_with_sender_sync(self, timeout: Optional[float] = -1.0) -> Optional[Tuple[str, str, Any]]:
        """As :meth:`receive_tensor_sync`, with the sender: ``(name, sender, value)``. The sender
        is the peer's key fingerprint over TLS, else its connection's address."""
        t = self.receive_timeout if timeout == -1.0 else timeout
        return self._started().receive(t)

    def receive_tensor_sync(self, timeout: Optional[float] = -1.0) -> Optional[Tuple[str, Any]]:
        """The oldest received push as ``(name, value)``, or None when none arrived within
        ``timeout`` seconds (default: the node's ``receive_timeout``; None waits without a
        deadline; 0 does not wait)."""
        got = self.receive_tensor_with_sender_sync(timeout)
        return None if got is None else (got[0], got[2])

    async def receive_tensor_with_sender(self, timeout: Optional[float] = -1.0) -> Optional[Tuple[str, str, Any]]:
        """Coroutine form of :meth:`receive_tensor_with_sender_sync`."""
        loop, q = self._queue()
        t = self.receive_timeout if timeout == -1.0 else timeout
        got: Optional[Tuple[str, str, Any]] = await _completion(q, q.receive(loop, t))
        return got

    async def receive_tensor(self, timeout: Optional[float] = -1.0) -> Optional[Tuple[str, Any]]:
        """Coroutine form of :meth:`receive_tensor_sync`."""
        got = await self.receive_tensor_with_sender(timeout)
        return None if got is None else (got[0], got[2])

    # ---- pull -------------------------------------------------------------------------------

    def publish(self, name: str, value: Any, *, strict: bool = False) -> None:
        """Publishes ``value`` under ``name`` (replacing any value of that name) for peers to
        pull. Arrays are served from their own memory: they are kept alive, and must not be
        modified, until unpublished, replaced or the node is closed."""
        self._started().publish(name, _to_value(value, strict))

    def unpublish(self, name: str) -> None:
        """Stops serving ``name``; ``TensoNotFoundError`` when nothing of that name is published."""
        self._started().unpublish(name)

    def request_tensor_sync(self, addr: str, name: str, timeout: Optional[float] = None) -> Any:
        """Pulls the value the node at ``addr`` publishes as ``name``; ``TensoNotFoundError`` when
        it publishes nothing of that name."""
        return self._started().request(addr, name, timeout)

    async def request_tensor(self, addr: str, name: str, timeout: Optional[float] = None) -> Any:
        """Coroutine form of :meth:`request_tensor_sync`; cancelling it cancels the request."""
        loop, q = self._queue()
        return await _completion(q, q.request(loop, addr, name, timeout))

    # ---- access -----------------------------------------------------------------------------

    def set_access(self, fn: Optional[Callable[[str, str, str], bool]]) -> None:
        """Installs a per-peer access policy: ``fn(op, peer, name)`` with ``op`` ``"get"`` (a peer
        pulls ``name``) or ``"push"`` (a peer pushes under ``name``) and ``peer`` the sender name
        (its key fingerprint over TLS) returns whether to allow it. A refused peer gets
        ``TensoAuthError``. ``fn`` runs on the node's event loop thread with the GIL held: keep
        it quick, and do not call this node's methods from it; an exception refuses. None
        removes the policy (the default: every trusted peer may get and push everything)."""
        self._started().set_access(fn)

    # ---- statistics -------------------------------------------------------------------------

    def pool_size_sync(self) -> int:
        """Outbound connections held in the pool (idle or busy)."""
        return int(self._started().stats()["pool_size"])

    async def pool_size(self) -> int:
        """Coroutine form of :meth:`pool_size_sync`."""
        return self.pool_size_sync()

    def stats(self) -> dict[str, int]:
        """``tenso_node_stats`` as a dict (pool_size, inbound_connections, queued, queued_bytes,
        bytes_sent, bytes_received, connections_opened, connections_reused, refused, and
        tls_kernel / tls_user: TLS connections whose records the kernel (kTLS, used where the
        kernel offers it) or OpenSSL in this process encrypts, and busy_polls / busy_poll_hits:
        waits for a peer's answer that polled for it first, and those it came during)."""
        return dict(self._started().stats())

    # ---- helpers ----------------------------------------------------------------------------

    def _started(self) -> _tenso.Node:
        node = self._node
        if node is None:
            if self._shut:
                raise _shutdown_error()
            raise _tenso_value_error("tenso node: not started (await node.start() first)")
        return node

    def _queue(self) -> Tuple[asyncio.AbstractEventLoop, _tenso.Queue]:
        """The running loop and this node's completion queue for it, made (and its descriptor
        added to the loop's readers) on first use."""
        loop = asyncio.get_running_loop()
        last_loop, q = self._last
        if last_loop is loop and q is not None:
            return loop, q
        node = self._started()
        with self._lock:
            if self._shut:
                raise _shutdown_error()
            q = self._queues.get(loop)
            if q is None:
                q = _tenso.Queue(node)
                loop.add_reader(q.fd(), q.reap)
                self._queues[loop] = q
            self._last = (loop, q)
        return loop, q


async def _completion(q: _tenso.Queue, fut: Awaitable[_T]) -> _T:
    """Awaits a call's future; a cancelled await cancels the call."""
    try:
        return await fut
    except asyncio.CancelledError:
        q.cancel(fut)
        raise


def _arg(value: Any, strict: bool) -> Any:
    """What a push takes: an array as it is (no Value object in between), anything else encoded."""
    return value if type(value) is np.ndarray else _to_value(value, strict)


def _detach(loop: asyncio.AbstractEventLoop, q: _tenso.Queue) -> None:
    """Resolves what the node's shutdown completed, removes the queue's reader and frees it: on
    the loop's thread (now, when that is this one)."""

    def run() -> None:
        try:
            q.reap()
        finally:
            loop.remove_reader(q.fd())
            q.close()

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        run()
    elif not loop.is_closed():
        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # closed meanwhile: its readers are gone with it
            q.close()
    else:
        q.close()


def _ms(seconds: Optional[float]) -> int:
    return 0 if seconds is None else max(1, int(seconds * 1000))


def _shutdown_error() -> Exception:
    return TensoShutdownError("tenso node: shut down")


def _tenso_value_error(message: str) -> Exception:
    return TensoValueError(message)
