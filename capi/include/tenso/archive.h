/**
 * @file tenso/archive.h
 * @brief files of many named tensors: tenso archives (.tenso), and safetensors
 * (.safetensors) and bintensors (.bt) files through the same reader and writer.
 *
 * Included by tenso/tenso.h; may also be included on its own.
 *
 * A tenso archive (layout: docs/archive-format.md) stores every tensor as a standard Tenso
 * packet at an absolute file offset aligned to 64 bytes (or 4096, for O_DIRECT and GPUDirect
 * Storage), so any one of them can be handed to tenso_loads() as it is. A binary index at the
 * end of the file, found through a fixed header, gives O(1) lookup by name without touching
 * the data; string metadata and an optional XXH3-64 per tensor ride along. Archives are
 * written as a stream (one tensor at a time, bounded memory) into a temporary file that is
 * renamed over the target when finished, so a failed or abandoned write leaves the old file.
 *
 * Readers map the file read-only: opening reads and checks only the header and index, and a
 * tensor's view points into the mapping (zero copy). Every index, JSON or bincode header is
 * hostile input: sizes are capped, names must be unique UTF-8, byte ranges must lie inside
 * the file, be disjoint and (tenso archives) aligned; safetensors and bintensors ranges must
 * also tile the data section exactly, as those formats require.
 *
 * Truncation. Mapped pages past a file's end raise SIGBUS when touched. tenso_archive_get,
 * tenso_archive_find and tenso_archive_verify first check that the file still holds what they
 * will touch and answer TENSO_E_TRUNCATED when it does not. A truncation after that
 * check, or while the caller reads a view, a name or a metadata string it already holds (they
 * point into the mapping), still raises SIGBUS. Writers never truncate: they replace files by
 * rename, so a reader of the old file is safe. See docs/threat-model.md.
 *
 * Writers create the temporary as tenso_save_file does: unnamed where O_TMPFILE and /proc are
 * available (a killed writer leaves nothing), else `<path>.tmp.<16 hex digits>` created O_EXCL
 * (a killed writer leaves it behind); with the permission bits and, where permitted, the group
 * of the regular file being replaced, never its owner (0600 for a new file or a symlink).
 * ========================================================================================== */
#ifndef TENSO_ARCHIVE_H
#define TENSO_ARCHIVE_H

#include "tenso/tenso.h"

TENSO_BEGIN_DECL

/** A file format. */
typedef int32_t tenso_format;

/** Decide from the file's first bytes (reading) or the path's extension (writing). */
#define TENSO_FORMAT_AUTO 0
/** A tenso archive: .tenso */
#define TENSO_FORMAT_ARCHIVE 1
/** safetensors: .safetensors */
#define TENSO_FORMAT_SAFETENSORS 2
/** bintensors: .bt */
#define TENSO_FORMAT_BINTENSORS 3
/** One Tenso packet (a dense tensor, or a bundle whose entries are the tensors); read only. */
#define TENSO_FORMAT_PACKET 4

/** The format's short name ("tenso", "safetensors", "bintensors", "packet"); "" if unknown.
 *  @since 1.1 */
TENSO_API const char *tenso_format_name(tenso_format format);

/* ============================================================================================
 * Reading
 * ========================================================================================== */

/** An open archive, safetensors or bintensors file: its index, and a read-only mapping. */
typedef struct tenso_archive tenso_archive;

/** tenso_archive_options.flags: verify every stored XXH3 while opening (O(file)). */
#define TENSO_ARCHIVE_VERIFY_ALL 0x1u
/** tenso_archive_options.flags: never verify stored hashes (they are checked lazily, on each
 *  tensor's first tenso_archive_get, by default). */
#define TENSO_ARCHIVE_NO_VERIFY 0x2u

/** Options for opening. Zero means "default" in every field. */
typedef struct tenso_archive_options {
    uint32_t version;         /**< TENSO_ARCHIVE_OPTIONS_VERSION */
    uint32_t flags;           /**< TENSO_ARCHIVE_* bits */
    tenso_format format;      /**< TENSO_FORMAT_AUTO detects it */
    uint32_t reserved0;       /**< 0 */
    uint64_t max_index_bytes; /**< index / JSON / bincode header; 0 = 100,000,000 */
    uint64_t max_tensors;     /**< 0 = 10,000,000 */
} tenso_archive_options;

#define TENSO_ARCHIVE_OPTIONS_VERSION 1 /**< the tenso_archive_options version these headers declare */
/** A tenso_archive_options with every default. */
#define TENSO_ARCHIVE_OPTIONS_INIT \
    { TENSO_ARCHIVE_OPTIONS_VERSION, 0, 0, 0, 0, 0 }

/** Fills *opts with defaults for struct version `version`. @since 1.1 */
TENSO_API tenso_status tenso_archive_options_init(tenso_archive_options *opts, uint32_t version);

/**
 * Opens a file and reads its index; the data is not touched.
 * @return TENSO_E_NOT_FOUND / TENSO_E_IO from the system; TENSO_E_CORRUPT for a header or
 *         index that is not valid for its format; TENSO_E_LIMIT past the size caps;
 *         TENSO_E_BAD_OFFSET, TENSO_E_DUPLICATE_KEY, TENSO_E_BAD_UTF8 as described above;
 *         TENSO_E_TRUNCATED for a file shorter than its header says; TENSO_E_BAD_DTYPE for a
 *         safetensors dtype tenso has no equivalent for (F8_*, F4, F6_*). @since 1.1
 */
TENSO_API tenso_status tenso_archive_open(tenso_archive **out, const char *path, const tenso_archive_options *opts);

/** Closes the handle; views from it keep the mapping alive. NULL is accepted. @since 1.1 */
TENSO_API void tenso_archive_close(tenso_archive *a);

/** The format that was opened. @since 1.1 */
TENSO_API tenso_format tenso_archive_format(const tenso_archive *a);

/**
 * A tenso archive's alignment: every packet, and every dense body written with it, starts at a
 * multiple of it in the file (64 by default, 4096 for O_DIRECT and GPUDirect Storage). 0 for
 * the other formats, which promise none (see tenso_view_alignment for one tensor's). @since 1.1
 */
TENSO_API uint32_t tenso_archive_alignment(const tenso_archive *a);

/** Number of tensors. @since 1.1 */
TENSO_API uint64_t tenso_archive_count(const tenso_archive *a);

/** tenso_archive_entry.flags: the index holds an XXH3-64 of the tensor's stored bytes. */
#define TENSO_ENTRY_HASHED 0x1u

/** One tensor as the index describes it. */
typedef struct tenso_archive_entry {
    const char *name;               /**< UTF-8, not NUL-terminated, owned by the archive handle */
    size_t name_len;                /**< the name's length in bytes */
    tenso_kind kind;                /**< TENSO_KIND_DENSE for safetensors and bintensors */
    tenso_dtype dtype;              /**< the element dtype (0 for containers) */
    uint32_t ndim;                  /**< dimensions */
    uint32_t flags;                 /**< TENSO_ENTRY_* */
    uint64_t shape[TENSO_MAX_NDIM]; /**< ndim entries are set, the rest are 0 */
    uint64_t offset;                /**< absolute file offset of the stored bytes (a packet for archives,
                                       the raw body for safetensors and bintensors) */
    uint64_t stored_bytes;          /**< length of the stored bytes */
    uint64_t nbytes;                /**< body bytes once decoded (shape x itemsize for dense) */
    uint64_t data_offset;           /**< absolute file offset of the body; 0 when not stored raw
                                       (compressed bodies, containers) */
    uint64_t xxh3;                  /**< with TENSO_ENTRY_HASHED */
    uint64_t reserved[4];           /**< 0; room to grow */
} tenso_archive_entry;

/** Entry `index` (0 <= index < count), in file order. @since 1.1 */
TENSO_API tenso_status tenso_archive_entry_at(tenso_archive_entry *out, const tenso_archive *a, uint64_t index);

/** The index of the tensor named `name`: O(1) in tenso archives (hash index), O(log n) else.
 *  @return TENSO_E_NOT_FOUND. @since 1.1 */
TENSO_API tenso_status tenso_archive_find(uint64_t *index_out, const tenso_archive *a, const char *name,
                                          size_t name_len);

/**
 * Tensor `index` as a view into the mapping (zero copy; decompressed into owned memory for LZ4
 * packets). The view keeps the mapping alive after tenso_archive_close. A stored hash is
 * verified on the first get of each tensor unless the archive was opened with
 * TENSO_ARCHIVE_NO_VERIFY. Thread-safe.
 * @return TENSO_E_CHECKSUM when the bytes do not match the stored hash; the tenso_loads
 *         statuses for a stored packet that does not decode. @since 1.1
 */
TENSO_API tenso_status tenso_archive_get(tenso_view **out, tenso_archive *a, uint64_t index,
                                         const tenso_decode_options *opts);

/**
 * Copies `len` body bytes of tensor `index`, starting `offset` bytes into its body, to `dst`
 * with pread(2): reads only those bytes, without mapping them (slices of tensors larger than
 * memory, O_DIRECT-style consumers). Only for tensors stored raw (data_offset != 0).
 * @return TENSO_E_INVALID_ARGUMENT for a range outside the body; TENSO_E_UNSUPPORTED_KIND for
 *         a tensor not stored raw. @since 1.1
 */
TENSO_API tenso_status tenso_archive_read(void *dst, tenso_archive *a, uint64_t index, uint64_t offset, uint64_t len);

/** Number of metadata pairs. @since 1.1 */
TENSO_API uint64_t tenso_archive_metadata_count(const tenso_archive *a);

/** Metadata pair `index`, in the order stored; strings are UTF-8, not NUL-terminated, owned by
 *  the handle. @since 1.1 */
TENSO_API tenso_status tenso_archive_metadata_at(const char **key_out, size_t *key_len_out, const char **value_out,
                                                 size_t *value_len_out, const tenso_archive *a, uint64_t index);

/** The metadata value for `key`. @return TENSO_E_NOT_FOUND. @since 1.1 */
TENSO_API tenso_status tenso_archive_metadata_find(const char **value_out, size_t *value_len_out,
                                                   const tenso_archive *a, const char *key, size_t key_len);

/** Progress callback: `done` of `total` units (bytes); non-zero return aborts the operation
 *  with TENSO_E_USER. */
typedef int (*tenso_progress_fn)(uint64_t done, uint64_t total, void *user);

/**
 * Verifies every stored hash (and, for archives, that every packet decodes).
 * @param bad_index_out  may be NULL; receives the first failing tensor's index.
 * @param a              the archive.
 * @param progress       may be NULL.
 * @param user           passed to `progress`.
 * @return TENSO_E_CHECKSUM (or the decode status) for the first failing tensor. @since 1.1
 */
TENSO_API tenso_status tenso_archive_verify(uint64_t *bad_index_out, tenso_archive *a, tenso_progress_fn progress,
                                            void *user);

/* ============================================================================================
 * Writing
 * ========================================================================================== */

/** An archive being written, into a temporary file renamed over the target by finish. */
typedef struct tenso_archive_writer tenso_archive_writer;

/** tenso_archive_write_options.flags: do not store XXH3 hashes in the index (archives). */
#define TENSO_ARCHIVE_NO_HASH 0x1u

/** Options for writing. Zero means "default" in every field.
 *  Version 2 (1.3) embeds a version 2 tenso_encode_options (with `threads`); version 1 structs,
 *  4 bytes shorter and holding a version 1 (or zeroed) encode struct, are still accepted. */
typedef struct tenso_archive_write_options {
    uint32_t version;            /**< TENSO_ARCHIVE_WRITE_OPTIONS_VERSION */
    uint32_t flags;              /**< TENSO_ARCHIVE_NO_HASH */
    tenso_format format;         /**< TENSO_FORMAT_AUTO: from the extension, else ARCHIVE */
    uint32_t alignment;          /**< archives: packet offsets and bodies; 64 (default) or 4096 */
    tenso_encode_options encode; /**< archives: packet options (integrity footers, LZ4) */
} tenso_archive_write_options;

#define TENSO_ARCHIVE_WRITE_OPTIONS_VERSION 2 /**< the tenso_archive_write_options version these headers declare */
/** A tenso_archive_write_options with every default. */
#define TENSO_ARCHIVE_WRITE_OPTIONS_INIT \
    { TENSO_ARCHIVE_WRITE_OPTIONS_VERSION, 0, 0, 0, TENSO_ENCODE_OPTIONS_INIT }

/** Fills *opts with defaults for struct version `version` (1 or 2), writing only the bytes that
 *  version has. @since 1.1 */
TENSO_API tenso_status tenso_archive_write_options_init(tenso_archive_write_options *opts, uint32_t version);

/**
 * Starts writing `path`: a temporary file next to it is created now and renamed over `path`
 * by tenso_archive_writer_finish().
 * @since 1.1
 */
TENSO_API tenso_status tenso_archive_writer_open(tenso_archive_writer **out, const char *path,
                                                 const tenso_archive_write_options *opts);

/**
 * Appends a tensor. The value's bytes are written before this returns (archives: with
 * vectored I/O, straight from the caller's memory) and are not needed afterwards; memory use
 * stays bounded by the index. safetensors and bintensors accept dense tensors only; their
 * bytes are spooled to the temporary file and placed in the format's canonical order at
 * finish (in-kernel copies).
 * @return TENSO_E_DUPLICATE_KEY for a name already added; TENSO_E_BAD_UTF8; for
 *         safetensors/bintensors TENSO_E_UNSUPPORTED_KIND (not dense) or TENSO_E_BAD_DTYPE
 *         (no equivalent: bintensors has no complex types). @since 1.1
 */
TENSO_API tenso_status tenso_archive_writer_add(tenso_archive_writer *w, const char *name, size_t name_len,
                                                const tenso_value *v);

/** Adds a metadata pair (UTF-8 strings; a key set twice keeps the last value). @since 1.1 */
TENSO_API tenso_status tenso_archive_writer_set_metadata(tenso_archive_writer *w, const char *key, size_t key_len,
                                                         const char *value, size_t value_len);

/**
 * Writes the index, flushes the file to disk and renames it over the target. After a failure
 * the target is untouched. Either way the writer must still be freed.
 * @since 1.1
 */
TENSO_API tenso_status tenso_archive_writer_finish(tenso_archive_writer *w);

/** Frees the writer; an unfinished file is discarded (the target is untouched). NULL is
 *  accepted. @since 1.1 */
TENSO_API void tenso_archive_writer_free(tenso_archive_writer *w);

TENSO_END_DECL

#endif /* TENSO_ARCHIVE_H */
