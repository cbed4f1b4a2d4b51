"""Tensors in POSIX shared memory: :class:`TensoShm` (one packet in one named segment) and
:class:`TensoCache` (a tensor cache any number of processes on the host share).

Both have upstream ``tenso.shm`` / ``tenso.cache``'s (0.24) names, arguments, return values and
exceptions, over libtenso's ``tenso/shm.h``:

* A segment holds one packet at byte 0, upstream's layout, so segments are exchanged with the
  upstream package both ways. Reads frame the packet by its exact length, so compressed packets
  (which upstream cannot read back) and packets followed by stale bytes work.
* Cache reads are zero-copy *and pinned*: the array points into the pool, and its entry is never
  evicted, expired, overwritten or reused while the array (or any view of it) is alive. Deleting
  or replacing the key hides it at once; the bytes stay until the arrays are garbage collected.
  (Upstream copies every read out of the pool under its lock.) Every operation takes the pool's
  process-shared robust lock; a process killed while holding it does not wedge the others.
"""

import secrets
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _tenso
from .core import _to_value
from .errors import TensoCorruptError, TensoTypeError
from .quantize import QuantizedTensor
from .utils import _packet_info

__all__ = ["TensoShm", "TensoCache"]

#: POSIX shared memory is available. libtenso's segments and cache are built on shm_open and
#: mmap, which every platform this package builds on has, so this is always True (upstream:
#: whether ``multiprocessing.shared_memory`` imports).
HAS_SHM: bool = True


class TensoShm:
    """
    One Tenso packet in a named POSIX shared-memory segment (``/dev/shm/<name>``).

    Example::

        # Writer
        with TensoShm.create_from("my_tensor", np.random.rand(100, 100)) as shm:
            ...
        # Reader (another process)
        with TensoShm("my_tensor") as shm:
            ary = shm.get()          # zero-copy, read-only view into the segment

    Parameters
    ----------
    name : str
        Segment name ("weights" and "/weights" are the same segment). With ``create=True`` it
        may be None for a random name.
    create : bool, default False
        Create a new zero-filled segment of ``size`` bytes (FileExistsError if the name exists)
        instead of attaching to an existing one (FileNotFoundError if it does not).
    size : int
        Bytes, for ``create=True``.
    any_owner : bool, keyword-only, default False
        Attach to a segment owned by another uid too. By default another uid's segment is
        refused (TensoIOError): whoever can write it controls every byte you read.

    A segment truncated by another process raises TensoTruncatedError from then on; views (and
    the memory of the segment) read zeros where the lost pages were instead of raising SIGBUS
    (see "Truncation" in tenso/shm.h for the limits).

    Python's ``faulthandler`` takes that protection away: ``faulthandler.enable()`` replaces
    libtenso's SIGBUS handler with one that re-raises the signal (a truncation then ends the
    process), and ``faulthandler.disable()`` restores the default, not libtenso's handler.
    Segments and pools mapped while it is replaced are checked with a system call per call
    instead; enable faulthandler before the first segment or pool, or not at all.
    """

    def __init__(self, name: Optional[str], create: bool = False, size: int = 0, *, any_owner: bool = False) -> None:
        if create:
            if size <= 0:
                # multiprocessing.shared_memory's message, which upstream surfaces.
                raise ValueError("'size' must be a positive number different from zero")
            if name is None:
                name = "tenso_" + secrets.token_hex(8)
            self._h: Optional[_tenso.Shm] = _tenso.Shm.create(name, size)
        else:
            if name is None:
                raise ValueError("name is required when create=False")
            self._h = _tenso.Shm.open(name, True, any_owner)
        self._name = name

    @classmethod
    def _wrap(cls, handle: Any, name: str) -> "TensoShm":
        self = cls.__new__(cls)
        self._h = handle
        self._name = name
        return self

    def _handle(self) -> _tenso.Shm:
        if self._h is None:
            raise ValueError(f"TensoShm {self._name!r} is closed")
        return self._h

    @property
    def name(self) -> str:
        """The name as given."""
        return self._name

    @property
    def size(self) -> int:
        """The segment's size in bytes."""
        return int(self._handle().size)

    @property
    def buffer(self) -> memoryview:
        """A writable memoryview of the whole segment. It keeps the mapping alive, also after
        :meth:`close` (upstream's ``close`` raises BufferError then)."""
        return memoryview(self._handle())

    def put(self, obj: Any, check_integrity: bool = False, compress: bool = False, alignment: int = 64) -> int:
        """
        Encode ``obj`` (anything :func:`tenso.dumps` accepts) at the start of the segment: one
        copy of each body, straight into shared memory, with the GIL released.

        Returns
        -------
        int
            The packet's length in bytes.

        Raises
        ------
        MemoryError
            The packet does not fit (the segment is unchanged).
        """
        return int(self._handle().put(_to_value(obj, False), check_integrity, compress, alignment))

    def get(self) -> Any:
        """
        Decode the packet at the start of the segment: zero-copy read-only arrays (a dict for
        bundles, ...) that keep the mapping alive after :meth:`close`. They see whatever a later
        :meth:`put` writes into the segment (use :class:`TensoCache` for pinned reads).
        Compressed packets are decompressed into memory the arrays own.

        Raises
        ------
        ValueError
            The segment holds no whole valid packet.
        """
        return self._handle().get()

    def close(self) -> None:
        """Release this mapping (arrays from :meth:`get` and memoryviews from :attr:`buffer`
        keep it until they go). The segment stays until :meth:`unlink`."""
        self._h = None

    def unlink(self) -> None:
        """Remove the segment's name (FileNotFoundError if there is none). Mappings stay valid."""
        _tenso.Shm.unlink(self._name)

    def __enter__(self) -> "TensoShm":
        return self

    def __exit__(self, *exc: object) -> None:
        # As upstream: closed, not unlinked (the other process may still need the segment).
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h is None else f"size={self._h.size}"
        return f"TensoShm(name={self._name!r}, {state})"

    @classmethod
    def create_from(
        cls,
        name: str,
        obj: Any,
        check_integrity: bool = False,
        compress: bool = False,
        alignment: int = 64,
    ) -> "TensoShm":
        """
        Create a segment sized exactly for ``obj``'s packet (an upper bound when compressing)
        and encode ``obj`` into it. A leftover segment of that name (a crashed run's) is
        replaced, as upstream does.
        """
        handle, _written = _tenso.Shm.create_for(
            name, _to_value(obj, False), check_integrity, compress, alignment, True
        )
        return cls._wrap(handle, name)


# ---------------------------------------------------------------------------------------------
# TensoCache
# ---------------------------------------------------------------------------------------------

_SIZE_UNITS = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _parse_size(size: Union[int, str]) -> int:
    """Bytes for 4096, "256MB", "1.5G", "64KiB" (binary units, as upstream)."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        return int(size)
    s = str(size).strip().upper().replace("IB", "B")
    for suffix in ("TB", "GB", "MB", "KB", "T", "G", "M", "K", "B"):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * _SIZE_UNITS[suffix[0]])
    return int(s)


def _to_device(obj: Any, device: str) -> Any:
    """A framework tensor from a numpy array: "torch[:dev]", "jax[:index]", "cupy[:index]", or
    "gpu[:index]" (libtenso's upload through pinned staging, as tenso.gpu.to_device)."""
    framework, _, spec = device.partition(":")
    framework = framework.lower()
    if framework == "gpu":
        from .gpu import to_device

        return to_device(obj, int(spec) if spec else 0)
    if framework == "torch":
        import torch

        t = torch.from_numpy(obj)
        return t.to(spec) if spec else t
    if framework == "jax":
        import jax

        out = jax.numpy.array(obj)
        return jax.device_put(out, jax.devices()[int(spec)]) if spec else out
    if framework == "cupy":
        import cupy

        if spec:
            with cupy.cuda.Device(int(spec)):
                return cupy.array(obj)
        return cupy.array(obj)
    raise ValueError(f"Unsupported device framework: {framework!r}. Supported: 'torch', 'jax', 'cupy'.")


def _not_a_cache(name: str, e: TensoCorruptError) -> TensoCorruptError:
    """Upstream's words ("Invalid TensoCache magic: b'...'") for a segment that does not start
    with a cache pool's magic, libtenso's message after them; ``e`` for other corruption."""
    try:
        with open("/dev/shm/" + name.lstrip("/"), "rb") as f:  # Linux's POSIX shm directory
            magic = f.read(8)
    except OSError:
        return e
    if magic == b"TNSOCACH":
        return e
    out = TensoCorruptError(f"Invalid TensoCache magic: {magic!r} ({e})")
    out.status = e.status
    return out


class TensoCache:
    """
    A tensor cache in one shared-memory pool, shared by every process that opens its name.

    Entries are Tenso packets at 64-byte aligned offsets. Puts encode straight into the pool;
    gets are zero-copy, read-only and pinned (see the module docstring). A put that does not fit
    first drops expired entries, then evicts unpinned entries from the least recently used end,
    and raises MemoryError when that is not enough.

    Example::

        with TensoCache("64MB") as cache:
            cache.put("weights", np.random.randn(1000, 1000).astype(np.float32))
            arr = cache.get("weights")        # zero-copy, pinned while `arr` lives
            print(cache.info("weights"), cache.stats)

    Parameters
    ----------
    max_memory : str or int, default "256MB"
        Pool size, header and tables included ("256MB", "1GB" or bytes). Ignored when attaching.
        Every size from 4800 bytes up works (upstream's minimum is 5120); below 1 MiB the
        tables shrink with the pool, so a tiny pool holds little: "5KB" holds 1 entry of up
        to 448 bytes of packet and 2 attached processes, "16KB" 4 entries in 10 KiB and 4
        processes (``stats["max_entries"]``, ``stats["data_region_size"]``). A smaller size is
        a ValueError naming the smallest.
    name : str, optional
        The pool's shared-memory name; random when None and creating.
    create : bool, default True
        Create the pool (FileExistsError if the name is taken) or attach to an existing one
        (FileNotFoundError if there is none; ValueError if it is not a tenso cache).
    max_entries : int, keyword-only
        Entry slots when creating; 0 derives them from the size.
    lock_timeout : float, keyword-only
        Seconds to wait for the pool's lock before TimeoutError; None for libtenso's 10 s.
    any_owner : bool, keyword-only, default False
        When attaching, accept a pool owned by another uid too. By default another uid's pool
        is refused (TensoIOError): every attached process can write every byte of it.

    A pool truncated by another process raises TensoTruncatedError from then on; views read
    zeros where the lost pages were, and freeing them is safe, instead of raising SIGBUS (see
    "Truncation" in tenso/shm.h for the limits).

    Python's ``faulthandler`` takes that protection away: ``faulthandler.enable()`` replaces
    libtenso's SIGBUS handler with one that re-raises the signal (a truncation then ends the
    process), and ``faulthandler.disable()`` restores the default, not libtenso's handler.
    Segments and pools mapped while it is replaced are checked with a system call per call
    instead; enable faulthandler before the first segment or pool, or not at all.
    """

    def __init__(
        self,
        max_memory: Union[int, str] = "256MB",
        name: Optional[str] = None,
        create: bool = True,
        *,
        max_entries: int = 0,
        lock_timeout: Optional[float] = None,
        any_owner: bool = False,
    ) -> None:
        self._h: Optional[_tenso.Cache] = None
        self._owns = create
        timeout_ms = 0 if lock_timeout is None else max(1, int(round(lock_timeout * 1000)))
        if create:
            if name is None:
                name = "tenso_cache_" + secrets.token_hex(8)
            size = _parse_size(max_memory)
            if size <= 0:
                raise ValueError(f"Pool size must be positive, not {max_memory!r}")
            self._h = _tenso.Cache.create(name, size, max_entries, 0, 0, timeout_ms)
        else:
            if name is None:
                raise ValueError("name is required when create=False")
            try:
                self._h = _tenso.Cache.open(name, timeout_ms, any_owner)
            except TensoCorruptError as e:
                raise _not_a_cache(name, e) from None
        self._name: str = name

    def _handle(self) -> _tenso.Cache:
        if self._h is None:
            raise RuntimeError("TensoCache is closed")
        return self._h

    @property
    def name(self) -> str:
        """The pool's shared-memory name."""
        return self._name

    def put(self, key: str, tensor: Any, ttl: Optional[float] = None, quantize: Optional[str] = None) -> int:
        """
        Store ``tensor`` under ``key``, encoded straight into the pool (GIL released).

        An existing unpinned entry with room is rewritten in place; otherwise the packet goes to
        fresh space and the old one is released (or kept for its pinned readers).

        Parameters
        ----------
        key : str
            1 to 128 bytes of UTF-8.
        tensor : numpy array, QuantizedTensor, dict, ... or framework tensor
            Anything :func:`tenso.dumps` accepts; DLPack producers (torch, jax) without a
            copy, other array-likes through ``numpy.asarray``.
        ttl : float, optional
            Seconds until the entry expires; None (or 0) never.
        quantize : {'qint8', 'quint8', 'qint4', 'quint4'}, optional
            Store a per-tensor quantized copy instead (:meth:`QuantizedTensor.quantize`).

        Returns
        -------
        int
            The packet's length in bytes.

        Raises
        ------
        ValueError
            Empty key or one longer than 128 bytes; negative ttl.
        MemoryError
            No room (or no entry slot) even after expiry and eviction of unpinned entries.
        TimeoutError
            The pool's lock was not obtained in time.
        """
        if not isinstance(key, str):
            raise TensoTypeError(f"cache keys must be str, not {type(key).__name__}")
        h = self._handle()
        obj = tensor
        if quantize is not None and not isinstance(obj, QuantizedTensor):
            obj = QuantizedTensor.quantize(np.asarray(obj), quantize)
        try:
            value = _to_value(obj, False)
        except TensoTypeError:
            value = _to_value(np.asarray(obj), False)  # lists, scalars, array-likes (as upstream)
        return int(h.put(key, value, float(ttl or 0.0)))

    def get(self, key: str, copy: bool = False, device: Optional[str] = None) -> Any:
        """
        The value under ``key``, or None when it is absent or expired (a miss).

        Parameters
        ----------
        copy : bool, default False
            False: a zero-copy read-only view into the pool, pinned until it and every view of
            it are garbage collected. True: a writeable copy (no pin is kept).
        device : str, optional
            "torch", "torch:cuda:0", "jax", "cupy:0", ...: converted from a copy, as upstream.
            "gpu" / "gpu:1": uploaded by libtenso straight from the pinned pool entry (no host
            copy) to a device tensor, as :func:`tenso.gpu.read_to_device` returns them.
        """
        # The hot path of the cache: one attribute and one call (what _handle() does, inlined).
        h = self._h
        if h is None:
            raise RuntimeError("TensoCache is closed")
        if not isinstance(key, str):
            raise TensoTypeError(f"cache keys must be str, not {type(key).__name__}")
        out = h.get(key, bool(copy) or (device is not None and not device.lower().startswith("gpu")))
        if device is None or out is None:
            return out
        return _to_device(out, device)

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it was there. Pinned readers keep their bytes until they go."""
        return bool(self._handle().delete(key))

    def info(self, key: str) -> Optional[Dict[str, Any]]:
        """
        What the cache knows about ``key`` without decoding it (neither a hit nor a miss): a dict
        with ``shape``, ``dtype`` (numpy dtype, quantized dtype name, or None for bundles),
        ``ndim``, ``size_bytes`` (the packet), ``alloc_bytes`` (its space in the pool), ``ttl``
        (None when it never expires), ``age`` (seconds since the put) and ``pins`` (live views
        over all processes); None when the key is absent or expired.
        """
        raw = self._handle().info(key)
        if raw is None:
            return None
        header = _packet_info(raw)
        return {
            "shape": header["shape"],
            "dtype": header["dtype"],
            "ndim": header["ndim"],
            "size_bytes": int(raw["packet_size"]),
            "alloc_bytes": int(raw["alloc_bytes"]),
            "ttl": raw["ttl_seconds"] if raw["ttl_seconds"] > 0 else None,
            "age": raw["age_seconds"],
            "pins": int(raw["pins"]),
        }

    def keys(self) -> List[str]:
        """Every live key, most recently used first."""
        return self._handle().keys()

    def clear(self) -> None:
        """Remove every entry (pinned ones are hidden, and released when their pins go)."""
        self._handle().clear()

    def check(self) -> None:
        """Check every invariant of the pool (O(entries), for tests and tooling); ValueError
        (TensoCorruptError) naming the first broken one."""
        self._handle().check()

    def __len__(self) -> int:
        return int(self._handle().stats()["entries"])

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return bool(self._handle().contains(key))

    @property
    def stats(self) -> Dict[str, Any]:
        """
        Counters and occupancy: upstream's ``entries``, ``max_entries``, ``pool_size``,
        ``used_bytes``, ``free_bytes``, ``data_region_size``, ``hits``, ``misses``, ``hit_rate``,
        plus ``evictions``, ``expirations``, ``pinned_entries``, ``recoveries`` (lock holders
        that died) and ``clients`` (handles attached now).
        """
        s = self._handle().stats()
        total = s["hits"] + s["misses"]
        return {
            "entries": s["entries"],
            "max_entries": s["max_entries"],
            "pool_size": s["pool_bytes"],
            "used_bytes": s["used_bytes"],
            "free_bytes": s["free_bytes"],
            "data_region_size": s["data_bytes"],
            "hits": s["hits"],
            "misses": s["misses"],
            "hit_rate": s["hits"] / total if total else 0.0,
            "evictions": s["evictions"],
            "expirations": s["expirations"],
            "pinned_entries": s["pinned_entries"],
            "recoveries": s["recoveries"],
            "clients": s["clients"],
        }

    def close(self) -> None:
        """Detach. Arrays already read stay valid (and pinned) until they are collected."""
        h, self._h = self._h, None
        if h is not None:
            h.close()

    def unlink(self) -> None:
        """Remove the pool's name (attached handles keep working). No error if it is gone."""
        try:
            _tenso.Cache.unlink(self._name)
        except FileNotFoundError:
            pass  # upstream ignores a missing segment here

    def __enter__(self) -> "TensoCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._owns:
            self.unlink()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._h is None:
            return f"TensoCache(name={self._name!r}, status=closed)"
        s = self._h.stats()
        return (
            f"TensoCache(name={self._name!r}, status=open, pool_size={s['pool_bytes']}, max_entries={s['max_entries']})"
        )
