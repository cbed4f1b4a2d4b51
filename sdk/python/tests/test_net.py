"""tenso.net.TensorNode over real sockets (127.0.0.1, ::1, Unix sockets): the seed's 13
scenarios (push, pull, concurrent senders, rapid fire, large tensor, multiple receivers, send
before the peer is ready, immediate shutdown, timeouts, missing tensor, bad address, calls after
shutdown, pool reuse), TLS by default, plaintext only when asked, cancellation."""

import asyncio
import gc
import os
import socket
import subprocess
import tempfile
import threading
import time
import weakref

import numpy as np
import pytest

import tenso
from tenso.errors import (
    TensoAuthError,
    TensoCancelledError,
    TensoConnectionError,
    TensoError,
    TensoNotFoundError,
    TensoShutdownError,
    TensoTimeoutError,
    TensoValueError,
)
from tenso.net import TensorNode


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def assert_same(a, b):
    """Every byte, dtype and shape of a decoded value against what was sent."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b)
        for k in a:
            assert_same(a[k], b[k])
        return
    assert isinstance(b, np.ndarray)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- 1. basic push (TLS, the default) --------------------------------------------------------


def test_basic_push_tls_default():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            assert addr.startswith("tls://") and "@127.0.0.1:" in addr
            fingerprint = addr[len("tls://") : addr.index("@")]
            assert fingerprint == rx.node_id and len(fingerprint) == 64
            x = np.arange(12, dtype=np.float32).reshape(3, 4)
            await tx.send_tensor(addr, "weights", x)
            name, sender, got = await rx.receive_tensor_with_sender(timeout=30)
            assert name == "weights"
            assert sender == tx.node_id  # over TLS the sender is the dialer's key
            assert_same(x, got)
            assert got.ctypes.data % 64 == 0  # received into aligned memory

    run(main())


def test_push_any_value_kind():
    values = {
        "bundle": {"w": np.ones((2, 3), np.float64), "b": {"i": np.arange(5, dtype=np.int8)}},
        "empty": np.zeros((0, 4), np.uint16),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.5, np.float32),
    }

    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            for k, v in values.items():
                await tx.send_tensor(addr, k, v)
            for k, v in values.items():
                name, got = await rx.receive_tensor(timeout=30)
                assert name == k
                assert_same(v, got)
            # composites too: strings and quantized
            await tx.send_tensor(addr, "s", tenso.StringTensor(["α", "", "βγ"]))
            _, s = await rx.receive_tensor(timeout=30)
            assert list(s) == ["α", "", "βγ"]

    run(main())


# ---- 2. pull -----------------------------------------------------------------------------------


def test_pull_published_value():
    async def main():
        async with TensorNode() as server, TensorNode(listen_enabled=False) as client:
            addr = await server.get_node_addr()
            x = np.random.default_rng(1).standard_normal((64, 33))
            server.publish("model/w", x)
            got = await client.request_tensor(addr, "model/w")
            assert_same(x, got)
            # replaced: the new value is served
            y = np.arange(7, dtype=np.int64)
            server.publish("model/w", y)
            assert_same(y, await client.request_tensor(addr, "model/w"))
            server.unpublish("model/w")
            with pytest.raises(TensoNotFoundError):
                await client.request_tensor(addr, "model/w")
            with pytest.raises(TensoNotFoundError):
                server.unpublish("model/w")

    run(main())


def test_publish_keeps_array_alive_until_released():
    node = TensorNode()
    node.start_sync()
    client = TensorNode(listen_enabled=False)
    client.start_sync()
    try:
        x = np.arange(100, dtype=np.int32)
        ref = weakref.ref(x)
        node.publish("x", x)
        del x
        gc.collect()
        assert ref() is not None  # the node serves from the array's memory: kept alive
        got = client.request_tensor_sync(node.get_node_addr_sync(), "x")
        assert got.tolist() == list(range(100))
        node.unpublish("x")
        # Released once no send of it is in progress (the server's reply may still hold it for
        # a moment); the next node call drops what the node released.
        while ref() is not None:
            node.stats()
            gc.collect()
            time.sleep(0.01)
    finally:
        client.close()
        node.close()


# ---- 3. concurrent senders ---------------------------------------------------------------------


def test_concurrent_senders():
    async def main():
        async with TensorNode() as rx:
            addr = await rx.get_node_addr()
            senders = [TensorNode(listen_enabled=False) for _ in range(4)]
            for s in senders:
                await s.start()
            try:
                sends = [
                    s.send_tensor(addr, f"{i}-{j}", np.full(1000, i * 100 + j, np.int32))
                    for i, s in enumerate(senders)
                    for j in range(10)
                ]
                await asyncio.gather(*sends)
                seen = {}
                for _ in range(40):
                    name, arr = await rx.receive_tensor(timeout=30)
                    seen[name] = arr
                assert sorted(seen) == sorted(f"{i}-{j}" for i in range(4) for j in range(10))
                for name, arr in seen.items():
                    i, j = map(int, name.split("-"))
                    assert (arr == i * 100 + j).all()
            finally:
                for s in senders:
                    s.close()

    run(main())


# ---- 4. rapid fire -----------------------------------------------------------------------------


def test_rapid_fire_in_order_one_connection():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            for i in range(500):
                await tx.send_tensor(addr, "t", np.array([i], np.int64))
            got = [int((await rx.receive_tensor(timeout=30))[1][0]) for _ in range(500)]
            assert got == list(range(500))
            st = tx.stats()
            assert st["connections_opened"] == 1 and st["connections_reused"] == 499

    run(main())


def test_post_pipelined_in_order_and_flush_reports_refusal():
    async def main():
        async with TensorNode(max_packet_bytes=4096) as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            buf = np.zeros(4, np.int64)
            for i in range(300):
                buf[0] = i
                await tx.post_tensor(addr, "t", buf)
            tx.post_tensor_sync(addr, "big", np.zeros(4096, np.int64))  # refused by the peer
            tx.post_tensor_sync(addr, "t", np.array([300, 0, 0, 0], np.int64))
            with pytest.raises(TensoError) as e:
                await tx.flush(addr)
            assert e.value.status == -13  # TENSO_E_LIMIT
            tx.flush_sync(addr)  # reported once
            got = [int((await rx.receive_tensor(timeout=30))[1][0]) for _ in range(301)]
            assert got == list(range(301))
            assert tx.stats()["connections_opened"] == 1

    run(main())


def test_post_many_in_order_with_refusals_and_bad_items():
    async def main():
        async with TensorNode(max_packet_bytes=4096, max_queued=4096) as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            small = [(f"s{i}", np.full(4, i, np.int64)) for i in range(1000)]
            mixed = small[:500] + [("big", np.zeros(4096, np.int64))] + small[500:]  # refused by the peer
            tx.post_many_sync(addr, iter(mixed))  # a generator: the values live only in the call
            await tx.post_many(addr, [("d", {"a": np.arange(3, dtype=np.float32)})])
            with pytest.raises(TensoError) as e:
                tx.flush_sync(addr)
            assert e.value.status == -13  # TENSO_E_LIMIT, reported once
            tx.flush_sync(addr)
            for i in range(1000):
                name, value = await rx.receive_tensor(timeout=30)
                assert name == f"s{i}" and int(value[0]) == i
            name, value = await rx.receive_tensor(timeout=30)
            assert name == "d" and value["a"].tolist() == [0.0, 1.0, 2.0]
            # A bad item: those before it are posted, it and those after are not.
            with pytest.raises(TypeError):
                tx.post_many_sync(addr, [("x", np.ones(2)), ("y", object()), ("z", np.ones(2))])
            tx.flush_sync(addr)
            assert (await rx.receive_tensor(timeout=30))[0] == "x"
            assert await rx.receive_tensor(timeout=0.2) is None

    run(main())


def test_failed_publish_leaves_value_with_caller():
    with TensorNode() as node:
        a = np.arange(8, dtype=np.float32)
        with pytest.raises(TensoError):
            node.publish("", a)
        node.publish("a", a)
        with TensorNode(listen_enabled=False) as peer:
            assert_same(peer.request_tensor_sync(node.get_node_addr_sync(), "a"), a)


# ---- 5. large tensor ---------------------------------------------------------------------------


def test_large_tensor_256mib():
    # >= 256 MiB through TLS, every byte checked (a pattern that differs in every 8 bytes).
    n = 256 * 1024 * 1024 // 8 + 3
    x = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)

    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            send = asyncio.ensure_future(tx.send_tensor(addr, "big", x, timeout=300))
            name, got = await rx.receive_tensor(timeout=300)
            await send
            assert name == "big"
            assert got.dtype == x.dtype and got.shape == x.shape
            assert np.array_equal(got, x)

    asyncio.run(main())


# ---- 6. multiple receivers ---------------------------------------------------------------------


def test_multiple_receivers():
    async def main():
        receivers = [TensorNode() for _ in range(3)]
        async with TensorNode(listen_enabled=False) as tx:
            for r in receivers:
                await r.start()
            try:
                for i, r in enumerate(receivers):
                    await tx.send_tensor(await r.get_node_addr(), f"to{i}", np.full(8, i, np.uint8))
                for i, r in enumerate(receivers):
                    name, arr = await r.receive_tensor(timeout=30)
                    assert name == f"to{i}" and arr.tolist() == [i] * 8
                    assert await r.receive_tensor(timeout=0) is None  # nothing else arrived
                assert await tx.pool_size() == 3  # one pooled connection per peer
            finally:
                for r in receivers:
                    r.close()

    run(main())


# ---- 7. send before the peer is ready ----------------------------------------------------------


def test_send_before_peer_is_ready():
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"

    async def main():
        async with TensorNode(listen_enabled=False, allow_plaintext=True) as tx:
            # nobody listens: a specific connection error, not a hang
            with pytest.raises(TensoConnectionError):
                await tx.send_tensor(addr, "early", np.ones(3), timeout=5)
            async with TensorNode(f"tcp://127.0.0.1:{port}", allow_plaintext=True) as rx:
                await tx.send_tensor(addr, "late", np.ones(3), timeout=30)
                name, arr = await rx.receive_tensor(timeout=30)
                assert name == "late" and arr.tolist() == [1.0, 1.0, 1.0]

    run(main())


# ---- 8. immediate shutdown ---------------------------------------------------------------------


def test_immediate_shutdown():
    node = TensorNode()
    node.start_sync()
    node.shutdown()
    node.shutdown()  # idempotent
    with pytest.raises(TensoShutdownError):
        node.receive_tensor_sync(timeout=1)
    node.close()

    never_started = TensorNode()
    never_started.shutdown()
    with pytest.raises(TensoShutdownError):
        never_started.start_sync()


def test_shutdown_fails_pending_receive():
    node = TensorNode()
    node.start_sync()
    errors = []

    def waiter():
        try:
            node.receive_tensor_sync(timeout=None)
        except TensoError as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    t.join(0.1)  # usually blocked in libtenso by now (GIL released); if not, it fails later
    node.shutdown()
    t.join(30)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], TensoShutdownError)
    node.close()


@pytest.mark.parametrize("how", ["shutdown", "close", "async_with"])
def test_awaited_receive_ends_with_shutdown(how):
    """An awaited receive_tensor ends at once with TensoShutdownError when the node is shut
    down, closed or left (``async with``) from another task; it used to wait for ever."""

    async def main():
        node = TensorNode()
        await node.start()
        waiting = asyncio.ensure_future(node.receive_tensor(timeout=None))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        start = time.monotonic()
        if how == "shutdown":
            node.shutdown()
        elif how == "close":
            node.close()
        else:
            async with node:
                pass
        with pytest.raises(TensoShutdownError):
            await asyncio.wait_for(waiting, 5)
        assert time.monotonic() - start < 2
        node.close()

    run(main())


def test_blocked_send_ends_with_close():
    """A send the peer holds un-acknowledged (its queue full) ends with TensoShutdownError when
    the sending node closes, awaited or blocking."""

    async def main():
        async with TensorNode(max_queued=1) as rx:
            addr = await rx.get_node_addr()
            tx = TensorNode(listen_enabled=False)
            await tx.start()
            await tx.send_tensor(addr, "fills", np.ones(1))
            pending = asyncio.ensure_future(tx.send_tensor(addr, "held", np.ones(1)))
            errors = []

            def blocking():
                try:
                    tx.send_tensor_sync(addr, "held too", np.ones(1))
                except TensoError as e:
                    errors.append(e)

            t = threading.Thread(target=blocking)
            t.start()
            await asyncio.sleep(0.2)
            tx.close()
            with pytest.raises(TensoShutdownError):
                await asyncio.wait_for(pending, 5)
            t.join(5)
            assert not t.is_alive() and len(errors) == 1 and isinstance(errors[0], TensoShutdownError)

    run(main())


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the policy that raises
def test_access_hook_and_key_text_not_kept():
    """set_access decides per peer and name (a refusal is TensoAuthError); the node object keeps
    no copy of its key's text once started."""

    async def main():
        rx = TensorNode()
        await rx.start()
        async with TensorNode(listen_enabled=False) as a, TensorNode(listen_enabled=False) as b:
            addr = await rx.get_node_addr()
            seen = []

            def policy(op, peer, name):
                seen.append((op, peer, name))
                if op == "get":
                    return name != "secret" or peer == b.node_id
                if name == "boom":
                    raise RuntimeError("a broken policy refuses")
                return name != "forbidden"

            rx.set_access(policy)
            rx.publish("secret", np.arange(3))
            with pytest.raises(TensoAuthError):
                await a.request_tensor(addr, "secret")
            assert_same(np.arange(3), await b.request_tensor(addr, "secret"))
            with pytest.raises(TensoAuthError):
                await a.send_tensor(addr, "forbidden", np.ones(2))
            with pytest.raises(TensoAuthError):
                await a.send_tensor(addr, "boom", np.ones(2))
            await a.send_tensor(addr, "fine", np.ones(2))
            assert (await rx.receive_tensor(timeout=10))[0] == "fine"
            assert ("get", a.node_id, "secret") in seen
            rx.set_access(None)
            await a.send_tensor(addr, "forbidden", np.ones(2))
        rx.close()

    run(main())
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                os.path.join(d, "k.pem"),
                "-out",
                os.path.join(d, "c.pem"),
                "-days",
                "2",
                "-subj",
                "/CN=t",
            ],
            check=True,
            capture_output=True,
        )
        with open(os.path.join(d, "c.pem")) as f, open(os.path.join(d, "k.pem")) as g:
            cert, key = f.read(), g.read()
    node = TensorNode(cert_pem=cert, key_pem=key)
    node.start_sync()
    assert node._options["key_pem"] is None
    with pytest.raises(TensoAuthError):  # empty text is not "unset"
        TensorNode(ca_pem="").start_sync()
    node.close()


# ---- 9. timeouts -------------------------------------------------------------------------------


def test_receive_timeout_returns_none():
    async def main():
        async with TensorNode() as node:
            assert await node.receive_tensor(timeout=0.05) is None
            assert await node.receive_tensor(timeout=0) is None
            assert node.receive_tensor_sync(timeout=0.05) is None

    run(main())


def test_send_timeout_when_peer_never_answers():
    # A listening socket that never speaks: the TLS handshake cannot finish.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        addr = f"tls://{'ab' * 32}@127.0.0.1:{port}"
        node = TensorNode(listen_enabled=False)
        node.start_sync()
        try:
            with pytest.raises(TensoTimeoutError):
                node.send_tensor_sync(addr, "x", np.ones(2), timeout=0.3)
        finally:
            node.close()


# ---- 10. missing tensor ------------------------------------------------------------------------


def test_missing_tensor():
    async def main():
        async with TensorNode() as server, TensorNode(listen_enabled=False) as client:
            with pytest.raises(TensoNotFoundError) as e:
                await client.request_tensor(await server.get_node_addr(), "nope")
            assert e.value.status == tenso.errors.TENSO_E_NOT_FOUND

    run(main())


# ---- 11. bad address ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "addr", ["", "nonsense", "tls://127.0.0.1:1", "tls://zz@127.0.0.1:1", "ftp://x:1", "tcp://127.0.0.1:notaport"]
)
def test_bad_address(addr):
    node = TensorNode(listen_enabled=False, allow_plaintext=True)
    node.start_sync()
    try:
        with pytest.raises(TensoError) as e:
            node.send_tensor_sync(addr, "x", np.ones(1), timeout=5)
        assert e.value.status == tenso.errors.TENSO_E_BAD_ADDRESS
    finally:
        node.close()


def test_bad_listen_address_and_plaintext_refused():
    with pytest.raises(TensoError) as e:
        TensorNode("bogus://x").start_sync()
    assert e.value.status == tenso.errors.TENSO_E_BAD_ADDRESS
    with pytest.raises(TensoValueError):
        TensorNode("tcp://127.0.0.1:0").start_sync()  # plaintext needs allow_plaintext


# ---- 12. calls after shutdown ------------------------------------------------------------------


def test_calls_after_shutdown():
    async def main():
        peer = TensorNode()
        await peer.start()
        addr = await peer.get_node_addr()
        node = TensorNode()
        await node.start()
        node.shutdown()
        for call in (
            lambda: node.send_tensor(addr, "x", np.ones(1)),
            lambda: node.request_tensor(addr, "x"),
        ):
            with pytest.raises(TensoShutdownError):
                await call()
        with pytest.raises(TensoShutdownError):
            node.publish("x", np.ones(1))
        node.close()
        peer.close()

    run(main())


# ---- 13. pool reuse ----------------------------------------------------------------------------


def test_pool_reuse_and_idle_timeout():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            assert await tx.pool_size() == 0
            for i in range(5):
                await tx.send_tensor(addr, "x", np.array([i]))
                await rx.receive_tensor(timeout=30)
            st = tx.stats()
            assert await tx.pool_size() == 1
            assert st["connections_opened"] == 1 and st["connections_reused"] == 4

        # an idle pooled connection is closed after idle_timeout
        async with TensorNode() as rx, TensorNode(listen_enabled=False, idle_timeout=0.1) as tx:
            addr = await rx.get_node_addr()
            await tx.send_tensor(addr, "x", np.ones(1))
            assert await tx.pool_size() == 1
            while await tx.pool_size() != 0:  # no wall-clock threshold: wait for the event
                await asyncio.sleep(0.02)
            await tx.send_tensor(addr, "x", np.ones(1))
            assert tx.stats()["connections_opened"] == 2

    run(main())


# ---- plaintext, IPv6 and Unix sockets when asked ------------------------------------------------


def test_plaintext_tcp_ipv6_and_unix():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rx.sock")

        async def main():
            listen = ["tcp://127.0.0.1:0", f"unix://{path}"]
            if socket.has_ipv6:
                listen.append("tcp://[::1]:0")
            async with (
                TensorNode(listen, allow_plaintext=True) as rx,
                TensorNode(listen_enabled=False, allow_plaintext=True) as tx,
            ):
                addrs = rx.addrs()
                assert addrs[0].startswith("tcp://127.0.0.1:") and addrs[1] == f"unix://{path}"
                for i, a in enumerate(addrs):
                    x = np.arange(10 + i, dtype=np.int16)
                    await tx.send_tensor(a, f"via{i}", x)
                    name, sender, got = await rx.receive_tensor_with_sender(timeout=30)
                    assert name == f"via{i}"
                    assert sender.startswith("unix:" if a.startswith("unix://") else "tcp://")
                    assert_same(x, got)
                # a large packet over the Unix socket (descriptor passing): every byte
                big = np.random.default_rng(2).integers(0, 255, 8 << 20, dtype=np.uint8)
                await tx.send_tensor(addrs[1], "big", big)
                _, got = await rx.receive_tensor(timeout=60)
                assert_same(big, got)

        run(main())


def test_tls_peer_refuses_plaintext_dialer_and_wrong_fingerprint():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False, allow_plaintext=True) as tx:
            addr = await rx.get_node_addr()
            hostport = addr[addr.index("@") + 1 :]
            wrong = "tls://" + "0" * 64 + "@" + hostport
            with pytest.raises(TensoAuthError):
                await tx.send_tensor(wrong, "x", np.ones(1), timeout=10)
            # a plaintext dialer to a TLS listener does not get its value queued
            with pytest.raises(TensoError):
                await tx.send_tensor("tcp://" + hostport, "x", np.ones(1), timeout=2)
            assert await rx.receive_tensor(timeout=0) is None

    run(main())


def test_pinned_keys_refuse_other_dialers():
    async def main():
        trusted = TensorNode(listen_enabled=False)
        other = TensorNode(listen_enabled=False)
        await trusted.start()
        await other.start()
        async with TensorNode(pinned_keys=[trusted.node_id]) as rx:
            addr = await rx.get_node_addr()
            await trusted.send_tensor(addr, "ok", np.ones(1))
            assert (await rx.receive_tensor(timeout=30))[0] == "ok"
            with pytest.raises(TensoAuthError):
                await other.send_tensor(addr, "no", np.ones(1), timeout=10)
            assert rx.stats()["refused"] >= 1
        trusted.close()
        other.close()

    run(main())


# ---- cancellation ------------------------------------------------------------------------------


def test_cancelling_a_send_triggers_its_token():
    # The receiver's queue holds one push; the second send waits for room (backpressure) until
    # the task is cancelled.
    async def main():
        async with TensorNode(max_queued=1) as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            await tx.send_tensor(addr, "a", np.ones(1))
            task = asyncio.ensure_future(tx.send_tensor(addr, "b", np.ones(1), timeout=600))
            await asyncio.sleep(0.2)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            name, _ = await rx.receive_tensor(timeout=30)
            assert name == "a"

    run(main())


def test_cancel_token_directly():
    node = TensorNode()
    node.start_sync()
    tok = tenso._tenso.Cancel()
    tok.trigger()
    assert tok.triggered
    with pytest.raises(TensoCancelledError):
        node._started().receive(None, tok)
    node.close()


def test_receive_task_cancellation_leaves_node_usable():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            task = asyncio.ensure_future(rx.receive_tensor(timeout=None))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await tx.send_tensor(await rx.get_node_addr(), "after", np.ones(2))
            assert (await rx.receive_tensor(timeout=30))[0] == "after"

    run(main())


def test_blocking_forms_from_threads():
    rx = TensorNode()
    rx.start_sync()
    tx = TensorNode(listen_enabled=False)
    tx.start_sync()
    addr = rx.get_node_addr_sync()
    try:
        threads = [threading.Thread(target=tx.send_tensor_sync, args=(addr, f"t{i}", np.full(4, i))) for i in range(8)]
        for t in threads:
            t.start()
        got = sorted(rx.receive_tensor_sync(timeout=30)[0] for _ in range(8))
        for t in threads:
            t.join()
        assert got == sorted(f"t{i}" for i in range(8))
        assert tx.pool_size_sync() >= 1
    finally:
        tx.close()
        rx.close()


# ---- coroutines on the running loop (libtenso's completion queues, issue 25) --------------------


def test_coroutines_use_no_threads_per_call():
    # 200 sends and requests in flight at once from one loop: no executor thread is started
    # (the node's own event-loop threads are all there is), and every call completes.
    async def main():
        async with (
            TensorNode(max_connections=8, max_pool_per_peer=8) as rx,
            TensorNode(listen_enabled=False, max_connections=8, max_pool_per_peer=8) as tx,
        ):
            addr = await rx.get_node_addr()
            rx.publish("p", np.arange(5))
            await tx.send_tensor(addr, "warm", np.ones(1))
            before = threading.active_count()
            sends = [tx.send_tensor(addr, f"s{i}", np.full(8, i)) for i in range(100)]
            reqs = [tx.request_tensor(addr, "p") for _ in range(100)]
            results = await asyncio.gather(*sends, *reqs)
            assert threading.active_count() == before
            for r in results[100:]:
                assert_same(np.arange(5), r)
            names = set()
            for _ in range(101):
                names.add((await rx.receive_tensor(timeout=30))[0])
            assert names == {"warm"} | {f"s{i}" for i in range(100)}
            assert tx.stats()["connections_opened"] <= 8

    run(main())


def test_one_node_from_several_loops():
    # Nothing assumes the default loop: the node serves a loop in another thread while the main
    # loop uses it, and a later asyncio.run gets a queue of its own.
    rx = TensorNode()
    rx.start_sync()
    tx = TensorNode(listen_enabled=False)
    tx.start_sync()
    addr = rx.get_node_addr_sync()
    try:

        async def sender(prefix):
            for i in range(20):
                await tx.send_tensor(addr, f"{prefix}{i}", np.array([i]))

        def other_thread():
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(sender("t"))
            finally:
                loop.close()

        th = threading.Thread(target=other_thread)
        th.start()
        run(sender("m"))
        th.join(60)
        assert not th.is_alive()
        run(sender("n"))
        got = sorted(rx.receive_tensor_sync(timeout=30)[0] for _ in range(60))
        assert got == sorted([f"{p}{i}" for p in "mnt" for i in range(20)])
    finally:
        tx.close()
        rx.close()


def test_wait_for_receive_loses_no_message():
    # receive_tensor under asyncio.wait_for with a short timeout, again and again, while pushes
    # arrive: a receive cancelled after it took a message hands it to the next one.
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            addr = await rx.get_node_addr()
            n = 200

            async def push():
                for i in range(n):
                    await tx.post_tensor(addr, f"p{i}", np.array([i]))
                await tx.flush(addr)

            pusher = asyncio.ensure_future(push())
            got = []
            while len(got) < n:
                try:
                    item = await asyncio.wait_for(rx.receive_tensor(timeout=None), 0.001)
                except asyncio.TimeoutError:
                    continue
                got.append(item[0])
            await pusher
            assert got == [f"p{i}" for i in range(n)]

    run(main())


def test_coroutine_and_blocking_posts_keep_order():
    async def main():
        async with (
            TensorNode("tcp://127.0.0.1:0", allow_plaintext=True) as rx,
            TensorNode(listen_enabled=False, allow_plaintext=True) as tx,
        ):
            addr = await rx.get_node_addr()
            big = np.ones(1 << 20, np.float32)  # 4 MiB: more than the socket takes at once
            k = 0
            for _ in range(3):
                await tx.post_tensor(addr, f"n{k}", big)
                k += 1
                tx.post_tensor_sync(addr, f"n{k}", np.array([k]))
                k += 1
                await tx.post_many(addr, [(f"n{k}", np.array([k])), (f"n{k + 1}", np.array([k + 1]))])
                k += 2
            await tx.flush(addr)
            for i in range(k):
                assert (await rx.receive_tensor(timeout=30))[0] == f"n{i}"

    run(main())


def test_cancelling_a_request_cancels_its_call():
    # A peer that accepts and never answers: the awaited request is cancelled by the task's
    # cancellation, at once, and the node goes on.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]

        async def main():
            async with TensorNode(listen_enabled=False, allow_plaintext=True) as tx:
                task = asyncio.ensure_future(tx.request_tensor(f"tcp://127.0.0.1:{port}", "x", timeout=600))
                await asyncio.sleep(0.1)
                t0 = time.monotonic()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert time.monotonic() - t0 < 5
                with pytest.raises(TensoTimeoutError):
                    await tx.request_tensor(f"tcp://127.0.0.1:{port}", "x", timeout=0.1)

        run(main())


def test_kernel_tls_or_fallback_in_stats():
    async def main():
        async with TensorNode() as rx, TensorNode(listen_enabled=False) as tx:
            await tx.send_tensor(await rx.get_node_addr(), "x", np.ones(3))
            for s in (tx.stats(), rx.stats()):
                assert s["tls_kernel"] + s["tls_user"] == 1

    run(main())


def test_busy_poll_counted_and_off():
    """A wait for a peer's answer polls first (counted in stats); busy_poll=False never does,
    and a listener answering never waits. The peer answers 1 ms late (its access hook sleeps):
    an answer already there when the sender first reads would need no wait at all."""

    def late(op: str, peer: str, name: str) -> bool:
        time.sleep(0.001)
        return True

    async def main():
        async with (
            TensorNode() as rx,
            TensorNode(listen_enabled=False) as tx,
            TensorNode(listen_enabled=False, busy_poll=False) as sleeper,
        ):
            rx.set_access(late)
            addr = await rx.get_node_addr()
            for node in (tx, sleeper):
                for _ in range(3):  # the first dials; later ones wait for answers
                    node.send_tensor_sync(addr, "x", np.ones(3))
                    await node.send_tensor(addr, "x", np.ones(3))
            s, q, r = tx.stats(), sleeper.stats(), rx.stats()
            # A process allowed one CPU never polls (its peer needs that CPU to answer).
            one_cpu = len(os.sched_getaffinity(0)) == 1
            assert (s["busy_polls"] == 0) if one_cpu else (s["busy_polls"] >= 1)
            assert s["busy_poll_hits"] == 0
            assert q["busy_polls"] == 0 and q["busy_poll_hits"] == 0
            assert r["busy_polls"] == 0

    run(main())
