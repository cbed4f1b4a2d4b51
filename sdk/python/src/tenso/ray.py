"""Ray integration: tenso packets as Ray's serializer for tensors (upstream ``tenso.ray``, 0.24).

Usage::

    import ray
    from tenso.ray import register

    ray.init()
    register()  # numpy arrays, dict bundles, QuantizedTensor (+ torch / jax when asked)

    ref = ray.put(np.zeros((1000, 1000)))
    arr = ray.get(ref)  # decoded by libtenso

    @ray.remote
    def process(tensor):
        return tensor.mean()

    ray.get(process.remote(np.random.randn(1000, 1000)))

How it travels. Each registered object becomes one packet (``tenso.dumps``) that Ray receives
as an out-of-band pickle buffer: it is copied once, into the object store, never into the
pickle stream. The deserializer decodes it from the object store's memory: a writeable copy by
default, as upstream, or, with ``register(zero_copy=True)``, read-only arrays that point into
the object store (as Ray's own numpy path returns), which keep the object pinned while they live.

Speed. Ray's default already sends numpy arrays out of band (one copy on put, a zero-copy
view on get), so register() is slower for plain arrays: put copies twice (into the packet, then
into the store), and the default get copies once (bench/python/ray_results.md). Use it for
upstream's API and wire format in Ray, not for speed; ``zero_copy=True`` makes get free.

Scope, as upstream. ``ray.util.register_serializer`` acts on the calling process only. The
driver's registration covers what the driver sends (``ray.put``, task and actor arguments);
for what workers send back (task results), register in each worker too, for example with
``ray.init(runtime_env={"worker_process_setup_hook": tenso.ray.register})``.

Dicts. ``dict`` is registered as upstream does, but Ray's pickler never consults registrations
for exact ``dict`` objects (CPython's pickler saves them itself), so a dict travels as a dict
whose arrays each travel as a packet. Were the registration ever used, a dict tenso cannot
encode (one holding other objects) falls back to pickle instead of failing.

Not in the core package: ``import tenso`` does not import Ray. Install with
``pip install 'libtenso[ray]'``.
"""

import pickle
from typing import Any, Dict, List, Tuple

import numpy as np

from . import core
from .errors import TensoError
from .quantize import QuantizedTensor

__all__ = ["register", "unregister"]

# The classes the last register() installed, so unregister() removes exactly those.
_registered_types: List[type] = []

# A serialized object: ("tenso", packet buffer) or ("pickle", what the fallback reduces to).
_Wire = Tuple[str, Any]


def _packet(obj: Any) -> _Wire:
    # PickleBuffer: Ray stores the packet as an out-of-band buffer (one copy, into the object
    # store), not inside the pickle stream.
    return ("tenso", pickle.PickleBuffer(core.dumps(obj)))


def _decode(data: Any, copy: bool) -> Any:
    # Ray hands an out-of-band buffer back as a read-only buffer over the object store.
    return core.loads(data, copy=copy)


def _serialize_ndarray(arr: np.ndarray) -> _Wire:
    """A numpy array as a tenso packet; dtypes tenso has no code for (object, datetime,
    structured, big-endian) are pickled, as Ray would without register()."""
    try:
        return _packet(arr)
    except (TensoError, ValueError, TypeError):
        # Plain pickle, not Ray's pickler: that one would call this serializer again.
        return ("pickle", pickle.dumps(arr, protocol=5))


def _deserialize(wire: _Wire, copy: bool) -> Any:
    kind, data = wire
    if kind == "tenso":
        return _decode(data, copy)
    if kind == "dict":
        return dict(data)
    return pickle.loads(data)


def _deserialize_copy(wire: _Wire) -> Any:
    return _deserialize(wire, True)


def _deserialize_view(wire: _Wire) -> Any:
    return _deserialize(wire, False)


def _serialize_dict(d: Dict[str, Any]) -> _Wire:
    """A dict of arrays as one bundle packet; any other dict as its items (pickled by Ray)."""
    try:
        return _packet(d)
    except (TensoError, ValueError, TypeError):
        return ("dict", list(d.items()))


def _serialize_quantized(qt: QuantizedTensor) -> _Wire:
    return _packet(qt)


def _serialize_torch(t: Any) -> _Wire:
    return _serialize_ndarray(t.detach().cpu().numpy())


def _deserialize_torch(wire: _Wire) -> Any:
    import torch

    return torch.from_numpy(_deserialize(wire, True))  # torch wants writeable memory


def _serialize_jax(t: Any) -> _Wire:
    return _serialize_ndarray(np.asarray(t))


def _deserialize_jax(wire: _Wire) -> Any:
    import jax.numpy as jnp

    return jnp.asarray(_deserialize(wire, False))  # jax copies to its device buffer anyway


def register(include_torch: bool = False, include_jax: bool = False, *, zero_copy: bool = False) -> None:
    """
    Register tenso as Ray's serializer for tensor types in this process.

    After this, ``ray.put``, ``ray.get``, task and actor arguments involving registered types
    are serialized as tenso packets instead of pickle (see the module docstring for which
    process's sends that covers).

    Parameters
    ----------
    include_torch : bool, default False
        Also register ``torch.Tensor`` (sent from CPU memory; received as a CPU tensor).
    include_jax : bool, default False
        Also register JAX arrays.
    zero_copy : bool, keyword-only, default False
        Received numpy arrays (and the parts of dicts and QuantizedTensors) are read-only views
        into Ray's object store instead of writeable copies. Not in upstream.

    Raises
    ------
    ImportError
        Ray, or a framework asked for, is not installed.

    Examples
    --------
    >>> import ray, numpy as np
    >>> from tenso.ray import register
    >>> ray.init(num_cpus=1)  # doctest: +SKIP
    >>> register()  # doctest: +SKIP
    >>> ray.get(ray.put(np.arange(3))).tolist()  # doctest: +SKIP
    [0, 1, 2]
    """
    try:
        from ray.util.serialization import register_serializer
    except ImportError:
        raise ImportError(
            "Ray is required for this integration. Install it with: pip install 'libtenso[ray]'"
        ) from None

    deserialize = _deserialize_view if zero_copy else _deserialize_copy
    serializers: List[Tuple[type, Any, Any]] = [
        (np.ndarray, _serialize_ndarray, deserialize),
        (dict, _serialize_dict, deserialize),
        (QuantizedTensor, _serialize_quantized, deserialize),
    ]
    if include_torch:
        try:
            import torch
        except ImportError:
            raise ImportError(
                "PyTorch is required for torch tensor serialization. Install it with: pip install torch"
            ) from None
        serializers.append((torch.Tensor, _serialize_torch, _deserialize_torch))
    if include_jax:
        try:
            from jax import Array as JaxArray
        except ImportError:
            raise ImportError("JAX is required for jax array serialization. Install it with: pip install jax") from None
        serializers.append((JaxArray, _serialize_jax, _deserialize_jax))

    unregister()  # a second register() replaces the first's set
    for cls, serializer, deserializer in serializers:
        register_serializer(cls, serializer=serializer, deserializer=deserializer)
        _registered_types.append(cls)


def unregister() -> None:
    """Remove the serializers the last :func:`register` installed; those types go back to
    Ray's default (pickle). Nothing happens when Ray is not installed or nothing is registered."""
    try:
        from ray.util.serialization import deregister_serializer
    except ImportError:
        return
    while _registered_types:
        deregister_serializer(_registered_types.pop())


def registered_types() -> Tuple[type, ...]:
    """The classes tenso serializes for Ray in this process now. Not in upstream."""
    return tuple(_registered_types)
