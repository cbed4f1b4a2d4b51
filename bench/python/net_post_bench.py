"""
Python sender rate alone (issue 16: >= 150k 1 KiB posts/s from Python, one connection): the
receiver, in another process, queues everything (max_queued large) and drains only after the
timing, so its Python receive loop is not what is measured. post_tensor_sync per value, and
post_many_sync of 1000 pairs per call; each ends with the flush that sees them acknowledged.
Issue 25: ``await post_tensor`` per value + ``await flush`` on the running loop (completion
queue; goal: within 2x of post_tensor_sync), in the same run.

    python net_post_bench.py [N]   (run with the SDK venv, e.g. build/venv-sdk/bin/python)
"""

import asyncio
import multiprocessing as mp
import os
import sys
import time

import numpy as np

from tenso.net import TensorNode

KIB = np.ones(256, np.float32)


def receiver(listen, q, n):
    with TensorNode(listen, allow_plaintext=True, max_queued=1 << 21, max_queued_bytes=1 << 32) as rx:
        q.put(rx.get_node_addr_sync())
        q.get()  # the sender's timing is done
        for _ in range(n + 1):
            rx.receive_tensor_sync(timeout=60)
        q.put("done")


def run(listen, n, mode):
    q = mp.Queue()
    p = mp.Process(target=receiver, args=(listen, q, n))
    p.start()
    addr = q.get()
    with TensorNode(listen_enabled=False, allow_plaintext=True, max_queued=1 << 16) as tx:
        tx.post_tensor_sync(addr, "warm", KIB)
        tx.flush_sync(addr)

        async def coroutines():
            t0 = time.perf_counter()
            for _ in range(n):
                await tx.post_tensor(addr, "k", KIB)
            await tx.flush(addr)
            return time.perf_counter() - t0

        t0 = time.perf_counter()
        if mode == "many":
            batch = [("k", KIB)] * 1000
            for _ in range(n // 1000):
                tx.post_many_sync(addr, batch)
        elif mode == "sync":
            for _ in range(n):
                tx.post_tensor_sync(addr, "k", KIB)
        if mode == "await":
            dt = asyncio.run(coroutines())
        else:
            tx.flush_sync(addr)
            dt = time.perf_counter() - t0
    q.put("go")
    time.sleep(0.1)
    assert q.get(timeout=120) == "done"
    p.join()
    return n / dt


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    print(f"load average at start: {os.getloadavg()}")
    for listen in ("tcp://127.0.0.1:0", "tls://127.0.0.1:0"):
        s = listen.split(":")[0]
        sync = run(listen, n, "sync")
        print(f"python post_tensor_sync 1 KiB + flush, {s}, receiver queues only: {sync:,.0f}/s", flush=True)
        many = run(listen, n, "many")
        print(f"python post_many_sync (1000/call) 1 KiB + flush, {s}, receiver queues only: {many:,.0f}/s", flush=True)
        coro = run(listen, n, "await")
        print(
            f"python await post_tensor 1 KiB + await flush, {s}, receiver queues only: {coro:,.0f}/s "
            f"({sync / coro:.2f}x the time of post_tensor_sync)",
            flush=True,
        )
    print(f"load average at end: {os.getloadavg()}")
