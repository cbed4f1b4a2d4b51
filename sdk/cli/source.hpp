// source.hpp - an input file opened for the subcommands, whatever its format: a tenso archive,
// safetensors or bintensors file (through tenso_archive_*), or a file of one or more Tenso
// packets back to back (framed with tenso_packet_length, decoded with tenso_loads). The file
// is also mapped read-only here, so packet headers can be inspected and views point into it.
#pragma once

#include "cli.hpp"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cli {

// One row of `tenso info`.
struct TensorInfo {
    std::string name;     // nested bundle entries: "outer/inner"
    uint32_t depth = 0;   // nesting level inside a packet file's bundles
    int64_t packet = -1;  // packet files: index of the top-level packet
    tenso_kind kind = 0;
    tenso_dtype dtype = 0;
    uint32_t ndim = 0;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    uint32_t entries = 0;  // bundles
    uint64_t stored_bytes = 0;
    uint64_t nbytes = 0;
    bool has_offset = false;  // offset of the stored bytes in the file
    uint64_t offset = 0;
    bool has_body = false;  // offset of the raw body in the file
    uint64_t body_offset = 0;
    bool integrity = false, compressed = false, hashed = false;
    uint64_t xxh3 = 0;
};

// Parses a --from / --to name ("tenso", "archive", "safetensors", "bt", "bintensors",
// "packet"); false when unknown.
bool parse_format(tenso_format &out, const std::string &name);

class Source {
public:
    // Opens `path`; `forced` is TENSO_FORMAT_AUTO to detect it. Throws Failure.
    Source(const std::string &path, tenso_format forced);
    ~Source();
    Source(const Source &) = delete;
    Source &operator=(const Source &) = delete;

    tenso_format format() const { return format_; }
    // A tenso archive's packet alignment; 0 for formats that promise none.
    uint32_t alignment() const { return archive_ ? tenso_archive_alignment(archive_) : 0; }
    uint64_t file_size() const { return size_; }
    const uint8_t *bytes() const { return map_; }

    // Every tensor as the file describes it (packet files are decoded without checksums).
    std::vector<TensorInfo> tensors() const;
    std::vector<std::pair<std::string, std::string>> metadata() const;

    // Checks every stored hash and footer and that every packet decodes; throws a Failure
    // naming the first bad tensor. Returns the number of tensors checked.
    uint64_t verify(Progress &progress);

    // Visits each top-level tensor (bundle entries of packet files) in file order as a view:
    // zero copy where the bytes are stored raw, hashes and footers verified. The view is valid
    // during the call only. `stored_bytes` is what the tensor occupies in the file.
    using Visitor = std::function<void(const std::string &name, const tenso_view *v, uint64_t stored_bytes)>;
    void for_each(const Visitor &fn);

    // The name given to top-level packet `i` that is not a bundle.
    std::string packet_name(size_t i) const;

private:
    std::string path_;
    int fd_ = -1;
    const uint8_t *map_ = nullptr;
    uint64_t size_ = 0;
    tenso_format format_ = TENSO_FORMAT_AUTO;
    tenso_archive *archive_ = nullptr;
    struct Packet {
        uint64_t offset, size;
    };
    std::vector<Packet> packets_;

    void map_file();
    void frame_packets();
    void describe(std::vector<TensorInfo> &rows, const tenso_view *v, const std::string &name, uint32_t depth,
                  int64_t packet) const;
};

}  // namespace cli
