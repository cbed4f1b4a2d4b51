/**
 * @file tenso/tenso.h
 * @brief the tenso C API.
 *
 * tenso moves tensors between processes, languages, files and hosts as Tenso packets: a
 * 10-byte header, the shape, zero padding to an alignment boundary (64 by default) and the raw
 * C-contiguous little-endian body, optionally followed by an XXH3-64 integrity footer. Reading
 * a packet is a pointer into the bytes; writing one is a single copy, or none with vectored
 * I/O. The bytes are those of the Tenso protocol v4 (PyPI `tenso` 0.24); v1 to v3 are read.
 *
 * API tiers
 *   - This header and the ones it includes are the stable API: everything declared here keeps
 *     its signature and meaning for the life of soname libtenso.so.1 (see README, "ABI").
 *   - Structs the caller fills (options) start with a version field and only ever grow at the
 *     end; initialise them with the *_INIT macros or *_init() functions.
 *   - Shared memory and the multi-process cache (tenso_shm_*, tenso_cache_*) are declared in
 *     tenso/shm.h, files of many tensors (tenso_archive_*) in tenso/archive.h; this header
 *     includes both. The family tenso_gpu_* (tenso/gpu.h) moves packets to and from devices.
 *
 * Conventions
 *   - Fallible functions return tenso_status (tenso/errors.h); details of the last failure on
 *     the calling thread are in tenso_last_error(). No function throws or aborts.
 *   - Output parameters come first and are named *_out or out.
 *   - Objects the library allocates are released with the matching tenso_*_free (objects) or
 *     tenso_buffer_dispose (caller-owned struct contents); every free accepts NULL. Never pass
 *     tenso memory to free().
 *   - Decoding never reads outside (data, len). Everything read from the wire is checked
 *     against limits (tenso_decode_options) before it is used to index or allocate memory,
 *     and every field that sizes or locates something is read once: bytes that another
 *     process rewrites during a decode (shared memory) give a clean error or a view that is
 *     consistent with itself. Contents (bodies, keys, sparse indices) stay where they are and
 *     are whatever the bytes hold when they are read.
 *     What each entry point trusts and guarantees (and the residual risks: SIGBUS on
 *     truncated mappings, a shared pool's mutex) is in docs/threat-model.md.
 *   - No global initialisation is needed. Functions without a handle are thread-safe. Views are
 *     immutable and may be read from any number of threads; a tenso_value is used by one
 *     thread at a time.
 */
#ifndef TENSO_TENSO_H
#define TENSO_TENSO_H

#include "tenso/common.h"
#include "tenso/dlpack.h"
#include "tenso/errors.h"
#include "tenso/version.h"

TENSO_BEGIN_DECL

/* ============================================================================================
 * Version
 * ========================================================================================== */

/** TENSO_VERSION_NUMBER of the loaded library; compare with the header's to detect a
 *  mismatch between the headers a program was built with and the library it runs with.
 *  @since 1.0 */
TENSO_API uint32_t tenso_version_number(void);

/** TENSO_VERSION_STRING of the loaded library ("1.0.0"). Static storage. @since 1.0 */
TENSO_API const char *tenso_version_string(void);

/** The wire protocol version the library writes: 4. @since 1.0 */
TENSO_API uint32_t tenso_protocol_version(void);

/* ============================================================================================
 * Dtypes, kinds, flags and limits (wire values)
 * ========================================================================================== */

/** A dtype code as stored in the packet header. */
typedef int32_t tenso_dtype;

#define TENSO_DTYPE_FLOAT32    1  /**< float32, 4 bytes */
#define TENSO_DTYPE_INT32      2  /**< int32 */
#define TENSO_DTYPE_FLOAT64    3  /**< float64 */
#define TENSO_DTYPE_INT64      4  /**< int64 */
#define TENSO_DTYPE_UINT8      5  /**< uint8 */
#define TENSO_DTYPE_UINT16     6  /**< uint16 */
#define TENSO_DTYPE_BOOL       7  /**< bool: one byte per element, 0 or 1 */
#define TENSO_DTYPE_FLOAT16    8  /**< IEEE half precision */
#define TENSO_DTYPE_INT8       9  /**< int8 */
#define TENSO_DTYPE_INT16      10 /**< int16 */
#define TENSO_DTYPE_UINT32     11 /**< uint32 */
#define TENSO_DTYPE_UINT64     12 /**< uint64 */
#define TENSO_DTYPE_COMPLEX64  13 /**< complex64: interleaved (re, im) float32 */
#define TENSO_DTYPE_COMPLEX128 14 /**< complex128: interleaved (re, im) float64 */
#define TENSO_DTYPE_BFLOAT16   15 /**< bfloat16: the upper 16 bits of a float32 */
#define TENSO_DTYPE_QINT8      16 /**< signed 8-bit codes; quantized packets only */
#define TENSO_DTYPE_QUINT8     17 /**< unsigned 8-bit codes; quantized packets only */
#define TENSO_DTYPE_QINT4      18 /**< signed 4-bit codes, two a byte; quantized packets only */
#define TENSO_DTYPE_QUINT4     19 /**< unsigned 4-bit codes, two a byte; quantized packets only */
#define TENSO_DTYPE_STRING     20 /**< UTF-8 strings; string packets only */
#define TENSO_DTYPE_BYTES      21 /**< byte strings; defined by the protocol, written by no encoder */

/** What a packet holds. */
typedef int32_t tenso_kind;

#define TENSO_KIND_DENSE       1 /**< one C-contiguous tensor */
#define TENSO_KIND_BUNDLE      2 /**< string key -> packet, nested */
#define TENSO_KIND_SPARSE_COO  3 /**< sparse, coordinates (values, row, col) */
#define TENSO_KIND_SPARSE_CSR  4 /**< sparse, compressed rows (values, indices, indptr) */
#define TENSO_KIND_SPARSE_CSC  5 /**< sparse, compressed columns (values, indices, indptr) */
#define TENSO_KIND_QUANTIZED   6 /**< 8- or 4-bit codes with scales and zero points */
#define TENSO_KIND_STRING      7 /**< an array of strings (offsets + payload) */
#define TENSO_KIND_RAGGED      8 /**< a ragged array (a flat tensor + row offsets) */
#define TENSO_KIND_GPU_IPC_REF 9 /**< a reference to device memory of another process */

/* Header flag bits (tenso_packet_info.flags, tenso_view_flags). */
#define TENSO_FLAG_ALIGNED     0x0001u /**< the body is padded to 64 bytes */
#define TENSO_FLAG_INTEGRITY   0x0002u /**< an XXH3-64 footer follows the body */
#define TENSO_FLAG_COMPRESSION 0x0004u /**< the body is an LZ4 frame */
#define TENSO_FLAG_SPARSE_COO  0x0008u /**< a COO sparse container */
#define TENSO_FLAG_BUNDLE      0x0010u /**< a bundle container */
#define TENSO_FLAG_SPARSE_CSR  0x0020u /**< a CSR sparse container */
#define TENSO_FLAG_SPARSE_CSC  0x0040u /**< a CSC sparse container */
#define TENSO_FLAG_CUST_ALIGN  0x0080u /**< an alignment exponent byte follows the shape (not 64) */
#define TENSO_FLAG_STRING      0x0100u /**< a string packet */
#define TENSO_FLAG_RAGGED      0x0200u /**< a ragged packet */
#define TENSO_FLAG_GPU_IPC_REF 0x0400u /**< a GPU IPC reference packet */

#define TENSO_MAX_NDIM           32            /**< the most dimensions a tensor may have */
#define TENSO_MAX_ELEMENTS       1000000000ULL /**< the most elements a tensor may have */
#define TENSO_MAX_DEPTH          64            /**< the deepest nesting of bundles and sparse components */
#define TENSO_MAX_BUNDLE_ENTRIES 255           /**< the most entries a bundle may have (the wire's count is one byte) */
/** The longest bundle key, in bytes, read or written (the wire allows 2^32-1; no real key
 *  needs more, and a stream reader must not reserve gigabytes for a claimed one). */
#define TENSO_MAX_KEY_BYTES     65536
#define TENSO_DEFAULT_ALIGNMENT 64 /**< the body alignment used when the options give none */
/** The largest alignment the encoder accepts (a page is the useful maximum). */
#define TENSO_MAX_ALIGNMENT (1u << 20)

/** Bytes per element of a dense dtype; 0 for codes that are not dense (0, 16 to 21, unknown).
 *  @since 1.0 */
TENSO_API size_t tenso_dtype_itemsize(tenso_dtype dtype);

/** The numpy name of a dtype ("float32", "bfloat16", "qint4", "string"); "unknown" otherwise.
 *  Static storage. @since 1.0 */
TENSO_API const char *tenso_dtype_name(tenso_dtype dtype);

/** The dtype code for a numpy name, the inverse of tenso_dtype_name().
 *  @return TENSO_E_BAD_DTYPE for names tenso does not know. @since 1.0 */
TENSO_API tenso_status tenso_dtype_from_name(tenso_dtype *out, const char *name);

/** How many dtype codes this library knows (21 in 1.3). With tenso_dtype_at() an SDK lists
 *  every dtype, with its name, size and kind, without a table of its own.
 *  @since 1.3 */
TENSO_API uint32_t tenso_dtype_count(void);

/** The index-th known dtype code, in ascending code order; 0 when index >= tenso_dtype_count().
 *  @code
 *  for (uint32_t i = 0; i < tenso_dtype_count(); ++i) {
 *      tenso_dtype d = tenso_dtype_at(i);
 *      printf("%d %s %zu\n", d, tenso_dtype_name(d), tenso_dtype_itemsize(d));
 *  }
 *  @endcode
 *  @since 1.3 */
TENSO_API tenso_dtype tenso_dtype_at(uint32_t index);

/** The kind of packet a dtype travels in: TENSO_KIND_DENSE for dense dtypes,
 *  TENSO_KIND_QUANTIZED for qint8 to quint4, TENSO_KIND_STRING for string and bytes; 0 for
 *  unknown codes. @since 1.3 */
TENSO_API tenso_kind tenso_dtype_kind(tenso_dtype dtype);

/** Bits per element as stored: 8 x itemsize for dense dtypes, 8 for qint8/quint8, 4 for
 *  qint4/quint4 (two elements per byte, low nibble first); 0 for string, bytes and unknown
 *  codes. @since 1.3 */
TENSO_API uint32_t tenso_dtype_bits(tenso_dtype dtype);

/** How many kinds this library knows (9 in 1.3), for iteration with tenso_kind_at().
 *  @since 1.3 */
TENSO_API uint32_t tenso_kind_count(void);

/** The index-th known kind code, ascending; 0 when index >= tenso_kind_count(). @since 1.3 */
TENSO_API tenso_kind tenso_kind_at(uint32_t index);

/** The name of a kind: "dense", "bundle", "sparse_coo", "sparse_csr", "sparse_csc",
 *  "quantized", "string", "ragged", "gpu_ipc_ref"; "unknown" otherwise. Static storage.
 *  @since 1.3 */
TENSO_API const char *tenso_kind_name(tenso_kind kind);

/** The kind code for a name, the inverse of tenso_kind_name().
 *  @return TENSO_E_INVALID_ARGUMENT for names tenso does not know. @since 1.3 */
TENSO_API tenso_status tenso_kind_from_name(tenso_kind *out, const char *name);

/* ============================================================================================
 * Buffers the library fills
 * ========================================================================================== */

/**
 * Bytes allocated by tenso on the caller's behalf. The caller owns the struct and releases its
 * contents with tenso_buffer_dispose(). `data` is aligned to 64 bytes, so a packet written into
 * it can be read back with its body aligned.
 */
typedef struct tenso_buffer {
    uint8_t *data;   /**< the bytes, 64-byte aligned; NULL when empty */
    size_t size;     /**< bytes in use (the packet's length) */
    size_t reserved; /**< the allocation's capacity; do not touch */
} tenso_buffer;

/** An empty tenso_buffer. */
#define TENSO_BUFFER_INIT \
    { NULL, 0, 0 }

/** Frees the buffer's contents and resets it to TENSO_BUFFER_INIT. NULL is accepted.
 *  Since 1.4 the pages of a large buffer (4 MiB and up) may be kept instead, for the next
 *  buffer of the same size (at most two buffers, 128 MiB): a 64 MiB tenso_dumps() in a loop
 *  then takes no page faults.
 *  @since 1.0 */
TENSO_API void tenso_buffer_dispose(tenso_buffer *buf);

/* ============================================================================================
 * Options
 * ========================================================================================== */

/** tenso_encode_options.flags: append an XXH3-64 footer to every body. */
#define TENSO_ENCODE_INTEGRITY 0x1u
/** tenso_encode_options.flags: LZ4-frame-compress dense bodies (ignored for other kinds). */
#define TENSO_ENCODE_COMPRESS 0x2u

/**
 * How to encode. Zero means "default" in every field.
 */
typedef struct tenso_encode_options {
    uint32_t version;          /**< TENSO_ENCODE_OPTIONS_VERSION */
    uint32_t flags;            /**< TENSO_ENCODE_* bits */
    uint32_t alignment;        /**< body alignment, a power of two; 0 = 64 */
    int32_t compression_level; /**< LZ4 frame level; 0 = fast (the default) */
    uint32_t threads;          /**< @since version 2 (1.3): threads that compress the 4 MiB LZ4
                                  blocks of a large body; 0 = every core, 1 = the calling
                                  thread only. The bytes written do not depend on it. */
} tenso_encode_options;

#define TENSO_ENCODE_OPTIONS_VERSION 2 /**< the tenso_encode_options version these headers declare */
/** A tenso_encode_options with every default. */
#define TENSO_ENCODE_OPTIONS_INIT \
    { TENSO_ENCODE_OPTIONS_VERSION, 0, 0, 0, 0 }

/** Fills *opts with defaults for struct version `version` (1 or 2), writing only the fields
 *  that version has; version 1 structs (without threads) are still accepted everywhere.
 *  @return TENSO_E_INVALID_ARGUMENT for a NULL opts or an unknown version.
 *  @since 1.0 (version 2 @since 1.3) */
TENSO_API tenso_status tenso_encode_options_init(tenso_encode_options *opts, uint32_t version);

/** tenso_decode_options.flags: do not verify integrity footers (they are still framed). */
#define TENSO_DECODE_SKIP_CHECKSUM 0x1u
/** tenso_decode_options.flags: check that string payloads are UTF-8 (O(payload)). */
#define TENSO_DECODE_VALIDATE_UTF8 0x2u

/**
 * Limits and switches for decoding. Zero means "default" in every field; a limit can only be
 * made tighter than the protocol's own (32 dims, 1e9 elements, depth 64). Every limit fails
 * with TENSO_E_LIMIT (ndim: TENSO_E_TOO_MANY_DIMS, elements: TENSO_E_TOO_MANY_ELEMENTS).
 *
 * Memory. Decoding a packet of N bytes allocates at most 24 x N bytes for the decoded tree
 * while it decodes, and the view keeps at most 12 x N (the worst case, a tree of empty bundles
 * at 16 bytes a packet, measured 23.5 x and 10.5 x; a dense tensor costs one small view), plus
 * the decompressed size of LZ4 bodies. Decompressed bytes
 * are bounded by max_decoded_bytes when set, else by max_packet_bytes when set; with neither,
 * only by max_elements per tensor; max_inflation bounds them as a multiple of the packet's size. max_decoded_bytes
 * bounds the sum of both parts as the decoder counts it (tree, copied string offsets and quantization scales,
 * decompressed bodies) before it allocates any of it.
 *
 * Version 1 structs (ending before max_decoded_bytes), version 2 (before timeout_ms) and version 3
 * (before max_inflation) are still accepted everywhere.
 */
typedef struct tenso_decode_options {
    uint32_t version;           /**< TENSO_DECODE_OPTIONS_VERSION */
    uint32_t flags;             /**< TENSO_DECODE_* bits */
    uint32_t max_ndim;          /**< 0 = TENSO_MAX_NDIM */
    uint32_t max_depth;         /**< bundle/sparse nesting; 0 = TENSO_MAX_DEPTH */
    uint64_t max_elements;      /**< per tensor; 0 = TENSO_MAX_ELEMENTS */
    uint64_t max_packet_bytes;  /**< whole packet, also bounds stream allocations and (unless
                                   max_decoded_bytes is set) decompressed bytes; 0 = no limit */
    uint64_t max_decoded_bytes; /**< @since version 2: all a decode allocates (see above);
                                   also bounds stream allocations; 0 = no limit */
    uint64_t max_entries;       /**< @since version 2: packets in one tree (the top one, bundle
                                   values, sparse components); 0 = no limit */
    uint64_t timeout_ms;        /**< @since version 3 (1.3): fd reads (tenso_read_fd and
                                   tenso_decoder_read_fd) - the most a call may wait for the
                                   peer, in total, per packet; 0 or >= 2^41 = no deadline of
                                   ours (a blocking socket's SO_RCVTIMEO is honoured either
                                   way). Expiry: TENSO_E_TIMEOUT. Writes take no deadline from
                                   here: they honour the socket's SO_SNDTIMEO. */
    uint32_t threads;           /**< @since version 3 (1.3): threads that decompress the
                                   independent LZ4 blocks of a large compressed body; 0 = every
                                   core, 1 = the calling thread only. */
    uint32_t max_inflation;     /**< @since version 4 (1.5): what LZ4 bodies may decompress to, in
                                   all, as a multiple of the bytes handed to the decode (the
                                   packet, for a stream decoder), counted as at least 4 MiB (a
                                   ratio says nothing useful about small packets); 0 = no such
                                   bound. With it, a packet of N bytes costs at most
                                   max(N, 4 MiB) x max_inflation in bodies, whatever its header
                                   claims. */
} tenso_decode_options;

#define TENSO_DECODE_OPTIONS_VERSION 4 /**< the tenso_decode_options version these headers declare */
/** A tenso_decode_options with every default. */
#define TENSO_DECODE_OPTIONS_INIT \
    { TENSO_DECODE_OPTIONS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/** Fills *opts with defaults for struct version `version` (1, 2 or 3), writing only the fields
 *  that version has. @since 1.0 (version 3 @since 1.3) */
TENSO_API tenso_status tenso_decode_options_init(tenso_decode_options *opts, uint32_t version);

/* ============================================================================================
 * Encoding a dense tensor
 *
 * Every encoder takes NULL options as "all defaults". The packet bytes are identical to the
 * upstream `tenso.dumps` for every uncompressed case; compressed bodies are valid LZ4 frames
 * (liblz4) that upstream decodes.
 * ========================================================================================== */

/**
 * A dense tensor to encode, described by the caller. Nothing is copied until an encode call;
 * the memory must stay valid and unchanged while tenso uses it.
 */
typedef struct tenso_tensor {
    const void *data;      /**< C-contiguous little-endian elements; may be NULL if nbytes is 0 */
    uint64_t nbytes;       /**< must equal product(shape) * itemsize */
    const uint64_t *shape; /**< ndim entries, each < 2^32; may be NULL if ndim is 0 */
    uint32_t ndim;         /**< 0 (a scalar) to 32 */
    tenso_dtype dtype;     /**< a dense dtype, 1 to 15 */
} tenso_tensor;

/**
 * An upper bound of the packet size for tensor `t` under `opts`: exact without compression.
 * The tensor checks are those of every encoder below.
 * @param bound_out  receives the size.
 * @param t          the tensor.
 * @param opts       NULL for defaults.
 * @return TENSO_E_BAD_DTYPE for a dtype that is not dense, TENSO_E_TOO_MANY_DIMS beyond 32
 *         dims, TENSO_E_TOO_MANY_ELEMENTS beyond 1e9 elements, TENSO_E_INVALID_ARGUMENT for
 *         anything else wrong (nbytes, a dimension >= 2^32, NULL pointers, options). @since 1.0
 */
TENSO_API tenso_status tenso_dumps_bound(size_t *bound_out, const tenso_tensor *t, const tenso_encode_options *opts);

/**
 * Encodes `t` into the caller's buffer: one pass over the body (copy, hashing each chunk while
 * it is still in cache when integrity is on). With compression, a dst of tenso_dumps_bound()
 * bytes gets the LZ4 frame written straight into it; a smaller dst that still holds the packet
 * gets it compressed aside first, then copied (since 1.4).
 * @param dst          where the packet goes; the body is aligned in memory when dst is.
 * @param dst_capacity bytes available at dst.
 * @param written_out  receives the packet length; with TENSO_E_BUFFER_TOO_SMALL, the size
 *                     needed (exact, also when compressing, since 1.4).
 * @param t            the tensor; its memory is only read.
 * @param opts         NULL for defaults.
 * @since 1.0
 */
TENSO_API tenso_status tenso_dumps_into(void *dst, size_t dst_capacity, size_t *written_out, const tenso_tensor *t,
                                        const tenso_encode_options *opts);

/**
 * Encodes `t` into a buffer the library allocates (64-byte aligned).
 * @param out  an initialised tenso_buffer (TENSO_BUFFER_INIT); its previous contents are
 *             disposed of. Release with tenso_buffer_dispose().
 * @param t    the tensor.
 * @param opts NULL for defaults.
 * @since 1.0
 */
TENSO_API tenso_status tenso_dumps(tenso_buffer *out, const tenso_tensor *t, const tenso_encode_options *opts);

/**
 * Writes the packet for `t` to a file descriptor (file, pipe or socket) with vectored I/O:
 * header and padding from a small buffer, the body straight from `t->data`, never copied.
 * Partial writes and EINTR are handled; a non-blocking fd that would block is waited for.
 * Sockets are written with MSG_NOSIGNAL: a closed peer gives TENSO_E_IO, never SIGPIPE.
 * @param written_out  may be NULL; receives the bytes written, also on failure.
 * @param fd           an open file descriptor, blocking or not.
 * @param t            the tensor.
 * @param opts         NULL for defaults.
 * @return TENSO_E_IO with errno's text when the system refuses. @since 1.0
 */
TENSO_API tenso_status tenso_write_fd(uint64_t *written_out, int fd, const tenso_tensor *t,
                                      const tenso_encode_options *opts);

/**
 * Saves the packet for `t` at `path` atomically: it is written to a temporary file in the same
 * directory, flushed, and renamed over `path`; on failure the old file is left intact.
 * The temporary is unnamed while it is written where O_TMPFILE and /proc are available, so a
 * process killed mid-save leaves no file behind; elsewhere it is created O_EXCL under a random
 * name, and a killed writer leaves that `<path>.tmp.<16 hex digits>` file. The new file gets
 * the permission bits (no set-id) and, where permitted, the group of the regular file it
 * replaces, never its owner; 0600 when there was none or `path` is a symlink (replaced, not
 * followed).
 * @since 1.0
 */
TENSO_API tenso_status tenso_save_file(const char *path, const tenso_tensor *t, const tenso_encode_options *opts);

/* ============================================================================================
 * Values: bundles and pre-encoded packets
 *
 * A tenso_value describes something to encode: a dense tensor, a bundle (string key -> value,
 * insertion order kept, at most 255 entries, nesting at most 64 deep), an already encoded
 * packet inserted verbatim, or one of the composite kinds below. Values borrow tensor and packet memory; it must
 * outlive the encode calls. A value is used from one thread at a time.
 * ========================================================================================== */

/** Something to encode: a tensor, a bundle, a packet or a composite (see above). */
typedef struct tenso_value tenso_value;
/** A decoded packet; see "Decoding: views" below. */
typedef struct tenso_view tenso_view;

/** A value for a dense tensor; the shape is copied, the data borrowed. @since 1.0 */
TENSO_API tenso_status tenso_value_new_tensor(tenso_value **out, const tenso_tensor *t);

/**
 * A value that is an encoded packet, inserted as it is (its own options apply). The bytes are
 * borrowed and must be exactly one packet (tenso_packet_length() equal to `len`).
 * @return TENSO_E_TRUNCATED when `len` is shorter than the packet, TENSO_E_INVALID_ARGUMENT
 *         when it is longer, or the status of the header check that fails. @since 1.0
 */
TENSO_API tenso_status tenso_value_new_packet(tenso_value **out, const void *packet, size_t len);

/** An empty bundle. @since 1.0 */
TENSO_API tenso_status tenso_value_new_bundle(tenso_value **out);

/**
 * Appends `key` -> `child` to a bundle. The child's description is copied (its borrowed memory
 * stays borrowed), so the child may be freed or changed afterwards without affecting `bundle`.
 * @param bundle   a value made by tenso_value_new_bundle().
 * @param key      UTF-8, need not be NUL-terminated; up to TENSO_MAX_KEY_BYTES bytes.
 * @param key_len  the key's length in bytes.
 * @param child    the entry's value.
 * @return TENSO_E_INVALID_ARGUMENT when `bundle` is not a bundle, the key is not UTF-8, the
 *         bundle already has 255 entries or would nest more than 64 deep. Duplicate keys are
 *         allowed by the wire format and kept in order. @since 1.0
 */
TENSO_API tenso_status tenso_bundle_insert(tenso_value *bundle, const char *key, size_t key_len,
                                           const tenso_value *child);

/** Number of entries of a bundle value; 0 for other values and NULL. @since 1.0 */
TENSO_API uint32_t tenso_bundle_count(const tenso_value *bundle);

/** Frees a value; NULL is accepted. @since 1.0 */
TENSO_API void tenso_value_free(tenso_value *v);

/** As tenso_dumps_bound(), for a value. @since 1.0 */
TENSO_API tenso_status tenso_value_dumps_bound(size_t *bound_out, const tenso_value *v,
                                               const tenso_encode_options *opts);
/** As tenso_dumps_into(), for a value. @since 1.0 */
TENSO_API tenso_status tenso_value_dumps_into(void *dst, size_t dst_capacity, size_t *written_out, const tenso_value *v,
                                              const tenso_encode_options *opts);
/** As tenso_dumps(), for a value. @since 1.0 */
TENSO_API tenso_status tenso_value_dumps(tenso_buffer *out, const tenso_value *v, const tenso_encode_options *opts);
/** As tenso_write_fd(), for a value: every tensor body goes to the fd uncopied. @since 1.0 */
TENSO_API tenso_status tenso_value_write_fd(uint64_t *written_out, int fd, const tenso_value *v,
                                            const tenso_encode_options *opts);
/**
 * Receives the packet of tenso_value_write_cb() piece by piece, in order.
 * @param data      the piece's bytes (never NULL; len > 0 except for an empty packet part).
 * @param len       the piece's length in bytes.
 * @param borrowed  1: the bytes are the caller's own, a tensor body (or string offsets and
 *                  payload, quantized data, embedded packet) exactly as given to the value, so
 *                  they stay valid as long as the caller keeps that memory: a sender may queue
 *                  them without copying. 0: headers, shapes, padding, footers and compressed
 *                  bodies, library memory valid only during this call.
 * @param user      tenso_value_write_cb()'s `user`.
 * @return 0 to go on; any other value stops the packet with TENSO_E_USER.
 * @since 1.4
 */
typedef int (*tenso_write_fn)(const void *data, size_t len, int borrowed, void *user);

/**
 * Hands the packet for `v` to `write` piece by piece instead of writing it anywhere: what
 * tenso_value_write_fd() sends with vectored I/O, for senders that are not a file descriptor
 * (an HTTP server's response stream, an RPC framework's buffers). Bodies that are sent as they
 * are come as borrowed pieces pointing into the caller's memory, never copied; integrity
 * footers are computed (one read pass over the hashed bodies) before the first piece.
 * The caller must not change that memory until the pieces are sent, or the footers stop
 * matching. The pieces concatenated are exactly tenso_value_dumps()'s packet.
 * @param written_out  may be NULL; receives the bytes of the pieces `write` accepted (returned
 *                     0 for), also on failure.
 * @param v            the value to encode.
 * @param opts         NULL for defaults.
 * @param write        called with each piece in order, on the calling thread.
 * @param user         passed to `write`.
 * @return TENSO_E_USER when `write` stopped it; the encoder's statuses otherwise.
 * Thread-safety: as tenso_value_write_fd(); `write` runs on the calling thread. @since 1.4
 */
TENSO_API tenso_status tenso_value_write_cb(uint64_t *written_out, const tenso_value *v,
                                            const tenso_encode_options *opts, tenso_write_fn write, void *user);
/** As tenso_save_file(), for a value. @since 1.0 */
TENSO_API tenso_status tenso_value_save_file(const char *path, const tenso_value *v, const tenso_encode_options *opts);

/* ============================================================================================
 * Composite kinds: sparse matrices, quantized tensors, strings, ragged arrays, GPU references
 *
 * Each kind has a value constructor (to encode it, alone or inside bundles and streams) and a
 * view accessor (to read it after tenso_loads). Bytes are those of the upstream package.
 * ========================================================================================== */

/**
 * A sparse matrix from three dense component tensors (borrowed, like tenso_value_new_tensor):
 *   TENSO_KIND_SPARSE_COO: a = data, b = row indices, c = column indices, all nnz long;
 *   TENSO_KIND_SPARSE_CSR: a = data, b = column indices (nnz), c = indptr (shape[0] + 1);
 *   TENSO_KIND_SPARSE_CSC: a = data, b = row indices (nnz), c = indptr (shape[1] + 1).
 * Indices and indptr are 1-D integer tensors (int32 or int64, as scipy holds them). The
 * structure is checked: lengths agree, indptr starts at 0, never decreases and ends at nnz,
 * indices lie inside the shape. As upstream, components are always written with alignment 64,
 * no integrity and no compression, whatever the encode options say.
 * @param ndim, shape  the matrix shape; ndim must be 2.
 * @param out          receives the value (free with tenso_value_free()).
 * @param format       TENSO_KIND_SPARSE_COO, _CSR or _CSC.
 * @param a, b, c      the component tensors, as listed above.
 * @return TENSO_E_INVALID_ARGUMENT for a structure that fails the checks. @since 1.0
 */
TENSO_API tenso_status tenso_value_new_sparse(tenso_value **out, tenso_kind format, uint32_t ndim,
                                              const uint64_t *shape, const tenso_tensor *a, const tenso_tensor *b,
                                              const tenso_tensor *c);

/**
 * Component `index` (0, 1, 2 as in tenso_value_new_sparse) of a sparse view: a dense view
 * owned by `v`. tenso_loads has already checked the structure as tenso_value_new_sparse does.
 * @return TENSO_E_UNSUPPORTED_KIND when v is not sparse. @since 1.0
 */
TENSO_API tenso_status tenso_view_component(const tenso_view **child_out, const tenso_view *v, uint32_t index);

#define TENSO_QUANT_PER_TENSOR  0 /**< one scale and zero point for the whole tensor */
#define TENSO_QUANT_PER_CHANNEL 1 /**< one scale and zero point per index along an axis */
#define TENSO_QUANT_PER_GROUP   2 /**< one scale and zero point per group_size consecutive elements */

/**
 * A quantized tensor, in parts. As an input (tenso_value_new_quantized) every pointer is
 * borrowed; as an output (tenso_value_quantized, tenso_view_quantized) every pointer is
 * borrowed from the value or view it came from.
 * Element i is dequantized as (q_i - zero_points[k]) * scales[k], where k is 0 (per tensor),
 * the index along `axis` (per channel) or i / group_size over the C-order elements (per group).
 */
typedef struct tenso_quantized {
    const void *data;         /**< packed: 1 byte per element, or for 4-bit dtypes 2 per byte
                                 (element 2k in the low nibble, 2k+1 in the high nibble) */
    uint64_t nbytes;          /**< numel, or ceil(numel / 2) for 4-bit dtypes */
    const uint64_t *shape;    /**< ndim entries */
    const float *scales;      /**< num_scales entries */
    const float *zero_points; /**< num_scales entries; floats, neither rounded nor clamped */
    uint32_t ndim;            /**< dimensions of the dequantized tensor */
    tenso_dtype dtype;        /**< TENSO_DTYPE_QINT8, QUINT8, QINT4 or QUINT4 */
    int32_t scheme;           /**< TENSO_QUANT_* */
    int32_t axis;             /**< per channel: the channel axis (as an input a negative axis
                                 counts from the end; outputs are always 0 <= axis < ndim);
                                 otherwise 0 */
    uint32_t group_size;      /**< per group: > 0; otherwise 0 */
    uint32_t num_scales;      /**< 1, shape[axis], or ceil(numel / group_size) */
} tenso_quantized;

/**
 * Quantizes a float32, float16 or bfloat16 tensor, bit-exact with upstream
 * QuantizedTensor.quantize: min-max affine per block, scale = f32((max - min) / (qmax - qmin)),
 * zero point = f32(qmin - min / scale) in float32, q = clip(round_half_even(x / scale + zp));
 * a constant block gets scale 1 and zero point 0. The value owns its packed data and scales.
 * @param out   receives the value (free with tenso_value_free()).
 * @param input the tensor to quantize; read only during the call.
 * @param qdtype TENSO_DTYPE_QINT8, QUINT8, QINT4 or QUINT4.
 * @param scheme TENSO_QUANT_PER_TENSOR, _PER_CHANNEL or _PER_GROUP.
 * @param axis  per channel: the channel axis, negative counts from the end; otherwise ignored.
 * @param group_size  per group: elements per group (> 0); otherwise ignored.
 * @since 1.0
 */
TENSO_API tenso_status tenso_quantize(tenso_value **out, const tenso_tensor *input, tenso_dtype qdtype, int32_t scheme,
                                      int32_t axis, uint32_t group_size);

/** A quantized value from parts (borrowed); they are checked for consistency. @since 1.0 */
TENSO_API tenso_status tenso_value_new_quantized(tenso_value **out, const tenso_quantized *q);

/** The parts of a quantized value (from tenso_quantize or tenso_value_new_quantized).
 *  @return TENSO_E_UNSUPPORTED_KIND for other values. @since 1.0 */
TENSO_API tenso_status tenso_value_quantized(tenso_quantized *out, const tenso_value *v);

/** The parts of a quantized view. Scales and zero points are copied into the view at decode
 *  time (they are unaligned on the wire). @since 1.0 */
TENSO_API tenso_status tenso_view_quantized(tenso_quantized *out, const tenso_view *v);

/**
 * Dequantizes into `dst` (dst_count must be the element count), bit-exact with upstream
 * QuantizedTensor.dequantize (float32 arithmetic).
 * @since 1.0
 */
TENSO_API tenso_status tenso_dequantize(float *dst, uint64_t dst_count, const tenso_quantized *q);

/**
 * A string tensor (dtype 20): `count` UTF-8 strings given as count + 1 offsets into one
 * payload of `payload_len` bytes (offsets[0] == 0, never decreasing, offsets[count] ==
 * payload_len). Borrowed.
 * The payload is checked to be UTF-8. Always 64-aligned (upstream ignores custom alignment
 * here); integrity covers offsets and payload. Unlike upstream, strings also travel inside
 * bundles and streams.
 * @since 1.0
 */
TENSO_API tenso_status tenso_value_new_strings(tenso_value **out, uint64_t count, const uint64_t *offsets,
                                               const void *payload, uint64_t payload_len);

/**
 * The strings of a string view (or the rows of a direct ragged packet): string i is
 * payload[offsets[i] .. offsets[i+1]), count = tenso_view_shape(v)[0]. `offsets` is an aligned
 * copy owned by the view, checked at decode time; `payload` points into the packet.
 * With TENSO_DECODE_VALIDATE_UTF8, tenso_loads also checked the payload is UTF-8.
 * @since 1.0
 */
TENSO_API tenso_status tenso_view_string_offsets(const uint64_t **offsets_out, const char **payload_out,
                                                 const tenso_view *v);

/**
 * A ragged array in upstream's form: a bundle of "__ragged_offsets__" (uint64, count + 1
 * element offsets into flat), "__ragged_flat__" (all rows, concatenated) and
 * "__ragged_count__" (uint64 [count]). `flat` and `row_offsets` are borrowed.
 * @since 1.0
 */
TENSO_API tenso_status tenso_value_new_ragged(tenso_value **out, const tenso_tensor *flat, uint64_t count,
                                              const uint64_t *row_offsets);

/**
 * Reads a bundle view as a ragged array, checking its form: the three keys, offsets that
 * start at 0, never decrease and end at the flat length, and a count that matches.
 * @param flat_out, offsets_out  dense 1-D child views owned by `v` (offsets: uint64, count+1).
 * @param v                      a decoded bundle view.
 * @return TENSO_E_UNSUPPORTED_KIND when `v` is not a bundle in that form. @since 1.0
 */
TENSO_API tenso_status tenso_view_ragged(const tenso_view **flat_out, const tenso_view **offsets_out,
                                         const tenso_view *v);

/** A GPU IPC reference: where another process finds device memory (106 bytes on the wire). */
typedef struct tenso_ipc_ref {
    uint8_t handle[64];      /**< opaque, e.g. cudaIpcMemHandle_t */
    uint64_t byte_offset;    /**< where the tensor starts inside the shared allocation */
    uint64_t nbytes;         /**< the tensor's bytes */
    uint8_t device_uuid[16]; /**< the device holding the allocation */
} tenso_ipc_ref;

/** A GPU IPC reference packet. Encode options do not apply (it never has a footer).
 *  @since 1.0 */
TENSO_API tenso_status tenso_value_new_ipc_ref(tenso_value **out, const tenso_ipc_ref *ref);

/** The reference held by a GPU IPC reference view. @since 1.0 */
TENSO_API tenso_status tenso_view_ipc_ref(tenso_ipc_ref *out, const tenso_view *v);

/* ============================================================================================
 * Inspecting packets without decoding them
 * ========================================================================================== */

/** What the header of a packet says, read without touching the body. */
typedef struct tenso_packet_info {
    uint32_t version;               /**< wire version, 1 to 4 */
    uint32_t flags;                 /**< TENSO_FLAG_* bits */
    tenso_kind kind;                /**< TENSO_KIND_* */
    tenso_dtype dtype;              /**< 0 for bundles, sparse containers and IPC references */
    uint32_t ndim;                  /**< dimensions; 0 for bundles */
    uint32_t entry_count;           /**< bundles: number of entries; otherwise 0 */
    uint32_t alignment;             /**< body alignment relative to the packet start (1 if unpadded) */
    uint32_t reserved0;             /**< 0 */
    uint64_t shape[TENSO_MAX_NDIM]; /**< ndim entries are set, the rest are 0 */
    uint64_t body_offset;           /**< where the body starts, from the packet start; 0 for containers */
    uint64_t body_size;             /**< body bytes as stored (compressed size with LZ4); 0 if unknown */
    uint64_t packet_size;           /**< exact packet length; 0 when `len` is too short to tell */
    uint64_t reserved[4];           /**< 0; room to grow */
} tenso_packet_info;

/**
 * Reads a packet's header (and shape and metadata) without touching its body.
 * @param out        receives what the header says.
 * @param data, len  at least the header and shape; more bytes let packet_size be filled.
 * @return TENSO_E_TRUNCATED when the header itself is incomplete; the status of any header
 *         check that fails (magic, version, dtype, limits). @since 1.0
 */
TENSO_API tenso_status tenso_inspect(tenso_packet_info *out, const void *data, size_t len);

/**
 * The exact length of the packet that starts at `data`, worked out from its headers alone
 * (for an LZ4 body, from the frame's block headers), so packets can be framed in streams and
 * in buffers with slack after them. The headers are checked against the decode limits as
 * they are read, so a framing loop never reads towards a size the limits forbid. This is the
 * stream decoder's framing (since 1.3); a complete packet is then checked as tenso_loads
 * checks it (all but checksums), and a failure has the status tenso_loads gives. To frame a
 * stream, prefer tenso_decoder (calling this again as bytes arrive re-reads the headers).
 * @param length_out  with TENSO_OK, the packet length (<= len). With TENSO_E_TRUNCATED, the
 *                    total number of bytes needed before the next call can make progress
 *                    (> len): read that many and call again.
 * @param opts        limits (max_packet_bytes, max_ndim, ...); NULL for defaults.
 * @param data, len   the bytes received so far, starting at the packet.
 * @since 1.0
 */
TENSO_API tenso_status tenso_packet_length(size_t *length_out, const void *data, size_t len,
                                           const tenso_decode_options *opts);

/* ============================================================================================
 * Decoding: views
 *
 * A tenso_view is a decoded packet. For a dense packet its data pointer points into the bytes
 * it was decoded from (zero copy) unless the view owns its bytes (tenso_view_owns_data): a
 * decompressed body, or a packet read from a stream or file. A view that borrows is valid only
 * while those bytes are alive and unchanged; a dense view that owns its data keeps no pointer
 * into the bytes it was decoded from, which may then be freed. Bundle entries are child views owned by (and
 * valid as long as) their parent. Views are immutable and thread-safe to read.
 * ========================================================================================== */

/**
 * Decodes the packet at the start of `data`. Trailing bytes after it are ignored. The
 * integrity footer, when present, is verified (unless TENSO_DECODE_SKIP_CHECKSUM); LZ4 bodies
 * are decompressed into memory the view owns and must decompress to exactly shape x itemsize.
 * Cost without integrity or compression: O(ndim + bundle entries), independent of body size.
 * @param opts  NULL for defaults.
 * @param out   receives the view (free with tenso_view_free()).
 * @param data, len  the bytes; the view borrows them unless it owns its data.
 * @since 1.0
 */
TENSO_API tenso_status tenso_loads(tenso_view **out, const void *data, size_t len, const tenso_decode_options *opts);

/**
 * Frees a view and its children; NULL is accepted. Child views must not be freed. What the view
 * holds (children, a mapping, a decompressed body) is released at once; the calling thread keeps
 * the view's own small allocation for its next tenso_loads(), which then allocates nothing.
 * @since 1.0
 */
TENSO_API void tenso_view_free(tenso_view *v);

/**
 * A dense tensor decoded into memory the caller provides (tenso_loads_tensor): a plain struct,
 * nothing to free. `data` points into the packet bytes given to the call and is valid exactly as
 * long as they are, unchanged; the shape is held in the struct.
 * @since 1.5
 */
typedef struct tenso_tensor_view {
    const void *data;               /**< the body, C-contiguous, in the caller's bytes; NULL when empty */
    uint64_t nbytes;                /**< body bytes: shape x itemsize */
    uint64_t packet_size;           /**< the packet's exact length, integrity footer included */
    tenso_dtype dtype;              /**< a dense dtype */
    uint32_t ndim;                  /**< dimensions */
    uint32_t flags;                 /**< header flags as on the wire (TENSO_FLAG_*) */
    uint32_t version;               /**< wire version the packet was written with (1 to 4) */
    uint32_t alignment;             /**< declared body alignment, relative to the packet start */
    uint32_t reserved;              /**< 0 */
    uint64_t shape[TENSO_MAX_NDIM]; /**< ndim entries are set */
} tenso_tensor_view;

/**
 * tenso_loads for a dense tensor, into the caller's struct instead of an allocated view: the
 * small-packet path (no allocation, no free call, the fields read in place). Checks exactly
 * what tenso_loads checks, the integrity footer included (unless TENSO_DECODE_SKIP_CHECKSUM),
 * with the same statuses. A packet of any other kind, or a compressed dense packet (whose body
 * needs memory to decompress into), is TENSO_E_UNSUPPORTED_KIND: decode those with tenso_loads.
 * *out is written only on success.
 * @param out   receives the tensor (nothing to free).
 * @param data, len  the packet bytes, which `out->data` points into.
 * @param opts  NULL for defaults.
 * @since 1.5
 */
TENSO_API tenso_status tenso_loads_tensor(tenso_tensor_view *out, const void *data, size_t len,
                                          const tenso_decode_options *opts);

/* Accessors. They accept NULL and then return 0 / NULL. Pointers are borrowed from the view. */
/** @since 1.0 */ TENSO_API tenso_kind tenso_view_kind(const tenso_view *v);
/** @since 1.0 */ TENSO_API tenso_dtype tenso_view_dtype(const tenso_view *v);
/** @since 1.0 */ TENSO_API uint32_t tenso_view_ndim(const tenso_view *v);
/** ndim entries; NULL for ndim 0. @since 1.0 */
TENSO_API const uint64_t *tenso_view_shape(const tenso_view *v);
/** The body: C-contiguous elements; NULL when empty. @since 1.0 */
TENSO_API const void *tenso_view_data(const tenso_view *v);
/** Body bytes (decompressed size for LZ4 packets). @since 1.0 */
TENSO_API uint64_t tenso_view_nbytes(const tenso_view *v);
/** Header flags as on the wire (TENSO_FLAG_*). @since 1.0 */
TENSO_API uint32_t tenso_view_flags(const tenso_view *v);
/** Wire version the packet was written with (1 to 4). @since 1.0 */
TENSO_API uint32_t tenso_view_version(const tenso_view *v);
/** Declared body alignment, relative to the packet start. @since 1.0 */
TENSO_API uint32_t tenso_view_alignment(const tenso_view *v);
/** Exact length of the packet the view was decoded from. @since 1.0 */
TENSO_API uint64_t tenso_view_packet_size(const tenso_view *v);
/** 1 when the data lives in memory the view owns, 0 when it points into the caller's bytes.
 *  @since 1.0 */
TENSO_API int tenso_view_owns_data(const tenso_view *v);

/** Number of entries of a bundle view; 0 for other kinds. @since 1.0 */
TENSO_API uint32_t tenso_view_bundle_count(const tenso_view *v);

/**
 * Entry `index` of a bundle view.
 * @param key_out, key_len_out  the key's UTF-8 bytes (not NUL-terminated), borrowed.
 * @param child_out             the entry's view, owned by `v`.
 * @param v                     a bundle view.
 * @param index                 0 to tenso_view_bundle_count(v) - 1.
 * @return TENSO_E_UNSUPPORTED_KIND when v is not a bundle; TENSO_E_INVALID_ARGUMENT for an
 *         index out of range. @since 1.0
 */
TENSO_API tenso_status tenso_view_bundle_entry(const char **key_out, size_t *key_len_out, const tenso_view **child_out,
                                               const tenso_view *v, uint32_t index);

/**
 * The first entry of a bundle view with the given key.
 * @return TENSO_E_INVALID_ARGUMENT (message "key not found") when there is none. @since 1.0
 */
TENSO_API tenso_status tenso_view_bundle_find(const tenso_view **child_out, const tenso_view *v, const char *key,
                                              size_t key_len);

/* ============================================================================================
 * Streams and files
 * ========================================================================================== */

/**
 * Reads exactly one packet from a file descriptor (socket, pipe, file) through a stream decoder
 * (below) with these options and no read-ahead: the header is read and checked against the
 * limits first, then one aligned buffer is allocated for the packet and filled; nothing past
 * the packet is consumed. The returned view owns that buffer.
 * A blocking socket's SO_RCVTIMEO and the options' timeout_ms (version 3) bound the wait.
 * @return TENSO_E_END_OF_STREAM when the stream ends before the packet's first byte;
 *         TENSO_E_TRUNCATED when it ends inside the packet; TENSO_E_TIMEOUT when SO_RCVTIMEO or
 *         timeout_ms expires (1.3); TENSO_E_IO on a read error.
 * @since 1.0
 */
TENSO_API tenso_status tenso_read_fd(tenso_view **out, int fd, const tenso_decode_options *opts);

/** tenso_load_file mode: read the packet into an aligned buffer the view owns. */
#define TENSO_LOAD_READ 0u
/** tenso_load_file mode: map the file read-only; the view keeps the mapping. O(1) in the file
 *  size without integrity checking, and works for files larger than memory. The size is
 *  checked when the file is loaded; if the file is truncated (or rewritten in place) while the
 *  view is alive, touching its pages past the new end raises SIGBUS, which the library cannot
 *  turn into a status. Map only files nobody truncates under you (files written by
 *  tenso_save_file are replaced by rename, which is safe); use TENSO_LOAD_READ otherwise. */
#define TENSO_LOAD_MMAP 1u

/**
 * Loads the first packet of the file at `path`.
 * @param mode  TENSO_LOAD_READ or TENSO_LOAD_MMAP.
 * @param out   receives the view (free with tenso_view_free()).
 * @param path  the file.
 * @param opts  NULL for defaults.
 * @since 1.0
 */
TENSO_API tenso_status tenso_load_file(tenso_view **out, const char *path, uint32_t mode,
                                       const tenso_decode_options *opts);

/* --------------------------------------------------------------------------------------------
 * Stream decoder (@since 1.3)
 *
 * A push-style decoder, shaped like LZ4F_decompress: the caller feeds bytes in whatever pieces
 * its transport delivers (socket, pipe, file, HTTP chunks, GPU staging) and gets complete
 * packets back as views. It never reads past a packet, never allocates by a length the limits
 * have not checked, honours every tenso_decode_options limit, handles every kind and wire
 * versions 1 to 4, and its work is linear in the bytes fed whatever the packet's structure.
 * It is the one framing code of the library: tenso_packet_length and tenso_read_fd run on it.
 *
 * Memory: a packet is received into one buffer of its exact length, asked for once the headers
 * have fixed that length (before that, a small header area that grows with the bytes received,
 * never with a claimed length). By default tenso allocates it 64-byte aligned and reuses
 * buffers whose views are all freed (on any thread): it keeps the largest one, and up to 1024
 * buffers under 64 KiB (1 MiB in all), so many small packets held at once and then freed
 * cost no allocation each; the decoder gives them back when it is freed. With an allocator
 * the caller provides the memory. Views own their buffer (tenso_view_owns_data() = 1) and may
 * outlive the decoder. A decoder is used from one thread at a time.
 * ------------------------------------------------------------------------------------------ */

/** A stream decoder. @since 1.3 */
typedef struct tenso_decoder tenso_decoder;

/**
 * Memory for one packet, asked for once its exact length is known.
 * @param user       tenso_decoder_options.alloc_user.
 * @param size       the packet length in bytes (> 0).
 * @param alignment  the alignment the buffer must have: 64, or the packet's body alignment when
 *                   larger (a power of two up to TENSO_MAX_ALIGNMENT). Misaligned memory fails
 *                   the packet with TENSO_E_INVALID_ARGUMENT and is released at once.
 * @return the memory, or NULL to refuse (the decoder then fails with TENSO_E_NO_MEMORY).
 * @since 1.3
 */
typedef void *(*tenso_alloc_fn)(void *user, size_t size, size_t alignment);
/**
 * Called when tenso no longer needs memory from tenso_alloc_fn: when the last view decoded
 * from it is freed (views may outlive the decoder), or when the decoder is reset or freed
 * mid-packet, or fails. `size` is the size it was asked for. @since 1.3
 */
typedef void (*tenso_release_fn)(void *user, void *ptr, size_t size);

/** tenso_decoder_options.flags: the decoder may read past the current packet from an fd (into
 *  its own read-ahead buffer, kept for the next tenso_decoder_read_fd on the same decoder).
 *  Makes small packets cheap (one read per many packets); never set it when other code reads
 *  the same fd. @since 1.3 */
#define TENSO_DECODER_READ_AHEAD 0x1u

/** Options for tenso_decoder_new. @since 1.3 */
typedef struct tenso_decoder_options {
    uint32_t version;                   /**< TENSO_DECODER_OPTIONS_VERSION (1) */
    uint32_t flags;                     /**< TENSO_DECODER_* */
    const tenso_decode_options *decode; /**< limits, flags, timeout; copied by _new; NULL = defaults */
    tenso_alloc_fn alloc;               /**< NULL: tenso allocates (64-byte aligned) and reuses
                                           buffers once their views are freed (see above) */
    tenso_release_fn release;           /**< required with alloc */
    void *alloc_user;                   /**< passed to alloc and release */
} tenso_decoder_options;

#define TENSO_DECODER_OPTIONS_VERSION 1 /**< the tenso_decoder_options version these headers declare */
/** A tenso_decoder_options with every default. */
#define TENSO_DECODER_OPTIONS_INIT \
    { TENSO_DECODER_OPTIONS_VERSION, 0, NULL, NULL, NULL, NULL }

/**
 * Creates a decoder.
 * @param opts  NULL for defaults (default limits, tenso's allocator, no read-ahead).
 * @param out   receives the decoder (free with tenso_decoder_free()).
 * @return TENSO_E_INVALID_ARGUMENT for an unknown version or flag, alloc without release, or
 *         invalid decode options. @since 1.3
 */
TENSO_API tenso_status tenso_decoder_new(tenso_decoder **out, const tenso_decoder_options *opts);

/** Frees a decoder (and any partial packet; views already handed out stay valid). NULL is
 *  accepted. @since 1.3 */
TENSO_API void tenso_decoder_free(tenso_decoder *d);

/** Drops any partial packet and any error; read-ahead bytes are dropped too. @since 1.3 */
TENSO_API void tenso_decoder_reset(tenso_decoder *d);

/**
 * Pushes bytes. Consumes at most what the current packet still needs - never past its end - so
 * *consumed_out < len means the rest belongs to the next packet: call again with
 * src + *consumed_out. When the packet is complete, *out receives its view (the caller frees
 * it) and the decoder is ready for the next packet; otherwise *out is NULL.
 * @return the statuses tenso_loads gives (bad magic, limits, checksum, ...); after an error the
 *         decoder must be reset (until then every call returns TENSO_E_INVALID_ARGUMENT).
 * @since 1.3
 */
TENSO_API tenso_status tenso_decoder_feed(tenso_decoder *d, const void *src, size_t len, size_t *consumed_out,
                                          tenso_view **out);

/**
 * Receive in place (no copy): where the next bytes go - a small header area first, then inside
 * the packet's own buffer once its length is known - and how many may go there: never 0, never
 * more than tenso_decoder_needed() (so reading up to *len_out never over-reads a stream), and
 * less only while the length is not known yet (the header area grows with the bytes received,
 * never with a length the stream claims). After writing n <= *len_out bytes there, call
 * tenso_decoder_commit. @since 1.3
 */
TENSO_API tenso_status tenso_decoder_buffer(tenso_decoder *d, void **dst_out, size_t *len_out);

/**
 * Accounts for n bytes written at tenso_decoder_buffer's pointer (n <= its *len_out).
 * @param out  receives the packet's view when it is complete, else NULL.
 * @param d    the decoder.
 * @param n    the bytes written (<= tenso_decoder_buffer()'s *len_out).
 * @since 1.3
 */
TENSO_API tenso_status tenso_decoder_commit(tenso_decoder *d, size_t n, tenso_view **out);

/** Bytes still needed before the decoder can make progress (the length hint, like LZ4F's);
 *  never 0 for a live decoder. 0 for NULL. @since 1.3 */
TENSO_API size_t tenso_decoder_needed(const tenso_decoder *d);

/** 1 between packets (nothing partial held), 0 inside one (or for NULL). @since 1.3 */
TENSO_API int tenso_decoder_idle(const tenso_decoder *d);

/** End of input: TENSO_OK when idle, TENSO_E_TRUNCATED (with how much was missing in the
 *  message) inside a packet. @since 1.3 */
TENSO_API tenso_status tenso_decoder_finish(tenso_decoder *d);

/**
 * One packet from an fd through the decoder (its limits, allocator, deadline, read-ahead).
 * Works on blocking and non-blocking fds (the latter are polled with the remaining deadline).
 * @return TENSO_E_END_OF_STREAM on a clean end before the first byte, TENSO_E_TRUNCATED inside
 *         a packet, TENSO_E_TIMEOUT on SO_RCVTIMEO / timeout_ms expiry (the partial packet is
 *         kept: a later call goes on with it), TENSO_E_IO otherwise. @since 1.3
 */
TENSO_API tenso_status tenso_decoder_read_fd(tenso_view **out, tenso_decoder *d, int fd);

/* ============================================================================================
 * DLPack export
 *
 * The exported tensor aliases the view's data (never copied) and is flagged READ_ONLY; its
 * strides are the compact row-major ones (shape and strides are NULL for a scalar). It
 * holds its own reference to whatever the view owns (a decompressed body, a stream buffer, a
 * mapping), so it stays valid after tenso_view_free(); when the view borrows the caller's
 * bytes, those must outlive the DLPack tensor too. The consumer calls the deleter exactly
 * once; the struct may be moved, since its bookkeeping lives in manager_ctx. bfloat16 maps to
 * kDLBfloat, bool to kDLBool, complex to kDLComplex.
 *
 * Alignment: a top-level body is aligned as the packet says relative to the packet's start, so
 * it is aligned in memory when the packet's buffer is (tenso_buffer, mmap, stream buffers are).
 * Bodies nested in bundles are padded relative to their own sub-packet and can sit at any
 * address, even one misaligned for their element type; consumers that read through typed
 * pointers must check (or copy) such tensors.
 * ========================================================================================== */

/**
 * Exports a dense view as a DLManagedTensorVersioned (DLPack 1.1, device kDLCPU).
 * @return TENSO_E_UNSUPPORTED_KIND for views that are not dense. @since 1.0
 */
TENSO_API tenso_status tenso_view_to_dlpack(DLManagedTensorVersioned **out, const tenso_view *v);

/** As tenso_view_to_dlpack(), as the pre-1.0 DLManagedTensor for older consumers (which have
 *  no read-only flag: they must not write through it). @since 1.0 */
TENSO_API tenso_status tenso_view_to_dlpack_legacy(DLManagedTensor **out, const tenso_view *v);

TENSO_END_DECL

#include "tenso/shm.h"
#include "tenso/archive.h"
#include "tenso/gpu.h"
#include "tenso/net.h"

#endif /* TENSO_TENSO_H */
