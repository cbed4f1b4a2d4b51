// archive.cpp - the tenso archive format (docs/archive-format.md: reader, index validation,
// streaming writer) and files that hold a single packet. The reader they feed is reader.cpp.
#include "file/archive.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "error.hpp"
#include "format/hash.hpp"
#include "format/wire.hpp"

namespace tenso {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

// ---- the tenso archive layout (docs/archive-format.md) ----
// Byte 0 has the high bit set and CR LF / ^Z follow, as in PNG: a 7-bit or newline-translating
// transfer garbles the magic instead of the data. It shares no prefix with a packet's "TNSO".
constexpr uint8_t kArcMagic[8] = {0x89, 'T', 'N', 'S', 'A', '\r', '\n', 0x1A};
constexpr uint16_t kArcVersion = 1;
constexpr size_t kFileHeader = 64;
constexpr size_t kIndexHeader = 48;
constexpr uint32_t kRecord = 64;
constexpr size_t kMetaRecord = 16;
constexpr uint8_t kIndexMagic[4] = {'T', 'I', 'D', 'X'};
// Writers stage packets up to this size in memory (one copy, one pwrite); larger ones go out
// with vectored I/O straight from the caller's memory.
constexpr size_t kStage = size_t(1) << 20;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }
uint64_t pad8(uint64_t v) { return align_up(v, 8); }

// Linear probing work allowed for a whole table: a table built from XXH3 at load <= 1/2 costs
// about 1.5 probes per name; a crafted one (names colliding in the low bits) would make open
// and find quadratic, so it is refused as corrupt.
uint64_t probe_budget(uint64_t count) { return 16 * count + 4096; }

// The longest run of occupied slots (cyclic) bounds what a lookup of an absent name costs; at
// load <= 1/2 an honest table's longest run grows like log(capacity), so this never refuses one.
uint64_t run_budget(uint64_t cap) {
    uint64_t bits = 0;
    while ((uint64_t(1) << bits) < cap) ++bits;
    return 64 + 16 * bits;
}

template <class Slot>
uint64_t longest_run(uint64_t cap, Slot occupied) {
    uint64_t start = 0;
    while (start < cap && occupied(start)) ++start;
    if (start == cap) return cap;  // full (refused by the load check before it matters)
    uint64_t best = 0, run = 0;
    for (uint64_t k = 1; k <= cap; ++k) {  // from the first empty slot, once around
        if (occupied((start + k) & (cap - 1))) best = std::max(best, ++run);
        else run = 0;
    }
    return best;
}

bool same(const char *a, size_t an, const char *b, size_t bn) { return an == bn && std::memcmp(a, b, an) == 0; }

bool raw_body(const Node &n) {
    switch (n.kind) {
    case TENSO_KIND_DENSE: return !n.compressed;
    case TENSO_KIND_QUANTIZED:
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: return true;
    default: return false;
    }
}

void push_packet(Catalog &cat, uint64_t name_off, uint32_t name_len, const Node &n, uint64_t base) {
    PacketFacts f = packet_facts(n);
    Catalog::Entry e;
    e.name_off = name_off;
    e.name_len = name_len;
    e.kind = f.kind;
    e.dtype = f.dtype;
    e.ndim = f.ndim;
    e.shape_off = cat.dims.size();
    cat.dims.insert(cat.dims.end(), f.shape, f.shape + f.ndim);
    e.offset = base + n.start;
    e.stored = n.end - n.start;
    e.nbytes = f.nbytes;
    e.data_offset = f.body_off ? e.offset + f.body_off : 0;
    cat.entries.push_back(e);
}

}  // namespace

PacketFacts packet_facts(const Node &n) {
    PacketFacts f;
    f.kind = uint8_t(n.kind);
    f.dtype = uint8_t(n.dtype);
    f.ndim = uint8_t(n.ndim);
    std::copy(n.shape.data(), n.shape.data() + n.ndim, f.shape);
    f.nbytes = n.nbytes;
    f.body_off = raw_body(n) ? n.body_off - n.start : 0;
    return f;
}

bool archive_magic(const uint8_t *p, size_t n) {
    return n >= sizeof kArcMagic ? std::memcmp(p, kArcMagic, sizeof kArcMagic) == 0
                                 : n && std::memcmp(p, kArcMagic, n) == 0;
}

// ------------------------------------------------------------------------------------------
// Reading tenso archives: everything in the index is checked here, in O(count), without
// touching the data area.
// ------------------------------------------------------------------------------------------

void read_tenso_archive(Catalog &cat, const FileMap &m, const ArchiveLimits &lim) {
    const uint8_t *b = m.data;
    const size_t size = m.size;
    if (size < kFileHeader) {
        if (size && std::memcmp(b, kArcMagic, std::min(size, sizeof kArcMagic)) == 0)
            fail(TENSO_E_TRUNCATED, "file of " + num(size) + " bytes ends inside the 64-byte archive header");
        fail(TENSO_E_CORRUPT, "not a tenso archive: " + num(size) + " bytes");
    }
    if (std::memcmp(b, kArcMagic, sizeof kArcMagic) != 0) fail(TENSO_E_CORRUPT, "bad magic: not a tenso archive");
    if (rd16(b + 8) != kArcVersion)
        fail(TENSO_E_UNSUPPORTED_VERSION, "archive format version " + num(rd16(b + 8)) + " (this reader knows 1)");
    if (rd16(b + 10) != kFileHeader) fail(TENSO_E_CORRUPT, "archive header size is not 64");
    if (xxh3(b, 56) != rd64(b + 56)) fail(TENSO_E_CORRUPT, "archive header checksum mismatch");
    if (rd32(b + 12) || rd32(b + 20)) fail(TENSO_E_CORRUPT, "archive header has unknown flags set");
    const uint64_t A = rd32(b + 16);
    if (!is_pow2(A) || A < TENSO_DEFAULT_ALIGNMENT || A > TENSO_MAX_ALIGNMENT)
        fail(TENSO_E_CORRUPT, "archive alignment " + num(A) + " is not a power of two in [64, 2^20]");
    const uint64_t ioff = rd64(b + 24), isz = rd64(b + 32), count = rd64(b + 40), mcount = rd64(b + 48);
    if (count > lim.max_tensors)
        fail(TENSO_E_LIMIT, num(count) + " tensors exceed max_tensors (" + num(lim.max_tensors) + ")");
    if (mcount > lim.max_tensors)
        fail(TENSO_E_LIMIT, num(mcount) + " metadata pairs exceed max_tensors (" + num(lim.max_tensors) + ")");
    if (isz > lim.max_index_bytes)
        fail(TENSO_E_LIMIT,
             "index of " + num(isz) + " bytes exceeds max_index_bytes (" + num(lim.max_index_bytes) + ")");
    if (ioff == 0) fail(TENSO_E_CORRUPT, "archive was never finished (no index)");
    if (ioff < A || ioff % A) fail(TENSO_E_CORRUPT, "index offset " + num(ioff) + " is not aligned to " + num(A));
    if (isz > UINT64_MAX - ioff) fail(TENSO_E_CORRUPT, "index range overflows");
    if (ioff + isz > size)
        fail(TENSO_E_TRUNCATED, "file has " + num(size) + " bytes, its index ends at " + num(ioff + isz));
    if (ioff + isz < size) fail(TENSO_E_CORRUPT, num(size - ioff - isz) + " bytes after the index");
    if (isz < kIndexHeader + 8) fail(TENSO_E_CORRUPT, "index of " + num(isz) + " bytes is too short");
    m.prefetch(ioff, isz);
    const uint8_t *x = b + ioff;
    if (xxh3(x, isz - 8) != rd64(x + isz - 8)) fail(TENSO_E_CORRUPT, "index checksum mismatch");
    if (std::memcmp(x, kIndexMagic, 4) != 0) fail(TENSO_E_CORRUPT, "bad index magic");
    const uint64_t rec = rd32(x + 4), cap = rd64(x + 8), ndims = rd64(x + 16), names_size = rd64(x + 24),
                   meta_size = rd64(x + 32);
    if (rec < kRecord || rec % 8) fail(TENSO_E_CORRUPT, "index record size " + num(rec) + " is invalid");
    if (rd64(x + 40)) fail(TENSO_E_CORRUPT, "index header has unknown fields set");

    // The sections, in order; any claim past the index is refused before it is multiplied.
    uint64_t pos = kIndexHeader;
    auto take = [&](uint64_t n, uint64_t each, const char *what) {
        if (n > (isz - pos) / each) fail(TENSO_E_CORRUPT, std::string("index ") + what + " run past the index");
        uint64_t at = pos;
        pos += n * each;
        pos = pad8(pos);
        if (pos > isz) fail(TENSO_E_CORRUPT, std::string("index ") + what + " run past the index");
        return at;
    };
    const uint64_t recs_at = take(count, rec, "records");
    const uint64_t dims_at = take(ndims, 8, "shapes");
    const uint64_t table_at = take(cap, 4, "hash table slots");
    const uint64_t names_at = take(names_size, 1, "names");
    const uint64_t meta_at = take(mcount, kMetaRecord, "metadata records");
    const uint64_t blob_at = take(meta_size, 1, "metadata strings");
    if (pos + 8 != isz) fail(TENSO_E_CORRUPT, "index sections do not add up to the index size");
    if (!is_pow2(cap) || cap < 2 * count)
        fail(TENSO_E_CORRUPT,
             "hash table capacity " + num(cap) + " is not a power of two of at least twice the tensor count");

    cat.format = TENSO_FORMAT_ARCHIVE;
    cat.alignment = uint32_t(A);
    cat.names = reinterpret_cast<const char *>(x + names_at);
    cat.meta_base = reinterpret_cast<const char *>(x + blob_at);
    cat.table = x + table_at;
    cat.table_mask = cap - 1;
    cat.dims.resize(ndims);
    for (uint64_t i = 0; i < ndims; ++i) cat.dims[i] = rd64(x + dims_at + 8 * i);

    cat.entries.resize(count);
    uint64_t expect = A;  // packets tile the data area: each at the previous end, padded to A
    for (uint64_t i = 0; i < count; ++i) {
        const uint8_t *r = x + recs_at + i * rec;
        Catalog::Entry &e = cat.entries[i];
        e.name_off = rd64(r);
        e.name_len = rd32(r + 8);
        e.kind = r[12];
        e.dtype = r[13];
        e.ndim = r[14];
        e.flags = r[15];
        e.shape_off = rd64(r + 16);
        e.offset = rd64(r + 24);
        e.stored = rd64(r + 32);
        e.nbytes = rd64(r + 40);
        e.data_offset = rd64(r + 48);
        e.xxh3 = rd64(r + 56);
        auto at = [i] { return "index entry " + num(i); };  // built only for a failure
        if (e.name_off > names_size || e.name_len > names_size - e.name_off)
            fail(TENSO_E_CORRUPT, at() + ": name runs past the names");
        if (e.flags & ~uint8_t(TENSO_ENTRY_HASHED)) fail(TENSO_E_CORRUPT, at() + ": unknown flags");
        if (e.kind < TENSO_KIND_DENSE || e.kind > TENSO_KIND_GPU_IPC_REF)
            fail(TENSO_E_CORRUPT, at() + ": unknown kind");
        if (e.ndim > TENSO_MAX_NDIM) fail(TENSO_E_CORRUPT, at() + ": ndim above 32");
        if (e.shape_off > ndims || e.ndim > ndims - e.shape_off)
            fail(TENSO_E_CORRUPT, at() + ": shape runs past the shapes");
        for (uint32_t d = 0; d < e.ndim; ++d)
            if (cat.dims[e.shape_off + d] > UINT32_MAX) fail(TENSO_E_CORRUPT, at() + ": dimension above 2^32 - 1");
        if (e.kind == TENSO_KIND_DENSE) {
            size_t item = dtype_itemsize(e.dtype);
            if (!item) fail(TENSO_E_CORRUPT, at() + ": dense entry with dtype code " + num(e.dtype));
            if (checked_numel(cat.dims.data() + e.shape_off, e.ndim, TENSO_MAX_ELEMENTS) * item != e.nbytes)
                fail(TENSO_E_CORRUPT, at() + ": nbytes disagrees with shape x itemsize");
        }
        if (e.offset % A) fail(TENSO_E_BAD_OFFSET, at() + ": offset " + num(e.offset) + " is not aligned to " + num(A));
        if (e.offset < expect)
            fail(TENSO_E_BAD_OFFSET,
                 at() + ": offset " + num(e.offset) + " overlaps the previous packet (or the header)");
        if (e.offset > expect) fail(TENSO_E_BAD_OFFSET, at() + ": hole before offset " + num(e.offset));
        if (e.stored < kHeaderLegacy || e.stored > ioff - e.offset)
            fail(TENSO_E_BAD_OFFSET,
                 at() + ": " + num(e.stored) + " bytes at " + num(e.offset) + " leave the data area");
        if (e.data_offset && (e.data_offset < e.offset || e.data_offset - e.offset > e.stored ||
                              e.nbytes > e.stored - (e.data_offset - e.offset)))
            fail(TENSO_E_BAD_OFFSET, at() + ": body range lies outside its packet");
        expect = align_up(e.offset + e.stored, A);
    }
    if (expect != ioff) fail(TENSO_E_BAD_OFFSET, "hole between the last packet and the index");

    cat.meta.resize(mcount);
    for (uint64_t j = 0; j < mcount; ++j) {
        const uint8_t *r = x + meta_at + j * kMetaRecord;
        uint64_t off = rd64(r), kl = rd32(r + 8), vl = rd32(r + 12);
        if (off > meta_size || kl > meta_size - off || vl > meta_size - off - kl)
            fail(TENSO_E_CORRUPT, "metadata record " + num(j) + " runs past the metadata strings");
        cat.meta[j] = Catalog::Meta{off, kl, off + kl, vl};
    }

    // The hash table: slots in range, each entry reachable from its name's home slot (which
    // also meets any second entry of the same name on the way), within the probe budget.
    // The file may change under the mapping: every read of a slot is checked, not only the first.
    auto slot = [&](uint64_t s) {
        uint32_t v = rd32(cat.table + 4 * s);
        if (v > count)
            fail(TENSO_E_CORRUPT, "hash table slot " + num(s) + " names entry " + num(v) + " of " + num(count));
        return v;
    };
    uint64_t used = 0;
    for (uint64_t s = 0; s < cap; ++s) used += slot(s) != 0;
    if (used != count) fail(TENSO_E_CORRUPT, "hash table holds " + num(used) + " entries, the index " + num(count));
    if (longest_run(cap, [&](uint64_t s) { return slot(s) != 0; }) > run_budget(cap))
        fail(TENSO_E_CORRUPT, "hash table is degenerate (a run of occupied slots is too long)");
    uint64_t steps = 0;
    const uint64_t budget = probe_budget(count);
    for (uint64_t i = 0; i < count; ++i) {
        const Catalog::Entry &e = cat.entries[i];
        const char *name = cat.names + e.name_off;
        for (uint64_t s = xxh3(name, e.name_len) & cat.table_mask;; s = (s + 1) & cat.table_mask) {
            if (++steps > budget) fail(TENSO_E_CORRUPT, "hash table is degenerate (probe chains too long)");
            uint32_t v = slot(s);
            if (!v) fail(TENSO_E_CORRUPT, "entry " + num(i) + " is missing from the hash table");
            if (v - 1 == i) break;
            const Catalog::Entry &o = cat.entries[v - 1];
            if (same(name, e.name_len, cat.names + o.name_off, o.name_len))
                fail(TENSO_E_DUPLICATE_KEY, "tensor name '" + cat.name(e) + "' occurs twice");
        }
    }
}

// ------------------------------------------------------------------------------------------
// A file holding one packet: a dense (or other) tensor is one entry named "tensor"; a bundle's
// entries are the tensors, each a standard packet in place.
// ------------------------------------------------------------------------------------------

void read_packet_file(Catalog &cat, const FileMap &m, const ArchiveLimits &lim) {
    if (!m.size) fail(TENSO_E_TRUNCATED, "empty file");
    Node n;
    try {
        n = scan(m.data, m.size, Limits());
    } catch (const NeedMore &more) {
        fail(TENSO_E_TRUNCATED,
             "file of " + num(m.size) + " bytes ends inside its packet (needs " + num(more.need) + ")");
    }
    if (n.end != m.size) fail(TENSO_E_CORRUPT, num(m.size - n.end) + " bytes after the packet");
    cat.format = TENSO_FORMAT_PACKET;
    if (n.kind == TENSO_KIND_BUNDLE) {
        if (n.children.size() > lim.max_tensors) fail(TENSO_E_LIMIT, "bundle has more entries than max_tensors");
        cat.names = reinterpret_cast<const char *>(m.data);
        for (const Node::Child &c : n.children) push_packet(cat, c.key_off, uint32_t(c.key_len), c.node, 0);
    } else {
        cat.owned = "tensor";
        push_packet(cat, 0, 6, n, 0);
    }
}

namespace {

class TensoWriter : public ArchiveWriter {
public:
    TensoWriter(const char *path, const ArchiveWriteOptions &o)
        : ArchiveWriter(path), enc_(o.encode), align_(o.alignment ? o.alignment : TENSO_DEFAULT_ALIGNMENT),
          hash_(o.hash) {
        if (!is_pow2(align_) || align_ < TENSO_DEFAULT_ALIGNMENT || align_ > TENSO_MAX_ALIGNMENT)
            fail(TENSO_E_INVALID_ARGUMENT, "archive alignment " + num(align_) + " is not a power of two in [64, 2^20]");
        // Packets sit at A-aligned offsets; encoded with alignment A, their bodies do too.
        if (!o.encode_alignment_given) enc_.alignment = align_;
        pos_ = align_;  // the header's slot, written by finish
    }

private:
    EncodeOptions enc_;
    uint32_t align_;
    bool hash_;
    uint64_t pos_;
    std::vector<Catalog::Entry> entries_;
    std::vector<uint64_t> dims_;
    std::string names_blob_;
    std::vector<uint8_t> stage_;

    void add_checked(const std::string &name, const Value &v) override {
        Plan p(enc_, false);
        p.add(v);  // refusals (and compression) happen here, before any byte is written
        const size_t size = p.size();
        const uint64_t off = pos_;
        const int fd = file_.fd();
        broken_ = true;
        Node n;
        uint64_t h = 0;
        auto describe = [&](const uint8_t *bytes) {
            n = scan(bytes, size, Limits());
            if (n.end != size) fail(TENSO_E_INTERNAL, "encoded packet does not scan to its own size");
            if (hash_) h = xxh3(bytes, size);
        };
        if (size <= kStage) {
            stage_.resize(size);
            p.write_to(stage_.data());
            describe(stage_.data());
            pwrite_all(fd, stage_.data(), size, off);
        } else {
            if (::lseek(fd, off_t(off), SEEK_SET) < 0) fail(TENSO_E_IO, std::string("lseek: ") + std::strerror(errno));
            p.write_fd(fd, nullptr);
            // Read back through the page cache (the bytes are hot there): the scanner records
            // the layout, the hash covers exactly the bytes on disk.
            const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
            const uint64_t mo = off & ~(page - 1);
            const size_t mlen = size_t(off + size - mo);
            void *addr = ::mmap(nullptr, mlen, PROT_READ, MAP_SHARED | (hash_ ? MAP_POPULATE : 0), fd, off_t(mo));
            if (addr == MAP_FAILED) fail(TENSO_E_IO, std::string("mmap: ") + std::strerror(errno));
            std::unique_ptr<void, std::function<void(void *)>> unmap(addr, [mlen](void *q) { ::munmap(q, mlen); });
            describe(static_cast<const uint8_t *>(addr) + (off - mo));
        }
        if (name.size() > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "name too long");
        Catalog::Entry e;
        e.name_off = names_blob_.size();
        e.name_len = uint32_t(name.size());
        names_blob_ += name;
        PacketFacts f = packet_facts(n);
        e.kind = f.kind;
        e.dtype = f.dtype;
        e.ndim = f.ndim;
        e.flags = hash_ ? TENSO_ENTRY_HASHED : 0;
        e.shape_off = dims_.size();
        dims_.insert(dims_.end(), f.shape, f.shape + f.ndim);
        e.offset = off;
        e.stored = size;
        e.nbytes = f.nbytes;
        e.data_offset = f.body_off ? off + f.body_off : 0;
        e.xxh3 = h;
        entries_.push_back(e);
        pos_ = align_up(off + size, align_);
        broken_ = false;
    }

    // The hash table: capacity >= 2 x count (load <= 1/2), doubled while the names probe past
    // the budgets the reader enforces.
    std::vector<uint32_t> build_table() const {
        uint64_t cap = 8;
        while (cap < 2 * entries_.size()) cap <<= 1;
        std::vector<uint64_t> hashes(entries_.size());
        for (size_t i = 0; i < entries_.size(); ++i)
            hashes[i] = xxh3(names_blob_.data() + entries_[i].name_off, entries_[i].name_len);
        for (int tries = 0; tries < 8; ++tries, cap <<= 1) {
            std::vector<uint32_t> t(cap, 0);
            uint64_t steps = 0;
            for (size_t i = 0; i < entries_.size(); ++i) {
                uint64_t s = hashes[i] & (cap - 1);
                for (++steps; t[s]; s = (s + 1) & (cap - 1)) ++steps;
                t[s] = uint32_t(i + 1);
            }
            if (steps <= probe_budget(entries_.size()) &&
                longest_run(cap, [&](uint64_t k) { return t[k] != 0; }) <= run_budget(cap))
                return t;
        }
        fail(TENSO_E_LIMIT, "tensor names collide too often in the hash index");
    }

    void finish_file() override {
        broken_ = true;
        const uint64_t count = entries_.size(), mcount = meta_.size();
        if (count >= UINT32_MAX) fail(TENSO_E_LIMIT, "an archive holds fewer than 2^32 - 1 tensors");
        std::vector<uint32_t> table = build_table();
        std::string blob;
        std::vector<uint64_t> moff;
        for (const auto &kv : meta_) {
            moff.push_back(blob.size());
            blob += kv.first;
            blob += kv.second;
        }
        const uint64_t recs_at = kIndexHeader, dims_at = pad8(recs_at + count * kRecord),
                       table_at = pad8(dims_at + 8 * dims_.size()), names_at = pad8(table_at + 4 * table.size()),
                       meta_at = pad8(names_at + names_blob_.size()), blob_at = pad8(meta_at + kMetaRecord * mcount),
                       isz = pad8(blob_at + blob.size()) + 8;
        std::vector<uint8_t> x(isz, 0);
        std::memcpy(x.data(), kIndexMagic, 4);
        wr32(&x[4], kRecord);
        wr64(&x[8], table.size());
        wr64(&x[16], dims_.size());
        wr64(&x[24], names_blob_.size());
        wr64(&x[32], blob.size());
        for (uint64_t i = 0; i < count; ++i) {
            const Catalog::Entry &e = entries_[i];
            uint8_t *r = &x[recs_at + i * kRecord];
            wr64(r, e.name_off);
            wr32(r + 8, e.name_len);
            r[12] = e.kind;
            r[13] = e.dtype;
            r[14] = e.ndim;
            r[15] = e.flags;
            wr64(r + 16, e.shape_off);
            wr64(r + 24, e.offset);
            wr64(r + 32, e.stored);
            wr64(r + 40, e.nbytes);
            wr64(r + 48, e.data_offset);
            wr64(r + 56, e.xxh3);
        }
        for (size_t i = 0; i < dims_.size(); ++i) wr64(&x[dims_at + 8 * i], dims_[i]);
        for (size_t i = 0; i < table.size(); ++i) wr32(&x[table_at + 4 * i], table[i]);
        if (!names_blob_.empty()) std::memcpy(&x[names_at], names_blob_.data(), names_blob_.size());
        for (uint64_t j = 0; j < mcount; ++j) {
            uint8_t *r = &x[meta_at + j * kMetaRecord];
            wr64(r, moff[j]);
            wr32(r + 8, uint32_t(meta_[j].first.size()));
            wr32(r + 12, uint32_t(meta_[j].second.size()));
        }
        if (!blob.empty()) std::memcpy(&x[blob_at], blob.data(), blob.size());
        wr64(&x[isz - 8], xxh3(x.data(), isz - 8));
        const int fd = file_.fd();
        pwrite_all(fd, x.data(), x.size(), pos_);
        uint8_t h[kFileHeader] = {};
        std::memcpy(h, kArcMagic, sizeof kArcMagic);
        wr16(h + 8, kArcVersion);
        wr16(h + 10, kFileHeader);
        wr32(h + 16, align_);
        wr64(h + 24, pos_);
        wr64(h + 32, isz);
        wr64(h + 40, count);
        wr64(h + 48, mcount);
        wr64(h + 56, xxh3(h, 56));
        pwrite_all(fd, h, sizeof h, 0);  // last: until now the file reads as unfinished
        file_.commit();
        broken_ = false;
    }
};

}  // namespace

std::unique_ptr<ArchiveWriter> make_tenso_writer(const char *path, const ArchiveWriteOptions &o) {
    return std::unique_ptr<ArchiveWriter>(new TensoWriter(path, o));
}

}  // namespace tenso
