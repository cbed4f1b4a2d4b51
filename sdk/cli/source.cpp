#include "source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace cli {

namespace {

struct ViewFree {
    void operator()(tenso_view *v) const { tenso_view_free(v); }
};
using ViewPtr = std::unique_ptr<tenso_view, ViewFree>;

// Packet headers (magic, version, flags, shape) fit well within this many bytes; a longer
// prefix only lets tenso_inspect fill in more.
constexpr uint64_t kHeadBytes = 4096;

}  // namespace

bool parse_format(tenso_format &out, const std::string &name) {
    if (name == "tenso" || name == "archive") out = TENSO_FORMAT_ARCHIVE;
    else if (name == "safetensors") out = TENSO_FORMAT_SAFETENSORS;
    else if (name == "bt" || name == "bintensors") out = TENSO_FORMAT_BINTENSORS;
    else if (name == "packet" || name == "tnso") out = TENSO_FORMAT_PACKET;
    else return false;
    return true;
}

Source::Source(const std::string &path, tenso_format forced) : path_(path) {
    map_file();
    if (forced == TENSO_FORMAT_PACKET) {
        format_ = TENSO_FORMAT_PACKET;
        frame_packets();
        return;
    }
    tenso_archive_options opts = TENSO_ARCHIVE_OPTIONS_INIT;
    opts.format = forced;
    tenso_status st = tenso_archive_open(&archive_, path.c_str(), &opts);
    if (st == TENSO_OK) {
        format_ = tenso_archive_format(archive_);
        if (format_ != TENSO_FORMAT_PACKET) return;
        // Packet files are read here, kind by kind, rather than as a flat list of entries.
        tenso_archive_close(archive_);
        archive_ = nullptr;
        frame_packets();
        return;
    }
    Failure archive_failure{st, tenso_last_error(), ""};
    // Nothing opened it as an archive. A file that starts like a packet (the magic and a header
    // that passes, even if the rest is broken) is reported as the packet it tries to be, with
    // the packet decoder's more specific status.
    tenso_packet_info info;
    if (forced == TENSO_FORMAT_AUTO && size_ > 0 &&
        tenso_inspect(&info, map_, static_cast<size_t>(std::min(size_, kHeadBytes))) == TENSO_OK) {
        format_ = TENSO_FORMAT_PACKET;
        frame_packets();
        return;
    }
    throw archive_failure;
}

Source::~Source() {
    tenso_archive_close(archive_);
    if (map_) ::munmap(const_cast<uint8_t *>(map_), static_cast<size_t>(size_));
    if (fd_ >= 0) ::close(fd_);
}

void Source::map_file() {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
        int e = errno;
        fail(e == ENOENT || e == ENOTDIR ? TENSO_E_NOT_FOUND : TENSO_E_IO, std::strerror(e));
    }
    struct stat sb;
    if (::fstat(fd_, &sb) != 0) fail(TENSO_E_IO, std::strerror(errno));
    if (S_ISDIR(sb.st_mode)) fail(TENSO_E_IO, std::strerror(EISDIR));
    if (!S_ISREG(sb.st_mode)) fail(TENSO_E_IO, "not a regular file");
    size_ = static_cast<uint64_t>(sb.st_size);
    if (size_ == 0) return;
    if (size_ > SIZE_MAX) fail(TENSO_E_LIMIT, "file too large to map");
    void *p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(TENSO_E_IO, std::string("mmap: ") + std::strerror(errno));
    map_ = static_cast<const uint8_t *>(p);
}

void Source::frame_packets() {
    if (size_ == 0) fail(TENSO_E_TRUNCATED, "empty file: no packet");
    uint64_t off = 0;
    while (off < size_) {
        size_t len = 0;
        tenso_status st = tenso_packet_length(&len, map_ + off, static_cast<size_t>(size_ - off), nullptr);
        if (st == TENSO_E_TRUNCATED)
            fail(st, "packet " + std::to_string(packets_.size()) + " at offset " + std::to_string(off) + " needs " +
                         std::to_string(len) + " bytes, " + std::to_string(size_ - off) + " left in the file");
        check(st, "packet " + std::to_string(packets_.size()) + " at offset " + std::to_string(off));
        packets_.push_back({off, len});
        off += len;
    }
}

std::string Source::packet_name(size_t i) const {
    return packets_.size() == 1 ? "tensor" : "tensor_" + std::to_string(i);
}

std::vector<std::pair<std::string, std::string>> Source::metadata() const {
    std::vector<std::pair<std::string, std::string>> out;
    if (!archive_) return out;
    uint64_t n = tenso_archive_metadata_count(archive_);
    for (uint64_t i = 0; i < n; ++i) {
        const char *k, *v;
        size_t kl, vl;
        check(tenso_archive_metadata_at(&k, &kl, &v, &vl, archive_, i), "metadata " + std::to_string(i));
        out.emplace_back(std::string(k, kl), std::string(v, vl));
    }
    return out;
}

void Source::describe(std::vector<TensorInfo> &rows, const tenso_view *v, const std::string &name, uint32_t depth,
                      int64_t packet) const {
    TensorInfo t;
    t.name = name;
    t.depth = depth;
    t.packet = packet;
    t.kind = tenso_view_kind(v);
    t.dtype = tenso_view_dtype(v);
    t.ndim = tenso_view_ndim(v);
    if (const uint64_t *s = tenso_view_shape(v)) std::copy(s, s + t.ndim, t.shape);
    t.stored_bytes = tenso_view_packet_size(v);
    t.nbytes = tenso_view_nbytes(v);
    uint32_t flags = tenso_view_flags(v);
    t.integrity = (flags & TENSO_FLAG_INTEGRITY) != 0;
    t.compressed = (flags & TENSO_FLAG_COMPRESSION) != 0;
    // A body stored raw is one the view points at inside our mapping.
    const auto *data = static_cast<const uint8_t *>(tenso_view_data(v));
    if (data && !tenso_view_owns_data(v) && data >= map_ && data < map_ + size_) {
        t.has_body = true;
        t.body_offset = static_cast<uint64_t>(data - map_);
    }
    if (t.kind == TENSO_KIND_SPARSE_COO || t.kind == TENSO_KIND_SPARSE_CSR || t.kind == TENSO_KIND_SPARSE_CSC) {
        t.nbytes = 0;
        for (uint32_t c = 0; c < 3; ++c) {
            const tenso_view *comp;
            check(tenso_view_component(&comp, v, c), name);
            t.nbytes += tenso_view_nbytes(comp);
            if (c == 0) t.dtype = tenso_view_dtype(comp);
        }
    }
    if (t.kind != TENSO_KIND_BUNDLE) {
        rows.push_back(t);
        return;
    }
    t.entries = tenso_view_bundle_count(v);
    t.dtype = 0;
    rows.push_back(t);
    for (uint32_t i = 0; i < t.entries; ++i) {
        const char *key;
        size_t key_len;
        const tenso_view *child;
        check(tenso_view_bundle_entry(&key, &key_len, &child, v, i), name);
        std::string child_name =
            depth == 0 && name.empty() ? std::string(key, key_len) : name + "/" + std::string(key, key_len);
        describe(rows, child, child_name, depth + 1, packet);
    }
}

std::vector<TensorInfo> Source::tensors() const {
    std::vector<TensorInfo> rows;
    if (archive_) {
        uint64_t n = tenso_archive_count(archive_);
        for (uint64_t i = 0; i < n; ++i) {
            tenso_archive_entry e;
            check(tenso_archive_entry_at(&e, archive_, i), "entry " + std::to_string(i));
            TensorInfo t;
            t.name.assign(e.name, e.name_len);
            t.kind = e.kind;
            t.dtype = e.dtype;
            t.ndim = std::min<uint32_t>(e.ndim, TENSO_MAX_NDIM);
            std::copy(e.shape, e.shape + t.ndim, t.shape);
            t.stored_bytes = e.stored_bytes;
            t.nbytes = e.nbytes;
            t.has_offset = true;
            t.offset = e.offset;
            t.has_body = e.data_offset != 0;
            t.body_offset = e.data_offset;
            t.hashed = (e.flags & TENSO_ENTRY_HASHED) != 0;
            t.xxh3 = e.xxh3;
            if (format_ == TENSO_FORMAT_ARCHIVE) {
                // The packet's own header says whether it carries a footer or an LZ4 body; only
                // the header is read (the archive checked the range against the file).
                if (e.offset > size_ || e.stored_bytes > size_ - e.offset)
                    throw Failure{TENSO_E_BAD_OFFSET, "stored bytes lie outside the file (changed since opened?)",
                                  t.name};
                tenso_packet_info info;
                tenso_status st =
                    tenso_inspect(&info, map_ + e.offset, static_cast<size_t>(std::min(e.stored_bytes, kHeadBytes)));
                if (st != TENSO_OK) throw Failure{st, tenso_last_error(), t.name};
                t.integrity = (info.flags & TENSO_FLAG_INTEGRITY) != 0;
                t.compressed = (info.flags & TENSO_FLAG_COMPRESSION) != 0;
                t.entries = info.entry_count;
            }
            rows.push_back(t);
        }
        return rows;
    }
    tenso_decode_options opts = TENSO_DECODE_OPTIONS_INIT;
    opts.flags = TENSO_DECODE_SKIP_CHECKSUM;  // info describes; verify checks
    for (size_t i = 0; i < packets_.size(); ++i) {
        tenso_view *raw = nullptr;
        tenso_status st = tenso_loads(&raw, map_ + packets_[i].offset, static_cast<size_t>(packets_[i].size), &opts);
        ViewPtr v(raw);
        if (st != TENSO_OK) throw Failure{st, tenso_last_error(), packet_name(i)};
        size_t first = rows.size();
        bool bundle = tenso_view_kind(v.get()) == TENSO_KIND_BUNDLE;
        describe(rows, v.get(), bundle && packets_.size() == 1 ? "" : packet_name(i), 0, static_cast<int64_t>(i));
        rows[first].has_offset = true;
        rows[first].offset = packets_[i].offset;
        // A single top-level bundle is the file itself: list its entries only.
        if (bundle && packets_.size() == 1) rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(first));
    }
    return rows;
}

uint64_t Source::verify(Progress &progress) {
    if (archive_) {
        uint64_t bad = 0;
        tenso_status st = tenso_archive_verify(&bad, archive_, &Progress::callback, &progress);
        if (st != TENSO_OK) {
            Failure f{st, tenso_last_error(), ""};
            tenso_archive_entry e;
            if (bad < tenso_archive_count(archive_) && tenso_archive_entry_at(&e, archive_, bad) == TENSO_OK)
                f.tensor.assign(e.name, e.name_len);
            throw f;
        }
        return tenso_archive_count(archive_);
    }
    uint64_t count = 0;
    for (size_t i = 0; i < packets_.size(); ++i) {
        tenso_view *raw = nullptr;
        tenso_status st = tenso_loads(&raw, map_ + packets_[i].offset, static_cast<size_t>(packets_[i].size), nullptr);
        ViewPtr v(raw);
        if (st != TENSO_OK) throw Failure{st, tenso_last_error(), packet_name(i)};
        count += tenso_view_kind(v.get()) == TENSO_KIND_BUNDLE ? tenso_view_bundle_count(v.get()) : 1;
        progress.update(packets_[i].offset + packets_[i].size);
    }
    return count;
}

void Source::for_each(const Visitor &fn) {
    if (archive_) {
        uint64_t n = tenso_archive_count(archive_);
        for (uint64_t i = 0; i < n; ++i) {
            tenso_archive_entry e;
            check(tenso_archive_entry_at(&e, archive_, i), "entry " + std::to_string(i));
            std::string name(e.name, e.name_len);
            tenso_view *raw = nullptr;
            tenso_status st = tenso_archive_get(&raw, archive_, i, nullptr);
            ViewPtr v(raw);
            if (st != TENSO_OK) throw Failure{st, tenso_last_error(), name};
            fn(name, v.get(), e.stored_bytes);
        }
        return;
    }
    for (size_t i = 0; i < packets_.size(); ++i) {
        tenso_view *raw = nullptr;
        tenso_status st = tenso_loads(&raw, map_ + packets_[i].offset, static_cast<size_t>(packets_[i].size), nullptr);
        ViewPtr v(raw);
        if (st != TENSO_OK) throw Failure{st, tenso_last_error(), packet_name(i)};
        if (tenso_view_kind(v.get()) != TENSO_KIND_BUNDLE) {
            fn(packet_name(i), v.get(), packets_[i].size);
            continue;
        }
        for (uint32_t k = 0, n = tenso_view_bundle_count(v.get()); k < n; ++k) {
            const char *key;
            size_t key_len;
            const tenso_view *child;
            check(tenso_view_bundle_entry(&key, &key_len, &child, v.get(), k));
            fn(std::string(key, key_len), child, tenso_view_packet_size(child));
        }
    }
}

}  // namespace cli
