"""TensoCache: upstream's API over libtenso's shared-memory cache (tenso/shm.h): TTL, LRU,
in-place updates, a full pool, pinned zero-copy reads, hostile pools, and several processes at
once (spawned, one SIGKILLed mid-write)."""

import gc
import inspect
import multiprocessing
import os
import secrets
import signal
import threading
import time

import numpy as np
import pytest

import cache_workers
import tenso

UPSTREAM_STATS = {
    "entries", "max_entries", "pool_size", "used_bytes", "free_bytes", "data_region_size", "hits",
    "misses", "hit_rate",
}  # fmt: skip


@pytest.fixture
def name():
    n = "tenso_cache_test_" + secrets.token_hex(6)
    yield n
    try:
        os.unlink("/dev/shm/" + n)
    except FileNotFoundError:
        pass


@pytest.fixture
def cache(name):
    with tenso.TensoCache("4MB", name=name) as c:
        yield c


def test_signatures_match_upstream():
    params = list(inspect.signature(tenso.TensoCache).parameters)
    assert params[:3] == ["max_memory", "name", "create"]
    assert list(inspect.signature(tenso.TensoCache.put).parameters) == ["self", "key", "tensor", "ttl", "quantize"]
    assert list(inspect.signature(tenso.TensoCache.get).parameters) == ["self", "key", "copy", "device"]


def test_put_get_round_trip_zero_copy(cache):
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    n = cache.put("w", a)
    assert n == len(tenso.dumps(a))
    out = cache.get("w")
    assert np.array_equal(out, a) and out.dtype == a.dtype
    assert not out.flags.writeable and out.ctypes.data % 64 == 0
    with pytest.raises(ValueError):
        out[0, 0] = 1
    c = cache.get("w", copy=True)
    assert c.flags.writeable and np.array_equal(c, a)
    assert cache.get("absent") is None
    s = cache.stats
    assert UPSTREAM_STATS <= set(s) and s["hits"] == 2 and s["misses"] == 1
    assert s["hit_rate"] == pytest.approx(2 / 3)
    assert s["entries"] == len(cache) == 1 and "w" in cache and "x" not in cache and 3 not in cache
    assert s["clients"] == 1 and s["pool_size"] == 4 << 20


def test_other_values_and_info(cache):
    cache.put("bundle", {"a": np.ones(3), "b": np.zeros((2, 2), np.int8)})
    assert cache.get("bundle")["b"].shape == (2, 2)
    cache.put("list", [1, 2, 3])  # array-likes, as upstream
    assert cache.get("list").tolist() == [1, 2, 3]
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    cache.put("q", x, quantize="qint8")
    q = cache.get("q")
    assert isinstance(q, tenso.QuantizedTensor)
    assert np.allclose(q.dequantize(), x, atol=2 / 255)
    info = cache.info("q")
    assert info["dtype"] == "qint8" and info["shape"] == (256,) and info["ttl"] is None
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    before = time.monotonic()  # the pool's clock is CLOCK_MONOTONIC, as time.monotonic()
    cache.put("a", a, ttl=100)
    info = cache.info("a")
    elapsed = time.monotonic() - before
    assert set(info) == {"shape", "dtype", "ndim", "size_bytes", "alloc_bytes", "ttl", "age", "pins"}
    assert info["shape"] == (3, 4) and info["dtype"] == np.int16 and info["ndim"] == 2
    assert info["size_bytes"] == len(tenso.dumps(a)) and info["alloc_bytes"] >= info["size_bytes"]
    assert info["alloc_bytes"] % 64 == 0 and info["ttl"] == 100
    assert 0 <= info["age"] <= elapsed + 1e-6  # stamped at the put, not some other time
    assert info["pins"] == 0
    assert cache.info("nope") is None
    assert sorted(cache.keys()) == ["a", "bundle", "list", "q"]
    assert cache.keys()[0] == "a"  # most recently used first
    assert cache.delete("a") and not cache.delete("a")
    cache.clear()
    assert len(cache) == 0 and cache.keys() == []
    cache.check()


def test_keys_and_errors(cache, name):
    cache.put("k" * 128, np.zeros(1))
    assert "k" * 128 in cache
    with pytest.raises(ValueError, match="Key too long"):
        cache.put("k" * 129, np.zeros(1))
    with pytest.raises(ValueError):
        cache.put("é" * 65, np.zeros(1))  # 130 bytes of UTF-8
    with pytest.raises(ValueError):
        cache.put("", np.zeros(1))
    with pytest.raises(TypeError):
        cache.put(b"bytes", np.zeros(1))
    with pytest.raises(ValueError):
        cache.put("neg", np.zeros(1), ttl=-1)
    with pytest.raises(FileExistsError):
        tenso.TensoCache("1MB", name=name)
    with pytest.raises(FileNotFoundError):
        tenso.TensoCache(name=name + "_missing", create=False)
    with pytest.raises(ValueError):
        tenso.TensoCache(create=False)
    with pytest.raises(ValueError):
        tenso.TensoCache(1024, name=name + "_tiny")  # cannot hold the tables and one packet


def test_ttl_expiry(cache):
    # Properties, not timing windows: an entry an hour from expiry is there, one whose 10 ms ran
    # out long ago is gone (however slow the machine, sleeping only lengthens "long ago").
    cache.put("short", np.arange(10), ttl=0.01)
    cache.put("long", np.arange(10), ttl=3600)
    assert cache.get("long") is not None and "long" in cache
    time.sleep(0.5)
    assert cache.get("short") is None and "short" not in cache and cache.info("short") is None
    assert cache.keys() == ["long"] and cache.get("long") is not None
    # An expired entry's space is taken back when room is needed.
    cache.put("fill", np.zeros(3 << 20, np.uint8))
    assert cache.stats["expirations"] >= 1
    cache.check()


def _block(cache, fraction):
    """A uint8 array whose packet takes about `fraction` of the pool's data region (the
    tables take a size-dependent share of the pool)."""
    return np.zeros(int(cache.stats["data_region_size"] * fraction) - 128, np.uint8)


def test_lru_eviction(name):
    with tenso.TensoCache(2 << 20, name=name) as cache:
        block = _block(cache, 0.22)
        for k in "abcd":
            cache.put(k, block)
        assert cache.get("a") is not None  # a is now the most recently used; b the least
        cache.put("e", block)
        cache.put("f", block)
        s = cache.stats
        assert s["evictions"] >= 1
        assert "b" not in cache and "a" in cache and "f" in cache
        cache.check()


def test_in_place_update(cache):
    cache.put("x", np.arange(1000, dtype=np.int64))
    before = cache.info("x")
    used = cache.stats["used_bytes"]
    cache.put("x", np.arange(1000, dtype=np.int64)[::-1].copy())
    after = cache.info("x")
    assert after["alloc_bytes"] == before["alloc_bytes"] and cache.stats["used_bytes"] == used
    assert cache.get("x")[0] == 999
    cache.put("x", np.arange(10, dtype=np.int8))  # smaller: fits the same space
    assert cache.get("x").tolist() == list(range(10)) and len(cache) == 1
    cache.check()


def test_full_pool(name):
    with tenso.TensoCache(2 << 20, name=name) as cache:
        with pytest.raises(MemoryError):
            cache.put("huge", np.zeros(2 << 20, np.uint8))
        with pytest.raises(tenso.TensoFullError):
            cache.put("huge", np.zeros(2 << 20, np.uint8))
        # Pinned entries are never evicted: with everything pinned, a put has no room.
        block = _block(cache, 0.3)
        pins = []
        for k in "abc":
            cache.put(k, block)
            pins.append(cache.get(k))
        with pytest.raises(MemoryError):
            cache.put("d", block)
        assert all(k in cache for k in "abc")
        pins.clear()
        gc.collect()
        cache.put("d", block)  # now the LRU one goes
        assert "a" not in cache and "d" in cache
        cache.check()


def test_pinned_arrays_survive_eviction_delete_and_replace(name):
    with tenso.TensoCache(2 << 20, name=name) as cache:
        a = np.arange(25_000, dtype=np.int64) * 3
        cache.put("p", a)
        held = cache.get("p")
        view = held[10:20]  # a numpy view of the pinned array keeps the pin too
        assert cache.info("p")["pins"] == 1 and cache.stats["pinned_entries"] == 1
        cache.put("p", np.ones(25_000, np.int64))  # replace: new bytes elsewhere
        assert cache.get("p", copy=True)[0] == 1
        assert np.array_equal(held, a)
        assert cache.delete("p") and "p" not in cache
        for i in range(8):  # churn the whole pool
            cache.put(f"f{i}", np.full(len(_block(cache, 0.3)), i, np.uint8))
        assert np.array_equal(held, a) and view.tolist() == a[10:20].tolist()
        assert cache.stats["pinned_entries"] == 1
        del held
        gc.collect()
        assert cache.stats["pinned_entries"] == 1  # `view` still holds it
        del view
        gc.collect()
        assert cache.stats["pinned_entries"] == 0
        cache.check()


def test_pins_go_with_the_arrays(cache):
    cache.put("k", np.arange(100))
    arrays = [cache.get("k") for _ in range(3)]
    assert cache.info("k")["pins"] == 3
    del arrays[0]
    assert cache.info("k")["pins"] == 2
    arrays.clear()
    assert cache.info("k")["pins"] == 0
    cache.get("k", copy=True)
    assert cache.info("k")["pins"] == 0


def test_close_while_other_threads_are_inside_calls(name):
    """close() on one thread while others are in get/put with the GIL released: the handle
    lives until their calls return, later calls raise, nothing crashes or reads freed memory."""
    for _ in range(20):
        cache = tenso.TensoCache("4MB", name=name)
        value = np.arange(4096, dtype=np.float64)
        cache.put("k", value)
        errors, started = [], threading.Barrier(5)

        def worker():
            started.wait()
            while True:
                try:
                    out = cache.get("k")
                    if out is not None and out[4095] != 4095.0:
                        errors.append("torn value")
                    cache.put("k", value)
                except (RuntimeError, ValueError) as e:  # closed: by the wrapper, or mid-call
                    if "closed" not in str(e):
                        errors.append(repr(e))
                    return

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        started.wait()
        time.sleep(0.002)
        cache.close()
        for t in threads:
            t.join(10)
        assert not errors and not any(t.is_alive() for t in threads)
        cache.unlink()


def test_arrays_outlive_close(name):
    cache = tenso.TensoCache("1MB", name=name)
    cache.put("k", np.arange(10))
    out = cache.get("k")
    cache.close()
    cache.close()  # idempotent
    assert out.tolist() == list(range(10))
    with pytest.raises(RuntimeError, match="closed"):
        cache.get("k")
    assert "closed" in repr(cache)
    other = tenso.TensoCache(name=name, create=False)
    assert other.info("k")["pins"] == 1
    del out
    gc.collect()
    assert other.info("k")["pins"] == 0
    other.close()
    cache.unlink()


def test_attach_any_owner(cache, name):
    cache.put("k", np.arange(3))
    for any_owner in (False, True):
        other = tenso.TensoCache(name=name, create=False, any_owner=any_owner)
        try:
            assert other.get("k").tolist() == [0, 1, 2]
        finally:
            other.close()


def test_attach_shares_entries_and_repr(cache, name):
    other = tenso.TensoCache(name=name, create=False)
    try:
        cache.put("shared", np.arange(5))
        assert other.get("shared").tolist() == [0, 1, 2, 3, 4]
        assert other.stats["clients"] == 2
        assert repr(other).startswith(f"TensoCache(name={name!r}, status=open, pool_size=")
    finally:
        other.close()
    assert cache.stats["clients"] == 1


def _write_segment(name, data):
    with open("/dev/shm/" + name, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("where", ["magic", "geometry", "short", "garbage"])
def test_hostile_pool_is_refused(name, where):
    if where == "garbage":
        _write_segment(name, os.urandom(1 << 16))
    else:
        with tenso.TensoCache(1 << 20, name=name) as c:
            c.put("k", np.arange(10))
            data = bytearray(open("/dev/shm/" + name, "rb").read())
            c.unlink()
        if where == "magic":
            data[0] ^= 0xFF
        elif where == "geometry":
            for off in range(8, 64, 4):  # the sizes and counts after the magic
                data[off] ^= 0x5A
        else:
            data = data[: len(data) // 3]
        _write_segment(name, bytes(data))
    with pytest.raises(ValueError) as e:
        tenso.TensoCache(name=name, create=False)
    assert e.value.status == -24  # TENSO_E_CORRUPT


# ---- several processes --------------------------------------------------------------------------


def _spawn():
    return multiprocessing.get_context("spawn")


# Operations per process in the mixed stress test (the 4 x 100k; TENSO_STRESS_OPS lowers
# it for a quick local run).
STRESS_OPS = int(os.environ.get("TENSO_STRESS_OPS", "100000"))


def test_four_processes_mixed_ops(name):
    with tenso.TensoCache(2 << 20, name=name) as cache:
        ctx = _spawn()
        with ctx.Pool(4) as pool:
            results = pool.starmap(cache_workers.mixed_ops, [(name, seed, STRESS_OPS) for seed in range(1, 5)])
        assert all(r["bad"] == 0 for r in results), results
        assert sum(r["hit"] for r in results) > 0 and sum(r["put"] for r in results) > 0
        cache.check()
        s = cache.stats
        assert s["clients"] == 1 and s["pinned_entries"] == 0
        for i, key in enumerate(cache_workers.KEYS):
            v = cache.get(key)
            assert v is None or cache_workers.value_ok(i, v)


# glibc x86-64: pthread_mutex_t's owner tid is the int at byte 8 of the mutex, which the pool
# keeps at byte 256 (docs/cache-layout.md).
_MUTEX_OWNER_OFF = 256 + 8


def _kill_holding_lock(pid, name, tries=5000):
    """Stops the writer at random moments until it is caught inside the pool's lock, then
    SIGKILLs it there (a random kill would land outside the lock most of the time). False when
    it was never caught (it is killed anyway)."""
    rng = np.random.default_rng(pid)
    fd = os.open("/dev/shm/" + name, os.O_RDONLY)
    try:
        for _ in range(tries):
            time.sleep(float(rng.random()) * 0.0005)
            os.kill(pid, signal.SIGSTOP)
            os.waitpid(pid, os.WUNTRACED)
            if int.from_bytes(os.pread(fd, 4, _MUTEX_OWNER_OFF), "little") == pid:
                os.kill(pid, signal.SIGKILL)
                return True
            os.kill(pid, signal.SIGCONT)
    finally:
        os.close(fd)
    os.kill(pid, signal.SIGKILL)
    return False


def test_sigkilled_writer_does_not_wedge_the_pool(name):
    rounds = 4
    with tenso.TensoCache(8 << 20, name=name, lock_timeout=5) as cache:
        ctx = _spawn()
        with ctx.Pool(1) as survivors:
            for r in range(rounds):
                ready = ctx.Event()
                p = ctx.Process(target=cache_workers.writer_forever, args=(name, ready))
                p.start()
                assert ready.wait(60)
                # Another process works on the pool throughout the kill and after it.
                survivor = survivors.apply_async(cache_workers.mixed_ops, (name, 100 + r, 3000))
                assert _kill_holding_lock(p.pid, name), "the writer was never caught holding the lock"
                p.join(10)
                assert p.exitcode == -signal.SIGKILL
                # The pool works at once: the lock the writer died holding is recovered.
                cache.put("after", np.arange(100))
                assert cache.get("after").tolist() == list(range(100))
                counts = survivor.get(60)
                assert counts["bad"] == 0 and counts["hit"] > 0, counts
                cache.check()
        assert cache.stats["recoveries"] >= rounds
        for i, key in enumerate(cache_workers.KEYS):
            v = cache.get(key)
            assert v is None or cache_workers.big_ok(v) or cache_workers.value_ok(i, v)
        cache.check()


def test_pins_of_a_killed_process_are_reclaimed(name):
    with tenso.TensoCache(2 << 20, name=name) as cache:
        cache.put("p", _block(cache, 0.6))
        ctx = _spawn()
        ready = ctx.Event()
        p = ctx.Process(target=cache_workers.pin_and_wait, args=(name, "p", ready))
        p.start()
        assert ready.wait(60)
        assert cache.info("p")["pins"] == 1
        os.kill(p.pid, signal.SIGKILL)
        p.join(10)
        assert cache.delete("p")  # hidden, but its bytes were pinned by the dead process
        cache.put("big", _block(cache, 0.7))  # fits only once the dead pin is reaped
        s = cache.stats
        assert s["pinned_entries"] == 0 and s["clients"] == 1
        cache.check()
