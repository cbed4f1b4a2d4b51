// CppApiTest - the C++17 layer tenso/tenso.hpp over the installed C ABI: golden bytes through
// the C++ calls, typed access refusing wrong dtypes / kinds / alignment with the exception's
// status, move semantics of every owning handle (run again under ASan by cpp.asan.*), bundle
// and string iteration, files and fds, archives, shared-memory segments and the cache.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "tenso/tenso.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes golden(const std::string &name) {
    const std::string path = std::string(TENSO_VECTORS_DIR) + "/" + name + ".tenso";
    std::ifstream f(path, std::ios::binary);
    if (!f) CPPUNIT_FAIL("cannot open golden vector " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string tmp_path(const std::string &name) {
    const std::string dir = TENSO_TEST_TMPDIR;
    ::mkdir(dir.c_str(), 0700);
    return dir + "/cpp-" + std::to_string(::getpid()) + "-" + name;
}

std::string shm_name(const char *tag) { return "tenso-test-cpp-" + std::to_string(::getpid()) + "-" + tag; }

// Runs f, which must throw tenso::error with `want`; returns the error's message.
template <class F>
std::string expect_error(tenso_status want, F &&f) {
    try {
        f();
    } catch (const tenso::error &e) {
        CPPUNIT_ASSERT_EQUAL_MESSAGE(std::string("wanted ") + tenso_status_name(want) + ", got " + e.what(), want,
                                     e.status());
        CPPUNIT_ASSERT_EQUAL(std::string(tenso_status_name(want)), std::string(e.status_name()));
        return e.what();
    }
    CPPUNIT_FAIL(std::string("no tenso::error thrown, wanted ") + tenso_status_name(want));
    return "";
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// The values of tests/vectors/dense_float32_2x3.tenso.
const std::vector<float> kF32 = {-1.5f, -0.0f, 0.25f, 1.0f, 3.75f, 100.5f};

}  // namespace

// Every owning handle is move-only, with a non-throwing move (so containers move, not copy).
template <class T>
constexpr bool kMoveOnly = !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
                           std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;
static_assert(kMoveOnly<tenso::view> && kMoveOnly<tenso::value> && kMoveOnly<tenso::buffer> && kMoveOnly<tenso::shm> &&
              kMoveOnly<tenso::cache> && kMoveOnly<tenso::archive> && kMoveOnly<tenso::archive_writer>);
static_assert(std::is_trivially_copyable_v<tenso::view_ref>);

// bytes() of a temporary buffer does not compile: loads() of it would borrow freed memory.
template <class T, class = void>
struct HasBytes : std::false_type {};
template <class T>
struct HasBytes<T, std::void_t<decltype(std::declval<T>().bytes())>> : std::true_type {};
static_assert(HasBytes<const tenso::buffer &>::value && !HasBytes<tenso::buffer &&>::value &&
              !HasBytes<tenso::buffer>::value);
// Nor does as_bytes of a temporary container.
template <class T, class = void>
struct HasAsBytes : std::false_type {};
template <class T>
struct HasAsBytes<T, std::void_t<decltype(tenso::as_bytes(std::declval<T>()))>> : std::true_type {};
static_assert(HasAsBytes<const std::string &>::value && HasAsBytes<std::vector<float> &>::value &&
              !HasAsBytes<std::string>::value && !HasAsBytes<std::vector<float> &&>::value);

class CppApiTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CppApiTest);
    CPPUNIT_TEST(denseRoundTripIsUpstreamBytes);
    CPPUNIT_TEST(typedAccessRefusesWrongDtype);
    CPPUNIT_TEST(misalignedBodyIsRefusedButCopied);
    CPPUNIT_TEST(errorsCarryStatusAndMessage);
    CPPUNIT_TEST(viewMoveSemantics);
    CPPUNIT_TEST(valueAndBufferMoveSemantics);
    CPPUNIT_TEST(bundleBuildAndIterate);
    CPPUNIT_TEST(stringsAndComposites);
    CPPUNIT_TEST(fileAndFd);
    CPPUNIT_TEST(archiveHandles);
    CPPUNIT_TEST(shmHandles);
    CPPUNIT_TEST(cacheHandles);
    CPPUNIT_TEST_SUITE_END();

public:
    void denseRoundTripIsUpstreamBytes() {
        const Bytes want = golden("dense_float32_2x3");
        const tenso::tensor t(kF32, {2, 3});
        CPPUNIT_ASSERT_EQUAL(want.size(), tenso::dumps_bound(t));

        const tenso::buffer packet = tenso::dumps(t);
        CPPUNIT_ASSERT(Bytes(packet.begin(), packet.end()) == want);
        CPPUNIT_ASSERT_EQUAL(std::uintptr_t(0), reinterpret_cast<std::uintptr_t>(packet.data()) % 64);

        // Into a caller buffer; too small reports the status.
        alignas(64) std::uint8_t buf[256];
        CPPUNIT_ASSERT_EQUAL(want.size(), tenso::dumps_into(tenso::span<std::uint8_t>(buf, 256), t));
        CPPUNIT_ASSERT(std::memcmp(buf, want.data(), want.size()) == 0);
        expect_error(TENSO_E_BUFFER_TOO_SMALL, [&] { tenso::dumps_into(tenso::span<std::uint8_t>(buf, 10), t); });

        // The struct decode (1.5): the same facts, no view; other kinds throw.
        const tenso_tensor_view tv = tenso::loads_tensor(packet.bytes());
        CPPUNIT_ASSERT(tv.data == packet.data() + 64 && tv.ndim == 2 && tv.shape[0] == 2 && tv.shape[1] == 3 &&
                       tv.dtype == TENSO_DTYPE_FLOAT32 && tv.nbytes == 24 && tv.packet_size == want.size());
        const Bytes bundle = golden("bundle_mixed");
        expect_error(TENSO_E_UNSUPPORTED_KIND,
                     [&] { tenso::loads_tensor(tenso::bytes_view(bundle.data(), bundle.size())); });

        // Decoding is zero copy: the span points into the packet, at its 64-byte boundary.
        const tenso::view v = tenso::loads(packet.bytes());
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, v.kind());
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_FLOAT32, v.dtype());
        CPPUNIT_ASSERT_EQUAL(2u, v.ndim());
        CPPUNIT_ASSERT(std::vector<std::uint64_t>(v.shape().begin(), v.shape().end()) ==
                       (std::vector<std::uint64_t>{2, 3}));
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(6), v.size());
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(want.size()), v.packet_size());
        CPPUNIT_ASSERT(!v.owns_data());
        const tenso::span<const float> x = v.as<float>();
        CPPUNIT_ASSERT_EQUAL(std::size_t(6), x.size());
        CPPUNIT_ASSERT(static_cast<const void *>(x.data()) == packet.data() + 64);
        CPPUNIT_ASSERT(std::vector<float>(x.begin(), x.end()) == kF32);
        CPPUNIT_ASSERT(v.to_vector<float>() == kF32);

        // Options reach the C calls: an integrity footer adds 8 bytes and still decodes.
        const tenso::buffer hashed = tenso::dumps(t, tenso::encode_options().integrity());
        CPPUNIT_ASSERT_EQUAL(want.size() + 8, hashed.size());
        CPPUNIT_ASSERT(tenso::inspect(hashed.bytes()).flags & TENSO_FLAG_INTEGRITY);
        CPPUNIT_ASSERT(tenso::loads(hashed.bytes()).to_vector<float>() == kF32);

        // Every C++ element type maps to its dtype.
        const std::vector<std::int64_t> i64 = {1, -2};
        const tenso::buffer pi = tenso::dumps(tenso::tensor(i64));
        const tenso::view vi = tenso::loads(pi.bytes());
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_INT64, vi.dtype());
        CPPUNIT_ASSERT_EQUAL(std::int64_t(-2), vi.as<std::int64_t>()[1]);
        const bool flags[3] = {true, false, true};
        const tenso::buffer pb = tenso::dumps(tenso::tensor(flags, 3, {3}));
        const tenso::view vb = tenso::loads(pb.bytes());
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_BOOL, vb.dtype());
        CPPUNIT_ASSERT(static_cast<bool>(vb.as<tenso::bool8>()[0]) && !static_cast<bool>(vb.as<tenso::bool8>()[1]));
    }

    void typedAccessRefusesWrongDtype() {
        const tenso::buffer packet = tenso::dumps(tenso::tensor(kF32, {2, 3}));
        const tenso::view v = tenso::loads(packet.bytes());
        std::string msg = expect_error(TENSO_E_BAD_DTYPE, [&] { v.as<double>(); });
        CPPUNIT_ASSERT_MESSAGE(msg, contains(msg, "float32") && contains(msg, "float64"));
        expect_error(TENSO_E_BAD_DTYPE, [&] { v.as<std::int32_t>(); });
        expect_error(TENSO_E_BAD_DTYPE, [&] { v.as<std::uint32_t>(); });
        expect_error(TENSO_E_BAD_DTYPE, [&] { v.to_vector<std::int32_t>(); });
        std::vector<double> d(6);
        expect_error(TENSO_E_BAD_DTYPE, [&] { v.copy_to(tenso::span<double>(d.data(), d.size())); });
        std::vector<float> short_dst(5);
        expect_error(TENSO_E_BUFFER_TOO_SMALL,
                     [&] { v.copy_to(tenso::span<float>(short_dst.data(), short_dst.size())); });

        // A bundle has no elements to type.
        tenso::value b = tenso::value::bundle();
        b.insert("x", tenso::tensor(kF32, {6}));
        const tenso::buffer bp = tenso::dumps(b);
        const tenso::view bv = tenso::loads(bp.bytes());
        expect_error(TENSO_E_UNSUPPORTED_KIND, [&] { bv.as<float>(); });
        // ... and a dense view has no entries.
        expect_error(TENSO_E_UNSUPPORTED_KIND, [&] { v.find("x"); });
        expect_error(TENSO_E_UNSUPPORTED_KIND, [&] { v.entry(0); });

        // A shape that does not hold the data is refused before any C call.
        msg = expect_error(TENSO_E_INVALID_ARGUMENT, [&] { tenso::tensor(kF32, {4, 2}); });
        CPPUNIT_ASSERT_MESSAGE(msg, contains(msg, "8 elements") && contains(msg, "6"));
        expect_error(TENSO_E_INVALID_ARGUMENT, [&] { tenso::tensor(kF32, {std::uint64_t(1) << 32, 1ull << 32}); });
    }

    void misalignedBodyIsRefusedButCopied() {
        const tenso::buffer packet = tenso::dumps(tenso::tensor(kF32, {2, 3}));
        // The same packet one byte off its alignment: the body is at an odd address.
        std::vector<std::uint8_t> shifted(packet.size() + 1);
        std::memcpy(shifted.data() + 1, packet.data(), packet.size());
        const tenso::view v = tenso::loads(tenso::bytes_view(shifted.data() + 1, packet.size()));
        CPPUNIT_ASSERT(reinterpret_cast<std::uintptr_t>(v.data()) % alignof(float) != 0);
        const std::string msg = expect_error(TENSO_E_INVALID_ARGUMENT, [&] { v.as<float>(); });
        CPPUNIT_ASSERT_MESSAGE(msg, contains(msg, "aligned"));
        CPPUNIT_ASSERT(v.to_vector<float>() == kF32);
        // Bytes have no alignment to keep.
        CPPUNIT_ASSERT_EQUAL(std::size_t(24), v.bytes().size());
    }

    void errorsCarryStatusAndMessage() {
        const std::string junk = "XXXXXXXXXXXXXXXX";
        try {
            tenso::loads(tenso::as_bytes(junk));
            CPPUNIT_FAIL("loads accepted junk");
        } catch (const tenso::error &e) {
            CPPUNIT_ASSERT_EQUAL(TENSO_E_BAD_MAGIC, e.status());
            CPPUNIT_ASSERT_EQUAL(std::string("TENSO_E_BAD_MAGIC"), std::string(e.status_name()));
            // The message is the C library's, copied when the call failed.
            const std::string what = e.what();
            CPPUNIT_ASSERT_MESSAGE(
                what, what.rfind("TENSO_E_BAD_MAGIC: ", 0) == 0 && what.size() > std::strlen("TENSO_E_BAD_MAGIC: "));
            tenso_error_clear();
            CPPUNIT_ASSERT_EQUAL(what, std::string(e.what()));
        }
        // tenso::error is a std::runtime_error.
        const Bytes g = golden("dense_float32_2x3");
        try {
            tenso::loads(tenso::bytes_view(g.data(), 40));
            CPPUNIT_FAIL("loads accepted a truncated packet");
        } catch (const std::runtime_error &e) {
            CPPUNIT_ASSERT(contains(e.what(), "TENSO_E_TRUNCATED"));
        }
        // Limits from decode_options reach the decoder.
        expect_error(TENSO_E_LIMIT,
                     [&] { tenso::loads(tenso::as_bytes(g), tenso::decode_options().packet_bytes(50)); });
    }

    void viewMoveSemantics() {
        const tenso::buffer packet = tenso::dumps(tenso::tensor(kF32, {2, 3}));
        tenso::view a = tenso::loads(packet.bytes());
        const tenso_view *raw = a.get();
        CPPUNIT_ASSERT(raw != nullptr);

        tenso::view b(std::move(a));  // construct: the source is left empty
        CPPUNIT_ASSERT(!a && a.get() == nullptr);
        CPPUNIT_ASSERT(b.get() == raw);
        // An empty view answers like the C accessors do for NULL.
        CPPUNIT_ASSERT_EQUAL(0u, a.ndim());
        CPPUNIT_ASSERT(a.data() == nullptr);

        tenso::view c = tenso::loads(packet.bytes());
        c = std::move(b);  // assign: c's old view is freed, b's taken
        CPPUNIT_ASSERT(!b && c.get() == raw);
        auto &alias = c;
        c = std::move(alias);  // self-move keeps the view
        CPPUNIT_ASSERT(c.get() == raw);
        CPPUNIT_ASSERT(c.to_vector<float>() == kF32);

        // release hands it back to C, which frees it once.
        tenso_view *r = c.release();
        CPPUNIT_ASSERT(!c && r == raw);
        tenso_view_free(r);

        // In containers: moved around on growth, each freed exactly once.
        std::vector<tenso::view> many;
        for (int i = 0; i < 40; ++i) many.push_back(tenso::loads(packet.bytes()));
        for (const tenso::view &v : many) CPPUNIT_ASSERT_EQUAL(100.5f, v.as<float>()[5]);

        // A view_ref into a bundle lives as long as the bundle's view, wherever it moves.
        tenso::value bundle = tenso::value::bundle();
        bundle.insert("w", tenso::tensor(kF32, {6}));
        const tenso::buffer bp = tenso::dumps(bundle);
        tenso::view owner = tenso::loads(bp.bytes());
        const tenso::view_ref w = owner.at("w");
        tenso::view moved = std::move(owner);
        CPPUNIT_ASSERT(w.to_vector<float>() == kF32);
        CPPUNIT_ASSERT(moved.ref().get() == moved.get());
    }

    void valueAndBufferMoveSemantics() {
        tenso::value a(tenso::tensor(kF32, {2, 3}));
        tenso_value *raw = a.get();
        tenso::value b = std::move(a);
        CPPUNIT_ASSERT(!a && b.get() == raw);
        tenso::value c = tenso::value::bundle();
        c = std::move(b);
        CPPUNIT_ASSERT(!b && c.get() == raw);

        tenso::buffer p = tenso::dumps(c);
        const std::uint8_t *bytes = p.data();
        const std::size_t size = p.size();
        tenso::buffer q = std::move(p);
        CPPUNIT_ASSERT(p.empty() && p.data() == nullptr);
        CPPUNIT_ASSERT(q.data() == bytes && q.size() == size);
        tenso::buffer r = tenso::dumps(tenso::tensor(kF32, {6}));
        r = std::move(q);
        CPPUNIT_ASSERT(q.data() == nullptr && r.data() == bytes);
        CPPUNIT_ASSERT(Bytes(r.begin(), r.end()) == golden("dense_float32_2x3"));

        tenso_value *released = c.release();
        CPPUNIT_ASSERT(!c && released == raw);
        tenso_value_free(released);
    }

    void bundleBuildAndIterate() {
        // {"a": f32[1, 2], "b": i64[10, 20, 30]}: upstream's bundle_mixed, byte for byte.
        const std::vector<float> fa = {1.0f, 2.0f};
        const std::vector<std::int64_t> ib = {10, 20, 30};
        tenso::value mixed = tenso::value::bundle();
        mixed.insert("a", tenso::tensor(fa)).insert("b", tenso::tensor(ib));
        CPPUNIT_ASSERT_EQUAL(2u, mixed.size());
        const tenso::buffer packet = tenso::dumps(mixed);
        CPPUNIT_ASSERT(Bytes(packet.begin(), packet.end()) == golden("bundle_mixed"));

        const tenso::view v = tenso::loads(packet.bytes());
        CPPUNIT_ASSERT(v.is_bundle());
        CPPUNIT_ASSERT_EQUAL(2u, v.bundle_size());
        std::vector<std::string> keys;
        for (const auto &[key, child] : v.entries()) {
            keys.emplace_back(key);
            CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, child.kind());
        }
        CPPUNIT_ASSERT(keys == (std::vector<std::string>{"a", "b"}));
        CPPUNIT_ASSERT_EQUAL(2u, v.entries().size());
        CPPUNIT_ASSERT(v["a"].to_vector<float>() == fa);
        CPPUNIT_ASSERT(v.at("b").to_vector<std::int64_t>() == ib);
        CPPUNIT_ASSERT_EQUAL(std::string("b"), std::string(v.entry(1).key));
        CPPUNIT_ASSERT(!v.find("missing"));
        const std::string msg = expect_error(TENSO_E_NOT_FOUND, [&] { v.at("missing"); });
        CPPUNIT_ASSERT_MESSAGE(msg, contains(msg, "missing"));
        expect_error(TENSO_E_INVALID_ARGUMENT, [&] { v.entry(2); });

        // Nested bundles, walked recursively: upstream's bundle_nested3 holds 3 levels.
        const Bytes nested = golden("bundle_nested3");
        const tenso::view n = tenso::loads(tenso::as_bytes(nested));
        std::vector<std::string> paths;
        struct Walk {
            std::vector<std::string> &out;
            void operator()(const tenso::view_ref &b, const std::string &prefix) const {
                for (const tenso::bundle_entry e : b.entries()) {
                    const std::string path = prefix + std::string(e.key);
                    out.push_back(path);
                    if (e.value.is_bundle()) (*this)(e.value, path + "/");
                }
            }
        };
        Walk{paths}(n, "");
        CPPUNIT_ASSERT_EQUAL(std::string("top"), paths.at(0));
        CPPUNIT_ASSERT_EQUAL(std::string("l1"), paths.at(1));
        CPPUNIT_ASSERT_EQUAL(std::string("l1/x"), paths.at(2));
        CPPUNIT_ASSERT_EQUAL(std::string("l1/l2"), paths.at(3));
        CPPUNIT_ASSERT_EQUAL(std::string("l1/l2/y"), paths.at(4));
        CPPUNIT_ASSERT(n["top"].as<tenso::bool8>().size() == 4);
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_COMPLEX64, n["l1"]["x"].dtype());
        // x = [1+1j, -0-2.5j]
        CPPUNIT_ASSERT_EQUAL(-2.5f, n["l1"]["x"].to_vector<std::complex<float>>()[1].imag());
    }

    void stringsAndComposites() {
        // Strings: upstream's string_mixed_utf8, built and read through the C++ API.
        const std::vector<std::uint64_t> offsets = {0, 2, 2, 7, 9};
        const std::string payload =
            "hi"
            ""
            "world"
            "\xc3\xb1";
        const tenso::value s = tenso::value::strings(offsets, payload);
        const tenso::buffer sp = tenso::dumps(s);
        CPPUNIT_ASSERT(Bytes(sp.begin(), sp.end()) == golden("string_mixed_utf8"));
        const tenso::view sv = tenso::loads(sp.bytes());
        std::vector<std::string> got;
        for (std::string_view str : sv.strings()) got.emplace_back(str);
        CPPUNIT_ASSERT(got == (std::vector<std::string>{"hi", "", "world", "\xc3\xb1"}));
        CPPUNIT_ASSERT_EQUAL(std::size_t(4), sv.strings().size());
        expect_error(TENSO_E_INVALID_ARGUMENT, [&] { tenso::value::strings(tenso::span<const std::uint64_t>(), ""); });

        // Ragged: rows [1], [2, 3], [].
        const std::vector<float> flat = {1, 2, 3};
        const std::vector<std::uint64_t> rows = {0, 1, 3, 3};
        const tenso::buffer rp = tenso::dumps(tenso::value::ragged(tenso::tensor(flat), rows));
        const tenso::view rv = tenso::loads(rp.bytes());
        // Not a structured binding: C++17 lambdas (below) cannot capture those.
        const std::pair<tenso::view_ref, tenso::view_ref> parts = rv.ragged();
        const tenso::view_ref rflat = parts.first, roffs = parts.second;
        CPPUNIT_ASSERT(rflat.to_vector<float>() == flat);
        CPPUNIT_ASSERT(roffs.to_vector<std::uint64_t>() == rows);

        // Sparse CSR 2x3 with entries (0,1)=5, (1,2)=7.
        const std::vector<float> data = {5, 7};
        const std::vector<std::int32_t> cols = {1, 2}, indptr = {0, 1, 2};
        const tenso::buffer csr = tenso::dumps(tenso::value::sparse(TENSO_KIND_SPARSE_CSR, 2, 3, tenso::tensor(data),
                                                                    tenso::tensor(cols), tenso::tensor(indptr)));
        const tenso::view cv = tenso::loads(csr.bytes());
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_SPARSE_CSR, cv.kind());
        CPPUNIT_ASSERT(cv.component(0).to_vector<float>() == data);
        CPPUNIT_ASSERT(cv.component(2).to_vector<std::int32_t>() == indptr);
        expect_error(TENSO_E_UNSUPPORTED_KIND, [&] { rflat.component(0); });

        // Quantized, per tensor: a constant-free ramp survives within one step.
        const std::vector<float> ramp = {0.0f, 1.0f, 2.0f, 3.0f};
        const tenso::value q = tenso::value::quantize(tenso::tensor(ramp), TENSO_DTYPE_QINT8, TENSO_QUANT_PER_TENSOR);
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_QINT8, q.quantized().dtype);
        const tenso::buffer qp = tenso::dumps(q);
        const std::vector<float> back = tenso::loads(qp.bytes()).dequantize();
        CPPUNIT_ASSERT_EQUAL(std::size_t(4), back.size());
        for (std::size_t i = 0; i < 4; ++i) CPPUNIT_ASSERT_DOUBLES_EQUAL(ramp[i], back[i], 0.02);

        // DLPack: an export the consumer deletes once.
        const tenso::buffer dp = tenso::dumps(tenso::tensor(kF32, {2, 3}));
        DLManagedTensorVersioned *dl = tenso::loads(dp.bytes()).to_dlpack();
        CPPUNIT_ASSERT_EQUAL(std::int64_t(3), dl->dl_tensor.shape[1]);
        dl->deleter(dl);
    }

    void fileAndFd() {
        const std::string path = tmp_path("single.tenso");
        tenso::save_file(path, tenso::tensor(kF32, {2, 3}));
        for (std::uint32_t mode : {TENSO_LOAD_READ, TENSO_LOAD_MMAP}) {
            const tenso::view v = tenso::load_file(path, mode);
            CPPUNIT_ASSERT(v.to_vector<float>() == kF32);
        }
        ::unlink(path.c_str());
        expect_error(TENSO_E_IO, [&] { tenso::load_file(path); });

        int fds[2];
        CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds));
        const std::uint64_t n = tenso::write_fd(fds[1], tenso::tensor(kF32, {2, 3}));
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(88), n);
        tenso::value b = tenso::value::bundle();
        b.insert("w", tenso::tensor(kF32, {6}));
        tenso::write_fd(fds[1], b);
        ::close(fds[1]);
        std::optional<tenso::view> first = tenso::read_fd(fds[0]);
        std::optional<tenso::view> second = tenso::read_fd(fds[0]);
        CPPUNIT_ASSERT(first && second);
        CPPUNIT_ASSERT(first->to_vector<float>() == kF32);
        CPPUNIT_ASSERT((*second)["w"].to_vector<float>() == kF32);
        CPPUNIT_ASSERT(!tenso::read_fd(fds[0]));  // a clean end is no error
        ::close(fds[0]);
    }

    void archiveHandles() {
        const std::string path = tmp_path("model.tenso");
        const std::vector<std::int32_t> ids = {7, 8, 9};
        {
            tenso::archive_writer w = tenso::archive_writer::open(path);
            w.add("weights", tenso::tensor(kF32, {2, 3})).add("ids", tenso::tensor(ids));
            w.set_metadata("framework", "c++");
            expect_error(TENSO_E_DUPLICATE_KEY, [&] { w.add("ids", tenso::tensor(ids)); });
            tenso::archive_writer moved = std::move(w);
            CPPUNIT_ASSERT(!w);
            moved.finish();
        }
        {
            // A writer dropped unfinished leaves no file.
            const std::string other = tmp_path("abandoned.tenso");
            tenso::archive_writer w = tenso::archive_writer::open(other);
            w.add("x", tenso::tensor(ids));
            w = tenso::archive_writer();  // frees the first writer
            CPPUNIT_ASSERT(::access(other.c_str(), F_OK) != 0);
        }

        tenso::view weights;
        {
            tenso::archive a = tenso::archive::open(path);
            CPPUNIT_ASSERT_EQUAL(TENSO_FORMAT_ARCHIVE, a.format());
            CPPUNIT_ASSERT_EQUAL(std::uint64_t(2), a.size());
            std::vector<std::string> names;
            for (const tenso::archive_entry &e : a) names.emplace_back(e.name());
            CPPUNIT_ASSERT(names == (std::vector<std::string>{"weights", "ids"}));
            CPPUNIT_ASSERT_EQUAL(std::uint64_t(3), a.entry(1).dims()[0]);
            CPPUNIT_ASSERT(a.find("ids") == std::optional<std::uint64_t>(1));
            CPPUNIT_ASSERT(!a.find("nope"));
            CPPUNIT_ASSERT(a.get("ids").to_vector<std::int32_t>() == ids);
            expect_error(TENSO_E_NOT_FOUND, [&] { a.get("nope"); });
            CPPUNIT_ASSERT(a.metadata("framework") == std::optional<std::string_view>("c++"));
            CPPUNIT_ASSERT(!a.metadata("absent"));
            CPPUNIT_ASSERT_EQUAL(std::size_t(1), a.metadata().size());
            a.verify();
            std::vector<std::uint8_t> two(8);
            a.read(1, 4, tenso::span<std::uint8_t>(two.data(), two.size()));
            std::int32_t tail[2];
            std::memcpy(tail, two.data(), sizeof tail);
            CPPUNIT_ASSERT(tail[0] == 8 && tail[1] == 9);
            weights = a.get("weights");
            tenso::archive b = std::move(a);
            CPPUNIT_ASSERT(!a && b.size() == 2);
        }
        // The view keeps the mapping after the archive is closed.
        CPPUNIT_ASSERT(weights.to_vector<float>() == kF32);
        ::unlink(path.c_str());
        expect_error(TENSO_E_NOT_FOUND, [&] { tenso::archive::open(path); });
    }

    void shmHandles() {
        const std::string name = shm_name("seg");
        tenso::shm::unlink(name);
        tenso::view kept;
        {
            tenso::shm s = tenso::shm::create_for(name, tenso::value(tenso::tensor(kF32, {2, 3})));
            CPPUNIT_ASSERT_EQUAL(std::string_view(name), s.name());
            CPPUNIT_ASSERT_EQUAL(std::uint64_t(88), s.size());
            CPPUNIT_ASSERT(s.load().to_vector<float>() == kF32);
            expect_error(TENSO_E_EXISTS, [&] { tenso::shm::create_for(name, tenso::value(tenso::tensor(kF32, {6}))); });

            tenso::shm r = tenso::shm::open(name);
            kept = r.load();
            // Zero copy: the body is in the mapping, 64 bytes in.
            CPPUNIT_ASSERT(kept.data() == static_cast<const std::uint8_t *>(r.data()) + 64);
            // Opened read-only: no put.
            expect_error(TENSO_E_INVALID_ARGUMENT, [&] { r.put(tenso::value(tenso::tensor(kF32, {6}))); });
            tenso::shm moved = std::move(r);
            CPPUNIT_ASSERT(!r && moved.data() != nullptr);
        }
        // The view keeps the mapping after every handle is closed.
        CPPUNIT_ASSERT(kept.to_vector<float>() == kF32);
        CPPUNIT_ASSERT(tenso::shm::unlink(name));
        CPPUNIT_ASSERT(!tenso::shm::unlink(name));
        expect_error(TENSO_E_NOT_FOUND, [&] { tenso::shm::open(name); });
    }

    void cacheHandles() {
        const std::string name = shm_name("cache");
        tenso::cache::unlink(name);
        tenso::cache_options o;
        o.bytes(1 << 20).replace();
        o.max_clients = 4;
        o.max_pins = 64;
        tenso::cache c = tenso::cache::create(name, o);
        CPPUNIT_ASSERT_EQUAL(std::string_view(name), c.name());

        const tenso::value w(tenso::tensor(kF32, {2, 3}));
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(88), c.put("w", w));
        c.put("w2", w, 3600);
        {
            tenso::cache other = tenso::cache::open(name);
            const tenso::view v = other.get("w");
            CPPUNIT_ASSERT(v.to_vector<float>() == kF32);
            CPPUNIT_ASSERT_EQUAL(1u, c.info("w").pins);  // pinned while the view lives
        }
        CPPUNIT_ASSERT_EQUAL(0u, c.info("w").pins);
        CPPUNIT_ASSERT(c.contains("w") && !c.contains("nope"));
        CPPUNIT_ASSERT(!c.try_get("nope"));
        expect_error(TENSO_E_NOT_FOUND, [&] { c.get("nope"); });
        CPPUNIT_ASSERT(c.try_get("w2").has_value());

        std::vector<std::string> keys = c.keys();
        CPPUNIT_ASSERT(keys == (std::vector<std::string>{"w2", "w"}));  // most recent first
        CPPUNIT_ASSERT(c.erase("w2"));
        CPPUNIT_ASSERT(!c.erase("w2"));
        const tenso_cache_stats st = c.stats();
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(1), st.entries);
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(2), st.hits);
        CPPUNIT_ASSERT_EQUAL(std::uint64_t(2), st.misses);
        c.check();

        tenso::cache moved = std::move(c);
        CPPUNIT_ASSERT(!c && moved.contains("w"));
        moved.clear();
        CPPUNIT_ASSERT(moved.keys().empty());
        CPPUNIT_ASSERT(tenso::cache::unlink(name));
        CPPUNIT_ASSERT(!tenso::cache::unlink(name));
        expect_error(TENSO_E_NOT_FOUND, [&] { tenso::cache::open(name); });
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CppApiTest);
