// archive.hpp - the tenso archive format (docs/archive-format.md) and files that hold a
// single packet: their readers, the facts an index records about a packet, and the writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "file/reader.hpp"

namespace tenso {

// The dtype/shape/layout facts an index records about a packet, as the scanner finds them
// (shared by the writer, which records them, and the reader, which checks them at first get).
struct PacketFacts {
    uint8_t kind = 0, dtype = 0, ndim = 0;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    uint64_t nbytes = 0;
    uint64_t body_off = 0;  // relative to the packet start; 0 when the body is not stored raw
};
PacketFacts packet_facts(const Node &n);

// Format readers (they fill `cat` from the mapped file; hostile input throws Error).
void read_tenso_archive(Catalog &cat, const FileMap &m, const ArchiveLimits &lim);
void read_packet_file(Catalog &cat, const FileMap &m, const ArchiveLimits &lim);

// Whether the n bytes at p begin the tenso archive magic (or are a cut-short piece of it, so
// that such a file reads as truncated rather than as another format).
bool archive_magic(const uint8_t *p, size_t n);

std::unique_ptr<ArchiveWriter> make_tenso_writer(const char *path, const ArchiveWriteOptions &o);

}  // namespace tenso
