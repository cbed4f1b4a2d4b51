//go:build !cgo

package tenso

import (
	"context"
	"io"
	"os"
	"time"
)

// Built without cgo (CGO_ENABLED=0, or cross-compiling without a C toolchain): libtenso
// cannot be called, so every function answers this error. The types, constants and pure-Go
// helpers (FromSlice, Values, NewBundle, ...) still work.
var errNoCgo = &Error{Status: ErrNotAvailable, Op: "tenso",
	Message: "the tenso Go package was built without cgo (CGO_ENABLED=0); it needs cgo and libtenso (pkg-config tenso)"}

var versionErr error = errNoCgo

// LibraryVersion is "" without cgo.
func LibraryVersion() string { return "" }

// LibraryPath is "" without cgo.
func LibraryPath() string { return "" }

// CheckVersion returns the error every function returns without cgo.
func CheckVersion() error { return errNoCgo }

func Loads(data []byte) (*Tensor, error)                                { return nil, errNoCgo }
func LoadFile(path string, mode LoadMode) (*Tensor, error)              { return nil, errNoCgo }
func Dumps(t *Tensor) ([]byte, error)                                   { return nil, errNoCgo }
func DumpsInto(dst []byte, t *Tensor) (int, error)                      { return 0, errNoCgo }
func DumpsBound(t *Tensor) (int, error)                                 { return 0, errNoCgo }
func SaveFile(path string, t *Tensor) error                             { return errNoCgo }
func DumpTo(w io.Writer, t *Tensor) (int64, error)                      { return 0, errNoCgo }
func ReadFrom(r io.Reader) (*Tensor, error)                             { return nil, errNoCgo }
func ReadFromContext(ctx context.Context, r io.Reader) (*Tensor, error) { return nil, errNoCgo }
func (o DecodeOptions) ReadPacketContext(ctx context.Context, r io.Reader) (*Tensor, error) {
	return nil, errNoCgo
}
func Inspect(data []byte) (PacketInfo, error)                      { return PacketInfo{}, errNoCgo }
func PacketLength(data []byte) (int, error)                        { return 0, errNoCgo }
func NewRagged(flat *Tensor, rowOffsets []uint64) (*Tensor, error) { return nil, errNoCgo }
func NewStrings(ss []string) (*Tensor, error)                      { return nil, errNoCgo }
func NewSparse(kind Kind, rows, cols uint64, data, indices, third *Tensor) (*Tensor, error) {
	return nil, errNoCgo
}
func NewQuantized(dtype DType, shape []uint64, packed []byte, q Quantization) (*Tensor, error) {
	return nil, errNoCgo
}
func Quantize(input *Tensor, qdtype DType, scheme QuantScheme, axis int, groupSize int) (*Tensor, error) {
	return nil, errNoCgo
}

func (o QuantizeOptions) Quantize(input *Tensor) (*Tensor, error) { return nil, errNoCgo }
func (t *Tensor) Dequantize() ([]float32, error)                  { return nil, errNoCgo }

func (o DecodeOptions) Loads(data []byte) (*Tensor, error)                   { return nil, errNoCgo }
func (o DecodeOptions) LoadFile(path string, mode LoadMode) (*Tensor, error) { return nil, errNoCgo }
func (o DecodeOptions) LoadFileAliased(path string) (*Tensor, error)         { return nil, errNoCgo }
func LoadFileAliased(path string) (*Tensor, error)                           { return nil, errNoCgo }
func (o DecodeOptions) ReadPacket(r io.Reader) (*Tensor, error)              { return nil, errNoCgo }
func (o EncodeOptions) Dumps(t *Tensor) ([]byte, error)                      { return nil, errNoCgo }
func (o EncodeOptions) DumpsInto(dst []byte, t *Tensor) (int, error)         { return 0, errNoCgo }
func (o EncodeOptions) DumpsBound(t *Tensor) (int, error)                    { return 0, errNoCgo }
func (o EncodeOptions) SaveFile(path string, t *Tensor) error                { return errNoCgo }
func (o EncodeOptions) DumpTo(w io.Writer, t *Tensor) (int64, error)         { return 0, errNoCgo }

// Shared memory and archives (libtenso 1.1): the same API, every call answering errNoCgo.

// Shm is a shared-memory segment (cgo only).
type Shm struct{}

// Cache is a shared-memory tensor cache (cgo only).
type Cache struct{}

// CacheView is a pinned cache entry (cgo only).
type CacheView struct{ *Tensor }

// Archive is an open archive file (cgo only).
type Archive struct{}

// ArchiveWriter writes an archive file (cgo only).
type ArchiveWriter struct{}

func CreateShm(name string, size uint64, replace bool) (*Shm, error) { return nil, errNoCgo }
func CreateShmFor(name string, t *Tensor, replace bool) (*Shm, uint64, error) {
	return nil, 0, errNoCgo
}
func OpenShm(name string, writable bool) (*Shm, error)        { return nil, errNoCgo }
func OpenShmWith(name string, o ShmOpenOptions) (*Shm, error) { return nil, errNoCgo }
func UnlinkShm(name string) error                             { return errNoCgo }
func (o EncodeOptions) CreateShm(name string, t *Tensor, replace bool) (*Shm, uint64, error) {
	return nil, 0, errNoCgo
}
func (s *Shm) Put(t *Tensor, o EncodeOptions) (uint64, error) { return 0, errNoCgo }
func (s *Shm) Get(o DecodeOptions) (*Tensor, error)           { return nil, errNoCgo }
func (s *Shm) GetAliased(o DecodeOptions) (*Tensor, error)    { return nil, errNoCgo }
func (s *Shm) Bytes() []byte                                  { return nil }
func (s *Shm) BytesAliased() []byte                           { return nil }
func (s *Shm) Size() uint64                                   { return 0 }
func (s *Shm) Name() string                                   { return "" }
func (s *Shm) Writable() bool                                 { return false }
func (s *Shm) Close() error                                   { return nil }

func CreateCache(name string, o CacheOptions) (*Cache, error) { return nil, errNoCgo }
func OpenCache(name string, o CacheOptions) (*Cache, error)   { return nil, errNoCgo }
func UnlinkCache(name string) error                           { return errNoCgo }
func (c *Cache) Name() string                                 { return "" }
func (c *Cache) Put(key string, t *Tensor, ttl time.Duration, o EncodeOptions) (uint64, error) {
	return 0, errNoCgo
}
func (c *Cache) Get(key string, o DecodeOptions) (*Tensor, error) { return nil, errNoCgo }
func (c *Cache) GetAliased(key string, o DecodeOptions) (*CacheView, error) {
	return nil, errNoCgo
}
func (c *Cache) Delete(key string) error                 { return errNoCgo }
func (c *Cache) Info(key string) (CacheEntryInfo, error) { return CacheEntryInfo{}, errNoCgo }
func (c *Cache) Contains(key string) (bool, error)       { return false, errNoCgo }
func (c *Cache) Keys() ([]string, error)                 { return nil, errNoCgo }
func (c *Cache) Clear() error                            { return errNoCgo }
func (c *Cache) Stats() (CacheStats, error)              { return CacheStats{}, errNoCgo }
func (c *Cache) Check() error                            { return errNoCgo }
func (c *Cache) Close() error                            { return nil }

func OpenArchive(path string) (*Archive, error)                               { return nil, errNoCgo }
func (o ArchiveOptions) Open(path string) (*Archive, error)                   { return nil, errNoCgo }
func (a *Archive) Format() Format                                             { return FormatAuto }
func (a *Archive) Len() int                                                   { return 0 }
func (a *Archive) Entry(i int) (ArchiveEntry, error)                          { return ArchiveEntry{}, errNoCgo }
func (a *Archive) Entries() ([]ArchiveEntry, error)                           { return nil, errNoCgo }
func (a *Archive) Find(name string) (int, error)                              { return 0, errNoCgo }
func (a *Archive) Get(i int, o ...DecodeOptions) (*Tensor, error)             { return nil, errNoCgo }
func (a *Archive) GetAliased(i int, o ...DecodeOptions) (*Tensor, error)      { return nil, errNoCgo }
func (a *Archive) GetByName(name string, o ...DecodeOptions) (*Tensor, error) { return nil, errNoCgo }
func (a *Archive) GetByNameAliased(name string, o ...DecodeOptions) (*Tensor, error) {
	return nil, errNoCgo
}
func (a *Archive) TensorReader(i int) (*io.SectionReader, error)              { return nil, errNoCgo }
func (a *Archive) ReadAt(i int, off uint64, dst []byte) error                 { return errNoCgo }
func (a *Archive) Metadata() ([]MetadataPair, error)                          { return nil, errNoCgo }
func (a *Archive) MetadataValue(key string) (string, bool)                    { return "", false }
func (a *Archive) Verify(progress func(done, total uint64) bool) (int, error) { return -1, errNoCgo }
func (a *Archive) Close() error                                               { return nil }

func CreateArchive(path string) (*ArchiveWriter, error)                  { return nil, errNoCgo }
func (o ArchiveWriteOptions) Create(path string) (*ArchiveWriter, error) { return nil, errNoCgo }
func (w *ArchiveWriter) Add(name string, t *Tensor) error                { return errNoCgo }
func (w *ArchiveWriter) SetMetadata(key, value string) error             { return errNoCgo }
func (w *ArchiveWriter) Finish() error                                   { return errNoCgo }
func (w *ArchiveWriter) Close() error                                    { return nil }

// Without libtenso there are no dtype facts: names are "unknown", sizes 0.
func dtypeName(d DType) string  { return "unknown" }
func dtypeItemSize(d DType) int { return 0 }
func kindName(k Kind) string    { return "unknown" }
func dtypeFromName(name string) (DType, error) {
	return 0, &Error{Status: ErrNotAvailable, Op: "ParseDType", Message: "built without cgo", Err: ErrBadDType}
}

// DeviceTensor is device memory (cgo only).
type DeviceTensor struct {
	DType  DType
	Shape  []uint64
	Device int
	Path   GPUPath
}

// DeviceValue is a packet on the device (cgo only).
type DeviceValue struct {
	Tensor  *DeviceTensor
	Entries []DeviceEntry
	Path    GPUPath
}

// DeviceEntry is a named bundle member on the device (cgo only).
type DeviceEntry struct {
	Key   string
	Value *DeviceValue
}

// GPUStream is a device stream (cgo only).
type GPUStream struct{}

func SelectGPUBackend(b GPUBackend) error         { return errNoCgo }
func GPUBackendInUse() GPUBackend                 { return GPUBackendNone }
func GPUAvailable() error                         { return errNoCgo }
func GPUDeviceCount() (int, error)                { return 0, errNoCgo }
func GPUDevice(device int) (GPUDeviceInfo, error) { return GPUDeviceInfo{}, errNoCgo }
func GPUPool() (GPUPoolStats, error)              { return GPUPoolStats{}, errNoCgo }
func SetGPUPoolLimit(limitBytes uint64) error     { return errNoCgo }
func NewGPUStream(device int) (*GPUStream, error) { return nil, errNoCgo }
func (s *GPUStream) Handle() uintptr              { return 0 }
func (s *GPUStream) Synchronize() error           { return errNoCgo }
func (s *GPUStream) Close() error                 { return nil }
func NewDeviceTensor(device int, dtype DType, shape []uint64) (*DeviceTensor, error) {
	return nil, errNoCgo
}
func Upload(t *Tensor, device int) (*DeviceTensor, error) { return nil, errNoCgo }
func WrapDevicePointer(ptr uintptr, device int, dtype DType, shape []uint64) (*DeviceTensor, error) {
	return nil, errNoCgo
}
func FromDLPack(managed uintptr) (*DeviceTensor, error) { return nil, errNoCgo }
func IPCOpen(refPacket []byte, dtype DType, shape []uint64) (*DeviceTensor, error) {
	return nil, errNoCgo
}
func (d *DeviceTensor) NBytes() uint64                                          { return 0 }
func (d *DeviceTensor) DataPtr() uintptr                                        { return 0 }
func (d *DeviceTensor) Upload(src []byte) error                                 { return errNoCgo }
func (d *DeviceTensor) DownloadInto(dst []byte) error                           { return errNoCgo }
func (d *DeviceTensor) Download() (*Tensor, error)                              { return nil, errNoCgo }
func (d *DeviceTensor) Dumps(o EncodeOptions) ([]byte, error)                   { return nil, errNoCgo }
func (d *DeviceTensor) WritePacket(f *os.File, o EncodeOptions) (uint64, error) { return 0, errNoCgo }
func (d *DeviceTensor) IPCExport() ([]byte, error)                              { return nil, errNoCgo }
func (d *DeviceTensor) ToDLPack() (uintptr, error)                              { return 0, errNoCgo }
func (d *DeviceTensor) Close() error                                            { return nil }
func (v *DeviceValue) Get(key string) *DeviceValue                              { return nil }
func (v *DeviceValue) Close() error                                             { return nil }
func GPULoads(packet []byte) (*DeviceValue, error)                              { return nil, errNoCgo }
func (o GPUOptions) Loads(packet []byte) (*DeviceValue, error)                  { return nil, errNoCgo }
func (o GPUOptions) ReadPacket(f *os.File) (*DeviceValue, error)                { return nil, errNoCgo }
func (o GPUOptions) LoadFile(path string) (*DeviceValue, error)                 { return nil, errNoCgo }
func (o GPUOptions) LoadsInto(ptr uintptr, capacity uint64, packet []byte) (uint64, error) {
	return 0, errNoCgo
}
func (o GPUOptions) Dequantize(packet []byte, out DType) (*DeviceTensor, error) { return nil, errNoCgo }

// Nodes (libtenso 1.4): the same API, every call answering errNoCgo.

// Node is a libtenso node (cgo only).
type Node struct{}

func NewNode(o NodeOptions) (*Node, error)                                        { return nil, errNoCgo }
func (n *Node) Shutdown()                                                         {}
func (n *Node) SetAccess(fn AccessFunc) error                                     { return errNoCgo }
func (n *Node) Close() error                                                      { return nil }
func (n *Node) Addrs() ([]string, error)                                          { return nil, errNoCgo }
func (n *Node) Addr() (string, error)                                             { return "", errNoCgo }
func (n *Node) ID() (string, error)                                               { return "", errNoCgo }
func (n *Node) Send(ctx context.Context, addr, name string, t *Tensor) error      { return errNoCgo }
func (n *Node) SendPacket(ctx context.Context, addr, name string, p []byte) error { return errNoCgo }
func (n *Node) Receive(ctx context.Context) (*Message, error)                     { return nil, errNoCgo }
func (n *Node) Publish(name string, t *Tensor) error                              { return errNoCgo }
func (n *Node) Post(ctx context.Context, addr, name string, t *Tensor) error      { return errNoCgo }
func (n *Node) Flush(ctx context.Context, addr string) error                      { return errNoCgo }
func (n *Node) Unpublish(name string) error                                       { return errNoCgo }
func (n *Node) Request(ctx context.Context, addr, name string) (*Tensor, error)   { return nil, errNoCgo }
func (n *Node) Stats() (NodeStats, error)                                         { return NodeStats{}, errNoCgo }
func (n *Node) PoolSize() (int, error)                                            { return 0, errNoCgo }
