//go:build cgo

package tenso

/*
#include "tgo.h"

// Options built on the C side: the decode limits are a pointer, and Go must not hand C a Go
// struct that holds a Go pointer.
typedef struct {
    int32_t device;
    int32_t dequantize_to;
    uint32_t flags;
    uint32_t staging_buffers;
    uint64_t chunk_bytes;
    uintptr_t stream;
} tgo_gpu_opts;

static tenso_gpu_options tgo_gpu_options_of(tgo_gpu_opts g, const tenso_decode_options *d) {
    tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
    o.device = g.device;
    o.dequantize_to = g.dequantize_to;
    o.flags = g.flags;
    o.staging_buffers = g.staging_buffers;
    o.chunk_bytes = g.chunk_bytes;
    o.stream = (void *)g.stream;
    o.decode = d;
    return o;
}

typedef struct {
    tgo_res res;
    tenso_gpu_value *value;   // a bundle (dense values hand their tensor over and are freed)
    tenso_gpu_tensor *tensor; // a dense value's tensor, owned by the caller
    uint32_t path;
} tgo_gpu_val;

static tgo_gpu_val tgo_gpu_val_of(tenso_status st, tenso_gpu_value *v) {
    tgo_gpu_val r;
    r.value = NULL;
    r.tensor = NULL;
    r.path = 0;
    if (st == TENSO_OK) {
        r.path = tenso_gpu_value_path(v);
        if (tenso_gpu_value_tensor(v) != NULL) {
            st = tenso_gpu_value_take_tensor(&r.tensor, v);
            r.res = tgo_res_of(st, 0);
            tenso_gpu_value_free(v);
            return r;
        }
        r.value = v;
    }
    r.res = tgo_res_of(st, 0);
    return r;
}

static tgo_gpu_val tgo_gpu_loads(const void *p, size_t n, tgo_gpu_opts g, const tenso_decode_options *d) {
    tenso_gpu_options o = tgo_gpu_options_of(g, d);
    tenso_gpu_value *v = NULL;
    tenso_status st = tenso_gpu_loads(&v, p, n, &o);
    return tgo_gpu_val_of(st, v);
}

static tgo_gpu_val tgo_gpu_read_fd(int fd, tgo_gpu_opts g, const tenso_decode_options *d) {
    tenso_gpu_options o = tgo_gpu_options_of(g, d);
    tenso_gpu_value *v = NULL;
    tenso_status st = tenso_gpu_read_fd(&v, fd, &o);
    return tgo_gpu_val_of(st, v);
}

static tgo_gpu_val tgo_gpu_load_file(const char *path, tgo_gpu_opts g, const tenso_decode_options *d) {
    tenso_gpu_options o = tgo_gpu_options_of(g, d);
    tenso_gpu_value *v = NULL;
    tenso_status st = tenso_gpu_load_file(&v, path, &o);
    return tgo_gpu_val_of(st, v);
}

static tgo_res tgo_gpu_loads_into(uintptr_t dst, uint64_t cap, const void *p, size_t n, tgo_gpu_opts g,
                                  const tenso_decode_options *d) {
    tenso_gpu_options o = tgo_gpu_options_of(g, d);
    uint64_t got = 0;
    tenso_status st = tenso_gpu_loads_into((void *)dst, cap, &got, p, n, &o);
    return tgo_res_of(st, got);
}

typedef struct {
    tgo_res res;
    tenso_gpu_tensor *t;
} tgo_gpu_t;

// Call first, then build the result: C leaves the order of argument evaluation open.

static tgo_gpu_t tgo_gpu_t_of(tenso_status st, tenso_gpu_tensor *t) {
    tgo_gpu_t r;
    r.res = tgo_res_of(st, 0);
    r.t = st == TENSO_OK ? t : NULL;
    return r;
}

static tgo_gpu_t tgo_gpu_tensor_new(int32_t device, tenso_dtype dtype, uint32_t ndim, const uint64_t *shape) {
    tenso_gpu_tensor *t = NULL;
    tenso_status st = tenso_gpu_tensor_new(&t, device, dtype, ndim, shape);
    return tgo_gpu_t_of(st, t);
}

static tgo_gpu_t tgo_gpu_tensor_wrap(uintptr_t ptr, int32_t device, tenso_dtype dtype, uint32_t ndim,
                                     const uint64_t *shape) {
    tenso_gpu_tensor *t = NULL;
    tenso_status st = tenso_gpu_tensor_wrap(&t, (void *)ptr, device, dtype, ndim, shape, NULL, NULL);
    return tgo_gpu_t_of(st, t);
}

static tgo_gpu_t tgo_gpu_from_dlpack(uintptr_t m) {
    tenso_gpu_tensor *t = NULL;
    tenso_status st = tenso_gpu_tensor_from_dlpack(&t, (DLManagedTensorVersioned *)m);
    return tgo_gpu_t_of(st, t);
}

static tgo_res tgo_gpu_to_dlpack(const tenso_gpu_tensor *t) {
    DLManagedTensorVersioned *m = NULL;
    tenso_status st = tenso_gpu_tensor_to_dlpack(&m, t);
    return tgo_res_of(st, (uint64_t)(uintptr_t)m);
}

// An IPC reference packet (host bytes) opened as a tensor; the view lives for the call.
static tgo_gpu_t tgo_gpu_ipc_open(const void *p, size_t n, tenso_dtype dtype, uint32_t ndim, const uint64_t *shape) {
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, p, n, NULL);
    tenso_gpu_tensor *t = NULL;
    if (st == TENSO_OK) st = tenso_gpu_ipc_open(&t, v, dtype, ndim, shape);
    tgo_gpu_t r = tgo_gpu_t_of(st, t);
    tenso_view_free(v);
    return r;
}

static tgo_gpu_t tgo_gpu_dequantize(const void *p, size_t n, tenso_dtype out, tgo_gpu_opts g,
                                    const tenso_decode_options *d) {
    tenso_gpu_options o = tgo_gpu_options_of(g, d);
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, p, n, d);
    tenso_gpu_tensor *t = NULL;
    if (st == TENSO_OK) st = tenso_gpu_dequantize(&t, v, out, &o);
    tgo_gpu_t r = tgo_gpu_t_of(st, t);
    tenso_view_free(v);
    return r;
}

static tgo_res tgo_gpu_dumps(tenso_buffer *out, const tenso_gpu_tensor *t, tenso_encode_options enc) {
    return tgo_res_of(tenso_gpu_dumps(out, t, &enc, NULL), 0);
}

static tgo_res tgo_gpu_write_fd(int fd, const tenso_gpu_tensor *t, tenso_encode_options enc) {
    uint64_t n = 0;
    tenso_status st = tenso_gpu_write_fd(&n, fd, t, &enc, NULL);
    return tgo_res_of(st, n);
}

static tgo_res tgo_gpu_ipc_export(tenso_buffer *out, const tenso_gpu_tensor *t) {
    tenso_value *v = NULL;
    tenso_status st = tenso_gpu_ipc_export(&v, t);
    if (st == TENSO_OK) st = tenso_value_dumps(out, v, NULL);
    tgo_res r = tgo_res_of(st, 0);
    tenso_value_free(v);
    return r;
}

static tgo_res tgo_gpu_upload(tenso_gpu_tensor *t, const void *p, size_t n) {
    return tgo_res_of(tenso_gpu_tensor_upload(t, p, n, NULL), 0);
}

static tgo_res tgo_gpu_download(void *p, size_t n, const tenso_gpu_tensor *t) {
    return tgo_res_of(tenso_gpu_tensor_download(p, n, t, NULL), 0);
}

static tgo_res tgo_gpu_select(uint32_t b) { return tgo_res_of(tenso_gpu_select_backend(b), 0); }
static tgo_res tgo_gpu_available(void) { return tgo_res_of(tenso_gpu_available(), 0); }
static tgo_res tgo_gpu_count(void) {
    int32_t n = 0;
    tenso_status st = tenso_gpu_device_count(&n);
    return tgo_res_of(st, (uint64_t)(n < 0 ? 0 : n));
}
static tgo_res tgo_gpu_info(tenso_gpu_device_info *out, int32_t device) {
    out->version = TENSO_GPU_DEVICE_INFO_VERSION;
    return tgo_res_of(tenso_gpu_device_info_get(out, device), 0);
}
static tgo_res tgo_gpu_pool(tenso_gpu_pool_stats *out) { return tgo_res_of(tenso_gpu_pool_stats_get(out), 0); }
static tgo_res tgo_gpu_pool_limit(uint64_t n) { return tgo_res_of(tenso_gpu_pool_set_limit(n), 0); }
static tgo_res tgo_gpu_stream_new(int32_t device) {
    void *s = NULL;
    tenso_status st = tenso_gpu_stream_new(&s, device);
    return tgo_res_of(st, (uint64_t)(uintptr_t)s);
}
static tgo_res tgo_gpu_stream_sync(uintptr_t s) { return tgo_res_of(tenso_gpu_stream_synchronize((void *)s), 0); }
static void tgo_gpu_stream_free(uintptr_t s) { tenso_gpu_stream_free((void *)s); }
static uintptr_t tgo_gpu_data(const tenso_gpu_tensor *t) { return (uintptr_t)tenso_gpu_tensor_data(t); }
static tgo_res tgo_gpu_entry(const char **key, size_t *key_len, const tenso_gpu_value **child,
                             const tenso_gpu_value *v, uint32_t i) {
    return tgo_res_of(tenso_gpu_value_bundle_entry(key, key_len, child, v, i), 0);
}
*/
import "C"

import (
	"os"
	"runtime"
	"unsafe"
)

// Compile-time checks that the Go constants are the header's.
var (
	_ = [1]struct{}{}[GPUBackend(C.TENSO_GPU_BACKEND_NONE)-GPUBackendNone]
	_ = [1]struct{}{}[GPUBackend(C.TENSO_GPU_BACKEND_CUDA)-GPUBackendCUDA]
	_ = [1]struct{}{}[GPUBackend(C.TENSO_GPU_BACKEND_HOST)-GPUBackendHost]
	_ = [1]struct{}{}[GPUPath(C.TENSO_GPU_PATH_STAGED)-GPUPathStaged]
	_ = [1]struct{}{}[GPUPath(C.TENSO_GPU_PATH_GDS)-GPUPathGDS]
	_ = [1]struct{}{}[GPUPath(C.TENSO_GPU_PATH_GDS_COMPAT)-GPUPathGDSCompat]
	_ = [1]struct{}{}[GPUPath(C.TENSO_GPU_PATH_IPC)-GPUPathIPC]
)

var errDeviceClosed = &Error{Status: ErrInvalidArgument, Op: "DeviceTensor", Message: "the device tensor is closed", Err: os.ErrClosed}

// SelectGPUBackend chooses libtenso's device backend for this process: before the first
// other GPU call, or again with the same one (ErrInvalidArgument for a different one).
func SelectGPUBackend(b GPUBackend) error {
	if versionErr != nil {
		return versionErr
	}
	return fail(C.tgo_gpu_select(C.uint32_t(b)), "SelectGPUBackend")
}

// GPUBackendInUse is the backend in use (GPUBackendNone before the first GPU call).
func GPUBackendInUse() GPUBackend {
	if versionErr != nil {
		return GPUBackendNone
	}
	return GPUBackend(C.tenso_gpu_backend())
}

// GPUAvailable is nil when the backend loaded and has a device; otherwise an error wrapping
// ErrGPUUnavailable with the reason (the CUDA runtime's own message where it got that far).
func GPUAvailable() error {
	if versionErr != nil {
		return versionErr
	}
	return fail(C.tgo_gpu_available(), "GPUAvailable")
}

// GPUDeviceCount is the number of devices (an error wrapping ErrGPUUnavailable when none).
func GPUDeviceCount() (int, error) {
	if versionErr != nil {
		return 0, versionErr
	}
	r := C.tgo_gpu_count()
	return int(r.n), fail(r, "GPUDeviceCount")
}

// GPUDevice returns the properties of device `device`.
func GPUDevice(device int) (GPUDeviceInfo, error) {
	if versionErr != nil {
		return GPUDeviceInfo{}, versionErr
	}
	var in C.tenso_gpu_device_info
	if err := fail(C.tgo_gpu_info(&in, C.int32_t(device)), "GPUDevice"); err != nil {
		return GPUDeviceInfo{}, err
	}
	d := GPUDeviceInfo{
		Device: int(in.device), Name: C.GoString(&in.name[0]), TotalMemory: uint64(in.total_memory),
		ComputeMajor: int(in.compute_major), ComputeMinor: int(in.compute_minor),
		Multiprocessors: int(in.multiprocessors), PCIDomain: int(in.pci_domain), PCIBus: int(in.pci_bus),
		PCIDevice: int(in.pci_device), Backend: GPUBackend(in.backend),
		GDS: in.flags&C.TENSO_GPU_DEVICE_GDS != 0, IPC: in.flags&C.TENSO_GPU_DEVICE_IPC != 0,
	}
	for i := range d.UUID {
		d.UUID[i] = byte(in.uuid[i])
	}
	return d, nil
}

// GPUPool returns the pinned staging pool's counters.
func GPUPool() (GPUPoolStats, error) {
	if versionErr != nil {
		return GPUPoolStats{}, versionErr
	}
	var s C.tenso_gpu_pool_stats
	if err := fail(C.tgo_gpu_pool(&s), "GPUPool"); err != nil {
		return GPUPoolStats{}, err
	}
	return GPUPoolStats{Buffers: uint64(s.buffers), Bytes: uint64(s.bytes), Hits: uint64(s.hits),
		Misses: uint64(s.misses), LimitBytes: uint64(s.limit_bytes)}, nil
}

// SetGPUPoolLimit sets how many bytes of pinned buffers the pool keeps (default 256 MiB); 0
// unpins the idle ones now.
func SetGPUPoolLimit(limitBytes uint64) error {
	if versionErr != nil {
		return versionErr
	}
	return fail(C.tgo_gpu_pool_limit(C.uint64_t(limitBytes)), "SetGPUPoolLimit")
}

// GPUStream is a stream of libtenso's (a cudaStream_t under CUDA, a worker queue under the
// host backend), for GPUOptions.Stream. Close frees it.
type GPUStream struct{ s uintptr }

// NewGPUStream creates a stream on `device`.
func NewGPUStream(device int) (*GPUStream, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	r := C.tgo_gpu_stream_new(C.int32_t(device))
	if err := fail(r, "NewGPUStream"); err != nil {
		return nil, err
	}
	return &GPUStream{s: uintptr(r.n)}, nil
}

// Handle is the stream's address, for GPUOptions.Stream (valid until Close).
func (s *GPUStream) Handle() uintptr { return s.s }

// Synchronize waits for everything queued on the stream.
func (s *GPUStream) Synchronize() error {
	return fail(C.tgo_gpu_stream_sync(C.uintptr_t(s.s)), "GPUStream.Synchronize")
}

// Close frees the stream (once; later calls do nothing).
func (s *GPUStream) Close() error {
	if s.s != 0 {
		C.tgo_gpu_stream_free(C.uintptr_t(s.s))
		s.s = 0
	}
	return nil
}

func (o GPUOptions) c() (C.tgo_gpu_opts, C.tenso_decode_options) {
	var g C.tgo_gpu_opts
	g.device = C.int32_t(o.Device)
	g.dequantize_to = C.int32_t(o.DequantizeTo)
	if o.NoGDS {
		g.flags |= C.TENSO_GPU_NO_GDS
	}
	g.staging_buffers = C.uint32_t(o.StagingBuffers)
	g.chunk_bytes = C.uint64_t(o.ChunkBytes)
	g.stream = C.uintptr_t(o.Stream)
	return g, o.Decode.c()
}

// DeviceTensor is dense device memory with a dtype and shape: owned by libtenso (freed by
// Close, or by a cleanup once unreachable), or borrowed from the caller ([WrapDevicePointer],
// [FromDLPack]). Members of a decoded bundle share the bundle's memory: closing one closes
// them all. Methods are safe for concurrent use; Close waits for calls in flight.
type DeviceTensor struct {
	h      *handle        // the tensor, or the bundle value that owns it
	t      unsafe.Pointer // the tenso_gpu_tensor (valid while h is open)
	DType  DType
	Shape  []uint64
	Device int
	Path   GPUPath // how a packet reached the device
}

func freeGPUTensor(p unsafe.Pointer) { C.tenso_gpu_tensor_free((*C.tenso_gpu_tensor)(p)) }
func freeGPUValue(p unsafe.Pointer)  { C.tenso_gpu_value_free((*C.tenso_gpu_value)(p)) }

func describe(h *handle, t *C.tenso_gpu_tensor, path GPUPath) *DeviceTensor {
	nd := int(C.tenso_gpu_tensor_ndim(t))
	shape := make([]uint64, nd)
	if nd > 0 {
		copy(shape, unsafe.Slice((*uint64)(unsafe.Pointer(C.tenso_gpu_tensor_shape(t))), nd))
	}
	return &DeviceTensor{h: h, t: unsafe.Pointer(t), DType: DType(C.tenso_gpu_tensor_dtype(t)), Shape: shape,
		Device: int(C.tenso_gpu_tensor_device(t)), Path: path}
}

func ownedTensor(r C.tgo_gpu_t, op string) (*DeviceTensor, error) {
	if err := fail(r.res, op); err != nil {
		return nil, err
	}
	return describe(newHandle(unsafe.Pointer(r.t), freeGPUTensor), r.t, GPUPathNone), nil
}

// use runs fn with the tensor held open; errDeviceClosed after Close.
func (d *DeviceTensor) use(fn func(t *C.tenso_gpu_tensor) error) error {
	if d == nil || d.h == nil || d.h.acquire() == nil {
		return errDeviceClosed
	}
	defer d.h.release()
	return fn((*C.tenso_gpu_tensor)(d.t))
}

// NewDeviceTensor allocates a C-contiguous tensor on `device` (contents undefined).
func NewDeviceTensor(device int, dtype DType, shape []uint64) (*DeviceTensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cs, nd := cshape(shape)
	r := C.tgo_gpu_tensor_new(C.int32_t(device), C.tenso_dtype(dtype), nd, cs)
	runtime.KeepAlive(shape)
	return ownedTensor(r, "NewDeviceTensor")
}

// Upload copies a dense host Tensor to a new tensor on `device` (through the pinned pool).
func Upload(t *Tensor, device int) (*DeviceTensor, error) {
	if t == nil || t.Kind != KindDense {
		return nil, &Error{Status: ErrUnsupportedKind, Op: "Upload", Message: "only dense tensors go to a device"}
	}
	d, err := NewDeviceTensor(device, t.DType, t.Shape)
	if err != nil {
		return nil, err
	}
	if err := d.Upload(t.Data); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// WrapDevicePointer wraps the caller's device memory (C-contiguous, product(shape) x itemsize
// bytes at ptr on `device`; host memory under the host backend) without copying. Ownership
// stays with the caller: the memory must outlive the DeviceTensor, and Close never frees it.
func WrapDevicePointer(ptr uintptr, device int, dtype DType, shape []uint64) (*DeviceTensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cs, nd := cshape(shape)
	r := C.tgo_gpu_tensor_wrap(C.uintptr_t(ptr), C.int32_t(device), C.tenso_dtype(dtype), nd, cs)
	runtime.KeepAlive(shape)
	return ownedTensor(r, "WrapDevicePointer")
}

// FromDLPack imports a DLManagedTensorVersioned (its address, from torch/cupy/jax C APIs or
// [DeviceTensor.ToDLPack]) without copying: kDLCUDA on the CUDA backend, kDLCPU on the host
// backend, compact row-major. On success tenso owns it and calls its deleter when the
// DeviceTensor is closed; on failure the caller still owns it.
func FromDLPack(managed uintptr) (*DeviceTensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	return ownedTensor(C.tgo_gpu_from_dlpack(C.uintptr_t(managed)), "FromDLPack")
}

// IPCOpen opens another process's device memory from its GPU IPC reference packet (106
// bytes, [DeviceTensor.IPCExport]) as a tensor of dtype and shape (their size must be the
// reference's nbytes: else ErrInvalidArgument). Close closes the handle.
func IPCOpen(refPacket []byte, dtype DType, shape []uint64) (*DeviceTensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	p, n := cbytes(refPacket)
	cs, nd := cshape(shape)
	r := C.tgo_gpu_ipc_open(p, n, C.tenso_dtype(dtype), nd, cs)
	runtime.KeepAlive(refPacket)
	runtime.KeepAlive(shape)
	d, err := ownedTensor(r, "IPCOpen")
	if d != nil {
		d.Path = GPUPathIPC
	}
	return d, err
}

// NBytes is the size of the tensor's memory.
func (d *DeviceTensor) NBytes() uint64 {
	var n uint64
	_ = d.use(func(t *C.tenso_gpu_tensor) error { n = uint64(C.tenso_gpu_tensor_nbytes(t)); return nil })
	return n
}

// DataPtr is the tensor's device address (for CUDA libraries and kernels), valid until Close;
// 0 once closed. The memory belongs to the DeviceTensor (or to whoever lent it): never free it.
func (d *DeviceTensor) DataPtr() uintptr {
	var p uintptr
	_ = d.use(func(t *C.tenso_gpu_tensor) error { p = uintptr(C.tgo_gpu_data(t)); return nil })
	return p
}

// Upload overwrites the whole tensor with src (exactly NBytes long) through the pinned pool.
func (d *DeviceTensor) Upload(src []byte) error {
	return d.use(func(t *C.tenso_gpu_tensor) error {
		p, n := cbytes(src)
		r := C.tgo_gpu_upload(t, p, n)
		runtime.KeepAlive(src)
		return fail(r, "DeviceTensor.Upload")
	})
}

// DownloadInto copies the whole tensor into dst (exactly NBytes long).
func (d *DeviceTensor) DownloadInto(dst []byte) error {
	return d.use(func(t *C.tenso_gpu_tensor) error {
		p, n := cbytes(dst)
		r := C.tgo_gpu_download(p, n, t)
		runtime.KeepAlive(dst)
		return fail(r, "DeviceTensor.DownloadInto")
	})
}

// Download copies the tensor to a host Tensor (Data 64-byte aligned, owned by Go).
func (d *DeviceTensor) Download() (*Tensor, error) {
	n := d.NBytes()
	buf := alignedBytes(int(n))
	if err := d.DownloadInto(buf); err != nil {
		return nil, err
	}
	return NewTensor(d.DType, append([]uint64(nil), d.Shape...), buf), nil
}

// Dumps encodes the tensor as a packet (downloaded through pinned staging): the same bytes
// [Dumps] gives for its host copy.
func (d *DeviceTensor) Dumps(o EncodeOptions) ([]byte, error) {
	return d.packet("DeviceTensor.Dumps", func(b *C.tenso_buffer, t *C.tenso_gpu_tensor) C.tgo_res {
		return C.tgo_gpu_dumps(b, t, o.c())
	})
}

// packet runs a call that fills a tenso_buffer from the tensor and copies the bytes into Go.
func (d *DeviceTensor) packet(op string, fill func(*C.tenso_buffer, *C.tenso_gpu_tensor) C.tgo_res) ([]byte, error) {
	var out []byte
	err := d.use(func(t *C.tenso_gpu_tensor) error {
		var b C.tenso_buffer
		r := fill(&b, t)
		defer C.tenso_buffer_dispose(&b)
		if err := fail(r, op); err != nil {
			return err
		}
		out = C.GoBytes(unsafe.Pointer(b.data), C.int(b.size))
		return nil
	})
	return out, err
}

// WritePacket writes the tensor's packet to f (a file, pipe or socket), overlapping device -> host
// copies with writes; it returns the bytes written.
func (d *DeviceTensor) WritePacket(f *os.File, o EncodeOptions) (uint64, error) {
	var n uint64
	err := d.use(func(t *C.tenso_gpu_tensor) error {
		r := C.tgo_gpu_write_fd(C.int(f.Fd()), t, o.c())
		runtime.KeepAlive(f)
		n = uint64(r.n)
		return fail(r, "DeviceTensor.WritePacket")
	})
	return n, err
}

// IPCExport returns the 106-byte GPU IPC reference packet for a tensor whose memory tenso
// allocated. Keep the tensor open while other processes use the reference.
func (d *DeviceTensor) IPCExport() ([]byte, error) {
	return d.packet("DeviceTensor.IPCExport", func(b *C.tenso_buffer, t *C.tenso_gpu_tensor) C.tgo_res {
		return C.tgo_gpu_ipc_export(b, t)
	})
}

// ToDLPack exports the tensor as a DLManagedTensorVersioned (DLPack 1.1; kDLCUDA with its
// device, kDLCPU under the host backend) and returns its address. The caller owns it and
// must call its deleter once (or hand it to a consumer that will); it holds its own
// reference, so it stays valid after Close.
func (d *DeviceTensor) ToDLPack() (uintptr, error) {
	var m uintptr
	err := d.use(func(t *C.tenso_gpu_tensor) error {
		r := C.tgo_gpu_to_dlpack(t)
		m = uintptr(r.n)
		return fail(r, "DeviceTensor.ToDLPack")
	})
	return m, err
}

// Close frees the tensor's memory (for a bundle member: the whole bundle's). It waits for
// calls in flight; later calls fail with an error wrapping os.ErrClosed. Safe to call twice.
func (d *DeviceTensor) Close() error {
	if d != nil && d.h != nil {
		d.h.close()
	}
	return nil
}

// DeviceValue is what a packet became on the device: a dense Tensor, or a bundle's Entries
// (members sharing the bundle's memory; Close frees them all).
type DeviceValue struct {
	Tensor  *DeviceTensor // the dense tensor; nil for a bundle
	Entries []DeviceEntry // bundle entries in packet order
	Path    GPUPath       // how the packet reached the device
	h       *handle       // the bundle value (nil for dense values)
}

// DeviceEntry is one named bundle member.
type DeviceEntry struct {
	Key   string
	Value *DeviceValue
}

// Get is the bundle entry named key, or nil.
func (v *DeviceValue) Get(key string) *DeviceValue {
	for _, e := range v.Entries {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

// Close frees the value's device memory.
func (v *DeviceValue) Close() error {
	if v.Tensor != nil {
		return v.Tensor.Close()
	}
	if v.h != nil {
		v.h.close()
	}
	return nil
}

func valueFrom(r C.tgo_gpu_val, op string) (*DeviceValue, error) {
	if err := fail(r.res, op); err != nil {
		return nil, withEOF(err)
	}
	path := GPUPath(r.path)
	if r.tensor != nil {
		d := describe(newHandle(unsafe.Pointer(r.tensor), freeGPUTensor), r.tensor, path)
		return &DeviceValue{Tensor: d, Path: path}, nil
	}
	h := newHandle(unsafe.Pointer(r.value), freeGPUValue)
	v, err := walkDevice(h, r.value, path, op)
	if err != nil {
		h.close()
		return nil, err
	}
	return v, nil
}

func walkDevice(h *handle, v *C.tenso_gpu_value, path GPUPath, op string) (*DeviceValue, error) {
	if t := C.tenso_gpu_value_tensor(v); t != nil {
		return &DeviceValue{Tensor: describe(h, t, path), Path: path}, nil
	}
	out := &DeviceValue{Path: path, h: h}
	n := uint32(C.tenso_gpu_value_bundle_count(v))
	for i := uint32(0); i < n; i++ {
		var key *C.char
		var keyLen C.size_t
		var child *C.tenso_gpu_value
		if err := fail(C.tgo_gpu_entry(&key, &keyLen, &child, v, C.uint32_t(i)), op); err != nil {
			return nil, err
		}
		cv, err := walkDevice(h, child, path, op)
		if err != nil {
			return nil, err
		}
		out.Entries = append(out.Entries, DeviceEntry{Key: C.GoStringN(key, C.int(keyLen)), Value: cv})
	}
	return out, nil
}

// GPULoads decodes a packet held in host memory into device memory with the default options;
// see [GPUOptions.Loads].
func GPULoads(packet []byte) (*DeviceValue, error) { return GPUOptions{}.Loads(packet) }

// Loads decodes a packet held in host memory into device memory: a dense tensor, a bundle
// member by member, a quantized packet dequantized on the device (DequantizeTo), or a GPU IPC
// reference packet opened (as uint8 bytes, Path GPUPathIPC).
func (o GPUOptions) Loads(packet []byte) (*DeviceValue, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	g, dec := o.c()
	p, n := cbytes(packet)
	r := C.tgo_gpu_loads(p, n, g, &dec)
	runtime.KeepAlive(packet)
	return valueFrom(r, "GPULoads")
}

// ReadPacket reads one packet from f (a file, pipe or socket) into device memory, overlapping
// reads with host -> device copies. A clean end of stream is an error wrapping io.EOF; a
// stream that ends inside a packet wraps io.ErrUnexpectedEOF.
func (o GPUOptions) ReadPacket(f *os.File) (*DeviceValue, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	g, dec := o.c()
	r := C.tgo_gpu_read_fd(C.int(f.Fd()), g, &dec)
	runtime.KeepAlive(f)
	return valueFrom(r, "GPUReadPacket")
}

// LoadFile reads a packet file into device memory: GPUDirect Storage where cuFile is present
// and the packet allows it, else staged (the value's Path says which).
func (o GPUOptions) LoadFile(path string) (*DeviceValue, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cp, keep, err := cpath(path, "GPULoadFile")
	if err != nil {
		return nil, err
	}
	g, dec := o.c()
	r := C.tgo_gpu_load_file(cp, g, &dec)
	runtime.KeepAlive(keep)
	return valueFrom(r, "GPULoadFile")
}

// LoadsInto decodes a dense packet into the caller's device memory (capacity bytes at ptr on
// o.Device; host memory under the host backend) and returns the body size (an error wrapping
// ErrBufferTooSmall when it does not fit). The memory stays the caller's.
func (o GPUOptions) LoadsInto(ptr uintptr, capacity uint64, packet []byte) (uint64, error) {
	if versionErr != nil {
		return 0, versionErr
	}
	g, dec := o.c()
	p, n := cbytes(packet)
	r := C.tgo_gpu_loads_into(C.uintptr_t(ptr), C.uint64_t(capacity), p, n, g, &dec)
	runtime.KeepAlive(packet)
	return uint64(r.n), fail(r, "GPULoadsInto")
}

// Dequantize decodes a quantized packet and dequantizes it on the device into out (Float32,
// Float16 or BFloat16): bit-exact with [Tensor.Dequantize] for Float32.
func (o GPUOptions) Dequantize(packet []byte, out DType) (*DeviceTensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	g, dec := o.c()
	p, n := cbytes(packet)
	r := C.tgo_gpu_dequantize(p, n, C.tenso_dtype(out), g, &dec)
	runtime.KeepAlive(packet)
	return ownedTensor(r, "GPUDequantize")
}
