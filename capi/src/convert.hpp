// convert.hpp - the boundary between the public C structs and the engine's own types. Option
// structs are read once, their version and flags checked, and turned into engine options;
// engine results are copied into the caller's structs. No rule of the format lives here.
#pragma once

#include <optional>

#include "tenso/archive.h"
#include "tenso/shm.h"
#include "tenso/tenso.h"

#include "file/reader.hpp"
#include "format/codec.hpp"
#include "format/decoder.hpp"
#include "gpu/engine.hpp"
#include "shm/cache.hpp"

namespace tenso::capi {

Limits read_limits(const tenso_decode_options *opts);  // not NULL
// The engine's limits for `opts`, passed on as a `const Limits &`: NULL is the defaults, which
// are not copied (a small packet's decode makes a hundred or so stores; a copy was nine more).
class DecodeLimits {
public:
    explicit DecodeLimits(const tenso_decode_options *opts) {
        if (opts) own_.emplace(read_limits(opts));
    }
    operator const Limits &() const { return own_ ? *own_ : kDefaults; }

private:
    static constexpr Limits kDefaults{};
    std::optional<Limits> own_;
};
inline DecodeLimits limits(const tenso_decode_options *opts) { return DecodeLimits(opts); }
EncodeOptions read_encode_options(const tenso_encode_options *opts);     // not NULL
inline EncodeOptions encode_options(const tenso_encode_options *opts) {  // NULL: the defaults
    return opts ? read_encode_options(opts) : EncodeOptions();
}
DecoderConfig decoder_config(const tenso_decoder_options *opts);  // NULL: the defaults
// Checked by make_tensor; the caller's struct is read once (make_tensor reads the shape once).
__attribute__((always_inline)) inline Tensor tensor(const tenso_tensor *tp) {
    if (!tp) fail_msg(TENSO_E_INVALID_ARGUMENT, "tensor is NULL");
    const tenso_tensor t = *tp;
    return make_tensor(t.dtype, t.ndim, t.shape, t.data, t.nbytes);
}
CacheOptions cache_options(const tenso_cache_options *opts);
ArchiveOptions archive_options(const tenso_archive_options *opts);
ArchiveWriteOptions archive_write_options(const tenso_archive_write_options *opts);
gpu::Options gpu_options(const tenso_gpu_options *opts);  // NULL: the defaults

void fill(tenso_packet_info *out, const PacketInfo &in);
void fill(tenso_cache_entry_info *out, const CacheEntryInfo &in);
void fill(tenso_cache_stats *out, const CacheStats &in);
void fill(tenso_archive_entry *out, const ArchiveEntry &in);

}  // namespace tenso::capi
