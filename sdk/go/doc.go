// Package tenso reads and writes Tenso packets (the zero-copy tensor wire format v4 of the
// PyPI package tenso 0.24) through libtenso's stable C ABI.
//
// It is a thin cgo layer: every byte of the wire format is produced and checked by libtenso;
// this package moves slices across the boundary and turns statuses into Go errors. It needs
// cgo and an installed libtenso found by pkg-config (see README.md); built with
// CGO_ENABLED=0 every function returns an error wrapping [ErrNotAvailable].
//
// # Reading
//
// [Loads] decodes a packet held in memory without copying it: the returned [Tensor]'s Data
// (and the Data of every bundle entry, sparse component, string payload...) is a sub-slice of
// the input. The lifetime rule is Go's own: the input stays alive as long as any Tensor
// refers to it, but it must not be modified while the Tensor is in use (the checks libtenso
// made, such as the integrity footer, would no longer hold). libtenso keeps no pointer into
// the input after Loads returns: metadata (shape, keys, quantization scales, string offsets)
// is copied into Go values, and a body that libtenso had to produce itself (an LZ4 body it
// decompressed) is copied into Go memory. A Tensor from Loads therefore owns no C memory;
// its Close does nothing.
//
// [ReadFrom] reads exactly one packet from any io.Reader: Go moves the bytes (r.Read, so
// deadlines, Close and [ReadFromContext] interrupt every wait) and libtenso's stream decoder
// frames and checks them, receiving the packet straight into one Go buffer that the Tensor
// slices. [LoadFile] loads a file's first packet into Go memory too. [Archive.Get],
// [Shm.Get] and [Cache.Get] copy the bodies out of their mapping ([Shm.Bytes] copies the
// segment). All of these return Tensors the garbage collector owns: keep them, or any slice
// of them, as long as you like; Close does nothing.
//
// # Zero-copy views of mappings (aliased Tensors)
//
// [LoadFileAliased], [Archive.GetAliased], [Archive.GetByNameAliased], [Shm.GetAliased] and
// [Cache.GetAliased] (a [CacheView]) return Tensors whose Data points into C memory: a file or
// segment mapping, or a pinned cache entry ([Shm.BytesAliased] is the segment itself, valid
// while the Shm is open and reachable). Close releases it (a cleanup does if Close is
// forgotten and the Tensor becomes unreachable); the slices do not keep it alive. So, for
// callers who manage that lifetime: defer t.Close(), and runtime.KeepAlive(t) after the last
// use of a slice. Close empties the Data of every Tensor of the packet, and [Values] copies
// from aliased Tensors (its result is always Go memory) and returns an error matching
// os.ErrClosed once they are closed; [ValuesAliased] is the zero-copy accessor.
//
// Bundle entries are rarely aligned for their element type on the wire; Values and
// ValuesAliased copy those silently (alignment is not a lifetime question).
//
// # Finding libtenso at run time
//
// pkg-config supplies the compiler and linker flags at build time; at run time the dynamic
// loader must find libtenso.so too. For a library outside the default path, embed its
// directory in the binary (the Go equivalent of an rpath):
//
//	export CGO_LDFLAGS="-Wl,-rpath,$(pkg-config --variable=libdir tenso)"
//	go build ./...
//
// or set LD_LIBRARY_PATH when running. sdk/go/run-tests.sh builds and runs a consumer this
// way, with LD_LIBRARY_PATH unset.
//
// # Writing
//
// [Dumps], [DumpsInto], [DumpTo] and [SaveFile] encode a [Tensor]: a dense tensor (see
// [NewTensor], [FromSlice]), a bundle (ordered [Entry] values, see [NewBundle]) or one of the
// composite kinds ([NewSparse], [Quantize], [NewStrings], [NewRagged], [NewIPCRef]). A decoded
// Tensor can be written again as it is. Go memory passed to libtenso is pinned
// (runtime.Pinner) while libtenso holds it and never retained afterwards.
//
// # Shared memory and archives
//
// [Shm] holds one packet in a named POSIX shared-memory segment (the layout of upstream's
// TensoShm). [Cache] is a tensor cache shared by every process on the host that opens the same
// name: LRU eviction, time to live, and zero-copy reads ([Cache.GetAliased], a [CacheView])
// that pin their entry until closed. [Archive] reads tenso archives, safetensors and bintensors files by mapping
// them (O(1) lookup by name, zero-copy Gets, pread slices, hash verification);
// [ArchiveWriter] streams them to disk and renames them into place atomically.
//
// # Errors
//
// Failures are [*Error] values carrying the status, the operation and libtenso's message;
// compare them with errors.Is against the [Status] constants ErrTruncated, ErrChecksum,
// ErrNotFound, ErrExists, ErrFull, ...
// End of stream is ErrEndOfStream and also matches io.EOF.
//
// # Threads
//
// Functions are safe for concurrent use. A Tensor may be read by many goroutines; Close must
// not race with other uses of the same Tensor.
package tenso
