package tenso

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// DType is a dtype code as stored in the packet header (tenso.h TENSO_DTYPE_*).
type DType int32

// Dtype codes. Bool is one byte per element (0 or 1); Complex64 is interleaved float32
// (re, im); BFloat16 is the upper half of a float32. QInt8 to QUInt4 only occur in quantized
// tensors, String in string tensors.
const (
	Float32    DType = 1
	Int32      DType = 2
	Float64    DType = 3
	Int64      DType = 4
	Uint8      DType = 5
	Uint16     DType = 6
	Bool       DType = 7
	Float16    DType = 8
	Int8       DType = 9
	Int16      DType = 10
	Uint32     DType = 11
	Uint64     DType = 12
	Complex64  DType = 13
	Complex128 DType = 14
	BFloat16   DType = 15
	QInt8      DType = 16
	QUInt8     DType = 17
	QInt4      DType = 18
	QUInt4     DType = 19
	String     DType = 20
	Bytes      DType = 21
)

// String returns the numpy name ("float32", "bfloat16", "qint4"), or "unknown": libtenso's
// tenso_dtype_name, so a dtype the library adds needs no change here.
func (d DType) String() string { return dtypeName(d) }

// ItemSize is the number of bytes per element of a dense dtype; 0 for the others
// (tenso_dtype_itemsize).
func (d DType) ItemSize() int { return dtypeItemSize(d) }

// Kind is the kind of packet the dtype travels in: KindDense for dense dtypes, KindQuantized
// for QInt8 to QUInt4, KindString for String and Bytes; 0 for unknown codes
// (tenso_dtype_kind).
func (d DType) Kind() Kind { return dtypeKind(d) }

// Bits is the number of bits per element as stored: 8 x ItemSize for dense dtypes, 8 or 4 for
// the quantized ones (4-bit elements pack two to a byte); 0 for String, Bytes and unknown
// codes (tenso_dtype_bits).
func (d DType) Bits() int { return dtypeBits(d) }

// ParseDType returns the dtype with the given numpy name (the inverse of DType.String;
// tenso_dtype_from_name). Unknown names give an error wrapping ErrBadDType.
func ParseDType(name string) (DType, error) { return dtypeFromName(name) }

// Kind is what a packet holds (tenso.h TENSO_KIND_*).
type Kind int32

// Packet kinds. KindRagged is the direct ragged framing that no writer produces (ragged
// arrays are normally bundles, see [NewRagged]).
const (
	KindDense     Kind = 1
	KindBundle    Kind = 2
	KindSparseCOO Kind = 3
	KindSparseCSR Kind = 4
	KindSparseCSC Kind = 5
	KindQuantized Kind = 6
	KindString    Kind = 7
	KindRagged    Kind = 8
	KindGPUIPCRef Kind = 9
)

// String is the kind's name from libtenso ("dense", "bundle", ...; tenso_kind_name), or
// "Kind(N)" for a code it does not know.
func (k Kind) String() string {
	if name := kindName(k); name != "unknown" {
		return name
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

// Header flag bits (Tensor.Flags, PacketInfo.Flags), as on the wire.
const (
	FlagAligned     uint32 = 0x0001
	FlagIntegrity   uint32 = 0x0002
	FlagCompression uint32 = 0x0004
	FlagSparseCOO   uint32 = 0x0008
	FlagBundle      uint32 = 0x0010
	FlagSparseCSR   uint32 = 0x0020
	FlagSparseCSC   uint32 = 0x0040
	FlagCustAlign   uint32 = 0x0080
	FlagString      uint32 = 0x0100
	FlagRagged      uint32 = 0x0200
	FlagGPUIPCRef   uint32 = 0x0400
)

// Protocol limits (tenso.h).
const (
	MaxNDim          = 32
	MaxElements      = 1_000_000_000
	MaxDepth         = 64
	MaxBundleEntries = 255
	DefaultAlignment = 64
	MaxAlignment     = 1 << 20
	MaxCacheKeyBytes = 128 // the longest cache key, in bytes
	ProtocolVersion  = 4   // the wire version libtenso writes (it reads 1 to 4)
)

const (
	ipcHandleLen      = 64
	ipcDeviceUUIDLen  = 16
	statusNamePrefix  = "TENSO_E_"
	statusUnknownName = "TENSO_E_UNKNOWN"
)

// Status is a libtenso status code (tenso/errors.h). The failure codes are exported as the
// sentinel errors Err*; a returned error is an [*Error] that wraps one of them, so
// errors.Is(err, tenso.ErrChecksum) works. The values are pinned by the ABI.
type Status int32

// Status codes; each failure code is also an error value (the sentinel of its status).
const (
	OK                    Status = 0
	ErrInvalidArgument    Status = -1
	ErrBufferTooSmall     Status = -2
	ErrTruncated          Status = -3
	ErrBadMagic           Status = -4
	ErrUnsupportedVersion Status = -5
	ErrBadDType           Status = -6
	ErrTooManyDims        Status = -7
	ErrTooManyElements    Status = -8
	ErrChecksum           Status = -9
	ErrCompression        Status = -10
	ErrBadBundle          Status = -11
	ErrMalformed          Status = -12
	ErrLimit              Status = -13
	ErrUnsupportedKind    Status = -14
	ErrNoMemory           Status = -15
	ErrIO                 Status = -16
	ErrEndOfStream        Status = -17
	ErrNotAvailable       Status = -18
	ErrUser               Status = -19
	ErrInternal           Status = -20
	ErrNotFound           Status = -21 // no such key, tensor name or segment (or it expired); 1.1
	ErrExists             Status = -22 // the segment or file to be created exists; 1.1
	ErrFull               Status = -23 // a cache with no room after expiry and eviction; 1.1
	ErrCorrupt            Status = -24 // a pool or file whose own structure is invalid; 1.1
	ErrTimeout            Status = -25 // a lock was not obtained in time; 1.1
	ErrBadOffset          Status = -26 // a byte range outside the file, overlapping, misaligned; 1.1
	ErrDuplicateKey       Status = -27 // a name that occurs twice where names must be unique; 1.1
	ErrBadUTF8            Status = -28 // a name, key or metadata string that is not UTF-8; 1.1
	ErrGPUUnavailable     Status = -29 // no CUDA runtime, driver or device; 1.4
	ErrGPU                Status = -30 // a CUDA call failed on a present device; 1.4
	ErrShutdown           Status = -31 // the node was shut down; 1.4
	ErrConnection         Status = -32 // a peer unreachable, refused, reset or gone mid-transfer; 1.4
	ErrAuth               Status = -33 // a peer failed TLS authentication; 1.4
	ErrBadAddress         Status = -34 // an address or ticket that cannot be parsed or resolved; 1.4
	ErrCancelled          Status = -35 // the call was cancelled (its context); 1.4
)

// statusNames mirror tenso_status_name (checked by a test), indexed by -status.
var statusNames = [...]string{
	"TENSO_OK", "TENSO_E_INVALID_ARGUMENT", "TENSO_E_BUFFER_TOO_SMALL", "TENSO_E_TRUNCATED",
	"TENSO_E_BAD_MAGIC", "TENSO_E_UNSUPPORTED_VERSION", "TENSO_E_BAD_DTYPE",
	"TENSO_E_TOO_MANY_DIMS", "TENSO_E_TOO_MANY_ELEMENTS", "TENSO_E_CHECKSUM",
	"TENSO_E_COMPRESSION", "TENSO_E_BAD_BUNDLE", "TENSO_E_MALFORMED", "TENSO_E_LIMIT",
	"TENSO_E_UNSUPPORTED_KIND", "TENSO_E_NO_MEMORY", "TENSO_E_IO", "TENSO_E_END_OF_STREAM",
	"TENSO_E_NOT_AVAILABLE", "TENSO_E_USER", "TENSO_E_INTERNAL", "TENSO_E_NOT_FOUND",
	"TENSO_E_EXISTS", "TENSO_E_FULL", "TENSO_E_CORRUPT", "TENSO_E_TIMEOUT", "TENSO_E_BAD_OFFSET",
	"TENSO_E_DUPLICATE_KEY", "TENSO_E_BAD_UTF8", "TENSO_E_GPU_UNAVAILABLE", "TENSO_E_GPU",
	"TENSO_E_SHUTDOWN", "TENSO_E_CONNECTION", "TENSO_E_AUTH", "TENSO_E_BAD_ADDRESS", "TENSO_E_CANCELLED",
}

// Name is the symbolic name, as tenso_status_name gives it ("TENSO_E_CHECKSUM").
func (s Status) Name() string {
	if s <= 0 && int(-s) < len(statusNames) {
		return statusNames[-s]
	}
	return statusUnknownName
}

// Error makes every status usable as a sentinel error.
func (s Status) Error() string {
	return "tenso: " + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.Name(), statusNamePrefix), "_", " "))
}

// Error is a failed libtenso call: the status, the Go function that failed and libtenso's
// thread-local message, captured in the same cgo call as the failure.
type Error struct {
	Status  Status
	Op      string // the Go function, e.g. "Loads", "ReadFrom"
	Message string // tenso_last_error() or the Go-side reason
	Err     error  // an underlying Go error (an io.Writer's, io.EOF at end of stream), or nil
}

// Error formats the failure as "tenso: Op: message (TENSO_E_NAME)", for the error interface.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		return fmt.Sprintf("tenso: %s: %s", e.Op, e.Status.Name())
	}
	return fmt.Sprintf("tenso: %s: %s (%s)", e.Op, msg, e.Status.Name())
}

// Unwrap exposes the status (for errors.Is against the Err* sentinels) and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Status, e.Err}
	}
	return []error{e.Status}
}

// errClosed is the error of a call on a closed handle: ErrInvalidArgument (as before 1.3)
// that also matches os.ErrClosed.
func errClosed(op, what string) error {
	return &Error{Status: ErrInvalidArgument, Op: op, Message: what + " is closed", Err: os.ErrClosed}
}

// EncodeOptions say how to encode. The zero value is upstream's default: alignment 64, no
// integrity footer, no compression.
type EncodeOptions struct {
	Integrity        bool   // append an XXH3-64 footer to every body
	Compress         bool   // LZ4-frame-compress dense bodies (other kinds ignore it)
	Alignment        uint32 // body alignment, a power of two up to MaxAlignment; 0 means 64
	CompressionLevel int32  // LZ4 level; 0 is the fast default
	// Threads compress LZ4 blocks (4 MiB, independent) on this many threads; 0: every core,
	// 1: the calling thread only. The packet's bytes do not depend on it. Since 1.4.
	Threads uint32
	// AsDecoded writes every tensor that was decoded (from Loads, ReadFrom, LoadFile) with
	// the integrity, compression and alignment it was read with, each bundle entry on its
	// own, so a packet read and written again keeps its bytes (a relay). The fields above
	// then only apply to tensors built in Go.
	AsDecoded bool
}

// DecodeOptions are limits and switches for decoding. The zero value means the protocol's
// own limits (32 dims, 1e9 elements per tensor, nesting depth 64); limits can only be made
// tighter.
type DecodeOptions struct {
	SkipChecksum   bool   // do not verify integrity footers (they are still framed)
	ValidateUTF8   bool   // check that string payloads are UTF-8
	MaxNDim        uint32 // 0: 32
	MaxDepth       uint32 // bundle and sparse nesting; 0: 64
	MaxElements    uint64 // per tensor; 0: 1e9
	MaxPacketBytes uint64 // whole packet, also bounds stream allocations and (unless MaxDecodedBytes is set) decompressed bytes; 0: no limit
	// MaxDecodedBytes bounds all one decode allocates: the decoded tree, copied offsets and
	// scales, decompressed bodies (see tenso_decode_options in tenso.h), and what stream
	// readers buffer; 0: no limit.
	MaxDecodedBytes uint64
	MaxEntries      uint64 // packets in one tree (the top one, bundle values, sparse components); 0: no limit
	// Threads decompress LZ4 blocks on this many threads; 0: every core, 1: the calling
	// thread only. Since 1.4.
	Threads uint32
	// MaxInflation bounds what LZ4 bodies decompress to, in all, as a multiple of the packet's
	// bytes (counted as at least 4 MiB): a packet of N bytes then costs at most
	// max(N, 4 MiB) x MaxInflation in bodies whatever its header claims; 0: no such bound.
	// Since 1.5.
	MaxInflation uint32
}

// LoadMode selects how LoadFile reads a file.
type LoadMode uint32

const (
	// LoadRead reads the packet into a buffer owned by the Tensor.
	LoadRead LoadMode = 0
	// LoadMmap maps the file read-only: O(1) in the file size without integrity checking.
	// The file must not be truncated while mapped (the process would get SIGBUS).
	LoadMmap LoadMode = 1
)

// QuantScheme is how quantization parameters are shared (TENSO_QUANT_*).
type QuantScheme int32

// Quantization schemes.
const (
	PerTensor  QuantScheme = 0
	PerChannel QuantScheme = 1
	PerGroup   QuantScheme = 2
)

// Quantization holds the parameters of a quantized tensor. Element i is dequantized as
// (q_i - ZeroPoints[k]) * Scales[k], where k is 0 (per tensor), the index along Axis (per
// channel) or i / GroupSize over the C-order elements (per group).
type Quantization struct {
	Scheme     QuantScheme
	Axis       int32  // per channel: 0 <= Axis < ndim
	GroupSize  uint32 // per group: > 0
	Scales     []float32
	ZeroPoints []float32
}

// IPCRef is a GPU IPC reference: where another process finds device memory.
type IPCRef struct {
	Handle     [ipcHandleLen]byte // opaque, e.g. a cudaIpcMemHandle_t
	ByteOffset uint64
	NBytes     uint64
	DeviceUUID [ipcDeviceUUIDLen]byte
}

// Entry is one key -> value pair of a bundle, in wire order. Keys are UTF-8 and may repeat.
type Entry struct {
	Key   string
	Value *Tensor
}

// PacketInfo is what a packet's header says, read without touching the body ([Inspect]).
type PacketInfo struct {
	Version    uint32
	Flags      uint32
	Kind       Kind
	DType      DType
	Shape      []uint64
	EntryCount uint32 // bundles
	Alignment  uint32 // body alignment relative to the packet start (1 if unpadded)
	BodyOffset uint64 // 0 for containers
	BodySize   uint64 // as stored (compressed size with LZ4); 0 if unknown
	PacketSize uint64 // 0 when the bytes given are too short to tell
}

// Format is a file format of archives (tenso/archive.h TENSO_FORMAT_*).
type Format int32

// File formats. FormatAuto detects the format from the file's first bytes when reading and
// from the extension when writing (.safetensors, .bt, else a tenso archive).
const (
	FormatAuto        Format = 0
	FormatArchive     Format = 1 // a tenso archive (.tenso)
	FormatSafetensors Format = 2 // safetensors (.safetensors)
	FormatBintensors  Format = 3 // bintensors (.bt)
	FormatPacket      Format = 4 // one Tenso packet (a dense tensor, or a bundle of them); read only
)

var formatNames = [...]string{FormatArchive: "tenso", FormatSafetensors: "safetensors",
	FormatBintensors: "bintensors", FormatPacket: "packet"}

// String is libtenso's short name of the format ("tenso", "safetensors", ...); "" if unknown.
func (f Format) String() string {
	if f > 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return ""
}

// CacheOptions say how to create or attach to a [Cache]. The zero value means libtenso's
// defaults: a 256 MiB pool, one entry slot per 16 KiB, 256 clients, 16384 pins, a 10 s lock
// timeout. Only LockTimeout and AnyOwner apply to OpenCache.
type CacheOptions struct {
	Size        uint64        // pool bytes, header and tables included
	MaxEntries  uint32        // entry slots
	MaxClients  uint32        // handles attached at once
	MaxPins     uint32        // distinct (handle, entry) pins at once
	LockTimeout time.Duration // wait at most this for the pool's lock (rounded up to 1 ms)
	Replace     bool          // create: replace a leftover pool of the same name
	// AnyOwner (open): also attach to a pool owned by another uid, which is refused by default
	// (the error wraps ErrIO): every attached process can write every byte of the pool.
	AnyOwner bool
}

// ShmOpenOptions say how [OpenShmWith] opens a segment. The zero value is read-only and
// refuses a segment owned by another uid (the error wraps ErrIO): whoever can write it
// controls every byte this process reads.
type ShmOpenOptions struct {
	Writable bool // map read-write (needed by Put)
	AnyOwner bool // also open a segment owned by another uid (a peer you trust)
}

// CacheEntryInfo is what a [Cache] knows about one entry ([Cache.Info]).
type CacheEntryInfo struct {
	Packet     PacketInfo    // the stored packet's header
	AllocBytes uint64        // space reserved for it in the pool
	TTL        time.Duration // 0 when it never expires
	Age        time.Duration // since it was put
	Pins       uint32        // views holding it now, over all processes
}

// CacheStats are the counters and occupancy of a [Cache] pool.
type CacheStats struct {
	Entries       uint64 // live keys
	MaxEntries    uint64
	PoolBytes     uint64 // the whole segment
	DataBytes     uint64 // the data region
	UsedBytes     uint64 // data bytes reserved by entries (pinned leftovers included)
	FreeBytes     uint64
	Hits, Misses  uint64
	Evictions     uint64 // entries dropped to make room
	Expirations   uint64 // entries dropped because their TTL passed
	PinnedEntries uint64 // entries with at least one pin
	Recoveries    uint64 // times a lock holder died and the pool was rebuilt
	Clients       uint64 // handles attached now
}

// HitRate is Hits / (Hits + Misses), 0 before any Get.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// ArchiveOptions say how to open an [Archive]. The zero value detects the format, verifies
// each stored hash on a tensor's first Get, and caps the index at 1e8 bytes and 1e7 tensors.
type ArchiveOptions struct {
	VerifyAll     bool   // verify every stored hash while opening (O(file))
	NoVerify      bool   // never verify stored hashes
	Format        Format // FormatAuto detects it
	MaxIndexBytes uint64 // index / JSON / bincode header; 0: 1e8
	MaxTensors    uint64 // 0: 1e7
}

// ArchiveWriteOptions say how to write an archive. The zero value picks the format from the
// extension, aligns packets to 64 bytes and stores an XXH3-64 per tensor.
type ArchiveWriteOptions struct {
	Format    Format        // FormatAuto: from the extension, else FormatArchive
	Alignment uint32        // archives: packet offsets and bodies, 64 (0) or 4096
	NoHash    bool          // archives: do not store XXH3 hashes in the index
	Encode    EncodeOptions // archives: packet options (Integrity, Compress, CompressionLevel)
}

// ArchiveEntry is one tensor as an archive's index describes it.
type ArchiveEntry struct {
	Name        string
	Kind        Kind  // KindDense for safetensors and bintensors
	DType       DType // 0 for containers
	Shape       []uint64
	Offset      uint64 // absolute file offset of the stored bytes (a packet for archives)
	StoredBytes uint64 // length of the stored bytes
	NBytes      uint64 // body bytes once decoded
	DataOffset  uint64 // absolute file offset of the raw body; 0 when not stored raw
	XXH3        uint64 // the stored hash when Hashed
	Hashed      bool
}

// MetadataPair is one string metadata pair of an archive, in the order stored.
type MetadataPair struct {
	Key, Value string
}

// QuantizeOptions say how Quantize works. The zero value quantizes to QInt8 per tensor.
type QuantizeOptions struct {
	DType     DType       // QInt8 (0 means QInt8), QUInt8, QInt4 or QUInt4
	Scheme    QuantScheme // PerTensor (the zero value), PerChannel or PerGroup
	Axis      int         // PerChannel: the channel axis; negative counts from the end
	GroupSize int         // PerGroup: elements per group
}
