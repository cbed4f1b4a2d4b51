// reader.cpp - the multi-tensor file reader shared by every format (open, lookup, get, read,
// verify) and the writers' common checks; the formats themselves are archive.cpp and
// safetensors.cpp.
#include "file/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "error.hpp"
#include "file/archive.hpp"
#include "file/safetensors.hpp"
#include "format/hash.hpp"
#include "format/wire.hpp"

namespace tenso {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

bool same(const char *a, size_t an, const char *b, size_t bn) { return an == bn && std::memcmp(a, b, an) == 0; }

bool name_less(const char *a, size_t an, const char *b, size_t bn) {
    int c = std::memcmp(a, b, std::min(an, bn));
    return c < 0 || (c == 0 && an < bn);
}

// Indices 0 .. n-1 in the order of their keys (pointer, length); two equal keys are
// DUPLICATE_KEY, named by `what`.
template <class Key>
std::vector<uint64_t> sorted_unique(uint64_t n, Key key, const char *what) {
    std::vector<uint64_t> order(n);
    for (uint64_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint64_t l, uint64_t r) {
        auto kl = key(l), kr = key(r);
        return name_less(kl.first, kl.second, kr.first, kr.second);
    });
    for (size_t i = 1; i < order.size(); ++i) {
        auto kl = key(order[i - 1]), kr = key(order[i]);
        if (same(kl.first, kl.second, kr.first, kr.second))
            fail(TENSO_E_DUPLICATE_KEY, std::string(what) + " '" + std::string(kl.first, kl.second) + "' occurs twice");
    }
    return order;
}

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

int sniff_format(const uint8_t *p, size_t n) {
    if (archive_magic(p, n)) return TENSO_FORMAT_ARCHIVE;
    if (n >= 4 && std::memcmp(p, kMagic, 4) == 0) return TENSO_FORMAT_PACKET;
    if (n > 8) {
        // After the u64 header length: JSON (padded with spaces, perhaps led by whitespace)
        // for safetensors, bincode's Option tag (0 or 1) for bintensors.
        uint8_t c = p[8];
        if (c == '{' || c == ' ' || c == '\t' || c == '\n' || c == '\r') return TENSO_FORMAT_SAFETENSORS;
        if (c == 0 || c == 1) return TENSO_FORMAT_BINTENSORS;
    }
    return 0;
}

Archive::~Archive() {
    if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<Archive> Archive::open(const char *path, const ArchiveOptions &o) {
    const ArchiveLimits &lim = o.limits;

    std::unique_ptr<Archive> a(new Archive);
    a->fd_ = open_read(path);
    struct stat st;
    if (::fstat(a->fd_, &st) != 0) fail(TENSO_E_IO, std::string("fstat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(TENSO_E_IO, std::string(path) + " is not a regular file");
    a->map_ = map_file(a->fd_, size_t(st.st_size));
    const FileMap &m = *a->map_;
    // Header and index reads fault one page at a time (each reader prefetches its index range),
    // so a cold open reads kilobytes instead of the read-around around every fault. A single
    // packet file's headers are spread through it: it keeps read-around.
    m.random();
    int format = o.format ? o.format : sniff_format(m.data, m.size);
    if (format == TENSO_FORMAT_PACKET) m.normal();
    Catalog &cat = a->cat_;
    switch (format) {
    case TENSO_FORMAT_ARCHIVE: read_tenso_archive(cat, m, lim); break;
    case TENSO_FORMAT_PACKET: read_packet_file(cat, m, lim); break;
    case TENSO_FORMAT_SAFETENSORS: read_safetensors(cat, m, lim); break;
    case TENSO_FORMAT_BINTENSORS: read_bintensors(cat, m, lim); break;
    default:
        if (!m.size) fail(TENSO_E_TRUNCATED, std::string(path) + " is empty");
        fail(TENSO_E_CORRUPT, "not a tenso archive, Tenso packet, safetensors or bintensors file");
    }
    m.normal();
    if (!cat.owned.empty() && !cat.names) cat.names = cat.owned.data();
    if (!cat.owned.empty() && !cat.meta_base) cat.meta_base = cat.owned.data();

    // What every format shares: UTF-8 names and metadata, unique keys.
    for (const Catalog::Entry &e : cat.entries)
        if (!valid_utf8(reinterpret_cast<const uint8_t *>(cat.names + e.name_off), e.name_len))
            fail(TENSO_E_BAD_UTF8, "a tensor name is not valid UTF-8");
    for (const Catalog::Meta &mt : cat.meta)
        if (!valid_utf8(reinterpret_cast<const uint8_t *>(cat.meta_base + mt.key_off), mt.key_len) ||
            !valid_utf8(reinterpret_cast<const uint8_t *>(cat.meta_base + mt.val_off), mt.val_len))
            fail(TENSO_E_BAD_UTF8, "a metadata string is not valid UTF-8");
    if (!cat.table)
        a->by_name_ = sorted_unique(
            cat.entries.size(),
            [&](uint64_t i) {
                return std::make_pair(cat.names + cat.entries[i].name_off, size_t(cat.entries[i].name_len));
            },
            "tensor name");
    a->meta_by_key_ = sorted_unique(
        cat.meta.size(),
        [&](uint64_t i) { return std::make_pair(cat.meta_base + cat.meta[i].key_off, size_t(cat.meta[i].key_len)); },
        "metadata key");

    a->verified_.reset(new std::atomic<uint8_t>[cat.entries.size()]);
    for (size_t i = 0; i < cat.entries.size(); ++i) a->verified_[i].store(0, std::memory_order_relaxed);
    a->no_verify_ = o.no_verify;
    if (o.verify_all) {
        uint64_t bad = 0;
        a->verify(&bad, nullptr);
    }
    return a;
}

void Archive::check_size(uint64_t end) const {
    // Mapped pages past a file's new end raise SIGBUS: refuse instead (a truncation after this
    // check still races, see archive.h).
    const uint64_t size = fd_size(fd_);
    if (size < end)
        fail(TENSO_E_TRUNCATED,
             "the file was truncated to " + num(size) + " bytes since it was opened; " + num(end) + " are needed");
}

void Archive::check_mapped(const void *p) const {
    const auto at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(map_->data);
    if (p && at >= base && at - base < map_->size) check_size(map_->size);
}

std::string Archive::name_of(const Catalog::Entry &e) const {
    check_mapped(cat_.names);
    return cat_.name(e);
}

const Catalog::Entry &Archive::at(uint64_t index) const {
    if (index >= cat_.entries.size())
        fail(TENSO_E_INVALID_ARGUMENT,
             "index " + num(index) + " is out of range (" + num(cat_.entries.size()) + " tensors)");
    return cat_.entries[index];
}

ArchiveEntry Archive::entry(uint64_t index) const {
    const Catalog::Entry &e = at(index);
    ArchiveEntry out;
    out.name = cat_.names + e.name_off;
    out.name_len = e.name_len;
    out.kind = e.kind;
    out.dtype = e.dtype;
    out.ndim = e.ndim;
    out.flags = e.flags;
    out.shape = cat_.dims.data() + e.shape_off;
    out.offset = e.offset;
    out.stored_bytes = e.stored;
    out.nbytes = e.nbytes;
    out.data_offset = e.data_offset;
    out.xxh3 = e.xxh3;
    return out;
}

bool Archive::find(uint64_t *index_out, const char *name, size_t len) const {
    const auto &E = cat_.entries;
    check_mapped(cat_.names);  // a tenso archive's names and table, a packet file's bundle keys
    if (cat_.table) {
        for (uint64_t s = xxh3(name, len) & cat_.table_mask, n = 0; n <= cat_.table_mask;
             s = (s + 1) & cat_.table_mask, ++n) {
            uint32_t v = rd32(cat_.table + 4 * s);
            if (!v) return false;
            if (v > E.size()) return false;  // the slot changed in the file since open() checked it
            const Catalog::Entry &e = E[v - 1];
            if (same(name, len, cat_.names + e.name_off, e.name_len)) {
                *index_out = v - 1;
                return true;
            }
        }
        return false;
    }
    auto it = std::lower_bound(by_name_.begin(), by_name_.end(), 0, [&](uint64_t i, int) {
        return name_less(cat_.names + E[i].name_off, E[i].name_len, name, len);
    });
    if (it == by_name_.end() || !same(cat_.names + E[*it].name_off, E[*it].name_len, name, len)) return false;
    *index_out = *it;
    return true;
}

void Archive::check_hash(uint64_t index) {
    const Catalog::Entry &e = cat_.entries[index];
    uint8_t s = verified_[index].load(std::memory_order_acquire);
    if (s == 0) {
        uint64_t h = xxh3(map_->data + e.offset, e.stored);
        s = h == e.xxh3 ? 1 : 2;
        verified_[index].store(s, std::memory_order_release);  // racing threads agree on s
    }
    if (s == 2)
        fail(TENSO_E_CHECKSUM,
             "tensor '" + name_of(e) + "': XXH3 of its " + num(e.stored) + " stored bytes does not match the index");
}

std::unique_ptr<View> Archive::decode_entry(uint64_t index, Limits lim) {
    const Catalog::Entry &e = cat_.entries[index];
    const uint8_t *p = map_->data + e.offset;
    Node n;
    try {
        n = scan(p, e.stored, lim);
    } catch (const NeedMore &) {
        fail(TENSO_E_CORRUPT,
             "tensor '" + name_of(e) + "': its packet runs past the " + num(e.stored) + " bytes the index gives it");
    }
    PacketFacts f = packet_facts(n);
    bool agree = n.end == e.stored && f.kind == e.kind && f.dtype == e.dtype && f.ndim == e.ndim &&
                 f.nbytes == e.nbytes && (f.body_off ? e.offset + f.body_off : 0) == e.data_offset &&
                 std::equal(f.shape, f.shape + f.ndim, cat_.dims.begin() + long(e.shape_off));
    if (!agree) fail(TENSO_E_CORRUPT, "tensor '" + name_of(e) + "': the packet disagrees with its index entry");
    return bind_scanned(n, p, lim, map_);  // the Node just checked, not a second read of the file
}

std::unique_ptr<View> Archive::get(uint64_t index, Limits lim) {
    const Catalog::Entry &e = at(index);
    check_size(e.offset + e.stored);
    if (cat_.format == TENSO_FORMAT_ARCHIVE || cat_.format == TENSO_FORMAT_PACKET) {
        if ((e.flags & TENSO_ENTRY_HASHED) && !no_verify_) {
            check_hash(index);
            // The index hash covers the whole packet, footer included: checking the footer
            // again would be a second pass over the body for nothing.
            lim.verify_checksums = false;
        }
        return decode_entry(index, lim);
    }
    // safetensors / bintensors: a dense view built from the header (checked at open).
    const uint64_t *shape = cat_.dims.data() + e.shape_off;
    // The limits as read once above. The 1e9-element default is the Tenso protocol's, not
    // safetensors': a larger tensor in such a file is refused only when the caller asks.
    if (e.ndim > lim.max_ndim) fail(TENSO_E_TOO_MANY_DIMS, "ndim " + num(e.ndim) + " exceeds max_ndim");
    if (lim.max_elements != TENSO_MAX_ELEMENTS) checked_numel(shape, e.ndim, lim.max_elements);
    std::unique_ptr<View> v(new View);
    v->kind = TENSO_KIND_DENSE;
    v->dtype = e.dtype;
    v->ndim = e.ndim;
    v->shape.assign(shape, e.ndim);
    // The alignment the file gives the body (the mapping itself is page-aligned).
    uint64_t al = e.offset & (~e.offset + 1);
    v->alignment = uint32_t(std::min<uint64_t>(al ? al : TENSO_MAX_ALIGNMENT, TENSO_MAX_ALIGNMENT));
    v->data = e.nbytes ? map_->data + e.offset : nullptr;
    v->nbytes = e.nbytes;
    v->keep = map_;
    v->owns_data = true;
    return v;
}

void Archive::read(void *dst, uint64_t index, uint64_t offset, uint64_t len) const {
    const Catalog::Entry &e = at(index);
    if (!e.data_offset)
        fail(TENSO_E_UNSUPPORTED_KIND, "tensor '" + name_of(e) + "' is not stored raw (compressed or a container)");
    if (offset > e.nbytes || len > e.nbytes - offset)
        fail(TENSO_E_INVALID_ARGUMENT,
             "range [" + num(offset) + ", +" + num(len) + ") is outside the body of " + num(e.nbytes) + " bytes");
    if (len) pread_all(fd_, dst, len, e.data_offset + offset);
}

void Archive::metadata_at(const char **k, size_t *klen, const char **v, size_t *vlen, uint64_t index) const {
    if (index >= cat_.meta.size()) fail(TENSO_E_INVALID_ARGUMENT, "metadata index " + num(index) + " is out of range");
    const Catalog::Meta &m = cat_.meta[index];
    *k = cat_.meta_base + m.key_off;
    *klen = m.key_len;
    *v = cat_.meta_base + m.val_off;
    *vlen = m.val_len;
}

bool Archive::metadata_find(const char **v, size_t *vlen, const char *key, size_t key_len) const {
    check_mapped(cat_.meta_base);
    auto it = std::lower_bound(meta_by_key_.begin(), meta_by_key_.end(), 0, [&](uint64_t i, int) {
        return name_less(cat_.meta_base + cat_.meta[i].key_off, cat_.meta[i].key_len, key, key_len);
    });
    if (it == meta_by_key_.end()) return false;
    const Catalog::Meta &m = cat_.meta[*it];
    if (!same(cat_.meta_base + m.key_off, m.key_len, key, key_len)) return false;
    *v = cat_.meta_base + m.val_off;
    *vlen = m.val_len;
    return true;
}

void Archive::verify(uint64_t *bad, const ArchiveProgress &progress) {
    uint64_t total = 0, done = 0;
    for (const Catalog::Entry &e : cat_.entries) total += e.stored;
    auto report = [&] {
        if (progress && progress(done, total)) fail(TENSO_E_USER, "the progress callback stopped verify");
    };
    report();
    const bool packets = cat_.format == TENSO_FORMAT_ARCHIVE || cat_.format == TENSO_FORMAT_PACKET;
    for (uint64_t i = 0; i < cat_.entries.size(); ++i) {
        const Catalog::Entry &e = cat_.entries[i];
        if (packets) {
            try {
                check_size(e.offset + e.stored);
                Limits lim;
                if (e.flags & TENSO_ENTRY_HASHED) {
                    check_hash(i);  // also when opened with NO_VERIFY: this is the explicit check
                    lim.verify_checksums = false;
                }
                decode_entry(i, lim);
            } catch (const Error &) {
                *bad = i;
                throw;
            }
        }
        done += e.stored;
        report();
    }
}

// ------------------------------------------------------------------------------------------
// Writers
// ------------------------------------------------------------------------------------------

void ArchiveWriter::add(const char *name, size_t len, const Value &v) {
    if (finished_) fail(TENSO_E_INVALID_ARGUMENT, "the writer is finished");
    if (broken_) fail(TENSO_E_IO, "an earlier write failed; the file is abandoned");
    if (len > TENSO_MAX_KEY_BYTES) fail(TENSO_E_INVALID_ARGUMENT, "tensor name is longer than 65536 bytes");
    std::string n(name ? name : "", len);
    if (!valid_utf8(reinterpret_cast<const uint8_t *>(n.data()), n.size()))
        fail(TENSO_E_BAD_UTF8, "tensor name is not valid UTF-8");
    if (names_.count(n)) fail(TENSO_E_DUPLICATE_KEY, "tensor name '" + n + "' was added already");
    add_checked(n, v);
    names_.insert(std::move(n));
}

void ArchiveWriter::set_metadata(const std::string &key, const std::string &value) {
    if (finished_) fail(TENSO_E_INVALID_ARGUMENT, "the writer is finished");
    if (key.size() > UINT32_MAX || value.size() > UINT32_MAX)
        fail(TENSO_E_INVALID_ARGUMENT, "metadata strings are limited to 4 GiB");
    if (!valid_utf8(reinterpret_cast<const uint8_t *>(key.data()), key.size()) ||
        !valid_utf8(reinterpret_cast<const uint8_t *>(value.data()), value.size()))
        fail(TENSO_E_BAD_UTF8, "metadata strings must be valid UTF-8");
    for (auto &kv : meta_)
        if (kv.first == key) {
            kv.second = value;
            return;
        }
    meta_.emplace_back(key, value);
}

void ArchiveWriter::finish() {
    if (finished_) fail(TENSO_E_INVALID_ARGUMENT, "the writer is finished already");
    if (broken_) fail(TENSO_E_IO, "an earlier write failed; the file is abandoned");
    finished_ = true;  // one attempt: after a failure the temporary goes with the writer
    finish_file();
}

std::unique_ptr<ArchiveWriter> ArchiveWriter::open(const char *path, const ArchiveWriteOptions &o) {
    int format = o.format;
    if (format == TENSO_FORMAT_AUTO) {
        std::string p(path);
        format = ends_with(p, ".safetensors") ? TENSO_FORMAT_SAFETENSORS
                 : ends_with(p, ".bt")        ? TENSO_FORMAT_BINTENSORS
                                              : TENSO_FORMAT_ARCHIVE;
    }
    if (format == TENSO_FORMAT_ARCHIVE) return make_tenso_writer(path, o);
    if (format == TENSO_FORMAT_SAFETENSORS || format == TENSO_FORMAT_BINTENSORS)
        return make_foreign_writer(path, format);
    fail(TENSO_E_INVALID_ARGUMENT, "format " + num(uint32_t(format)) + " cannot be written");
}

}  // namespace tenso
