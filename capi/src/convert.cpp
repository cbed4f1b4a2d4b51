// convert.cpp - public C structs to and from the engine's types (convert.hpp).
#include "convert.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "error.hpp"

namespace tenso::capi {

namespace {
std::string num(uint64_t v) { return std::to_string(v); }

[[noreturn]] __attribute__((noinline, cold)) void unknown_version(const char *what, uint32_t version) {
    fail(TENSO_E_INVALID_ARGUMENT, std::string("unknown ") + what + " version " + std::to_string(version));
}

// A caller's versioned options struct, read once: its version checked (1 to N) and as many
// bytes copied over `defaults` as that version has (ends[version - 1]).
template <class T, size_t N>
T read_options(const T *user, T defaults, const char *what, const size_t (&ends)[N]) {
    const uint32_t version = user->version;
    if (version == N) {  // today's struct: one fixed-size copy
        T o = *user;
        o.version = version;  // as checked, whatever the caller's memory says now
        return o;
    }
    if (version < 1 || version > N) unknown_version(what, version);
    std::memcpy(&defaults, user, ends[version - 1]);
    return defaults;
}
}  // namespace

Limits read_limits(const tenso_decode_options *opts) {
    Limits l;
    // The caller's struct is read once, as far as its version reaches; the copy is checked and used.
    static const size_t ends[] = {offsetof(tenso_decode_options, max_decoded_bytes),
                                  offsetof(tenso_decode_options, timeout_ms),
                                  offsetof(tenso_decode_options, max_inflation), sizeof(tenso_decode_options)};
    static_assert(sizeof ends / sizeof *ends == TENSO_DECODE_OPTIONS_VERSION, "one end per version");
    const tenso_decode_options o =
        read_options(opts, tenso_decode_options TENSO_DECODE_OPTIONS_INIT, "tenso_decode_options", ends);
    if (o.flags & ~uint32_t(TENSO_DECODE_SKIP_CHECKSUM | TENSO_DECODE_VALIDATE_UTF8))
        fail_msg(TENSO_E_INVALID_ARGUMENT, "unknown decode flags");
    // 0 means "the default"; a caller may tighten the protocol's limits, never loosen them.
    l.timeout_ms = o.timeout_ms;
    l.threads = o.threads;
    l.max_decoded_bytes = o.max_decoded_bytes;
    l.max_entries = o.max_entries;
    l.max_inflation = o.max_inflation;
    if (o.max_ndim && o.max_ndim < l.max_ndim) l.max_ndim = o.max_ndim;
    if (o.max_depth && o.max_depth < l.max_depth) l.max_depth = o.max_depth;
    if (o.max_elements && o.max_elements < l.max_elements) l.max_elements = o.max_elements;
    l.max_packet_bytes = o.max_packet_bytes;
    l.verify_checksums = !(o.flags & TENSO_DECODE_SKIP_CHECKSUM);
    l.validate_utf8 = o.flags & TENSO_DECODE_VALIDATE_UTF8;
    return l;
}

DecoderConfig decoder_config(const tenso_decoder_options *opts) {
    DecoderConfig cfg;
    if (!opts) return cfg;
    tenso_decoder_options o;
    std::memcpy(&o, opts, sizeof o);
    if (o.version != TENSO_DECODER_OPTIONS_VERSION)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_decoder_options version " + num(o.version));
    if (o.flags & ~uint32_t(TENSO_DECODER_READ_AHEAD)) fail(TENSO_E_INVALID_ARGUMENT, "unknown decoder flags");
    if (bool(o.alloc) != bool(o.release)) fail(TENSO_E_INVALID_ARGUMENT, "alloc and release must be given together");
    cfg.limits = limits(o.decode);
    cfg.read_ahead = o.flags & TENSO_DECODER_READ_AHEAD;
    cfg.alloc = o.alloc;
    cfg.release = o.release;
    cfg.alloc_user = o.alloc_user;
    return cfg;
}

gpu::Options gpu_options(const tenso_gpu_options *opts) {
    gpu::Options g;
    if (!opts) return g;
    static const size_t ends[] = {sizeof(tenso_gpu_options)};
    static_assert(sizeof ends / sizeof *ends == TENSO_GPU_OPTIONS_VERSION, "one end per version");
    const tenso_gpu_options o = read_options(opts, tenso_gpu_options TENSO_GPU_OPTIONS_INIT, "tenso_gpu_options", ends);
    if (o.flags & ~uint32_t(TENSO_GPU_NO_GDS)) fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_gpu_options flags");
    if (o.dequantize_to && o.dequantize_to != TENSO_DTYPE_FLOAT32 && o.dequantize_to != TENSO_DTYPE_FLOAT16 &&
        o.dequantize_to != TENSO_DTYPE_BFLOAT16)
        fail(TENSO_E_INVALID_ARGUMENT, "dequantize_to must be 0, float32, float16 or bfloat16");
    if (o.staging_buffers > 64) fail(TENSO_E_INVALID_ARGUMENT, "staging_buffers is at most 64");
    if (o.chunk_bytes > (uint64_t(1) << 32)) fail(TENSO_E_INVALID_ARGUMENT, "chunk_bytes is at most 4 GiB");
    g.flags = o.flags;
    g.device = o.device;
    g.dequantize_to = o.dequantize_to;
    g.stream = o.stream;
    if (o.chunk_bytes) g.chunk_bytes = o.chunk_bytes;
    if (o.staging_buffers) g.staging_buffers = o.staging_buffers;
    g.limits = limits(o.decode);
    return g;
}

EncodeOptions read_encode_options(const tenso_encode_options *opts) {
    EncodeOptions e;
    static const size_t ends[] = {offsetof(tenso_encode_options, threads), sizeof(tenso_encode_options)};
    static_assert(sizeof ends / sizeof *ends == TENSO_ENCODE_OPTIONS_VERSION, "one end per version");
    const tenso_encode_options o =  // read the caller's struct once, as far as its version reaches
        read_options(opts, tenso_encode_options TENSO_ENCODE_OPTIONS_INIT, "tenso_encode_options", ends);
    if (o.flags & ~uint32_t(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS))
        fail_msg(TENSO_E_INVALID_ARGUMENT, "unknown encode flags");
    e.integrity = o.flags & TENSO_ENCODE_INTEGRITY;
    e.compress = o.flags & TENSO_ENCODE_COMPRESS;
    if (o.alignment) e.alignment = checked_alignment(o.alignment);
    e.level = o.compression_level;
    e.threads = o.threads;
    return e;
}

CacheOptions cache_options(const tenso_cache_options *opts) {
    CacheOptions c;
    if (!opts) return c;
    const tenso_cache_options o = *opts;
    if (o.version != TENSO_CACHE_OPTIONS_VERSION)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_cache_options version " + num(o.version));
    if (o.flags & ~uint32_t(TENSO_SHM_REPLACE | TENSO_SHM_ANY_OWNER))
        fail(TENSO_E_INVALID_ARGUMENT, "unknown cache flags");
    c.size = o.size;
    c.max_entries = o.max_entries;
    c.max_clients = o.max_clients;
    c.max_pins = o.max_pins;
    c.lock_timeout_ms = o.lock_timeout_ms;
    c.replace = o.flags & TENSO_SHM_REPLACE;
    c.any_owner = o.flags & TENSO_SHM_ANY_OWNER;
    return c;
}

ArchiveOptions archive_options(const tenso_archive_options *opts) {
    tenso_archive_options o = TENSO_ARCHIVE_OPTIONS_INIT;
    if (opts) {
        o = *opts;
        if (o.version != TENSO_ARCHIVE_OPTIONS_VERSION)
            fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_archive_options version " + num(o.version));
    }
    if (o.flags & ~uint32_t(TENSO_ARCHIVE_VERIFY_ALL | TENSO_ARCHIVE_NO_VERIFY))
        fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_archive_options flags");
    if (o.format < TENSO_FORMAT_AUTO || o.format > TENSO_FORMAT_PACKET)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown format " + num(uint32_t(o.format)));
    ArchiveOptions a;
    a.format = o.format;
    a.verify_all = o.flags & TENSO_ARCHIVE_VERIFY_ALL;
    a.no_verify = o.flags & TENSO_ARCHIVE_NO_VERIFY;
    if (o.max_index_bytes) a.limits.max_index_bytes = o.max_index_bytes;
    if (o.max_tensors) a.limits.max_tensors = o.max_tensors;
    return a;
}

ArchiveWriteOptions archive_write_options(const tenso_archive_write_options *opts) {
    tenso_archive_write_options o = TENSO_ARCHIVE_WRITE_OPTIONS_INIT;
    if (opts) {
        // Version 1 (1.1, 1.2) embeds a version 1 tenso_encode_options: the struct ends 4 bytes
        // before today's, so it is read only that far.
        static const size_t ends[] = {offsetof(tenso_archive_write_options, encode.threads),
                                      sizeof(tenso_archive_write_options)};
        static_assert(sizeof ends / sizeof *ends == TENSO_ARCHIVE_WRITE_OPTIONS_VERSION, "one end per version");
        o = read_options(opts, o, "tenso_archive_write_options", ends);
        if (o.version == 1) {  // the copy: the caller's struct is read once
            if (o.encode.version > 1)
                fail(TENSO_E_INVALID_ARGUMENT,
                     "tenso_archive_write_options version 1 holds encode options version 0 or 1");
            o.encode.threads = 0;
        }
    }
    if (o.flags & ~uint32_t(TENSO_ARCHIVE_NO_HASH)) fail(TENSO_E_INVALID_ARGUMENT, "unknown write flags");
    ArchiveWriteOptions w;
    w.format = o.format;
    w.alignment = o.alignment;
    w.hash = !(o.flags & TENSO_ARCHIVE_NO_HASH);
    w.encode = encode_options(o.encode.version ? &o.encode : nullptr);
    w.encode_alignment_given = o.encode.alignment != 0;
    return w;
}

void fill(tenso_packet_info *out, const PacketInfo &in) {
    std::memset(out, 0, sizeof *out);
    out->version = in.version;
    out->flags = in.flags;
    out->kind = in.kind;
    out->dtype = in.dtype;
    out->ndim = in.ndim;
    out->entry_count = in.entry_count;
    out->alignment = in.alignment;
    std::copy(in.shape, in.shape + in.ndim, out->shape);
    out->body_offset = in.body_offset;
    out->body_size = in.body_size;
    out->packet_size = in.packet_size;
}

void fill(tenso_cache_entry_info *out, const CacheEntryInfo &in) {
    std::memset(out, 0, sizeof *out);
    fill(&out->packet, in.packet);
    out->alloc_bytes = in.alloc_bytes;
    out->ttl_seconds = in.ttl_seconds;
    out->age_seconds = in.age_seconds;
    out->pins = in.pins;
}

void fill(tenso_cache_stats *out, const CacheStats &in) {
    std::memset(out, 0, sizeof *out);
    out->entries = in.entries;
    out->max_entries = in.max_entries;
    out->pool_bytes = in.pool_bytes;
    out->data_bytes = in.data_bytes;
    out->used_bytes = in.used_bytes;
    out->free_bytes = in.free_bytes;
    out->hits = in.hits;
    out->misses = in.misses;
    out->evictions = in.evictions;
    out->expirations = in.expirations;
    out->pinned_entries = in.pinned_entries;
    out->recoveries = in.recoveries;
    out->clients = in.clients;
}

void fill(tenso_archive_entry *out, const ArchiveEntry &in) {
    std::memset(out, 0, sizeof *out);
    out->name = in.name;
    out->name_len = in.name_len;
    out->kind = in.kind;
    out->dtype = in.dtype;
    out->ndim = in.ndim;
    out->flags = in.flags;
    std::copy(in.shape, in.shape + in.ndim, out->shape);
    out->offset = in.offset;
    out->stored_bytes = in.stored_bytes;
    out->nbytes = in.nbytes;
    out->data_offset = in.data_offset;
    out->xxh3 = in.xxh3;
}

}  // namespace tenso::capi
