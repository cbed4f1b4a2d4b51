// safetensors.hpp - the peer formats: safetensors (JSON header) and bintensors (bincode
// header) files, read into a Catalog and written by an ArchiveWriter (reader.hpp).
#pragma once

#include <memory>

#include "file/reader.hpp"

namespace tenso {

void read_safetensors(Catalog &cat, const FileMap &m, const ArchiveLimits &lim);
void read_bintensors(Catalog &cat, const FileMap &m, const ArchiveLimits &lim);
// format: TENSO_FORMAT_SAFETENSORS or TENSO_FORMAT_BINTENSORS.
std::unique_ptr<ArchiveWriter> make_foreign_writer(const char *path, int format);

}  // namespace tenso
