//go:build cgo

package tenso

/*
#cgo pkg-config: tenso
#define _GNU_SOURCE 1
#include "tgo.h"
#include <dlfcn.h>

// The path of the loaded libtenso, for the load-time version message.
static const char *tgo_library_path(void) {
	Dl_info info;
	if (dladdr((void *)&tenso_version_number, &info) && info.dli_fname) return info.dli_fname;
	return "libtenso";
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Compile-time checks that the Go constants are the header's: [1]struct{}{}[x] compiles only
// for x == 0.
var (
	_ = [1]struct{}{}[Status(C.TENSO_OK)-OK]
	_ = [1]struct{}{}[Status(C.TENSO_E_INVALID_ARGUMENT)-ErrInvalidArgument]
	_ = [1]struct{}{}[Status(C.TENSO_E_BUFFER_TOO_SMALL)-ErrBufferTooSmall]
	_ = [1]struct{}{}[Status(C.TENSO_E_TRUNCATED)-ErrTruncated]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_MAGIC)-ErrBadMagic]
	_ = [1]struct{}{}[Status(C.TENSO_E_UNSUPPORTED_VERSION)-ErrUnsupportedVersion]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_DTYPE)-ErrBadDType]
	_ = [1]struct{}{}[Status(C.TENSO_E_TOO_MANY_DIMS)-ErrTooManyDims]
	_ = [1]struct{}{}[Status(C.TENSO_E_TOO_MANY_ELEMENTS)-ErrTooManyElements]
	_ = [1]struct{}{}[Status(C.TENSO_E_CHECKSUM)-ErrChecksum]
	_ = [1]struct{}{}[Status(C.TENSO_E_COMPRESSION)-ErrCompression]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_BUNDLE)-ErrBadBundle]
	_ = [1]struct{}{}[Status(C.TENSO_E_MALFORMED)-ErrMalformed]
	_ = [1]struct{}{}[Status(C.TENSO_E_LIMIT)-ErrLimit]
	_ = [1]struct{}{}[Status(C.TENSO_E_UNSUPPORTED_KIND)-ErrUnsupportedKind]
	_ = [1]struct{}{}[Status(C.TENSO_E_NO_MEMORY)-ErrNoMemory]
	_ = [1]struct{}{}[Status(C.TENSO_E_IO)-ErrIO]
	_ = [1]struct{}{}[Status(C.TENSO_E_END_OF_STREAM)-ErrEndOfStream]
	_ = [1]struct{}{}[Status(C.TENSO_E_NOT_AVAILABLE)-ErrNotAvailable]
	_ = [1]struct{}{}[Status(C.TENSO_E_USER)-ErrUser]
	_ = [1]struct{}{}[Status(C.TENSO_E_INTERNAL)-ErrInternal]
	_ = [1]struct{}{}[Status(C.TENSO_E_NOT_FOUND)-ErrNotFound]
	_ = [1]struct{}{}[Status(C.TENSO_E_EXISTS)-ErrExists]
	_ = [1]struct{}{}[Status(C.TENSO_E_FULL)-ErrFull]
	_ = [1]struct{}{}[Status(C.TENSO_E_CORRUPT)-ErrCorrupt]
	_ = [1]struct{}{}[Status(C.TENSO_E_TIMEOUT)-ErrTimeout]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_OFFSET)-ErrBadOffset]
	_ = [1]struct{}{}[Status(C.TENSO_E_DUPLICATE_KEY)-ErrDuplicateKey]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_UTF8)-ErrBadUTF8]
	_ = [1]struct{}{}[Status(C.TENSO_E_GPU_UNAVAILABLE)-ErrGPUUnavailable]
	_ = [1]struct{}{}[Status(C.TENSO_E_GPU)-ErrGPU]
	_ = [1]struct{}{}[Status(C.TENSO_E_SHUTDOWN)-ErrShutdown]
	_ = [1]struct{}{}[Status(C.TENSO_E_CONNECTION)-ErrConnection]
	_ = [1]struct{}{}[Status(C.TENSO_E_AUTH)-ErrAuth]
	_ = [1]struct{}{}[Status(C.TENSO_E_BAD_ADDRESS)-ErrBadAddress]
	_ = [1]struct{}{}[Status(C.TENSO_E_CANCELLED)-ErrCancelled]
	_ = [1]struct{}{}[Format(C.TENSO_FORMAT_AUTO)-FormatAuto]
	_ = [1]struct{}{}[Format(C.TENSO_FORMAT_ARCHIVE)-FormatArchive]
	_ = [1]struct{}{}[Format(C.TENSO_FORMAT_SAFETENSORS)-FormatSafetensors]
	_ = [1]struct{}{}[Format(C.TENSO_FORMAT_BINTENSORS)-FormatBintensors]
	_ = [1]struct{}{}[Format(C.TENSO_FORMAT_PACKET)-FormatPacket]
	_ = [1]struct{}{}[C.TENSO_CACHE_MAX_KEY_BYTES-MaxCacheKeyBytes]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_FLOAT32)-Float32]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_INT32)-Int32]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_FLOAT64)-Float64]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_INT64)-Int64]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_UINT8)-Uint8]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_UINT16)-Uint16]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_BOOL)-Bool]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_FLOAT16)-Float16]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_INT8)-Int8]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_INT16)-Int16]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_UINT32)-Uint32]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_UINT64)-Uint64]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_COMPLEX64)-Complex64]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_COMPLEX128)-Complex128]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_BFLOAT16)-BFloat16]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_QINT8)-QInt8]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_QUINT8)-QUInt8]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_QINT4)-QInt4]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_QUINT4)-QUInt4]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_STRING)-String]
	_ = [1]struct{}{}[DType(C.TENSO_DTYPE_BYTES)-Bytes]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_DENSE)-KindDense]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_BUNDLE)-KindBundle]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_SPARSE_COO)-KindSparseCOO]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_SPARSE_CSR)-KindSparseCSR]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_SPARSE_CSC)-KindSparseCSC]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_QUANTIZED)-KindQuantized]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_STRING)-KindString]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_RAGGED)-KindRagged]
	_ = [1]struct{}{}[Kind(C.TENSO_KIND_GPU_IPC_REF)-KindGPUIPCRef]
	_ = [1]struct{}{}[C.TENSO_FLAG_ALIGNED-FlagAligned]
	_ = [1]struct{}{}[C.TENSO_FLAG_INTEGRITY-FlagIntegrity]
	_ = [1]struct{}{}[C.TENSO_FLAG_COMPRESSION-FlagCompression]
	_ = [1]struct{}{}[C.TENSO_FLAG_SPARSE_COO-FlagSparseCOO]
	_ = [1]struct{}{}[C.TENSO_FLAG_BUNDLE-FlagBundle]
	_ = [1]struct{}{}[C.TENSO_FLAG_SPARSE_CSR-FlagSparseCSR]
	_ = [1]struct{}{}[C.TENSO_FLAG_SPARSE_CSC-FlagSparseCSC]
	_ = [1]struct{}{}[C.TENSO_FLAG_CUST_ALIGN-FlagCustAlign]
	_ = [1]struct{}{}[C.TENSO_FLAG_STRING-FlagString]
	_ = [1]struct{}{}[C.TENSO_FLAG_RAGGED-FlagRagged]
	_ = [1]struct{}{}[C.TENSO_FLAG_GPU_IPC_REF-FlagGPUIPCRef]
	_ = [1]struct{}{}[C.TENSO_MAX_NDIM-MaxNDim]
	_ = [1]struct{}{}[C.TENSO_MAX_ELEMENTS-MaxElements]
	_ = [1]struct{}{}[C.TENSO_MAX_DEPTH-MaxDepth]
	_ = [1]struct{}{}[C.TENSO_MAX_BUNDLE_ENTRIES-MaxBundleEntries]
	_ = [1]struct{}{}[C.TENSO_DEFAULT_ALIGNMENT-DefaultAlignment]
	_ = [1]struct{}{}[C.TENSO_MAX_ALIGNMENT-MaxAlignment]
	_ = [1]struct{}{}[C.TENSO_PROTOCOL_VERSION-ProtocolVersion]
	_ = [1]struct{}{}[QuantScheme(C.TENSO_QUANT_PER_TENSOR)-PerTensor]
	_ = [1]struct{}{}[QuantScheme(C.TENSO_QUANT_PER_CHANNEL)-PerChannel]
	_ = [1]struct{}{}[QuantScheme(C.TENSO_QUANT_PER_GROUP)-PerGroup]
	_ = [1]struct{}{}[LoadMode(C.TENSO_LOAD_READ)-LoadRead]
	_ = [1]struct{}{}[LoadMode(C.TENSO_LOAD_MMAP)-LoadMmap]
	_ = [1]struct{}{}[unsafe.Sizeof(C.tenso_ipc_ref{}.handle)-ipcHandleLen]
	_ = [1]struct{}{}[unsafe.Sizeof(C.tenso_ipc_ref{}.device_uuid)-ipcDeviceUUIDLen]
)

// headerVersion is TENSO_VERSION_NUMBER of the headers this package was compiled with.
const headerVersion = C.TENSO_VERSION_NUMBER

// versionErr is set at load time when the loaded libtenso is not compatible with the
// headers: another major, or an older minor (which may lack functions). Every entry point
// returns it.
var versionErr = checkVersion(uint32(C.tenso_version_number()), C.GoString(C.tgo_library_path()))

func checkVersion(loaded uint32, path string) error {
	if loaded/10000 == headerVersion/10000 && loaded >= headerVersion {
		return nil
	}
	return &Error{Status: ErrNotAvailable, Op: "load",
		Message: fmt.Sprintf("%s is libtenso %d.%d.%d, but this package was built for %d.%d.%d (same major, same or newer minor needed)",
			path, loaded/10000, loaded/100%100, loaded%100, headerVersion/10000, headerVersion/100%100, headerVersion%100)}
}

// LibraryVersion is the version of the loaded libtenso ("1.5.0").
func LibraryVersion() string { return C.GoString(C.tenso_version_string()) }

// LibraryPath is the file the loaded libtenso came from.
func LibraryPath() string { return C.GoString(C.tgo_library_path()) }

// CheckVersion returns the load-time version error, if any (it is also returned by every
// function of the package).
func CheckVersion() error { return versionErr }

// fail turns a helper's result into an error, freeing the copied message. Success is decided
// by the status alone.
func fail(r C.tgo_res, op string) error {
	if r.status == 0 {
		return nil
	}
	e := &Error{Status: Status(r.status), Op: op}
	if r.msg != nil {
		e.Message = C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
	}
	return e
}

// cbytes returns the (pointer, length) to hand a byte slice to C; an empty slice is NULL.
func cbytes(b []byte) (unsafe.Pointer, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b))
}

func cshape(shape []uint64) (*C.uint64_t, C.uint32_t) {
	if len(shape) == 0 {
		return nil, 0
	}
	return (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(shape))), C.uint32_t(len(shape))
}

// cpath is path as a NUL-terminated Go byte slice (passed for the duration of one call).
func cpath(path, op string) (*C.char, []byte, error) {
	for i := 0; i < len(path); i++ {
		if path[i] == 0 {
			return nil, nil, &Error{Status: ErrInvalidArgument, Op: op, Message: "path contains a NUL byte"}
		}
	}
	b := make([]byte, len(path)+1)
	copy(b, path)
	return (*C.char)(unsafe.Pointer(&b[0])), b, nil
}

func (o DecodeOptions) c() C.tenso_decode_options {
	var d C.tenso_decode_options
	d.version = C.TENSO_DECODE_OPTIONS_VERSION
	if o.SkipChecksum {
		d.flags |= C.TENSO_DECODE_SKIP_CHECKSUM
	}
	if o.ValidateUTF8 {
		d.flags |= C.TENSO_DECODE_VALIDATE_UTF8
	}
	d.max_ndim = C.uint32_t(o.MaxNDim)
	d.max_depth = C.uint32_t(o.MaxDepth)
	d.max_elements = C.uint64_t(o.MaxElements)
	d.max_packet_bytes = C.uint64_t(o.MaxPacketBytes)
	d.max_decoded_bytes = C.uint64_t(o.MaxDecodedBytes)
	d.max_entries = C.uint64_t(o.MaxEntries)
	d.threads = C.uint32_t(o.Threads)
	d.max_inflation = C.uint32_t(o.MaxInflation)
	return d
}

func (o EncodeOptions) c() C.tenso_encode_options {
	var e C.tenso_encode_options
	e.version = C.TENSO_ENCODE_OPTIONS_VERSION
	if o.Integrity {
		e.flags |= C.TENSO_ENCODE_INTEGRITY
	}
	if o.Compress {
		e.flags |= C.TENSO_ENCODE_COMPRESS
	}
	e.alignment = C.uint32_t(o.Alignment)
	e.compression_level = C.int32_t(o.CompressionLevel)
	e.threads = C.uint32_t(o.Threads)
	return e
}

func freeView(v unsafe.Pointer) { C.tenso_view_free((*C.tenso_view)(v)) }

// Dtype facts are libtenso's (one table, in the engine).
func dtypeName(d DType) string  { return C.GoString(C.tenso_dtype_name(C.tenso_dtype(d))) }
func dtypeItemSize(d DType) int { return int(C.tenso_dtype_itemsize(C.tenso_dtype(d))) }
func kindName(k Kind) string    { return C.GoString(C.tenso_kind_name(C.tenso_kind(k))) }
func dtypeFromName(name string) (DType, error) {
	code, err := codeFromName(name, "ParseDType", "dtype", ErrBadDType, func(cn *C.char) (int32, C.tenso_status) {
		var d C.tenso_dtype
		st := C.tenso_dtype_from_name(&d, cn)
		return int32(d), st
	})
	return DType(code), err
}

// codeFromName looks a registry name up with lookup (a tenso_*_from_name call); unknown names
// give `bad`.
func codeFromName(name, op, what string, bad Status, lookup func(*C.char) (int32, C.tenso_status)) (int32, error) {
	cn, keep, err := cpath(name, op) // NUL-terminated for the call (a NUL inside is refused)
	if err == nil {
		code, st := lookup(cn)
		runtime.KeepAlive(keep)
		if st == C.TENSO_OK {
			return code, nil
		}
	}
	return 0, &Error{Status: bad, Op: op, Message: fmt.Sprintf("unknown %s name %q", what, name)}
}

// cDTypeName and friends expose the library's tables to the tests (which cannot use cgo).
func cStatusName(s Status) string   { return C.GoString(C.tenso_status_name(C.tenso_status(s))) }
func cProtocolVersion() uint32      { return uint32(C.tenso_protocol_version()) }
func cLiveViewsForTest() int64      { return liveViews.Load() }
func cVersionNumber() uint32        { return uint32(C.tenso_version_number()) }
func cFormatName(f Format) string   { return C.GoString(C.tenso_format_name(C.tenso_format(f))) }
func cHeaderVersionForTest() uint32 { return headerVersion }
