/**
 * @file tenso/tenso.hpp
 * @brief the C++17 layer over the tenso C API. @since 1.3
 *
 * Header-only and inline: it calls only tenso_* functions of libtenso.so, so a program built
 * with it links the same library (pkg-config `tenso`, CMake `tenso::tenso`) and depends on the
 * same stable ABI as a C program; no engine code is compiled into it.
 *
 *   - Every handle owns one C object and frees it exactly once: move-only (moving leaves the
 *     source empty, get() == nullptr), with release() to hand the pointer back to C code.
 *     tenso::view (tenso_view), value, buffer, decoder, shm, cache, archive, archive_writer.
 *   - Failures throw tenso::error, which carries the tenso_status and tenso_last_error()'s
 *     message as it was when the call failed. The layer's own checks (a typed read of the
 *     wrong dtype, a shape that does not match the data) throw it too, with the status the C
 *     API gives for the same mistake. "Not there" answers that are not failures (a cache miss
 *     through try_get, a clean end of stream) are std::optional / empty results.
 *   - view_ref is a non-owning view (a bundle entry, a sparse component): valid as long as
 *     the view it came from. Typed access (as<T>()) refuses a dtype other than T's, a view
 *     that is not dense, and a body not aligned for T (bodies nested in bundles can sit at
 *     any address): copy_to / to_vector read any of those.
 *   - Nothing here adds state or threads: the thread-safety of each call is the C function's.
 *
 * Example (README.md, "Using the C++ API", is compiled as a test):
 *
 *     std::vector<float> w = {1, 2, 3, 4, 5, 6};
 *     tenso::buffer packet = tenso::dumps(tenso::tensor(w, {2, 3}));
 *     tenso::view v = tenso::loads(packet.bytes());
 *     tenso::span<const float> x = v.as<float>();   // zero copy; throws on a wrong dtype
 */
#ifndef TENSO_TENSO_HPP
#define TENSO_TENSO_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "tenso/tenso.hpp needs C++17; C programs include tenso/tenso.h"
#endif

#include "tenso/tenso.h"

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tenso {

/* ============================================================================================
 * Errors
 * ========================================================================================== */

/** A failed tenso call: the status and the message. @since 1.3 */
class error : public std::runtime_error {
public:
    /** An error carrying `status` (a TENSO_E_* code) and `message`. */
    error(tenso_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    /** The TENSO_E_* code. */
    tenso_status status() const noexcept { return status_; }
    /** Its symbolic name, "TENSO_E_CHECKSUM". */
    const char *status_name() const noexcept { return tenso_status_name(status_); }

private:
    tenso_status status_;
};

/// @cond TENSO_INTERNAL
namespace detail {
/* The message is copied at once: tenso_last_error() lasts only until the next tenso call. */
[[noreturn]] inline void throw_last(tenso_status st) {
    const char *msg = tenso_last_error();
    throw error(st, std::string(tenso_status_name(st)) + ": " + (msg ? msg : ""));
}
inline void check(tenso_status st) {
    if (st != TENSO_OK) throw_last(st);
}
[[noreturn]] inline void fail(tenso_status st, const std::string &what) {
    throw error(st, std::string(tenso_status_name(st)) + ": " + what);
}
/* "Not there" is an answer, not a failure: false for TENSO_E_NOT_FOUND, true for TENSO_OK,
 * and anything else throws. */
inline bool found(tenso_status st) {
    if (st == TENSO_E_NOT_FOUND) return false;
    check(st);
    return true;
}
/* Names the C API returns, NULL for an empty handle. */
inline std::string_view string_or_empty(const char *s) noexcept { return s ? std::string_view(s) : std::string_view(); }
}  // namespace detail
/// @endcond

/* ============================================================================================
 * span: a pointer and a count (std::span is C++20)
 * ========================================================================================== */

/** A contiguous run of T, borrowed. @since 1.3 */
template <class T>
class span {
public:
    using element_type = T;                 /**< T, as given (const or not) */
    using value_type = std::remove_cv_t<T>; /**< T without const */
    using iterator = T *;                   /**< a pointer */

    /** An empty span. */
    constexpr span() noexcept = default;
    /** `size` elements from `data`. */
    constexpr span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    /** From a span of a convertible element type (span<T> to span<const T>). */
    template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
    constexpr span(const span<U> &other) noexcept : data_(other.data()), size_(other.size()) {}
    /** The elements of a container with data() and size() (std::vector, std::array,
     *  std::string). */
    template <class C, class = std::enable_if_t<std::is_convertible_v<
                           std::remove_pointer_t<decltype(std::declval<C &>().data())> (*)[], T (*)[]>>>
    constexpr span(C &c) noexcept(noexcept(c.data())) : data_(c.data()), size_(c.size()) {}

    /** The first element. */
    constexpr T *data() const noexcept { return data_; }
    /** Number of elements. */
    constexpr std::size_t size() const noexcept { return size_; }
    /** Number of bytes: size() x sizeof(T). */
    constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    /** True when size() is 0. */
    constexpr bool empty() const noexcept { return size_ == 0; }
    /** Element `i`, unchecked. */
    constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }
    /** The first element, for range-for. */
    constexpr T *begin() const noexcept { return data_; }
    /** One past the last element. */
    constexpr T *end() const noexcept { return data_ + size_; }

private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};

/** Raw bytes, as packets are handed around. */
using bytes_view = span<const std::uint8_t>;

/** The bytes of any contiguous object: as_bytes(vec), as_bytes(str). */
template <class C>
inline bytes_view as_bytes(const C &c) noexcept {
    return bytes_view(reinterpret_cast<const std::uint8_t *>(c.data()), c.size() * sizeof(*c.data()));
}
/* Not of a temporary: the bytes would be gone at the end of the statement, under any view
 * decoded from them. */
template <class C>
bytes_view as_bytes(const C &&) = delete;

/* ============================================================================================
 * Dtypes: C++ element types and their codes
 * ========================================================================================== */

/** One bool element as stored (a byte that should be 0 or 1). Read bool tensors through this
 *  type: a byte of any other value, which hostile input can hold, is not a valid C++ bool. */
struct bool8 {
    std::uint8_t value; /**< the stored byte */
    /** True for any non-zero byte. */
    explicit constexpr operator bool() const noexcept { return value != 0; }
};
/** IEEE binary16, as its bits. */
struct float16 {
    std::uint16_t bits; /**< sign, 5 exponent bits, 10 mantissa bits */
};
/** bfloat16 (the upper half of a float32), as its bits. */
struct bfloat16 {
    std::uint16_t bits; /**< sign, 8 exponent bits, 7 mantissa bits */
};
static_assert(sizeof(bool8) == 1 && sizeof(float16) == 2 && sizeof(bfloat16) == 2,
              "element types must have the wire's sizes");

/** dtype_of<T>::value: the dtype code of a C++ element type: float, double, the fixed-width
 *  integers, bool8 (and bool, for writing), float16, bfloat16, std::complex<float> and
 *  std::complex<double>. @since 1.3 */
template <class T>
struct dtype_of; /* undefined: T is no tenso element type */
/// @cond TENSO_INTERNAL
#define TENSO_HPP_DTYPE_(type, code)               \
    template <>                                    \
    struct dtype_of<type> {                        \
        static constexpr tenso_dtype value = code; \
    }
TENSO_HPP_DTYPE_(float, TENSO_DTYPE_FLOAT32);
TENSO_HPP_DTYPE_(double, TENSO_DTYPE_FLOAT64);
TENSO_HPP_DTYPE_(std::int8_t, TENSO_DTYPE_INT8);
TENSO_HPP_DTYPE_(std::int16_t, TENSO_DTYPE_INT16);
TENSO_HPP_DTYPE_(std::int32_t, TENSO_DTYPE_INT32);
TENSO_HPP_DTYPE_(std::int64_t, TENSO_DTYPE_INT64);
TENSO_HPP_DTYPE_(std::uint8_t, TENSO_DTYPE_UINT8);
TENSO_HPP_DTYPE_(std::uint16_t, TENSO_DTYPE_UINT16);
TENSO_HPP_DTYPE_(std::uint32_t, TENSO_DTYPE_UINT32);
TENSO_HPP_DTYPE_(std::uint64_t, TENSO_DTYPE_UINT64);
TENSO_HPP_DTYPE_(bool8, TENSO_DTYPE_BOOL);
TENSO_HPP_DTYPE_(bool, TENSO_DTYPE_BOOL); /* for writing; reading goes through bool8 */
TENSO_HPP_DTYPE_(float16, TENSO_DTYPE_FLOAT16);
TENSO_HPP_DTYPE_(bfloat16, TENSO_DTYPE_BFLOAT16);
TENSO_HPP_DTYPE_(std::complex<float>, TENSO_DTYPE_COMPLEX64);
TENSO_HPP_DTYPE_(std::complex<double>, TENSO_DTYPE_COMPLEX128);
#undef TENSO_HPP_DTYPE_
/// @endcond

/** dtype_of<T>::value for T without const. */
template <class T>
inline constexpr tenso_dtype dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

/** The numpy name of a dtype code ("float32"). */
inline std::string_view dtype_name(tenso_dtype d) noexcept { return tenso_dtype_name(d); }

/* ============================================================================================
 * Options: the C structs, initialised, with chainable setters
 * ========================================================================================== */

/// @cond TENSO_INTERNAL
namespace detail {
/* The chainable setters of the option wrappers: one field, or one flag bit. */
template <class Self, class Field, class V>
Self &assign(Self &self, Field &field, V v) noexcept {
    field = v;
    return self;
}
template <class Self>
Self &flag(Self &self, std::uint32_t bit, bool on) noexcept {
    self.flags = on ? (self.flags | bit) : (self.flags & ~bit);
    return self;
}
}  // namespace detail
/// @endcond

/** tenso_encode_options with its defaults. @since 1.3 */
struct encode_options : tenso_encode_options {
    encode_options() noexcept : tenso_encode_options(TENSO_ENCODE_OPTIONS_INIT) {}
    /** An XXH3-64 footer on every body. */
    encode_options &integrity(bool on = true) noexcept { return detail::flag(*this, TENSO_ENCODE_INTEGRITY, on); }
    /** LZ4-frame-compress dense bodies at `level` (0: fast). */
    encode_options &compress(bool on = true, std::int32_t level = 0) noexcept {
        compression_level = level;
        return detail::flag(*this, TENSO_ENCODE_COMPRESS, on);
    }
    /** Body alignment, a power of two (0: 64). */
    encode_options &align(std::uint32_t bytes) noexcept { return detail::assign(*this, alignment, bytes); }
};

/** tenso_decode_options with its defaults (zero: the protocol's limits). @since 1.3 */
struct decode_options : tenso_decode_options {
    decode_options() noexcept : tenso_decode_options(TENSO_DECODE_OPTIONS_INIT) {}
    /** Do not verify integrity footers (they are still framed). */
    decode_options &skip_checksum(bool on = true) noexcept {
        return detail::flag(*this, TENSO_DECODE_SKIP_CHECKSUM, on);
    }
    /** Check that string payloads are UTF-8. */
    decode_options &validate_utf8(bool on = true) noexcept {
        return detail::flag(*this, TENSO_DECODE_VALIDATE_UTF8, on);
    }
    /** The largest packet accepted, in bytes (0: no limit). */
    decode_options &packet_bytes(std::uint64_t n) noexcept { return detail::assign(*this, max_packet_bytes, n); }
    /** The most a decode may allocate, in bytes (0: no limit). */
    decode_options &decoded_bytes(std::uint64_t n) noexcept { return detail::assign(*this, max_decoded_bytes, n); }
    /** fd reads and writes wait at most this long per packet (0: no deadline of ours);
     *  expiry throws TENSO_E_TIMEOUT. */
    decode_options &timeout(std::uint64_t ms) noexcept { return detail::assign(*this, timeout_ms, ms); }
};

static_assert(sizeof(encode_options) == sizeof(tenso_encode_options) &&
                  sizeof(decode_options) == sizeof(tenso_decode_options),
              "the option wrappers add no members: they are passed to C as their base");

/* ============================================================================================
 * tensor: a dense tensor to encode (borrows the data, holds its own shape)
 * ========================================================================================== */

/** A dense tensor to encode: the elements are borrowed (they must outlive every encode call
 *  that uses them), the shape is copied. @since 1.3 */
class tensor {
public:
    /** `count` elements of T at `data`, of the given shape. Throws TENSO_E_INVALID_ARGUMENT
     *  when the shape's element count is not `count`. */
    template <class T>
    tensor(const T *data, std::size_t count, std::vector<std::uint64_t> shape)
        : data_(data), shape_(std::move(shape)), dtype_(dtype_of_v<T>) {
        const std::uint64_t n = elements(shape_);
        if (n != count) {
            detail::fail(TENSO_E_INVALID_ARGUMENT,
                         "the shape holds " + std::to_string(n) + " elements, the data " + std::to_string(count));
        }
        nbytes_ = count * sizeof(T);
    }
    /** A contiguous container (std::vector<float>, std::array, span) of the given shape. */
    template <class C, class T = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const C &>().data())>>>
    tensor(const C &elements_in, std::vector<std::uint64_t> shape)
        : tensor(static_cast<const T *>(elements_in.data()), elements_in.size(), std::move(shape)) {}
    /** A 1-D tensor of a contiguous container. */
    template <class C, class T = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const C &>().data())>>>
    explicit tensor(const C &elements_in)
        : tensor(static_cast<const T *>(elements_in.data()), elements_in.size(),
                 {static_cast<std::uint64_t>(elements_in.size())}) {}
    /** Raw: `nbytes` bytes of dtype `dtype`, for element types C++ has no name for. The C
     *  library checks nbytes against the shape at encode time. */
    tensor(const void *data, std::uint64_t nbytes, std::vector<std::uint64_t> shape, tenso_dtype dtype)
        : data_(data), nbytes_(nbytes), shape_(std::move(shape)), dtype_(dtype) {}

    /** The C description; valid while this tensor is alive and unchanged. */
    tenso_tensor c() const noexcept {
        tenso_tensor t;
        t.data = data_;
        t.nbytes = nbytes_;
        t.shape = shape_.empty() ? nullptr : shape_.data();
        t.ndim = static_cast<std::uint32_t>(shape_.size());
        t.dtype = dtype_;
        return t;
    }
    /** The dtype code. */
    tenso_dtype dtype() const noexcept { return dtype_; }
    /** The shape (a copy the tensor holds). */
    const std::vector<std::uint64_t> &shape() const noexcept { return shape_; }
    /** Bytes of the elements. */
    std::uint64_t nbytes() const noexcept { return nbytes_; }

private:
    /* Saturates instead of wrapping, so an overflowing shape never equals a real count. */
    static std::uint64_t elements(const std::vector<std::uint64_t> &shape) noexcept {
        std::uint64_t n = 1;
        for (std::uint64_t d : shape) {
            if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d)
                return std::numeric_limits<std::uint64_t>::max();
            n *= d;
        }
        return n;
    }

    const void *data_ = nullptr;
    std::uint64_t nbytes_ = 0;
    std::vector<std::uint64_t> shape_;
    tenso_dtype dtype_ = 0;
};

/* ============================================================================================
 * Owning handles
 * ========================================================================================== */

namespace detail {
/** The owner of a C handle that every owning class (view, decoder, shm, cache, archive,
 *  archive_writer) builds on: move-only, frees with `Free` exactly once. */
template <class H, void (*Free)(H *)>
class handle {
public:
    /** Empty: owns nothing. */
    handle() noexcept = default;
    /** Takes ownership of `h`, a handle from the C API. */
    explicit handle(H *h) noexcept : h_(h) {}
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    /** Takes `o`'s handle; `o` is left empty. */
    handle(handle &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    /** Frees the current handle and takes `o`'s; `o` is left empty. */
    handle &operator=(handle &&o) noexcept {
        if (this != &o) reset(std::exchange(o.h_, nullptr));
        return *this;
    }
    ~handle() { reset(); }

    /** The C handle, still owned; nullptr when empty (moved from). */
    H *get() const noexcept { return h_; }
    /** Gives up ownership: the caller frees the C handle. */
    H *release() noexcept { return std::exchange(h_, nullptr); }
    /** Frees the current handle (if any) and takes `h`. */
    void reset(H *h = nullptr) noexcept {
        H *old = std::exchange(h_, h);
        if (old) Free(old);
    }
    /** True when a handle is owned. */
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    H *h_ = nullptr;
};
}  // namespace detail

class view_ref;
struct bundle_entry;

namespace detail {
/** The read side of a view, shared by the owning tenso::view and the borrowed
 *  tenso::view_ref: every accessor of a decoded packet. */
template <class Derived>
class view_reader {
public:
    /** What the packet holds (TENSO_KIND_*). */
    tenso_kind kind() const noexcept { return tenso_view_kind(h()); }
    /** The element dtype (0 for containers). */
    tenso_dtype dtype() const noexcept { return tenso_view_dtype(h()); }
    /** Number of dimensions. */
    std::uint32_t ndim() const noexcept { return tenso_view_ndim(h()); }
    /** The shape, owned by the view. */
    span<const std::uint64_t> shape() const noexcept {
        return span<const std::uint64_t>(tenso_view_shape(h()), tenso_view_ndim(h()));
    }
    /** Elements: the product of the shape (1 for a scalar). */
    std::uint64_t size() const noexcept {
        std::uint64_t n = 1;
        for (std::uint64_t d : shape()) n *= d; /* decode checked it against max_elements */
        return n;
    }
    /** The body (into the decoded bytes, or memory the view owns). */
    const void *data() const noexcept { return tenso_view_data(h()); }
    /** Bytes of the body. */
    std::uint64_t nbytes() const noexcept { return tenso_view_nbytes(h()); }
    /** The body's bytes, whatever the dtype. */
    bytes_view bytes() const noexcept {
        return bytes_view(static_cast<const std::uint8_t *>(data()), static_cast<std::size_t>(nbytes()));
    }
    /** The header's TENSO_FLAG_* bits. */
    std::uint32_t flags() const noexcept { return tenso_view_flags(h()); }
    /** The wire version the packet was written in (1 to 4). */
    std::uint32_t version() const noexcept { return tenso_view_version(h()); }
    /** Declared body alignment, relative to the packet start. */
    std::uint32_t alignment() const noexcept { return tenso_view_alignment(h()); }
    /** Exact length of the packet. */
    std::uint64_t packet_size() const noexcept { return tenso_view_packet_size(h()); }
    /** True when the body lives in memory the view owns, not in the decoded bytes. */
    bool owns_data() const noexcept { return tenso_view_owns_data(h()) != 0; }

    /**
     * The elements as T, zero copy. Throws TENSO_E_UNSUPPORTED_KIND for a view that is not
     * dense, TENSO_E_BAD_DTYPE when the dtype is not T's, TENSO_E_INVALID_ARGUMENT when the
     * body is not aligned for T (read it with copy_to or to_vector).
     */
    template <class T>
    span<const T> as() const {
        check_elements<T>();
        const void *p = data();
        if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) {
            fail(TENSO_E_INVALID_ARGUMENT, "the body is not aligned for " + std::string(tenso_dtype_name(dtype())) +
                                               " (a tensor nested in a bundle); read it with copy_to or to_vector");
        }
        return span<const T>(static_cast<const T *>(p), static_cast<std::size_t>(nbytes() / sizeof(T)));
    }
    /** Copies the elements into dst (exactly size() of them), at any alignment; the dtype
     *  checks are those of as<T>(). */
    template <class T>
    void copy_to(span<T> dst) const {
        static_assert(!std::is_const_v<T>, "copy_to writes into dst");
        check_elements<T>();
        if (dst.size_bytes() != nbytes()) {
            fail(TENSO_E_BUFFER_TOO_SMALL, "the destination holds " + std::to_string(dst.size()) +
                                               " elements, the view " + std::to_string(size()));
        }
        if (nbytes() != 0) std::memcpy(dst.data(), data(), dst.size_bytes());
    }
    /** The elements copied into a new vector, at any alignment. */
    template <class T>
    std::vector<T> to_vector() const {
        check_elements<T>();
        std::vector<T> out(static_cast<std::size_t>(nbytes() / sizeof(T)));
        copy_to(span<T>(out.data(), out.size()));
        return out;
    }

    /* ---- bundles ---- */
    /** True for a bundle. */
    bool is_bundle() const noexcept { return kind() == TENSO_KIND_BUNDLE; }
    /** Number of entries; 0 for other kinds. */
    std::uint32_t bundle_size() const noexcept { return tenso_view_bundle_count(h()); }
    /** Entry `index`; throws TENSO_E_UNSUPPORTED_KIND (not a bundle), TENSO_E_INVALID_ARGUMENT
     *  (out of range). */
    bundle_entry entry(std::uint32_t index) const;
    /** The bundle's entries in order: `for (auto [key, value] : v.entries())`. */
    auto entries() const;
    /** The first entry under `key`, or an empty view_ref when there is none. Throws
     *  TENSO_E_UNSUPPORTED_KIND when this is not a bundle. */
    view_ref find(std::string_view key) const;
    /** The first entry under `key`; throws TENSO_E_NOT_FOUND when there is none. */
    view_ref at(std::string_view key) const;
    /** As at(). */
    view_ref operator[](std::string_view key) const;

    /* ---- composites ---- */
    /** Sparse component 0, 1 or 2 (data, indices, indices or indptr). */
    view_ref component(std::uint32_t index) const;
    /** The strings of a string view, zero copy (UTF-8 as the bytes hold it). */
    auto strings() const;
    /** A ragged view's flat values and its count + 1 row offsets. */
    std::pair<view_ref, view_ref> ragged() const;
    /** The parts of a quantized view (pointers borrowed from the view). */
    tenso_quantized quantized() const {
        tenso_quantized q;
        check(tenso_view_quantized(&q, h()));
        return q;
    }
    /** A quantized view, dequantized (bit-exact with upstream). */
    std::vector<float> dequantize() const {
        const tenso_quantized q = quantized();
        std::uint64_t n = 1;
        for (std::uint32_t i = 0; i < q.ndim; ++i) n *= q.shape[i];
        std::vector<float> out(static_cast<std::size_t>(n));
        check(tenso_dequantize(out.data(), n, &q));
        return out;
    }
    /** The reference a GPU IPC reference view holds. */
    tenso_ipc_ref ipc_ref() const {
        tenso_ipc_ref r;
        check(tenso_view_ipc_ref(&r, h()));
        return r;
    }

    /* ---- DLPack ---- */
    /** A DLPack 1.1 tensor aliasing the body (read-only); call its deleter once, or hand it to
     *  a consumer that will. It stays valid after this view is freed. */
    DLManagedTensorVersioned *to_dlpack() const {
        DLManagedTensorVersioned *out = nullptr;
        check(tenso_view_to_dlpack(&out, h()));
        return out;
    }

private:
    const tenso_view *h() const noexcept { return static_cast<const Derived *>(this)->get(); }
    template <class T>
    void check_elements() const {
        static_assert(!std::is_same_v<std::remove_cv_t<T>, bool>,
                      "read bool tensors as tenso::bool8: a byte other than 0 or 1 is not a bool");
        if (kind() != TENSO_KIND_DENSE) {
            fail(TENSO_E_UNSUPPORTED_KIND, "typed access needs a dense view");
        }
        if (dtype() != dtype_of_v<T>) {
            fail(TENSO_E_BAD_DTYPE, "the view holds " + std::string(tenso_dtype_name(dtype())) + ", not " +
                                        tenso_dtype_name(dtype_of_v<T>));
        }
    }
};
}  // namespace detail

/** A view owned by something else (a bundle's entry, a sparse component): valid as long as
 *  its owner. Copyable; empty (operator bool false) when default-constructed. @since 1.3 */
class view_ref : public detail::view_reader<view_ref> {
public:
    /** Empty. */
    view_ref() noexcept = default;
    /** Refers to `v`, a view owned elsewhere. */
    explicit view_ref(const tenso_view *v) noexcept : v_(v) {}
    /** The C view, borrowed. */
    const tenso_view *get() const noexcept { return v_; }
    /** True unless empty. */
    explicit operator bool() const noexcept { return v_ != nullptr; }

private:
    const tenso_view *v_ = nullptr;
};

/** A bundle entry: its key and its value (both owned by the bundle view). @since 1.3 */
struct bundle_entry {
    std::string_view key; /**< UTF-8, as the packet holds it */
    view_ref value;       /**< the entry's view */
};

/** A decoded packet, owned: tenso_view_free when destroyed. Move-only. @since 1.3 */
class view : public detail::view_reader<view>, public detail::handle<tenso_view, &tenso_view_free> {
public:
    view() noexcept = default;
    /** Takes ownership of a view from the C API. */
    using handle::handle;
    /** A borrowed reference to this view (valid while this view lives). */
    view_ref ref() const noexcept { return view_ref(get()); }
    /** As ref(). */
    operator view_ref() const noexcept { return ref(); }
};

/* ---- the bundle and composite readers, now that view_ref is complete ---- */

namespace detail {
/** An input iterator over positions 0..size() of a source that makes each element on demand
 *  (source[i]: bundle entries, strings, archive entries), so nothing is copied up front. The
 *  source must outlive its iterators, as a container must. */
template <class Source, class Value, class Index>
class index_iterator {
public:
    using iterator_category = std::input_iterator_tag; /**< single pass */
    using value_type = Value;                          /**< what it yields */
    using difference_type = std::ptrdiff_t;            /**< for the iterator traits */
    using pointer = void;                              /**< no operator-> */
    using reference = Value;                           /**< yields values */
    /** Position `i` of `s`. */
    index_iterator(const Source *s, Index i) noexcept : s_(s), i_(i) {}
    /** The element here, made on demand. */
    Value operator*() const { return (*s_)[i_]; }
    /** Next position. */
    index_iterator &operator++() noexcept {
        ++i_;
        return *this;
    }
    /** Next position, returning the old one. */
    index_iterator operator++(int) noexcept {
        index_iterator old = *this;
        ++i_;
        return old;
    }
    /** Same source and position. */
    bool operator==(const index_iterator &o) const noexcept { return s_ == o.s_ && i_ == o.i_; }
    /** Not ==. */
    bool operator!=(const index_iterator &o) const noexcept { return !(*this == o); }

private:
    const Source *s_;
    Index i_;
};

/** What view::entries() returns: bundle entries by index, keys and children borrowed from the
 *  bundle view. */
class bundle_range {
public:
    using iterator = index_iterator<bundle_range, bundle_entry, std::uint32_t>; /**< yields entries */
    /** The entries of bundle view `v`. */
    explicit bundle_range(const tenso_view *v) noexcept : v_(v) {}
    /** Entry `i`. */
    bundle_entry operator[](std::uint32_t i) const { return view_ref(v_).entry(i); }
    /** The first entry. */
    iterator begin() const noexcept { return iterator(this, 0); }
    /** Past the last entry. */
    iterator end() const noexcept { return iterator(this, size()); }
    /** Number of entries. */
    std::uint32_t size() const noexcept { return tenso_view_bundle_count(v_); }

private:
    const tenso_view *v_;
};

/** What view::strings() returns: the strings of a string view (count + 1 offsets into one
 *  payload), borrowed from it. */
class string_list {
public:
    using iterator = index_iterator<string_list, std::string_view, std::size_t>; /**< yields strings */
    /** `count` strings: string i is payload[offsets[i], offsets[i + 1]). */
    string_list(const std::uint64_t *offsets, const char *payload, std::size_t count) noexcept
        : offsets_(offsets), payload_(payload), count_(count) {}
    /** Number of strings. */
    std::size_t size() const noexcept { return count_; }
    /** String `i` (the offsets were checked at decode time: they start at 0, never decrease
     *  and end in bounds). */
    std::string_view operator[](std::size_t i) const noexcept {
        return std::string_view(payload_ + offsets_[i], static_cast<std::size_t>(offsets_[i + 1] - offsets_[i]));
    }
    /** The first string. */
    iterator begin() const noexcept { return iterator(this, 0); }
    /** Past the last string. */
    iterator end() const noexcept { return iterator(this, count_); }

private:
    const std::uint64_t *offsets_;
    const char *payload_;
    std::size_t count_;
};

template <class D>
inline bundle_entry view_reader<D>::entry(std::uint32_t index) const {
    const char *key = nullptr;
    std::size_t key_len = 0;
    const tenso_view *child = nullptr;
    check(tenso_view_bundle_entry(&key, &key_len, &child, h(), index));
    return bundle_entry{std::string_view(key, key_len), view_ref(child)};
}
template <class D>
inline auto view_reader<D>::entries() const {
    return bundle_range(h());
}
template <class D>
inline view_ref view_reader<D>::find(std::string_view key) const {
    if (!is_bundle()) fail(TENSO_E_UNSUPPORTED_KIND, "not a bundle");
    const tenso_view *child = nullptr;
    /* On a bundle the only failure is "key not found". */
    if (tenso_view_bundle_find(&child, h(), key.data(), key.size()) != TENSO_OK) return view_ref();
    return view_ref(child);
}
template <class D>
inline view_ref view_reader<D>::at(std::string_view key) const {
    view_ref r = find(key);
    if (!r) fail(TENSO_E_NOT_FOUND, "no bundle entry \"" + std::string(key) + "\"");
    return r;
}
template <class D>
inline view_ref view_reader<D>::operator[](std::string_view key) const {
    return at(key);
}
template <class D>
inline view_ref view_reader<D>::component(std::uint32_t index) const {
    const tenso_view *child = nullptr;
    check(tenso_view_component(&child, h(), index));
    return view_ref(child);
}
template <class D>
inline auto view_reader<D>::strings() const {
    const std::uint64_t *offsets = nullptr;
    const char *payload = nullptr;
    check(tenso_view_string_offsets(&offsets, &payload, h()));
    const std::uint64_t *dims = tenso_view_shape(h());
    return string_list(offsets, payload, static_cast<std::size_t>(dims ? dims[0] : 0));
}
template <class D>
inline std::pair<view_ref, view_ref> view_reader<D>::ragged() const {
    const tenso_view *flat = nullptr;
    const tenso_view *offsets = nullptr;
    check(tenso_view_ragged(&flat, &offsets, h()));
    return {view_ref(flat), view_ref(offsets)};
}
}  // namespace detail

/* ============================================================================================
 * buffer: bytes tenso allocated (64-byte aligned)
 * ========================================================================================== */

/** A tenso_buffer, owned: tenso_buffer_dispose when destroyed. Move-only. @since 1.3 */
class buffer {
public:
    /** Empty. */
    buffer() noexcept = default;
    buffer(const buffer &) = delete;
    buffer &operator=(const buffer &) = delete;
    /** Takes `o`'s bytes; `o` is left empty. */
    buffer(buffer &&o) noexcept : b_(std::exchange(o.b_, tenso_buffer(TENSO_BUFFER_INIT))) {}
    /** Disposes of the current bytes and takes `o`'s. */
    buffer &operator=(buffer &&o) noexcept {
        if (this != &o) {
            tenso_buffer_dispose(&b_);
            b_ = std::exchange(o.b_, tenso_buffer(TENSO_BUFFER_INIT));
        }
        return *this;
    }
    ~buffer() { tenso_buffer_dispose(&b_); }

    /** The bytes, 64-byte aligned. */
    const std::uint8_t *data() const noexcept { return b_.data; }
    /** Number of bytes (the packet's length). */
    std::size_t size() const noexcept { return b_.size; }
    /** True when size() is 0. */
    bool empty() const noexcept { return b_.size == 0; }
    /** The bytes as a span, for loads(). */
    bytes_view bytes() const &noexcept { return bytes_view(b_.data, b_.size); }
    /* A view of a temporary buffer would dangle at the end of the statement (loads of it
     * would borrow freed bytes): keep the buffer in a variable. */
    bytes_view bytes() const && = delete;
    /** The first byte. */
    const std::uint8_t *begin() const noexcept { return b_.data; }
    /** Past the last byte. */
    const std::uint8_t *end() const noexcept { return b_.data + b_.size; }
    /** The C struct, for tenso_*dumps(out, ...) calls; its old contents are disposed of by
     *  them. */
    tenso_buffer *c() noexcept { return &b_; }

private:
    tenso_buffer b_ = TENSO_BUFFER_INIT;
};

/* ============================================================================================
 * value: something to encode (dense tensor, bundle, packet, composite)
 * ========================================================================================== */

/** A tenso_value, owned. Values borrow tensor and packet memory, which must outlive every
 *  encode call that uses them. Move-only. @since 1.3 */
class value : public detail::handle<tenso_value, &tenso_value_free> {
public:
    using handle::handle;
    value() noexcept = default;
    /** A dense tensor (the data borrowed, the shape copied). */
    value(const tensor &t)
        : handle(make([&](tenso_value **o) {
              const tenso_tensor c = t.c();
              return tenso_value_new_tensor(o, &c);
          })) {}

    /** An empty bundle; add entries with insert(). */
    static value bundle() {
        return value(make([](tenso_value **o) { return tenso_value_new_bundle(o); }));
    }
    /** An encoded packet inserted verbatim (exactly one packet; borrowed). */
    static value packet(bytes_view bytes) {
        return value(make([&](tenso_value **o) { return tenso_value_new_packet(o, bytes.data(), bytes.size()); }));
    }
    /** A string tensor from count + 1 offsets into a UTF-8 payload (borrowed). */
    static value strings(span<const std::uint64_t> offsets, std::string_view payload) {
        if (offsets.empty()) fail_offsets();
        return value(make([&](tenso_value **o) {
            return tenso_value_new_strings(o, offsets.size() - 1, offsets.data(), payload.data(), payload.size());
        }));
    }
    /** A sparse matrix (TENSO_KIND_SPARSE_COO / CSR / CSC) from its three components. */
    static value sparse(tenso_kind format, std::uint64_t rows, std::uint64_t cols, const tensor &a, const tensor &b,
                        const tensor &c) {
        const std::uint64_t shape[2] = {rows, cols};
        const tenso_tensor ca = a.c(), cb = b.c(), cc = c.c();
        return value(make([&](tenso_value **o) { return tenso_value_new_sparse(o, format, 2, shape, &ca, &cb, &cc); }));
    }
    /** Quantizes a float32, float16 or bfloat16 tensor (the value owns the result). */
    static value quantize(const tensor &input, tenso_dtype qdtype, std::int32_t scheme, std::int32_t axis = 0,
                          std::uint32_t group_size = 0) {
        const tenso_tensor c = input.c();
        return value(make([&](tenso_value **o) { return tenso_quantize(o, &c, qdtype, scheme, axis, group_size); }));
    }
    /** A ragged array: rows of `flat` split at count + 1 element offsets (borrowed). */
    static value ragged(const tensor &flat, span<const std::uint64_t> row_offsets) {
        if (row_offsets.empty()) fail_offsets();
        const tenso_tensor c = flat.c();
        return value(make([&](tenso_value **o) {
            return tenso_value_new_ragged(o, &c, row_offsets.size() - 1, row_offsets.data());
        }));
    }
    /** A GPU IPC reference packet. */
    static value ipc_ref(const tenso_ipc_ref &ref) {
        return value(make([&](tenso_value **o) { return tenso_value_new_ipc_ref(o, &ref); }));
    }

    /** Appends key -> child to this bundle (the child's description is copied; the memory it
     *  borrows stays borrowed). Chainable. */
    value &insert(std::string_view key, const value &child) {
        detail::check(tenso_bundle_insert(get(), key.data(), key.size(), child.get()));
        return *this;
    }
    /** Appends key -> a value of `t`. Chainable. */
    value &insert(std::string_view key, const tensor &t) { return insert(key, value(t)); }
    /** Bundle entries; 0 for other values. */
    std::uint32_t size() const noexcept { return tenso_bundle_count(get()); }
    /** The parts of a quantized value. */
    tenso_quantized quantized() const {
        tenso_quantized q;
        detail::check(tenso_value_quantized(&q, get()));
        return q;
    }

private:
    template <class F>
    static tenso_value *make(F &&f) {
        tenso_value *v = nullptr;
        detail::check(f(&v));
        return v;
    }
    [[noreturn]] static void fail_offsets() {
        detail::fail(TENSO_E_INVALID_ARGUMENT, "offsets need count + 1 entries");
    }
};

/* ============================================================================================
 * Encoding and decoding
 * ========================================================================================== */

/// @cond TENSO_INTERNAL
namespace detail {
/* The wrappers add no members, so the C calls take them as their base struct. */
inline const tenso_encode_options *c(const encode_options &o) noexcept { return &o; }
inline const tenso_decode_options *c(const decode_options &o) noexcept { return &o; }
}  // namespace detail
/// @endcond

/** An upper bound of the packet size (exact without compression). @since 1.3 */
inline std::size_t dumps_bound(const tensor &t, const encode_options &opts = {}) {
    std::size_t n = 0;
    const tenso_tensor c = t.c();
    detail::check(tenso_dumps_bound(&n, &c, detail::c(opts)));
    return n;
}
/** As dumps_bound(const tensor &, const encode_options &), for a value. @since 1.3 */
inline std::size_t dumps_bound(const value &v, const encode_options &opts = {}) {
    std::size_t n = 0;
    detail::check(tenso_value_dumps_bound(&n, v.get(), detail::c(opts)));
    return n;
}
/** Encodes into a new 64-byte aligned buffer. @since 1.3 */
inline buffer dumps(const tensor &t, const encode_options &opts = {}) {
    buffer out;
    const tenso_tensor c = t.c();
    detail::check(tenso_dumps(out.c(), &c, detail::c(opts)));
    return out;
}
/** As dumps(const tensor &, const encode_options &), for a value. @since 1.3 */
inline buffer dumps(const value &v, const encode_options &opts = {}) {
    buffer out;
    detail::check(tenso_value_dumps(out.c(), v.get(), detail::c(opts)));
    return out;
}
/** Encodes into `dst`; returns the packet length. Throws TENSO_E_BUFFER_TOO_SMALL. @since 1.3 */
inline std::size_t dumps_into(span<std::uint8_t> dst, const tensor &t, const encode_options &opts = {}) {
    std::size_t n = 0;
    const tenso_tensor c = t.c();
    detail::check(tenso_dumps_into(dst.data(), dst.size(), &n, &c, detail::c(opts)));
    return n;
}
/** As dumps_into(span<std::uint8_t>, const tensor &, const encode_options &), for a value.
 *  @since 1.3 */
inline std::size_t dumps_into(span<std::uint8_t> dst, const value &v, const encode_options &opts = {}) {
    std::size_t n = 0;
    detail::check(tenso_value_dumps_into(dst.data(), dst.size(), &n, v.get(), detail::c(opts)));
    return n;
}
/** Writes one packet to a file descriptor (vectored: bodies are not copied); returns the bytes
 *  written. @since 1.3 */
inline std::uint64_t write_fd(int fd, const tensor &t, const encode_options &opts = {}) {
    std::uint64_t n = 0;
    const tenso_tensor c = t.c();
    detail::check(tenso_write_fd(&n, fd, &c, detail::c(opts)));
    return n;
}
/** As write_fd(int, const tensor &, const encode_options &), for a value. @since 1.3 */
inline std::uint64_t write_fd(int fd, const value &v, const encode_options &opts = {}) {
    std::uint64_t n = 0;
    detail::check(tenso_value_write_fd(&n, fd, v.get(), detail::c(opts)));
    return n;
}
/** Saves one packet at `path` atomically (temporary file + rename). @since 1.3 */
inline void save_file(const std::string &path, const tensor &t, const encode_options &opts = {}) {
    const tenso_tensor c = t.c();
    detail::check(tenso_save_file(path.c_str(), &c, detail::c(opts)));
}
/** As save_file(const std::string &, const tensor &, const encode_options &), for a value.
 *  @since 1.3 */
inline void save_file(const std::string &path, const value &v, const encode_options &opts = {}) {
    detail::check(tenso_value_save_file(path.c_str(), v.get(), detail::c(opts)));
}

/** Decodes the packet at the start of `bytes`; the view borrows them (zero copy) unless
 *  owns_data(). @since 1.3 */
inline view loads(bytes_view bytes, const decode_options &opts = {}) {
    tenso_view *v = nullptr;
    detail::check(tenso_loads(&v, bytes.data(), bytes.size(), detail::c(opts)));
    return view(v);
}
/** Decodes a dense tensor packet into a plain struct (tenso_loads_tensor): no allocation,
 *  nothing to free; its data and the struct's shape borrow `bytes`. Other kinds and
 *  compressed bodies throw error(TENSO_E_UNSUPPORTED_KIND): use loads. @since 1.5 */
inline tenso_tensor_view loads_tensor(bytes_view bytes, const decode_options &opts = {}) {
    tenso_tensor_view t;
    detail::check(tenso_loads_tensor(&t, bytes.data(), bytes.size(), detail::c(opts)));
    return t;
}
/** Loads the first packet of a file: TENSO_LOAD_READ or TENSO_LOAD_MMAP. @since 1.3 */
inline view load_file(const std::string &path, std::uint32_t mode = TENSO_LOAD_READ, const decode_options &opts = {}) {
    tenso_view *v = nullptr;
    detail::check(tenso_load_file(&v, path.c_str(), mode, detail::c(opts)));
    return view(v);
}
/** Reads exactly one packet from an fd; std::nullopt at a clean end of stream (before the
 *  packet's first byte). @since 1.3 */
inline std::optional<view> read_fd(int fd, const decode_options &opts = {}) {
    tenso_view *v = nullptr;
    const tenso_status st = tenso_read_fd(&v, fd, detail::c(opts));
    if (st == TENSO_E_END_OF_STREAM) return std::nullopt;
    detail::check(st);
    return view(v);
}
/** A packet's header, without touching its body. @since 1.3 */
inline tenso_packet_info inspect(bytes_view bytes) {
    tenso_packet_info info;
    detail::check(tenso_inspect(&info, bytes.data(), bytes.size()));
    return info;
}

/* ============================================================================================
 * decoder: packets from a stream, pushed (feed) or pulled from an fd (packets)
 * ========================================================================================== */

class decoder;

namespace detail {
/** What decoder::packets() returns: the packets of an fd, read through a decoder until a
 *  clean end of stream. */
class fd_packets {
public:
    /** Walks the packets; reading the next one happens on ++. */
    class iterator {
    public:
        using iterator_category = std::input_iterator_tag; /**< single pass */
        using value_type = view;                           /**< yields views */
        using difference_type = std::ptrdiff_t;            /**< for the iterator traits */
        using pointer = view *;                            /**< operator-> */
        using reference = view &;                          /**< operator* */
        /** The end: past the last packet. */
        iterator() noexcept = default;
        /** At the first packet of `r` (read now). */
        explicit iterator(fd_packets *r) : r_(r) { next(); }
        /** The current packet; move it out to keep it. */
        view &operator*() const noexcept { return *r_->cur_; }
        /** The current packet's members. */
        view *operator->() const noexcept { return &*r_->cur_; }
        /** Reads the next packet (throws on a truncated or bad one). */
        iterator &operator++() {
            next();
            return *this;
        }
        /** Both at the end, or both walking the same range. */
        bool operator==(const iterator &o) const noexcept { return r_ == o.r_; }
        /** Not ==. */
        bool operator!=(const iterator &o) const noexcept { return r_ != o.r_; }

    private:
        inline void next();
        fd_packets *r_ = nullptr;
    };
    /** The packets `d` reads from `fd`. */
    fd_packets(decoder &d, int fd) noexcept : d_(&d), fd_(fd) {}
    /** Reads the first packet; a range is walked once. */
    iterator begin() { return iterator(this); }
    /** The end of the stream. */
    iterator end() noexcept { return iterator(); }

private:
    decoder *d_;
    int fd_;
    std::optional<view> cur_;
};
}  // namespace detail

/**
 * A stream decoder (tenso_decoder), owned. Packets can be pushed in pieces of any size
 * (feed), received in place (buffer + commit) or read from an fd (read_fd, packets). After an
 * error the decoder must be reset() before it is used again (a TENSO_E_TIMEOUT from an fd keeps
 * the partial packet: reading again goes on with it). Move-only; one thread at a time.
 * @since 1.3
 */
class decoder : public detail::handle<tenso_decoder, &tenso_decoder_free> {
public:
    using handle::handle;
    /** Defaults: the protocol's limits, tenso's allocator, no read-ahead. */
    decoder() : decoder(tenso_decoder_options(TENSO_DECODER_OPTIONS_INIT)) {}
    /** With decode limits (and timeout), and TENSO_DECODER_* flags. */
    explicit decoder(const decode_options &limits, std::uint32_t flags = 0) : decoder(with(limits, flags)) {}
    /** With the full C options (a caller allocator). */
    explicit decoder(const tenso_decoder_options &opts) {
        tenso_decoder *d = nullptr;
        detail::check(tenso_decoder_new(&d, &opts));
        handle::reset(d);
    }

    /** Feeds `bytes` and calls on_packet(view&&) for every packet they complete; the tail of
     *  an incomplete packet is kept for the next call. Returns how many packets completed.
     *  An exception from on_packet propagates, and the bytes after that packet are not fed. */
    template <class F>
    std::size_t feed(bytes_view bytes, F &&on_packet) {
        std::size_t packets = 0;
        const std::uint8_t *p = bytes.data();
        std::size_t left = bytes.size();
        while (left > 0) {
            std::size_t used = 0;
            std::optional<view> v = feed_some(bytes_view(p, left), used);
            p += used;
            left -= used;
            if (v) {
                ++packets;
                on_packet(std::move(*v));
            } else if (used == 0) {
                break; /* the C API always takes a byte of a non-empty input; never spin */
            }
        }
        return packets;
    }
    /** One step: consumes at most the current packet's remaining bytes (`consumed`), and
     *  returns the packet when it is complete. */
    std::optional<view> feed_some(bytes_view bytes, std::size_t &consumed) {
        tenso_view *v = nullptr;
        consumed = 0;
        detail::check(tenso_decoder_feed(get(), bytes.data(), bytes.size(), &consumed, &v));
        if (!v) return std::nullopt;
        return view(v);
    }
    /** Where the next bytes go, and exactly how many are needed next (receive in place). */
    span<std::uint8_t> buffer() {
        void *dst = nullptr;
        std::size_t len = 0;
        detail::check(tenso_decoder_buffer(get(), &dst, &len));
        return span<std::uint8_t>(static_cast<std::uint8_t *>(dst), len);
    }
    /** `n` bytes were written into buffer(); returns the packet when it is complete. */
    std::optional<view> commit(std::size_t n) {
        tenso_view *v = nullptr;
        detail::check(tenso_decoder_commit(get(), n, &v));
        if (!v) return std::nullopt;
        return view(v);
    }
    /** One packet from an fd; std::nullopt at a clean end of stream. */
    std::optional<view> read_fd(int fd) {
        tenso_view *v = nullptr;
        const tenso_status st = tenso_decoder_read_fd(&v, get(), fd);
        if (st == TENSO_E_END_OF_STREAM) return std::nullopt;
        detail::check(st);
        return view(v);
    }
    /** Every packet from `fd` until a clean end: `for (tenso::view &v : dec.packets(fd))`.
     *  Throws on anything else (TENSO_E_TRUNCATED, TENSO_E_TIMEOUT, TENSO_E_IO, decode
     *  statuses). */
    detail::fd_packets packets(int fd) noexcept { return detail::fd_packets(*this, fd); }

    /** Bytes still needed before the decoder can make progress. */
    std::size_t needed() const noexcept { return tenso_decoder_needed(get()); }
    /** True between packets (nothing partial held). */
    bool idle() const noexcept { return tenso_decoder_idle(get()) != 0; }
    /** End of input: throws TENSO_E_TRUNCATED inside a packet. */
    void finish() { detail::check(tenso_decoder_finish(get())); }
    /** Drops any partial packet (needed after an error). */
    void reset() noexcept { tenso_decoder_reset(get()); }

private:
    static tenso_decoder_options with(const decode_options &limits, std::uint32_t flags) {
        tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
        o.flags = flags;
        o.decode = &limits; /* copied by tenso_decoder_new */
        return o;
    }
};

inline void detail::fd_packets::iterator::next() {
    r_->cur_ = r_->d_->read_fd(r_->fd_);
    if (!r_->cur_) r_ = nullptr; /* the end */
}

/* ============================================================================================
 * Shared memory: segments and the cache
 * ========================================================================================== */

/** A shared-memory segment holding one packet (tenso_shm), owned. Move-only. @since 1.3 */
class shm : public detail::handle<tenso_shm, &tenso_shm_close> {
public:
    using handle::handle;
    shm() noexcept = default;
    /** A new zero-filled segment of `size` bytes (flags: TENSO_SHM_REPLACE). */
    static shm create(const std::string &name, std::uint64_t size, std::uint32_t flags = 0) {
        tenso_shm *s = nullptr;
        detail::check(tenso_shm_create(&s, name.c_str(), size, flags));
        return shm(s);
    }
    /** A new segment sized for `v`, with `v` encoded into it. */
    static shm create_for(const std::string &name, const value &v, const encode_options &opts = {},
                          std::uint32_t flags = 0) {
        tenso_shm *s = nullptr;
        detail::check(tenso_shm_create_for(&s, nullptr, name.c_str(), v.get(), &opts, flags));
        return shm(s);
    }
    /** An existing segment (flags: TENSO_SHM_WRITABLE, TENSO_SHM_ANY_OWNER). */
    static shm open(const std::string &name, std::uint32_t flags = 0) {
        tenso_shm *s = nullptr;
        detail::check(tenso_shm_open_flags(&s, name.c_str(), flags));
        return shm(s);
    }
    /** Removes a segment's name; returns false when there was none. */
    static bool unlink(const std::string &name) { return detail::found(tenso_shm_unlink(name.c_str())); }

    /** Encodes `v` at the start of the segment; returns the packet length. */
    std::uint64_t put(const value &v, const encode_options &opts = {}) {
        std::uint64_t n = 0;
        detail::check(tenso_shm_put(&n, get(), v.get(), &opts));
        return n;
    }
    /** The packet in the segment, zero copy; the view keeps the mapping alive (get() is the
     *  C handle, as for every owner here). */
    view load(const decode_options &opts = {}) const {
        tenso_view *v = nullptr;
        detail::check(tenso_shm_get(&v, get(), &opts));
        return view(v);
    }
    /** The mapping's first byte. */
    void *data() const noexcept { return tenso_shm_data(get()); }
    /** The segment's size in bytes. */
    std::uint64_t size() const noexcept { return tenso_shm_size(get()); }
    /** The segment's name. */
    std::string_view name() const noexcept { return detail::string_or_empty(tenso_shm_name(get())); }
};

/** tenso_cache_options with its defaults. @since 1.3 */
struct cache_options : tenso_cache_options {
    cache_options() noexcept : tenso_cache_options(TENSO_CACHE_OPTIONS_INIT) {}
    /** create: pool bytes (0: 256 MiB). */
    cache_options &bytes(std::uint64_t n) noexcept { return detail::assign(*this, size, n); }
    /** create: replace a pool left under the name. */
    cache_options &replace(bool on = true) noexcept { return detail::flag(*this, TENSO_SHM_REPLACE, on); }
};

/** A handle on a multi-process tensor cache (tenso_cache), owned. Move-only; a handle may be
 *  used from several threads at once (as the C API's). @since 1.3 */
class cache : public detail::handle<tenso_cache, &tenso_cache_close> {
public:
    using handle::get;
    using handle::handle;
    cache() noexcept = default;
    /** Creates a pool named `name` and attaches to it. */
    static cache create(const std::string &name, const cache_options &opts = {}) {
        tenso_cache *c = nullptr;
        detail::check(tenso_cache_create(&c, name.c_str(), &opts));
        return cache(c);
    }
    /** Attaches to the existing pool `name`. */
    static cache open(const std::string &name, const cache_options &opts = {}) {
        tenso_cache *c = nullptr;
        detail::check(tenso_cache_open(&c, name.c_str(), &opts));
        return cache(c);
    }
    /** Removes a pool's name; returns false when there was none. */
    static bool unlink(const std::string &name) { return detail::found(tenso_cache_unlink(name.c_str())); }

    /** Stores `v` under `key` (ttl_seconds 0: never expires); returns the packet length. */
    std::uint64_t put(std::string_view key, const value &v, double ttl_seconds = 0, const encode_options &opts = {}) {
        std::uint64_t n = 0;
        detail::check(tenso_cache_put(&n, get(), key.data(), key.size(), v.get(), &opts, ttl_seconds));
        return n;
    }
    /** The entry as a zero-copy view, pinned until the view is destroyed; throws
     *  TENSO_E_NOT_FOUND. */
    view get(std::string_view key, const decode_options &opts = {}) {
        tenso_view *v = nullptr;
        detail::check(tenso_cache_get(&v, get(), key.data(), key.size(), &opts));
        return view(v);
    }
    /** As get(), std::nullopt on a miss. */
    std::optional<view> try_get(std::string_view key, const decode_options &opts = {}) {
        tenso_view *v = nullptr;
        if (!detail::found(tenso_cache_get(&v, get(), key.data(), key.size(), &opts))) return std::nullopt;
        return view(v);
    }
    /** Removes `key`; returns false when it was absent. */
    bool erase(std::string_view key) { return detail::found(tenso_cache_delete(get(), key.data(), key.size())); }
    /** True when `key` is present and not expired (neither a hit nor a miss). */
    bool contains(std::string_view key) {
        int found = 0;
        detail::check(tenso_cache_contains(&found, get(), key.data(), key.size()));
        return found != 0;
    }
    /** What the cache knows about `key`; throws TENSO_E_NOT_FOUND. */
    tenso_cache_entry_info info(std::string_view key) {
        tenso_cache_entry_info out;
        detail::check(tenso_cache_info(&out, get(), key.data(), key.size()));
        return out;
    }
    /** Every live key, most recently used first. */
    std::vector<std::string> keys() {
        struct collect {
            std::vector<std::string> keys;
            std::exception_ptr failure;
            /* No exception may cross the C library: it is kept and rethrown below. */
            static int add(const char *key, std::size_t len, void *user) noexcept {
                auto *self = static_cast<collect *>(user);
                try {
                    self->keys.emplace_back(key, len);
                    return 0;
                } catch (...) {
                    self->failure = std::current_exception();
                    return 1;
                }
            }
        } c;
        const tenso_status st = tenso_cache_keys(get(), &collect::add, &c);
        if (c.failure) std::rethrow_exception(c.failure);
        detail::check(st);
        return std::move(c.keys);
    }
    /** Removes every entry (pinned ones go when their pins do). */
    void clear() { detail::check(tenso_cache_clear(get())); }
    /** Counters and occupancy of the pool. */
    tenso_cache_stats stats() {
        tenso_cache_stats s;
        detail::check(tenso_cache_stats_get(&s, get()));
        return s;
    }
    /** Checks every invariant of the pool; throws TENSO_E_CORRUPT. */
    void check() { detail::check(tenso_cache_check(get())); }
    /** The pool's name. */
    std::string_view name() const noexcept { return detail::string_or_empty(tenso_cache_name(get())); }
};

/* ============================================================================================
 * Archives: .tenso, safetensors, bintensors
 * ========================================================================================== */

/** One tensor as an archive's index describes it. @since 1.3 */
struct archive_entry : tenso_archive_entry {
    /** The name (UTF-8, borrowed from the archive handle). */
    std::string_view name() const noexcept { return std::string_view(tenso_archive_entry::name, name_len); }
    /** The shape, ndim entries. */
    span<const std::uint64_t> dims() const noexcept { return span<const std::uint64_t>(shape, ndim); }
};

/** An archive opened for reading (tenso_archive), owned. Views from it keep the mapping alive
 *  after it is closed. Move-only. @since 1.3 */
class archive : public detail::handle<tenso_archive, &tenso_archive_close> {
public:
    using handle::get;
    using handle::handle;
    archive() noexcept = default;
    /** Opens and checks the header and index (format from the first bytes by default). */
    static archive open(const std::string &path, const tenso_archive_options *opts = nullptr) {
        tenso_archive *a = nullptr;
        detail::check(tenso_archive_open(&a, path.c_str(), opts));
        return archive(a);
    }

    /** The file's format (TENSO_FORMAT_*). */
    tenso_format format() const noexcept { return tenso_archive_format(get()); }
    /** A tenso archive's packet alignment; 0 for formats that promise none. */
    std::uint32_t alignment() const noexcept { return tenso_archive_alignment(get()); }
    /** Number of tensors. */
    std::uint64_t size() const noexcept { return tenso_archive_count(get()); }
    /** Entry `index`, in file order; throws TENSO_E_INVALID_ARGUMENT past the end. */
    archive_entry entry(std::uint64_t index) const {
        archive_entry e;
        detail::check(tenso_archive_entry_at(&e, get(), index));
        return e;
    }
    /** The index of `name`, or std::nullopt. */
    std::optional<std::uint64_t> find(std::string_view name) const {
        std::uint64_t i = 0;
        if (!detail::found(tenso_archive_find(&i, get(), name.data(), name.size()))) return std::nullopt;
        return i;
    }
    /** Tensor `index`, zero copy (its stored hash verified on first use). */
    view get(std::uint64_t index, const decode_options &opts = {}) {
        tenso_view *v = nullptr;
        detail::check(tenso_archive_get(&v, get(), index, &opts));
        return view(v);
    }
    /** The tensor named `name`; throws TENSO_E_NOT_FOUND. */
    view get(std::string_view name, const decode_options &opts = {}) {
        std::uint64_t i = 0;
        detail::check(tenso_archive_find(&i, get(), name.data(), name.size()));
        return get(i, opts);
    }
    /** Copies dst.size() body bytes of tensor `index` from `offset` with pread (raw tensors). */
    void read(std::uint64_t index, std::uint64_t offset, span<std::uint8_t> dst) {
        detail::check(tenso_archive_read(dst.data(), get(), index, offset, dst.size()));
    }
    /** The metadata value for `key`, or std::nullopt. */
    std::optional<std::string_view> metadata(std::string_view key) const {
        const char *v = nullptr;
        std::size_t len = 0;
        if (!detail::found(tenso_archive_metadata_find(&v, &len, get(), key.data(), key.size()))) return std::nullopt;
        return std::string_view(v, len);
    }
    /** Every metadata pair, in the order stored. */
    std::vector<std::pair<std::string_view, std::string_view>> metadata() const {
        const std::uint64_t n = tenso_archive_metadata_count(get());
        std::vector<std::pair<std::string_view, std::string_view>> out;
        out.reserve(static_cast<std::size_t>(n));
        for (std::uint64_t i = 0; i < n; ++i) {
            const char *k = nullptr, *v = nullptr;
            std::size_t kl = 0, vl = 0;
            detail::check(tenso_archive_metadata_at(&k, &kl, &v, &vl, get(), i));
            out.emplace_back(std::string_view(k, kl), std::string_view(v, vl));
        }
        return out;
    }
    /** Verifies every stored hash; throws (TENSO_E_CHECKSUM, ...) naming the first bad tensor's
     *  index in the message. */
    void verify() {
        std::uint64_t bad = 0;
        const tenso_status st = tenso_archive_verify(&bad, get(), nullptr, nullptr);
        if (st != TENSO_OK) {
            const std::string msg = tenso_last_error();
            detail::fail(st, "tensor " + std::to_string(bad) + ": " + msg);
        }
    }

    /** The entries in file order: `for (const tenso::archive_entry &e : a)`. */
    using iterator = detail::index_iterator<archive, archive_entry, std::uint64_t>;
    /** As entry(). */
    archive_entry operator[](std::uint64_t index) const { return entry(index); }
    /** The first entry. */
    iterator begin() const noexcept { return iterator(this, 0); }
    /** Past the last entry. */
    iterator end() const noexcept { return iterator(this, size()); }
};

/** Writes an archive (tenso_archive_writer), owned: destroying it unfinished discards the
 *  temporary file and leaves the target untouched. Move-only. @since 1.3 */
class archive_writer : public detail::handle<tenso_archive_writer, &tenso_archive_writer_free> {
public:
    using handle::handle;
    archive_writer() noexcept = default;
    /** Starts writing `path` (format from the extension by default). */
    static archive_writer open(const std::string &path, const tenso_archive_write_options *opts = nullptr) {
        tenso_archive_writer *w = nullptr;
        detail::check(tenso_archive_writer_open(&w, path.c_str(), opts));
        return archive_writer(w);
    }
    /** Appends a tensor (written before this returns). Chainable. */
    archive_writer &add(std::string_view name, const value &v) {
        detail::check(tenso_archive_writer_add(get(), name.data(), name.size(), v.get()));
        return *this;
    }
    /** Appends a dense tensor. Chainable. */
    archive_writer &add(std::string_view name, const tensor &t) { return add(name, value(t)); }
    /** Sets a metadata string (written with the index). Chainable. */
    archive_writer &set_metadata(std::string_view key, std::string_view val) {
        detail::check(tenso_archive_writer_set_metadata(get(), key.data(), key.size(), val.data(), val.size()));
        return *this;
    }
    /** Writes the index and renames the file over the target. */
    void finish() { detail::check(tenso_archive_writer_finish(get())); }
};

/** The library's version string; compare version_number() with TENSO_VERSION_NUMBER. */
inline std::string_view version_string() noexcept { return tenso_version_string(); }
/** The library's TENSO_VERSION_NUMBER, to compare with the headers' at run time. */
inline std::uint32_t version_number() noexcept { return tenso_version_number(); }

}  // namespace tenso

#endif /* TENSO_TENSO_HPP */
