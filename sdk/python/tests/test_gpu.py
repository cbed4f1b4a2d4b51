"""tenso.gpu on libtenso's host backend (an emulated device in host memory, the same transfer
code as CUDA): packets into device memory from every kind of source and back out byte-exact,
bundles, DLPack both ways, IPC references across processes, device dequantize, the pinned pool,
upstream's names; and the CUDA backend answering "not available" cleanly on a machine without
a GPU. torch / cupy / jax tests skip when those are not installed."""

import io
import os
import socket
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tenso
import tenso.gpu as gpu
from tenso import QuantizedTensor, _tenso
from tenso.errors import (
    TensoChecksumError,
    TensoCorruptError,
    TensoLimitError,
    TensoTruncatedError,
    TensoUnsupportedError,
    TensoValueError,
)


@pytest.fixture(scope="module", autouse=True)
def host_backend():
    # Chosen once per process; other test modules never touch the GPU family.
    gpu.select_backend("host")
    assert gpu.device_backend() == "host"
    yield


def arr(shape=(3, 5), dtype=np.float32):
    return (np.arange(int(np.prod(shape)), dtype=np.float64) * 1.5 - 7).astype(dtype).reshape(shape)


def load(source, **kw):
    return gpu.read_to_device(source, framework=None, **kw)


# ---- discovery ----------------------------------------------------------------------------


def test_host_backend_has_a_device():
    assert gpu.available()
    gpu.check_available()
    assert gpu.device_count() >= 1
    info = gpu.device_info(0)
    assert info["backend"] == "host"
    assert info["device"] == 0
    assert len(info["uuid"]) == 16
    assert info["total_memory"] > 0
    assert info["gds"] is False


def test_upstream_names():
    assert tenso.read_to_device is gpu.read_to_device
    assert gpu.BACKEND in (None, "cupy", "torch", "jax")
    for name in ("read_to_device", "write_from_device", "GPUDirectTransfer", "BACKEND"):
        assert hasattr(gpu, name)
    gdt = gpu.GPUDirectTransfer(device_id=0)
    assert gdt.gds_available is False
    assert "staged" in repr(gdt)


# ---- packet -> device ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64, np.bool_, np.float16])
def test_read_to_device_dense_roundtrip(dtype):
    a = arr((4, 7), dtype)
    t = load(tenso.dumps(a))
    assert isinstance(t, gpu.DeviceTensor)
    assert t.shape == (4, 7) and t.dtype == np.dtype(dtype) and t.ndim == 2
    assert t.nbytes == a.nbytes and t.device == 0 and t.data_ptr != 0
    assert t.transfer_path == "staged"
    np.testing.assert_array_equal(t.to_numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_scalar_and_empty():
    s = load(tenso.dumps(np.array(3.25, dtype=np.float32)))
    assert s.shape == () and s.to_numpy() == np.float32(3.25)
    e = load(tenso.dumps(np.zeros((0, 4), dtype=np.int32)))
    assert e.shape == (0, 4) and e.to_numpy().shape == (0, 4)


def test_compressed_and_integrity_packets():
    a = np.tile(np.arange(64, dtype=np.int32), 4096)
    for kw in ({"compress": True}, {"check_integrity": True}, {"compress": True, "check_integrity": True}):
        np.testing.assert_array_equal(load(tenso.dumps(a, **kw)).to_numpy(), a)


def test_small_chunks_exercise_double_buffering():
    a = arr((1000, 33), np.float64)
    t = _tenso.gpu_loads(tenso.dumps(a), chunk_bytes=4096, staging_buffers=3)
    np.testing.assert_array_equal(t.to_numpy(), a)


def test_bundle_becomes_dict_of_device_tensors():
    bundle = {"w": arr((2, 3)), "b": np.arange(5, dtype=np.int16), "nested": {"x": np.ones(4, np.uint8)}}
    out = load(tenso.dumps(bundle))
    assert set(out) == {"w", "b", "nested"}
    np.testing.assert_array_equal(out["w"].to_numpy(), bundle["w"])
    np.testing.assert_array_equal(out["b"].to_numpy(), bundle["b"])
    np.testing.assert_array_equal(out["nested"]["x"].to_numpy(), bundle["nested"]["x"])
    w = out["w"]
    del out  # a member keeps its bundle's device memory alive
    np.testing.assert_array_equal(w.to_numpy(), bundle["w"])


def test_sources_fd_pipe_socket_files_and_streams(tmp_path):
    a = arr((64, 9), np.float32)
    packet = bytes(tenso.dumps(a))
    # bytes-likes
    for src in (packet, bytearray(packet), memoryview(packet), np.frombuffer(packet, np.uint8)):
        np.testing.assert_array_equal(load(src).to_numpy(), a)
    # a path (tenso_gpu_load_file) and file objects (raw: the fd; buffered: framed in Python)
    p = tmp_path / "a.tenso"
    p.write_bytes(packet + packet)
    np.testing.assert_array_equal(load(str(p)).to_numpy(), a)
    np.testing.assert_array_equal(load(p).to_numpy(), a)
    with open(p, "rb", buffering=0) as f:
        np.testing.assert_array_equal(load(f).to_numpy(), a)
        np.testing.assert_array_equal(load(f).to_numpy(), a)
        assert load(f) is None
    with open(p, "rb") as f:
        np.testing.assert_array_equal(load(f).to_numpy(), a)
        assert f.tell() == len(packet)  # nothing past the packet was consumed
        np.testing.assert_array_equal(load(f).to_numpy(), a)
        assert load(f) is None
    bio = io.BytesIO(packet)
    np.testing.assert_array_equal(load(bio).to_numpy(), a)
    assert load(bio) is None
    # a pipe written by another thread (reads overlap device copies) and a socket
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, packet), os.close(w)))
    writer.start()
    try:
        np.testing.assert_array_equal(load(r).to_numpy(), a)
        assert load(r) is None
    finally:
        writer.join()
        os.close(r)
    s1, s2 = socket.socketpair()
    with s1, s2:
        s1.sendall(packet)
        np.testing.assert_array_equal(load(s2).to_numpy(), a)


def test_truncated_and_corrupt_packets_raise():
    packet = tenso.dumps(arr((16, 16)), check_integrity=True)
    with pytest.raises(EOFError):
        load(io.BytesIO(packet[:-10]))
    with pytest.raises(EOFError):
        load(io.BytesIO(packet[:5]))
    r, w = os.pipe()
    os.write(w, packet[:100])
    os.close(w)
    try:
        with pytest.raises(TensoTruncatedError):
            load(r)
    finally:
        os.close(r)
    bad = bytearray(packet)
    bad[-20] ^= 0xFF  # the body under the checksum
    with pytest.raises(TensoChecksumError):
        load(bytes(bad))
    with pytest.raises(TensoCorruptError) as e:
        load(b"XXXX" + packet[4:])
    assert e.value.status == -4  # TENSO_E_BAD_MAGIC


def test_unsupported_kinds_are_refused():
    import scipy.sparse

    with pytest.raises(TensoUnsupportedError):
        load(tenso.dumps(scipy.sparse.eye(4, format="csr", dtype=np.float32)))
    q = QuantizedTensor.quantize(arr((8, 8)), "qint8")
    with pytest.raises(TensoUnsupportedError):
        load(tenso.dumps(q))


def test_decode_limits_apply():
    with pytest.raises(TensoLimitError):
        load(tenso.dumps(arr((100, 100))), options=tenso.DecodeOptions(max_packet_bytes=1000))


# ---- device -> packet ---------------------------------------------------------------------


@pytest.mark.parametrize("check_integrity", [False, True])
def test_dumps_and_write_from_device_are_byte_exact(tmp_path, check_integrity):
    a = arr((33, 17), np.float64)
    want = tenso.dumps(a, check_integrity=check_integrity)
    t = load(tenso.dumps(a))
    assert gpu.dumps(t, check_integrity=check_integrity) == bytes(want)
    # BytesIO (.write), a raw file (the fd), a buffered file after buffered bytes, a socket
    bio = io.BytesIO()
    assert gpu.write_from_device(t, bio, check_integrity=check_integrity) == len(want)
    assert bio.getvalue() == bytes(want)
    p = tmp_path / "out.tenso"
    with open(p, "wb") as f:
        f.write(b"head")
        n = gpu.write_from_device(t, f, check_integrity)
        f.write(b"tail")
    assert n == len(want)
    assert p.read_bytes() == b"head" + bytes(want) + b"tail"
    s1, s2 = socket.socketpair()
    with s1, s2:
        assert gpu.write_from_device(t, s1, check_integrity) == len(want)
        got = b""
        while len(got) < len(want):
            got += s2.recv(1 << 20)
    assert got == bytes(want)


def test_compressed_dumps_roundtrip():
    a = np.zeros((256, 256), np.float32)
    packet = gpu.dumps(load(tenso.dumps(a)), compress=True)
    assert len(packet) < a.nbytes // 10
    np.testing.assert_array_equal(tenso.loads(packet), a)


def test_write_from_device_host_arrays_match_upstream():
    # Host objects go through DLPack under the host backend; the bytes are tenso.dumps'.
    a = arr((5, 5), np.int32)
    bio = io.BytesIO()
    gpu.write_from_device(a, bio)
    assert bio.getvalue() == bytes(tenso.dumps(a))
    bio = io.BytesIO()
    gpu.write_from_device([1.0, 2.0], bio)  # no __dlpack__: upstream's np.asarray path
    assert bio.getvalue() == bytes(tenso.dumps(np.asarray([1.0, 2.0])))


# ---- DLPack -------------------------------------------------------------------------------


def test_dlpack_export_is_zero_copy_and_outlives_the_tensor():
    a = arr((6, 6))
    t = load(tenso.dumps(a))
    assert t.__dlpack_device__() == (1, 0)  # host backend: its memory is host memory (kDLCPU)
    view = np.from_dlpack(t)
    np.testing.assert_array_equal(view, a)
    assert view.__array_interface__["data"][0] == t.data_ptr
    del t
    np.testing.assert_array_equal(view, a)
    legacy = load(tenso.dumps(a)).__dlpack__()  # no max_version: the legacy capsule
    assert "dltensor" in repr(legacy)


def test_from_dlpack_imports_without_copy_and_keeps_producer_alive():
    a = arr((10, 3), np.float32)
    t = gpu.from_dlpack(a)
    assert t.data_ptr == a.__array_interface__["data"][0]
    assert t.shape == (10, 3) and t.dtype == np.float32
    del a
    assert gpu.dumps(t) == bytes(tenso.dumps(arr((10, 3), np.float32)))


def test_to_device_uploads_a_copy():
    a = arr((3, 3), np.int64)
    t = gpu.to_device(a, framework=None)
    assert t.data_ptr != a.__array_interface__["data"][0]
    a[:] = 0
    np.testing.assert_array_equal(t.to_numpy(), arr((3, 3), np.int64))


@pytest.mark.parametrize("framework", ["torch", "cupy", "jax"])
def test_frameworks_through_dlpack(framework):
    pytest.importorskip(framework)
    if framework == "cupy":
        pytest.skip("cupy takes CUDA memory only; the host backend's tensors are CPU memory")
    a = arr((4, 4))
    out = gpu.read_to_device(tenso.dumps(a), framework=framework)
    np.testing.assert_array_equal(np.asarray(out), a)
    bio = io.BytesIO()
    gpu.write_from_device(out, bio)
    assert bio.getvalue() == bytes(tenso.dumps(a))


# ---- IPC ----------------------------------------------------------------------------------


def test_ipc_reference_in_process_and_in_another_process():
    a = arr((8, 8), np.float32)
    t = load(tenso.dumps(a))
    ref = gpu.export_ipc(t)
    assert len(ref) == 106
    opened = gpu.open_ipc(ref, np.float32, (8, 8), framework=None)
    assert opened.transfer_path == "ipc"
    np.testing.assert_array_equal(opened.to_numpy(), a)
    # read_to_device opens a reference packet as its bytes
    raw = load(ref)
    assert raw.transfer_path == "ipc" and raw.dtype == np.uint8 and raw.nbytes == a.nbytes
    assert raw.to_numpy().tobytes() == a.tobytes()
    with pytest.raises(TensoValueError):
        gpu.open_ipc(ref, np.float32, (8, 9))
    # another process maps the same memory (host backend: a shared segment)
    code = textwrap.dedent(
        """
        import sys, numpy as np, tenso.gpu as gpu
        t = gpu.open_ipc(bytes.fromhex(sys.argv[1]), np.float32, (8, 8), framework=None)
        print(float(t.to_numpy().sum()))
        """
    )
    env = dict(os.environ, TENSO_GPU_BACKEND="host")
    out = subprocess.run([sys.executable, "-c", code, ref.hex()], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == float(a.sum())


def test_ipc_export_of_borrowed_memory_is_refused():
    with pytest.raises(TensoValueError):
        gpu.export_ipc(gpu.from_dlpack(arr((2, 2))))


# ---- dequantize ---------------------------------------------------------------------------


@pytest.mark.parametrize("qdtype", ["qint8", "quint8", "qint4", "quint4"])
@pytest.mark.parametrize("scheme", ["per_tensor", "per_channel", "per_group"])
def test_device_dequantize_is_bit_exact(qdtype, scheme):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 16)).astype(np.float32)
    kw = {"group_size": 8} if scheme == "per_group" else {}
    q = QuantizedTensor.quantize(x, qdtype, scheme=scheme, axis=0, **kw)
    packet = tenso.dumps(q)
    want = q.dequantize()
    got = gpu.dequantize(packet, np.float32, framework=None).to_numpy()
    assert got.dtype == np.float32
    assert got.tobytes() == want.tobytes()
    via_load = load(packet, dequantize_to=np.float32).to_numpy()
    assert via_load.tobytes() == want.tobytes()
    half = gpu.dequantize(packet, np.float16, framework=None).to_numpy()
    np.testing.assert_array_equal(half, want.astype(np.float16))


# ---- GPUDirectTransfer, the cache, the pool -----------------------------------------------


def test_gpudirect_transfer_reads(tmp_path):
    a = arr((5, 6), np.float32)
    p = tmp_path / "raw.bin"
    p.write_bytes(b"\0" * 13 + a.tobytes())
    gdt = gpu.GPUDirectTransfer(0)
    gdt._backend = None  # DeviceTensor results whatever framework is installed
    fd = os.open(p, os.O_RDONLY)
    try:
        t = gdt.read_from_fd(fd, shape=(5, 6), dtype=np.float32, offset=13)
        np.testing.assert_array_equal(t.to_numpy(), a)
        with pytest.raises(EOFError):
            gdt.read_from_fd(fd, shape=(6, 6), dtype=np.float32, offset=13)
    finally:
        os.close(fd)
    np.testing.assert_array_equal(gdt.read_packet(tenso.dumps(a)).to_numpy(), a)
    pk = tmp_path / "a.tenso"
    pk.write_bytes(tenso.dumps(a))
    t = gdt.read_file(pk)
    assert t.transfer_path == "staged"  # no cuFile on the host backend
    np.testing.assert_array_equal(t.to_numpy(), a)


def test_cache_get_to_gpu():
    a = arr((32, 32))
    with tenso.TensoCache("4MB") as cache:
        cache.put("w", a)
        t = cache.get("w", device="gpu:0")
        if gpu.BACKEND is None:
            assert isinstance(t, gpu.DeviceTensor)
        np.testing.assert_array_equal(np.asarray(t), a)
        assert cache.get("missing", device="gpu") is None


def test_pinned_pool_is_reused():
    gpu.set_pool_limit(64 << 20)
    packet = tenso.dumps(arr((256, 256)))
    load(packet)
    before = gpu.pool_stats()
    load(packet)
    after = gpu.pool_stats()
    assert after["hits"] > before["hits"]
    assert after["misses"] == before["misses"]
    assert after["limit_bytes"] == 64 << 20
    gpu.set_pool_limit(0)
    assert gpu.pool_stats()["buffers"] == 0
    gpu.set_pool_limit(256 << 20)


def test_backend_cannot_change_after_first_use():
    with pytest.raises(TensoValueError):
        gpu.select_backend("cuda")
    with pytest.raises(TensoValueError):
        gpu.select_backend("metal")
    gpu.select_backend("host")  # the same one again is allowed


# ---- the CUDA backend without a GPU ---------------------------------------------------------


def test_cuda_backend_reports_unavailable_cleanly():
    """On this machine (no driver / device): TensoNotAvailableError with a reason, no crash."""
    code = textwrap.dedent(
        """
        import numpy as np, tenso, tenso.gpu as gpu
        from tenso.errors import TensoNotAvailableError
        try:
            gpu.read_to_device(tenso.dumps(np.ones(4, np.float32)), framework=None)
        except TensoNotAvailableError as e:
            assert e.status == -29 and str(e), e
            print("unavailable:", e)
        else:
            print("AVAILABLE")
        assert not gpu.available()
        print(gpu.device_backend())
        """
    )
    env = dict(os.environ, TENSO_GPU_BACKEND="cuda")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    if "AVAILABLE" in out.stdout.split("\n")[0]:
        pytest.skip("this machine has a CUDA device")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unavailable: ")
    assert out.stdout.strip().endswith("cuda")
