// safetensors.cpp - safetensors (JSON header) and bintensors (bincode header) files: readers
// that turn the header into a Catalog over the mapped file, and a writer that spools tensors
// to a scratch file and lays them out in the formats' canonical order at finish.
//
// Both formats: u64 LE header length N, N header bytes, then the data section, which the
// tensors' [begin, end) ranges (relative to it) must tile exactly. Facts and the reference
// behaviour: shared/reference/peers.md sections 1 and 2; docs/archive-format.md.
#include "file/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "format/wire.hpp"

namespace tenso {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

// The dtypes both formats share with tenso. `rank` is the reference writers' sort key (their
// Dtype enums' order, written largest first); `bincode` the bintensors enum discriminant.
struct PeerDtype {
    int tenso;
    const char *name;
    int rank;
    int bincode;  // -1: bintensors has no such dtype
};
constexpr PeerDtype kPeerDtypes[] = {
    {TENSO_DTYPE_BOOL, "BOOL", 0, 0},     {TENSO_DTYPE_UINT8, "U8", 1, 1},        {TENSO_DTYPE_INT8, "I8", 2, 2},
    {TENSO_DTYPE_INT16, "I16", 3, 5},     {TENSO_DTYPE_UINT16, "U16", 4, 6},      {TENSO_DTYPE_FLOAT16, "F16", 5, 7},
    {TENSO_DTYPE_BFLOAT16, "BF16", 6, 8}, {TENSO_DTYPE_INT32, "I32", 7, 9},       {TENSO_DTYPE_UINT32, "U32", 8, 10},
    {TENSO_DTYPE_FLOAT32, "F32", 9, 11},  {TENSO_DTYPE_COMPLEX64, "C64", 10, -1}, {TENSO_DTYPE_FLOAT64, "F64", 11, 12},
    {TENSO_DTYPE_INT64, "I64", 12, 13},   {TENSO_DTYPE_UINT64, "U64", 13, 14},
};
// Names the formats define that tenso has no dtype for (8-, 6- and 4-bit floats).
constexpr const char *kForeignOnly[] = {"F8_E5M2",     "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
                                        "F8_E5M2FNUZ", "F4",      "F6_E2M3", "F6_E3M2"};

const PeerDtype *peer_by_tenso(int dtype) {
    for (const auto &d : kPeerDtypes)
        if (d.tenso == dtype) return &d;
    return nullptr;
}

int tenso_from_safetensors(const std::string &name) {
    for (const auto &d : kPeerDtypes)
        if (name == d.name) return d.tenso;
    for (const char *f : kForeignOnly)
        if (name == f) fail(TENSO_E_BAD_DTYPE, "safetensors dtype " + name + " has no tenso equivalent");
    fail(TENSO_E_BAD_DTYPE, "unknown safetensors dtype '" + name + "'");
}

int tenso_from_bincode(uint64_t code) {
    for (const auto &d : kPeerDtypes)
        if (d.bincode >= 0 && uint64_t(d.bincode) == code) return d.tenso;
    if (code == 3 || code == 4)
        fail(TENSO_E_BAD_DTYPE,
             std::string("bintensors dtype ") + (code == 3 ? "F8_E5M2" : "F8_E4M3") + " has no tenso equivalent");
    fail(TENSO_E_BAD_DTYPE, "unknown bintensors dtype code " + num(code));
}

// A tensor as a header describes it, before the ranges are checked.
struct Described {
    uint64_t name_off;
    uint32_t name_len;
    int dtype;
    uint64_t shape_off;
    uint32_t ndim;
    uint64_t begin, end;
};

// The u64 header length and the header's bounds; returns the header size N.
uint64_t header_length(const FileMap &m, const ArchiveLimits &lim, const char *format) {
    if (m.size < 8)
        fail(TENSO_E_TRUNCATED,
             std::string(format) + " file of " + num(m.size) + " bytes ends inside its 8-byte header length");
    uint64_t n = rd64(m.data);
    if (n > lim.max_index_bytes)
        fail(TENSO_E_LIMIT, std::string(format) + " header of " + num(n) + " bytes exceeds max_index_bytes (" +
                                num(lim.max_index_bytes) + ")");
    if (n > m.size - 8)
        fail(TENSO_E_TRUNCATED,
             std::string(format) + " header of " + num(n) + " bytes runs past the file (" + num(m.size) + " bytes)");
    m.prefetch(8, n);
    return n;
}

// Checks the described tensors against the data section [8 + N, file end) and fills the
// catalog's entries in file order: byte counts match shape x itemsize, ranges lie inside the
// section and tile it exactly (no overlap, no hole, nothing left over), as both formats demand.
void place(Catalog &cat, std::vector<Described> &ts, uint64_t data_start, uint64_t data_len, const ArchiveLimits &lim) {
    if (ts.size() > lim.max_tensors)
        fail(TENSO_E_LIMIT, num(ts.size()) + " tensors exceed max_tensors (" + num(lim.max_tensors) + ")");
    for (const Described &t : ts) {
        const std::string at = "tensor '" + std::string(cat.owned, t.name_off, t.name_len) + "'";
        if (t.begin > t.end || t.end > data_len)
            fail(TENSO_E_BAD_OFFSET, at + ": data_offsets [" + num(t.begin) + ", " + num(t.end) +
                                         ") lie outside the data section of " + num(data_len) + " bytes");
        uint64_t item = dtype_itemsize(t.dtype);
        uint64_t numel = checked_numel(cat.dims.data() + t.shape_off, t.ndim, UINT64_MAX / item);
        if (numel * item != t.end - t.begin)
            fail(TENSO_E_BAD_OFFSET, at + ": data_offsets span " + num(t.end - t.begin) +
                                         " bytes, shape x dtype needs " + num(numel * item));
    }
    std::sort(ts.begin(), ts.end(), [&](const Described &a, const Described &b) {
        if (a.begin != b.begin) return a.begin < b.begin;
        if (a.end != b.end) return a.end < b.end;
        return cat.owned.compare(a.name_off, a.name_len, cat.owned, b.name_off, b.name_len) < 0;
    });
    uint64_t expect = 0;
    for (const Described &t : ts) {
        if (t.begin != expect)
            fail(TENSO_E_BAD_OFFSET,
                 "tensor '" + std::string(cat.owned, t.name_off, t.name_len) + "' at " + num(t.begin) +
                     (t.begin < expect ? " overlaps the previous tensor" : " leaves a hole before it"));
        expect = t.end;
        Catalog::Entry e;
        e.name_off = t.name_off;
        e.name_len = t.name_len;
        e.kind = TENSO_KIND_DENSE;
        e.dtype = uint8_t(t.dtype);
        e.ndim = uint8_t(t.ndim);
        e.shape_off = t.shape_off;
        e.offset = e.data_offset = data_start + t.begin;
        e.stored = e.nbytes = t.end - t.begin;
        cat.entries.push_back(e);
    }
    if (expect != data_len)
        fail(TENSO_E_BAD_OFFSET, num(data_len - expect) + " bytes of the data section belong to no tensor");
    cat.names = cat.meta_base = cat.owned.data();
}

// ---- safetensors: the JSON header, read as SAX events so nothing is built beyond what the
// catalog needs, nesting is bounded (3 levels), and duplicate keys are seen (a DOM parser
// would keep one silently) ----
using json = nlohmann::json;

class HeaderSax : public nlohmann::json_sax<json> {
public:
    HeaderSax(Catalog &cat, std::vector<Described> &ts, const ArchiveLimits &lim) : cat_(cat), ts_(ts), lim_(lim) {}

    bool null() override { return scalar("null"); }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t) override { return scalar("a negative number"); }
    bool number_float(number_float_t, const string_t &) override { return scalar("a non-integer number"); }
    bool binary(binary_t &) override { return scalar("binary"); }
    bool number_unsigned(number_unsigned_t v) override {
        if (depth_ != 3) return scalar("a number");
        if (field_ == kShape) {
            if (cur_.ndim >= TENSO_MAX_NDIM)
                fail(TENSO_E_TOO_MANY_DIMS, where() + ": shape has more than 32 dimensions");
            cat_.dims.push_back(v);
            ++cur_.ndim;
        } else {
            if (noffsets_ >= 2) fail(TENSO_E_CORRUPT, where() + ": data_offsets has more than 2 numbers");
            (noffsets_++ ? cur_.end : cur_.begin) = v;
        }
        return true;
    }
    bool string(string_t &s) override {
        if (depth_ == 2 && in_meta_) {
            cat_.meta.back().val_off = cat_.owned.size();
            cat_.meta.back().val_len = s.size();
            cat_.owned += s;
            return true;
        }
        if (depth_ == 2 && field_ == kDtype) {
            cur_.dtype = tenso_from_safetensors(s);
            return true;
        }
        return scalar("a string");
    }
    bool start_object(std::size_t) override {
        if (depth_ == 0 || (depth_ == 1 && pending_)) {
            ++depth_;
            pending_ = false;
            seen_ = 0;
            return true;
        }
        fail(TENSO_E_CORRUPT, where() + ": unexpected object");
    }
    bool end_object() override {
        if (depth_ == 2 && !in_meta_) {
            if (seen_ != 7) fail(TENSO_E_CORRUPT, where() + ": needs dtype, shape and data_offsets");
            ts_.push_back(cur_);
        }
        in_meta_ = false;
        --depth_;
        return true;
    }
    bool start_array(std::size_t) override {
        if (depth_ == 2 && !in_meta_ && (field_ == kShape || field_ == kOffsets)) {
            ++depth_;
            return true;
        }
        fail(TENSO_E_CORRUPT, where() + ": unexpected array");
    }
    bool end_array() override {
        if (field_ == kOffsets && noffsets_ != 2) fail(TENSO_E_CORRUPT, where() + ": data_offsets needs 2 numbers");
        --depth_;
        return true;
    }
    bool key(string_t &k) override {
        if (depth_ == 1) {
            pending_ = true;
            if (k == "__metadata__") {
                if (saw_meta_) fail(TENSO_E_DUPLICATE_KEY, "__metadata__ occurs twice");
                saw_meta_ = in_meta_ = true;
                return true;
            }
            if (ts_.size() >= lim_.max_tensors)
                fail(TENSO_E_LIMIT, "more tensors than max_tensors (" + num(lim_.max_tensors) + ")");
            cur_ = Described{cat_.owned.size(), uint32_t(k.size()), 0, cat_.dims.size(), 0, 0, 0};
            if (k.size() > UINT32_MAX) fail(TENSO_E_LIMIT, "tensor name longer than 4 GiB");
            cat_.owned += k;
            return true;
        }
        if (depth_ == 2 && in_meta_) {
            if (cat_.meta.size() >= lim_.max_tensors) fail(TENSO_E_LIMIT, "more metadata pairs than max_tensors");
            Catalog::Meta m;
            m.key_off = cat_.owned.size();
            m.key_len = k.size();
            cat_.owned += k;
            cat_.meta.push_back(m);
            return true;
        }
        if (depth_ == 2) {
            int f = k == "dtype" ? kDtype : k == "shape" ? kShape : k == "data_offsets" ? kOffsets : 0;
            if (!f) fail(TENSO_E_CORRUPT, where() + ": unknown field '" + k + "'");
            if (seen_ & f) fail(TENSO_E_DUPLICATE_KEY, where() + ": field '" + k + "' occurs twice");
            seen_ |= f;
            field_ = f;
            noffsets_ = 0;
            return true;
        }
        fail(TENSO_E_CORRUPT, "unexpected key");
    }
    bool parse_error(std::size_t pos, const std::string &, const nlohmann::detail::exception &e) override {
        fail(TENSO_E_CORRUPT, "safetensors header is not valid JSON at byte " + num(pos) + ": " + e.what());
    }

private:
    enum { kDtype = 1, kShape = 2, kOffsets = 4 };
    Catalog &cat_;
    std::vector<Described> &ts_;
    const ArchiveLimits &lim_;
    int depth_ = 0, field_ = 0, seen_ = 0, noffsets_ = 0;
    bool pending_ = false, in_meta_ = false, saw_meta_ = false;
    Described cur_{};

    std::string where() const {
        if (in_meta_) return "__metadata__";
        return depth_ >= 2 ? "tensor '" + std::string(cat_.owned, cur_.name_off, cur_.name_len) + "'"
                           : "safetensors header";
    }
    bool scalar(const char *what) {
        if (depth_ == 2 && in_meta_)
            fail(TENSO_E_CORRUPT, "__metadata__ values must be strings, not " + std::string(what));
        fail(TENSO_E_CORRUPT, where() + ": unexpected " + what);
    }
};

// ---- bintensors: bincode 2 "standard" (varint integers, little-endian), bounded by N ----
class Bincode {
public:
    Bincode(const uint8_t *p, size_t n) : p_(p), n_(n) {}
    size_t left() const { return n_ - pos_; }
    size_t pos() const { return pos_; }

    uint8_t byte() {
        if (!left()) fail(TENSO_E_CORRUPT, "bintensors header ends early (at byte " + num(pos_) + ")");
        return p_[pos_++];
    }
    uint64_t varint() {
        uint8_t b = byte();
        if (b < 251) return b;
        size_t w = b == 251 ? 2 : b == 252 ? 4 : b == 253 ? 8 : 0;
        if (!w) fail(TENSO_E_CORRUPT, "bintensors varint tag " + num(b) + " is not a u64");
        if (left() < w) fail(TENSO_E_CORRUPT, "bintensors header ends inside a varint");
        uint64_t v = 0;
        for (size_t i = 0; i < w; ++i) v |= uint64_t(p_[pos_ + i]) << (8 * i);
        pos_ += w;
        return v;
    }
    // A count of elements that each take at least `min_bytes`: bounded by what is left before
    // anything is reserved for it.
    uint64_t count(size_t min_bytes, const char *what) {
        uint64_t c = varint();
        if (c > left() / min_bytes)
            fail(TENSO_E_CORRUPT, std::string("bintensors ") + what + " count " + num(c) + " runs past the header");
        return c;
    }
    void string(std::string &dst, uint64_t *off, uint64_t *len) {
        uint64_t l = varint();
        if (l > left()) fail(TENSO_E_CORRUPT, "bintensors string runs past the header");
        if (!valid_utf8(p_ + pos_, l)) fail(TENSO_E_BAD_UTF8, "bintensors string is not valid UTF-8");
        *off = dst.size();
        *len = l;
        dst.append(reinterpret_cast<const char *>(p_ + pos_), l);
        pos_ += l;
    }

private:
    const uint8_t *p_;
    size_t n_, pos_ = 0;
};

void put_varint(std::string &out, uint64_t v) {
    auto le = [&](uint64_t x, int w) {
        for (int i = 0; i < w; ++i) out.push_back(char(uint8_t(x >> (8 * i))));
    };
    if (v < 251) out.push_back(char(v));
    else if (v <= 0xFFFF) {
        out.push_back(char(251));
        le(v, 2);
    } else if (v <= 0xFFFFFFFFu) {
        out.push_back(char(252));
        le(v, 4);
    } else {
        out.push_back(char(253));
        le(v, 8);
    }
}

void put_string(std::string &out, const std::string &s) {
    put_varint(out, s.size());
    out += s;
}

}  // namespace

void read_safetensors(Catalog &cat, const FileMap &m, const ArchiveLimits &lim) {
    const uint64_t n = header_length(m, lim, "safetensors");
    const uint8_t *h = m.data + 8;
    if (!valid_utf8(h, n)) fail(TENSO_E_BAD_UTF8, "safetensors header is not valid UTF-8");
    cat.format = TENSO_FORMAT_SAFETENSORS;
    std::vector<Described> ts;
    HeaderSax sax(cat, ts, lim);
    try {
        json::sax_parse(h, h + n, &sax);
    } catch (const Error &) {
        throw;
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception &e) {
        fail(TENSO_E_CORRUPT, std::string("safetensors header: ") + e.what());
    }
    place(cat, ts, 8 + n, m.size - 8 - n, lim);
}

void read_bintensors(Catalog &cat, const FileMap &m, const ArchiveLimits &lim) {
    const uint64_t n = header_length(m, lim, "bintensors");
    Bincode r(m.data + 8, n);
    cat.format = TENSO_FORMAT_BINTENSORS;
    // (Option<BTreeMap<String, String>>, Vec<(String, (Dtype, Vec<usize>, (usize, usize)))>)
    uint8_t opt = r.byte();
    if (opt > 1) fail(TENSO_E_CORRUPT, "bintensors metadata tag " + num(opt) + " is not an Option");
    if (opt) {
        uint64_t c = r.count(2, "metadata");
        if (c > lim.max_tensors) fail(TENSO_E_LIMIT, "more metadata pairs than max_tensors");
        cat.meta.resize(c);
        for (auto &mt : cat.meta) {
            r.string(cat.owned, &mt.key_off, &mt.key_len);
            r.string(cat.owned, &mt.val_off, &mt.val_len);
        }
    }
    uint64_t c = r.count(5, "tensor");
    if (c > lim.max_tensors) fail(TENSO_E_LIMIT, num(c) + " tensors exceed max_tensors (" + num(lim.max_tensors) + ")");
    std::vector<Described> ts(c);
    for (Described &t : ts) {
        uint64_t off, len;
        r.string(cat.owned, &off, &len);
        t.name_off = off;
        t.name_len = uint32_t(len);
        t.dtype = tenso_from_bincode(r.varint());
        uint64_t nd = r.count(1, "shape");
        if (nd > TENSO_MAX_NDIM) fail(TENSO_E_TOO_MANY_DIMS, "bintensors shape has " + num(nd) + " dimensions");
        t.ndim = uint32_t(nd);
        t.shape_off = cat.dims.size();
        for (uint64_t d = 0; d < nd; ++d) cat.dims.push_back(r.varint());
        t.begin = r.varint();
        t.end = r.varint();
    }
    // The reference writer pads the header with spaces to a multiple of 8; nothing else may
    // hide there.
    for (size_t i = r.pos(); i < n; ++i)
        if (m.data[8 + i] != ' ')
            fail(TENSO_E_CORRUPT, "bintensors header has bytes after its end that are not padding");
    place(cat, ts, 8 + n, m.size - 8 - n, lim);
}

// ------------------------------------------------------------------------------------------
// The writer: tensors are spooled to an unnamed scratch file beside the target as they come
// (memory holds only names and shapes); finish writes the header, then copies each tensor in
// canonical order in the kernel (copy_file_range), then fsync + rename.
// ------------------------------------------------------------------------------------------

namespace {

int open_scratch(const std::string &target) {
    std::string name;
    int fd = create_temp(target, &name);
    if (!name.empty()) ::unlink(name.c_str());  // named only where O_TMPFILE is missing
    return fd;
}

// Copies len bytes between files at the given offsets, in the kernel when it can.
void copy_range(int in, uint64_t in_off, int out, uint64_t out_off, uint64_t len) {
    while (len) {
        loff_t io = loff_t(in_off), oo = loff_t(out_off);
        ssize_t r = ::copy_file_range(in, &io, out, &oo, size_t(std::min<uint64_t>(len, uint64_t(1) << 30)), 0);
        if (r > 0) {
            in_off += uint64_t(r);
            out_off += uint64_t(r);
            len -= uint64_t(r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r == 0 || errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) break;
        fail(TENSO_E_IO, std::string("copy_file_range: ") + std::strerror(errno));
    }
    std::vector<uint8_t> buf(std::min<uint64_t>(len, uint64_t(1) << 20));
    while (len) {  // the portable path, for what the kernel would not copy
        size_t n = size_t(std::min<uint64_t>(len, buf.size()));
        pread_all(in, buf.data(), n, in_off);
        pwrite_all(out, buf.data(), n, out_off);
        in_off += n;
        out_off += n;
        len -= n;
    }
}

class ForeignWriter : public ArchiveWriter {
public:
    ForeignWriter(const char *path, int format) : ArchiveWriter(path), format_(format), spool_(open_scratch(path)) {}
    ~ForeignWriter() override { ::close(spool_); }

private:
    struct Spooled {
        std::string name;
        int dtype;
        std::vector<uint64_t> shape;
        uint64_t at, nbytes;
    };
    int format_;
    int spool_;
    uint64_t spooled_ = 0;
    std::vector<Spooled> ts_;

    const char *fmt() const { return format_ == TENSO_FORMAT_SAFETENSORS ? "safetensors" : "bintensors"; }

    void add_checked(const std::string &name, const Value &v) override {
        if (v.type != Value::kTensor)
            fail(TENSO_E_UNSUPPORTED_KIND, std::string(fmt()) + " files hold dense tensors only");
        const Tensor &t = v.tensor;
        const PeerDtype *d = peer_by_tenso(t.dtype);
        if (!d || (format_ == TENSO_FORMAT_BINTENSORS && d->bincode < 0))
            fail(TENSO_E_BAD_DTYPE, std::string(fmt()) + " has no dtype for " + dtype_name(t.dtype));
        if (format_ == TENSO_FORMAT_SAFETENSORS && name == "__metadata__")
            fail(TENSO_E_INVALID_ARGUMENT, "'__metadata__' is the safetensors metadata key, not a tensor name");
        broken_ = true;
        pwrite_all(spool_, t.data, t.nbytes, spooled_);
        ts_.push_back(Spooled{name, t.dtype, std::vector<uint64_t>(t.shape, t.shape + t.ndim), spooled_, t.nbytes});
        spooled_ += t.nbytes;
        broken_ = false;
    }

    std::string header(const std::vector<const Spooled *> &order) const {
        std::string h;
        uint64_t at = 0;
        if (format_ == TENSO_FORMAT_SAFETENSORS) {
            nlohmann::ordered_json j = nlohmann::ordered_json::object();
            if (!meta_.empty()) {
                nlohmann::ordered_json m = nlohmann::ordered_json::object();
                for (const auto &kv : meta_) m[kv.first] = kv.second;
                j["__metadata__"] = std::move(m);
            }
            for (const Spooled *t : order) {
                nlohmann::ordered_json info = nlohmann::ordered_json::object();
                info["dtype"] = peer_by_tenso(t->dtype)->name;
                info["shape"] = t->shape;
                info["data_offsets"] = {at, at + t->nbytes};
                j[t->name] = std::move(info);
                at += t->nbytes;
            }
            h = j.dump();
        } else {
            if (meta_.empty()) {
                h.push_back(0);
            } else {
                auto sorted = meta_;  // a BTreeMap on the Rust side: keys in byte order
                std::sort(sorted.begin(), sorted.end());
                h.push_back(1);
                put_varint(h, sorted.size());
                for (const auto &kv : sorted) {
                    put_string(h, kv.first);
                    put_string(h, kv.second);
                }
            }
            put_varint(h, order.size());
            for (const Spooled *t : order) {
                put_string(h, t->name);
                put_varint(h, uint64_t(peer_by_tenso(t->dtype)->bincode));
                put_varint(h, t->shape.size());
                for (uint64_t d : t->shape) put_varint(h, d);
                put_varint(h, at);
                put_varint(h, at + t->nbytes);
                at += t->nbytes;
            }
        }
        // Spaces up to a multiple of 8 past the length field, as the reference writers do, so
        // the data section (and every tensor, in canonical order) is 8-aligned.
        h.append((8 - h.size() % 8) % 8, ' ');
        return h;
    }

    void finish_file() override {
        broken_ = true;
        std::vector<const Spooled *> order;
        for (const Spooled &t : ts_) order.push_back(&t);
        // The reference writers' order: larger dtypes first, then by name.
        std::sort(order.begin(), order.end(), [](const Spooled *a, const Spooled *b) {
            int ra = peer_by_tenso(a->dtype)->rank, rb = peer_by_tenso(b->dtype)->rank;
            return ra != rb ? ra > rb : a->name < b->name;
        });
        std::string h = header(order);
        uint8_t len[8];
        wr64(len, h.size());
        const int fd = file_.fd();
        pwrite_all(fd, len, 8, 0);
        pwrite_all(fd, h.data(), h.size(), 8);
        uint64_t at = 8 + h.size();
        for (const Spooled *t : order) {
            copy_range(spool_, t->at, fd, at, t->nbytes);
            at += t->nbytes;
        }
        file_.commit();
        broken_ = false;
    }
};

}  // namespace

std::unique_ptr<ArchiveWriter> make_foreign_writer(const char *path, int format) {
    return std::unique_ptr<ArchiveWriter>(new ForeignWriter(path, format));
}

}  // namespace tenso
