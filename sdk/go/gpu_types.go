package tenso

// GPU types shared by the cgo build (gpu.go) and the stub build.

// GPUBackend is a device backend of libtenso (tenso/gpu.h, since 1.4).
type GPUBackend uint32

const (
	// GPUBackendNone: no backend chosen yet (before the first GPU call).
	GPUBackendNone GPUBackend = 0
	// GPUBackendCUDA: real devices through the CUDA runtime (libtenso's plugin
	// libtenso_cuda.so, loaded at the first GPU call). The default.
	GPUBackendCUDA GPUBackend = 1
	// GPUBackendHost: an emulated device in host memory that runs the same transfer code, for
	// tests and machines without a GPU. Also chosen by TENSO_GPU_BACKEND=host.
	GPUBackendHost GPUBackend = 2
)

// String is libtenso's name: "cuda", "host" or "none".
func (b GPUBackend) String() string { return backendName(b) }

// GPUPath says how a packet reached the device.
type GPUPath uint32

const (
	GPUPathNone      GPUPath = 0 // not read from a packet (NewDeviceTensor, Upload, FromDLPack)
	GPUPathStaged    GPUPath = 1 // source -> pinned staging -> device, overlapped
	GPUPathGDS       GPUPath = 2 // cuFile: NVMe -> device DMA
	GPUPathGDSCompat GPUPath = 3 // cuFile in compatibility mode (it stages internally)
	GPUPathIPC       GPUPath = 4 // an IPC reference opened; nothing copied
)

// GPUDeviceInfo is a device's properties ([GPUDevice]).
type GPUDeviceInfo struct {
	Device          int
	Name            string
	UUID            [16]byte // the device UUID (the host backend: one per process)
	TotalMemory     uint64
	ComputeMajor    int
	ComputeMinor    int
	Multiprocessors int
	PCIDomain       int
	PCIBus          int
	PCIDevice       int
	Backend         GPUBackend
	GDS             bool // GPUDirect Storage (cuFile) can reach the device
	IPC             bool // CUDA IPC handles can be exported from the device
}

// GPUPoolStats are the pinned staging pool's counters ([GPUPool]).
type GPUPoolStats struct {
	Buffers    uint64 // pinned buffers held now
	Bytes      uint64 // their total size
	Hits       uint64 // requests served by a kept buffer
	Misses     uint64 // requests that pinned a new one
	LimitBytes uint64 // the most bytes kept
}

// GPUOptions are the options of the packet <-> device calls; the zero value is device 0,
// tenso's own stream (synchronized before each call returns), 8 MiB chunks, double buffering,
// GPUDirect Storage where possible, default limits, quantized packets refused.
type GPUOptions struct {
	Device         int    // the target device ordinal
	DequantizeTo   DType  // Float32, Float16 or BFloat16: dequantize quantized packets on the device; 0 refuses them
	NoGDS          bool   // never use GPUDirect Storage for files
	ChunkBytes     uint64 // staging chunk; 0: 8 MiB
	StagingBuffers uint32 // chunks in flight; 0: 2
	// Stream is a cudaStream_t of the caller's (or one from NewGPUStream) as an address: the
	// calls then return before the copies finish and the caller synchronizes it. 0: tenso's own.
	Stream uintptr
	Decode DecodeOptions // limits for the packet
}
