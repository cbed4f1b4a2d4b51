"""tenso.ray on a real local Ray cluster (one per module: starting Ray is slow on 2 cores).

How a test tells which serializer ran: Ray's own numpy path gives read-only arrays (zero-copy
out of the object store); tenso.ray.register() gives writeable copies, as upstream does, and
with zero_copy=True read-only arrays whose numpy base is a tenso Packet.
"""

import importlib
import subprocess
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import tenso  # noqa: E402
import tenso.ray  # noqa: E402
from tenso import QuantizedTensor  # noqa: E402

# Workers cannot import this test module: send its remote functions and actor by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        object_store_memory=200 << 20,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield
    finally:
        tenso.ray.unregister()
        ray.shutdown()


@pytest.fixture
def registered(cluster):
    tenso.ray.register()
    try:
        yield
    finally:
        tenso.ray.unregister()


@ray.remote
def _describe(x):
    """What a task received: for arrays (writeable, dtype, shape, sum); for dicts, per key."""
    if isinstance(x, dict):
        return {k: _describe_one(v) for k, v in x.items()}
    return _describe_one(x)


def _describe_one(v):
    if isinstance(v, np.ndarray):
        return (bool(v.flags.writeable), str(v.dtype), v.shape, float(v.astype(np.float64).sum()))
    return ("value", repr(v))


@ray.remote
class _Echo:
    """An actor that registers tenso in its own process, so what it returns travels as packets."""

    def __init__(self):
        tenso.ray.register()

    def double(self, x):
        return (bool(x.flags.writeable), x * 2)

    def quantized(self, q):
        return (type(q).__name__, q.dequantize())


def test_core_import_has_no_ray():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, tenso, tenso.cache; print('ray' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


def test_register_outside_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.util.serialization", None)  # as if ray were missing
    with pytest.raises(ImportError, match=r"tenso\[ray\]"):
        tenso.ray.register()
    tenso.ray.unregister()  # a no-op without ray


def test_put_get_array(registered):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = ray.get(ray.put(a))
    np.testing.assert_array_equal(got, a)
    assert got.dtype == np.float32 and got.flags.writeable  # tenso's copy, as upstream
    got[0, 0] = 5  # and it is the caller's own memory
    assert set(tenso.ray.registered_types()) == {np.ndarray, dict, QuantizedTensor}


def test_unregister_goes_back_to_pickle(cluster):
    a = np.arange(5, dtype=np.int64)
    tenso.ray.register()
    assert ray.get(ray.put(a)).flags.writeable
    tenso.ray.unregister()
    assert tenso.ray.registered_types() == ()
    got = ray.get(ray.put(a))
    np.testing.assert_array_equal(got, a)
    assert not got.flags.writeable  # Ray's own zero-copy numpy path again


def test_zero_copy_views_into_the_object_store(cluster):
    tenso.ray.register(zero_copy=True)
    try:
        a = np.random.default_rng(1).standard_normal((256, 64))
        got = ray.get(ray.put(a))
        np.testing.assert_array_equal(got, a)
        assert not got.flags.writeable
        assert isinstance(got.base, tenso.Packet)  # decoded in place by libtenso
        assert got.ctypes.data % 64 == 0
    finally:
        tenso.ray.unregister()


def test_dict_of_arrays(registered):
    rng = np.random.default_rng(2)
    d = {f"layer{i}": rng.standard_normal(16 + i).astype(np.float32) for i in range(100)}
    got = ray.get(ray.put(d))
    assert list(got) == list(d)
    for k in d:
        np.testing.assert_array_equal(got[k], d[k])
        assert got[k].flags.writeable  # each array came through tenso
    # As a task argument: the worker decodes each array with tenso's deserializer.
    seen = ray.get(_describe.remote(d))
    assert seen["layer3"] == (True, "float32", (19,), pytest.approx(float(d["layer3"].astype(np.float64).sum())))


def test_dicts_of_other_objects_still_travel(registered):
    d = {"name": "w", "step": 3, "nested": {"a": [1, 2]}, "t": np.ones(2)}
    got = ray.get(ray.put(d))
    assert got["name"] == "w" and got["step"] == 3 and got["nested"] == {"a": [1, 2]}
    np.testing.assert_array_equal(got["t"], np.ones(2))
    assert ray.get(_describe.remote(d))["step"] == ("value", "3")


def test_dtypes_tenso_cannot_encode_fall_back_to_pickle(registered):
    for a in (
        np.array([1, "x", None], dtype=object),
        np.arange(3).astype("datetime64[s]"),
        np.arange(4, dtype=">i4"),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
    ):
        got = ray.get(ray.put(a))
        assert got.dtype == a.dtype
        assert got.tolist() == a.tolist()


def test_task_arguments(registered):
    a = np.arange(1000, dtype=np.int32).reshape(10, 100)
    writeable, dtype, shape, total = ray.get(_describe.remote(a))
    assert (writeable, dtype, shape, total) == (True, "int32", (10, 100), float(a.sum()))
    big = np.ones((512, 1024), dtype=np.float32)  # 2 MiB: passed through the object store
    assert ray.get(_describe.remote(big)) == (True, "float32", (512, 1024), float(512 * 1024))


def test_actor_arguments_and_results(registered):
    actor = _Echo.remote()
    a = np.linspace(0, 1, 300, dtype=np.float64).reshape(3, 100)
    writeable, doubled = ray.get(actor.double.remote(a))
    assert writeable  # the actor received tenso's copy
    np.testing.assert_array_equal(doubled, a * 2)
    assert doubled.flags.writeable  # the actor registered too: its result came as a packet
    ray.kill(actor)


def test_quantized_tensor(registered):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    q = QuantizedTensor.quantize(w, "qint8")
    got = ray.get(ray.put(q))
    assert isinstance(got, QuantizedTensor)
    np.testing.assert_array_equal(got.dequantize(), q.dequantize())
    actor = _Echo.remote()
    name, deq = ray.get(actor.quantized.remote(q))
    assert name == "QuantizedTensor"
    np.testing.assert_array_equal(deq, q.dequantize())
    ray.kill(actor)


@pytest.mark.parametrize("framework,needs", [("torch", "PyTorch is required"), ("jax.numpy", "JAX is required")])
def test_frameworks_when_installed(cluster, framework, needs):
    flag = {"include_" + framework.split(".")[0]: True}
    try:
        fw = importlib.import_module(framework)
    except ImportError:
        with pytest.raises(ImportError, match=needs):
            tenso.ray.register(**flag)
        assert tenso.ray.registered_types() == ()
        return
    x = fw.arange(6, dtype=fw.float32).reshape(2, 3)
    tenso.ray.register(**flag)
    try:
        got = ray.get(ray.put(x))
        assert type(got) is type(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(x))
    finally:
        tenso.ray.unregister()
