// convert.hpp - the boundary between the public C structs and the engine's own types. Option
// structs are read once, their version and flags checked, and turned into engine options;
// engine results are copied into the caller's structs. No rule of the format lives here.
#pragma once

#include "tenso/archive.h"
#include "tenso/shm.h"
#include "tenso/tenso.h"

#include "file/reader.hpp"
#include "format/codec.hpp"
#include "format/decoder.hpp"
#include "gpu/engine.hpp"
#include "shm/cache.hpp"

namespace tenso::capi {

Limits limits(const tenso_decode_options *opts);                  // NULL: the defaults
EncodeOptions encode_options(const tenso_encode_options *opts);   // NULL: the defaults
DecoderConfig decoder_config(const tenso_decoder_options *opts);  // NULL: the defaults
Tensor tensor(const tenso_tensor *t);                             // checked by make_tensor
CacheOptions cache_options(const tenso_cache_options *opts);
ArchiveOptions archive_options(const tenso_archive_options *opts);
ArchiveWriteOptions archive_write_options(const tenso_archive_write_options *opts);
gpu::Options gpu_options(const tenso_gpu_options *opts);  // NULL: the defaults

void fill(tenso_packet_info *out, const PacketInfo &in);
void fill(tenso_cache_entry_info *out, const CacheEntryInfo &in);
void fill(tenso_cache_stats *out, const CacheStats &in);
void fill(tenso_archive_entry *out, const ArchiveEntry &in);
void fill(tenso_tensor_view *out, const DenseView &in);

}  // namespace tenso::capi
