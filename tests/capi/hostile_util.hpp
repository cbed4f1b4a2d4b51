// hostile_util.hpp - helpers shared by CapiStreamTest, CapiFileTest and CapiHostileTest: golden
// vectors, a byte builder for hand-made packets, buffers that fault on over-reads, RAII for tenso
// handles and a structural comparison of two views. Public tenso headers only.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tenso/tenso.h"

#if defined(__SANITIZE_ADDRESS__)
#define HOSTILE_UTIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOSTILE_UTIL_ASAN 1
#endif
#endif
#ifdef HOSTILE_UTIL_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace hostile {

using Bytes = std::vector<uint8_t>;

// ---- files and golden vectors ----

inline Bytes slurp(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path);
    Bytes out;
    uint8_t chunk[65536];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) out.insert(out.end(), chunk, chunk + n);
    std::fclose(f);
    return out;
}

inline void spit(const std::string &path, const void *p, size_t n) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot create " + path);
    if (n && std::fwrite(p, 1, n, f) != n) throw std::runtime_error("short write to " + path);
    std::fclose(f);
}

inline std::string vectors_dir() { return TENSO_VECTORS_DIR; }

// Every *.tenso in tests/vectors, by name without the extension, sorted.
inline std::vector<std::string> golden_names() {
    std::vector<std::string> names;
    DIR *d = ::opendir(TENSO_VECTORS_DIR);
    if (!d) throw std::runtime_error("cannot list " + vectors_dir());
    while (struct dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 6 && n.compare(n.size() - 6, 6, ".tenso") == 0) names.push_back(n.substr(0, n.size() - 6));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

inline Bytes golden(const std::string &name) { return slurp(vectors_dir() + "/" + name + ".tenso"); }

// A fresh scratch directory under TENSO_TEST_TMPDIR, removed by remove_dir() (files and
// empty subdirectories: what a failed test may leave).
inline std::string make_scratch(const char *suite) {
    ::mkdir(TENSO_TEST_TMPDIR, 0777);
    std::string d = std::string(TENSO_TEST_TMPDIR) + "/" + suite + "." + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0777);
    return d;
}

inline std::vector<std::string> list_dir(const std::string &dir) {
    std::vector<std::string> out;
    DIR *d = ::opendir(dir.c_str());
    if (!d) return out;
    while (struct dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

inline void remove_dir(const std::string &dir) {
    ::chmod(dir.c_str(), 0755);
    for (const auto &n : list_dir(dir))
        if (::unlink((dir + "/" + n).c_str()) != 0) ::rmdir((dir + "/" + n).c_str());
    ::rmdir(dir.c_str());
}

// ---- little-endian byte editing ----

inline void set32(Bytes &b, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.at(off + i) = uint8_t(v >> (8 * i));
}
inline void set64(Bytes &b, size_t off, uint64_t v) {
    for (int i = 0; i < 8; ++i) b.at(off + i) = uint8_t(v >> (8 * i));
}

// Builds packets by hand, field by field.
struct Pkt {
    Bytes b;
    Pkt &v4(uint16_t flags, uint8_t dtype, uint8_t ndim, uint8_t reserved = 0) {
        const uint8_t h[10] = {'T', 'N', 'S', 'O', 4, uint8_t(flags), uint8_t(flags >> 8), dtype, ndim, reserved};
        b.insert(b.end(), h, h + 10);
        return *this;
    }
    Pkt &legacy(uint8_t version, uint8_t flags, uint8_t dtype, uint8_t ndim) {
        const uint8_t h[8] = {'T', 'N', 'S', 'O', version, flags, dtype, ndim};
        b.insert(b.end(), h, h + 8);
        return *this;
    }
    Pkt &u8(uint8_t v) {
        b.push_back(v);
        return *this;
    }
    Pkt &u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
        return *this;
    }
    Pkt &u64(uint64_t v) {
        for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
        return *this;
    }
    Pkt &zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
    Pkt &pad(size_t align) { return zeros((align - b.size() % align) % align); }
    Pkt &raw(const void *p, size_t n) {
        const auto *q = static_cast<const uint8_t *>(p);
        b.insert(b.end(), q, q + n);
        return *this;
    }
    Pkt &raw(const Bytes &v) { return raw(v.data(), v.size()); }
    Pkt &str(const std::string &s) { return raw(s.data(), s.size()); }
    // A bundle entry: key_len, key, value_len, value.
    Pkt &entry(const std::string &key, const Bytes &value) {
        return u32(uint32_t(key.size())).str(key).u32(uint32_t(value.size())).raw(value);
    }
    operator const Bytes &() const { return b; }
};

// ---- memory that faults on the first byte past the data ----

// `place(src, n)` copies n bytes so the last one sits just before a PROT_NONE page: a read
// past the end is a SIGSEGV (a crash is a failed test) in every build, not only under ASan.
class GuardedBuffer {
public:
    explicit GuardedBuffer(size_t capacity) {
        page_ = size_t(::sysconf(_SC_PAGESIZE));
        data_len_ = (capacity + page_ - 1) / page_ * page_;
        if (data_len_ == 0) data_len_ = page_;
        void *p = ::mmap(nullptr, data_len_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
        base_ = static_cast<uint8_t *>(p);
        if (::mprotect(base_ + data_len_, page_, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
    }
    ~GuardedBuffer() { ::munmap(base_, data_len_ + page_); }
    GuardedBuffer(const GuardedBuffer &) = delete;
    GuardedBuffer &operator=(const GuardedBuffer &) = delete;

    uint8_t *place(const uint8_t *src, size_t n) {
        if (n > data_len_) throw std::runtime_error("GuardedBuffer too small");
        uint8_t *p = end() - n;
        if (n) std::memcpy(p, src, n);
        return p;
    }
    uint8_t *end() { return base_ + data_len_; }

private:
    uint8_t *base_ = nullptr;
    size_t page_ = 0, data_len_ = 0;
};

// Under ASan, marks [p, p+n) unreadable (a read there is reported); a no-op otherwise.
inline void poison(const void *p, size_t n) {
#ifdef HOSTILE_UTIL_ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#else
    (void)p;
    (void)n;
#endif
}
inline void unpoison(const void *p, size_t n) {
#ifdef HOSTILE_UTIL_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
    (void)p;
    (void)n;
#endif
}
inline bool asan_build() {
#ifdef HOSTILE_UTIL_ASAN
    return true;
#else
    return false;
#endif
}

// ASan or TSan: both reserve terabytes of shadow address space, so RLIMIT_AS cannot be used.
inline bool shadow_sanitizer_build() {
#if defined(__SANITIZE_THREAD__)
    return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return true;
#endif
#endif
    return asan_build();
}

// ---- RAII for tenso handles ----

struct ViewFree {
    void operator()(tenso_view *v) const { tenso_view_free(v); }
};
struct ValueFree {
    void operator()(tenso_value *v) const { tenso_value_free(v); }
};
using ViewPtr = std::unique_ptr<tenso_view, ViewFree>;
using ValuePtr = std::unique_ptr<tenso_value, ValueFree>;

struct Buffer {
    tenso_buffer b = TENSO_BUFFER_INIT;
    Buffer() = default;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer() { tenso_buffer_dispose(&b); }
    Bytes bytes() const { return Bytes(b.data, b.data + b.size); }
};

inline tenso_encode_options enc(uint32_t flags = 0, uint32_t alignment = 0) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    o.alignment = alignment;
    return o;
}

// A dense tensor over caller-held data and shape.
inline tenso_tensor tensor(const void *data, uint64_t nbytes, const std::vector<uint64_t> &shape, tenso_dtype dtype) {
    tenso_tensor t;
    t.data = data;
    t.nbytes = nbytes;
    t.shape = shape.empty() ? nullptr : shape.data();
    t.ndim = uint32_t(shape.size());
    t.dtype = dtype;
    return t;
}

// ---- comparing views ----

// Compares two decoded views field by field (and bundle entries recursively). Returns "" when
// they agree, else a description of the first difference.
inline std::string view_diff(const tenso_view *a, const tenso_view *b, const std::string &where = "$") {
    auto d = [&](const char *what, uint64_t x, uint64_t y) {
        return where + ": " + what + " " + std::to_string(x) + " != " + std::to_string(y);
    };
    if (tenso_view_kind(a) != tenso_view_kind(b))
        return d("kind", uint64_t(tenso_view_kind(a)), uint64_t(tenso_view_kind(b)));
    if (tenso_view_dtype(a) != tenso_view_dtype(b))
        return d("dtype", uint64_t(tenso_view_dtype(a)), uint64_t(tenso_view_dtype(b)));
    if (tenso_view_ndim(a) != tenso_view_ndim(b)) return d("ndim", tenso_view_ndim(a), tenso_view_ndim(b));
    for (uint32_t i = 0; i < tenso_view_ndim(a); ++i)
        if (tenso_view_shape(a)[i] != tenso_view_shape(b)[i])
            return d("shape", tenso_view_shape(a)[i], tenso_view_shape(b)[i]);
    if (tenso_view_flags(a) != tenso_view_flags(b)) return d("flags", tenso_view_flags(a), tenso_view_flags(b));
    if (tenso_view_version(a) != tenso_view_version(b))
        return d("version", tenso_view_version(a), tenso_view_version(b));
    if (tenso_view_alignment(a) != tenso_view_alignment(b))
        return d("alignment", tenso_view_alignment(a), tenso_view_alignment(b));
    if (tenso_view_packet_size(a) != tenso_view_packet_size(b))
        return d("packet_size", tenso_view_packet_size(a), tenso_view_packet_size(b));
    if (tenso_view_nbytes(a) != tenso_view_nbytes(b)) return d("nbytes", tenso_view_nbytes(a), tenso_view_nbytes(b));
    uint64_t n = tenso_view_nbytes(a);
    if (n && std::memcmp(tenso_view_data(a), tenso_view_data(b), n) != 0) return where + ": body bytes differ";
    const tenso_kind kind = tenso_view_kind(a);
    if (kind == TENSO_KIND_BUNDLE) {
        if (tenso_view_bundle_count(a) != tenso_view_bundle_count(b))
            return d("bundle_count", tenso_view_bundle_count(a), tenso_view_bundle_count(b));
        for (uint32_t i = 0; i < tenso_view_bundle_count(a); ++i) {
            const char *ka, *kb;
            size_t la, lb;
            const tenso_view *ca, *cb;
            if (tenso_view_bundle_entry(&ka, &la, &ca, a, i) != TENSO_OK ||
                tenso_view_bundle_entry(&kb, &lb, &cb, b, i) != TENSO_OK)
                return where + ": bundle_entry failed";
            std::string key(ka, la);
            if (key != std::string(kb, lb)) return where + ": key " + key + " != " + std::string(kb, lb);
            std::string r = view_diff(ca, cb, where + "/" + key);
            if (!r.empty()) return r;
        }
    } else if (kind == TENSO_KIND_SPARSE_COO || kind == TENSO_KIND_SPARSE_CSR || kind == TENSO_KIND_SPARSE_CSC) {
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *ca = nullptr, *cb = nullptr;
            if (tenso_view_component(&ca, a, i) != TENSO_OK || tenso_view_component(&cb, b, i) != TENSO_OK)
                return where + ": component failed";
            std::string r = view_diff(ca, cb, where + "/component" + std::to_string(i));
            if (!r.empty()) return r;
        }
    } else if (kind == TENSO_KIND_QUANTIZED) {
        tenso_quantized qa, qb;
        if (tenso_view_quantized(&qa, a) != TENSO_OK || tenso_view_quantized(&qb, b) != TENSO_OK)
            return where + ": view_quantized failed";
        if (qa.scheme != qb.scheme || qa.axis != qb.axis || qa.group_size != qb.group_size ||
            qa.num_scales != qb.num_scales)
            return where + ": quantization parameters differ";
        if (std::memcmp(qa.scales, qb.scales, 4 * size_t(qa.num_scales)) != 0 ||
            std::memcmp(qa.zero_points, qb.zero_points, 4 * size_t(qa.num_scales)) != 0)
            return where + ": scales or zero points differ";
    } else if (kind == TENSO_KIND_STRING || kind == TENSO_KIND_RAGGED) {
        const uint64_t *oa, *ob;
        const char *pa, *pb;
        if (tenso_view_string_offsets(&oa, &pa, a) != TENSO_OK || tenso_view_string_offsets(&ob, &pb, b) != TENSO_OK)
            return where + ": string_offsets failed";
        const uint64_t count = tenso_view_ndim(a) ? tenso_view_shape(a)[0] : 0;
        if (std::memcmp(oa, ob, 8 * size_t(count + 1)) != 0) return where + ": string offsets differ";
    }
    return "";
}

// A dense tensor with deterministic data it owns (bool data kept to 0/1).
struct OwnedTensor {
    Bytes data;
    std::vector<uint64_t> shape;
    tenso_tensor t{};
    OwnedTensor(tenso_dtype dtype, std::vector<uint64_t> s, uint8_t seed) : shape(std::move(s)) {
        uint64_t n = tenso_dtype_itemsize(dtype);
        for (uint64_t d : shape) n *= d;
        data.resize(size_t(n));
        for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 131 + seed * 7 + (i >> 9));
        if (dtype == TENSO_DTYPE_BOOL)
            for (auto &b : data) b &= 1;
        t = tensor(data.data(), n, shape, dtype);
    }
    OwnedTensor(const OwnedTensor &) = delete;  // `t` points into this object
    OwnedTensor &operator=(const OwnedTensor &) = delete;
};

}  // namespace hostile
