"""Worker processes for the multi-process cache tests (test_cache.py). A module of
its own so that multiprocessing's "spawn" children can import the functions by name."""

import os
import time

import numpy as np

import tenso

KEYS = [f"k{i}" for i in range(16)]


def make_value(key_index: int, version: int, rng: np.random.Generator) -> np.ndarray:
    """A self-checking value: element 0 is its version, element 1 its key, then a run of
    consecutive integers starting at version * 7 + key; the length varies so puts reuse, grow
    and move entries."""
    n = int(rng.integers(16, 4096))
    v = np.empty(n, np.int64)
    v[0], v[1] = version, key_index
    v[2:] = np.arange(n - 2, dtype=np.int64) + version * 7 + key_index
    return v


def value_ok(key_index: int, v: np.ndarray) -> bool:
    if v.dtype != np.int64 or v.ndim != 1 or len(v) < 16 or v[1] != key_index:
        return False
    expect = np.arange(len(v) - 2, dtype=np.int64) + int(v[0]) * 7 + key_index
    return bool(np.array_equal(v[2:], expect))


BIG = 1 << 18


def big_value() -> np.ndarray:
    return np.arange(BIG, dtype=np.int64)


def big_ok(v: np.ndarray) -> bool:
    return v.dtype == np.int64 and v.shape == (BIG,) and bool(np.array_equal(v, np.arange(BIG, dtype=np.int64)))


def mixed_ops(name: str, seed: int, ops: int) -> dict:
    """put/get/delete at random on shared keys; every value read must be whole and unchanged
    while it is held (pinned), whatever the other processes do meanwhile."""
    rng = np.random.default_rng(seed)
    cache = tenso.TensoCache(name=name, create=False)
    counts = {"put": 0, "hit": 0, "miss": 0, "delete": 0, "bad": 0, "full": 0}
    held = []
    try:
        for i in range(ops):
            k = int(rng.integers(len(KEYS)))
            r = rng.random()
            if r < 0.45:
                try:
                    cache.put(KEYS[k], make_value(k, seed * 100000 + i, rng))
                    counts["put"] += 1
                except MemoryError:
                    counts["full"] += 1  # everything pinned by the others at that moment
            elif r < 0.9:
                v = cache.get(KEYS[k])
                if v is None:
                    counts["miss"] += 1
                    continue
                counts["hit"] += 1
                if not (value_ok(k, v) or big_ok(v)):
                    counts["bad"] += 1
                held.append((k, v, v.copy()))
                if len(held) > 4:  # keep a few pinned while others write
                    hk, hv, hcopy = held.pop(0)
                    if not np.array_equal(hv, hcopy) or not (value_ok(hk, hv) or big_ok(hv)):
                        counts["bad"] += 1
            else:
                counts["delete"] += int(cache.delete(KEYS[k]))
        for _hk, hv, hcopy in held:
            if not np.array_equal(hv, hcopy):
                counts["bad"] += 1
    finally:
        held.clear()
        cache.close()
    return counts


def writer_forever(name: str, ready) -> None:
    """Puts large values (2 MiB copies under the lock) as fast as it can until killed."""
    cache = tenso.TensoCache(name=name, create=False)
    rng = np.random.default_rng(os.getpid())
    big = big_value()
    ready.set()
    i = 0
    while True:
        try:
            cache.put(KEYS[i % len(KEYS)], big if i % 2 else make_value(i % len(KEYS), i, rng))
        except MemoryError:
            pass  # the other process pins enough big values to fill the pool: try the next key
        i += 1


def pin_and_wait(name: str, key: str, ready) -> None:
    """Gets `key` (a pin) and holds it until killed."""
    cache = tenso.TensoCache(name=name, create=False)
    held = cache.get(key)
    assert held is not None
    ready.set()
    while True:
        time.sleep(1)
