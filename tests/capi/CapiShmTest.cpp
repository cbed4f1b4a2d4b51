// CapiShmTest - tenso_shm_*: single-packet shared-memory segments. Round trips of dense,
// bundle, compressed and integrity packets (the compressed one framed exactly), read-only
// handles, EXISTS / REPLACE / NOT_FOUND, views that outlive the handle, a segment larger than
// its packet (stale bytes after it, as upstream leaves them), and a second process reading.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "isolated.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

std::string seg_name(const char *tag) { return "tenso-test-shm-" + std::to_string(::getpid()) + "-" + tag; }

// Unlinks the name at scope exit, whatever happened.
struct Unlink {
    std::string name;
    ~Unlink() { tenso_shm_unlink(name.c_str()); }
};
struct ShmClose {
    void operator()(tenso_shm *s) const { tenso_shm_close(s); }
};
using ShmPtr = std::unique_ptr<tenso_shm, ShmClose>;

struct Data {
    std::vector<float> v;
    std::vector<uint64_t> shape;
    tenso_tensor t{};
    ValuePtr value;
    Data(size_t n, float seed, std::vector<uint64_t> s) : v(n), shape(std::move(s)) {
        for (size_t i = 0; i < n; ++i) v[i] = seed + float(i % 7);  // compressible
        t = tensor(v.data(), v.size() * 4, shape, TENSO_DTYPE_FLOAT32);
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &t));
        value.reset(raw);
    }
};

Bytes dumps(const tenso_value *v, const tenso_encode_options &o) {
    Buffer b;
    TENSO_CHECK_OK(tenso_value_dumps(&b.b, v, &o));
    return b.bytes();
}

// Writes raw bytes into a fresh segment, as another program would.
void raw_segment(const std::string &name, const Bytes &bytes) {
    std::string n = "/" + name;
    int fd = ::shm_open(n.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    CPPUNIT_ASSERT(fd >= 0);
    CPPUNIT_ASSERT(::ftruncate(fd, off_t(bytes.size())) == 0);
    CPPUNIT_ASSERT(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
    ::close(fd);
}

}  // namespace

class CapiShmTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiShmTest);
    CPPUNIT_TEST(testRoundTrips);
    CPPUNIT_TEST(testPutAndSizes);
    CPPUNIT_TEST(testReadOnly);
    CPPUNIT_TEST(testExistsReplaceNotFound);
    CPPUNIT_TEST(testViewOutlivesClose);
    CPPUNIT_TEST(testTrailingBytes);
    CPPUNIT_TEST(testOtherProcess);
    CPPUNIT_TEST(testNames);
    CPPUNIT_TEST_SUITE_END();

public:
    void testRoundTrips() {
        Data a(1000, 1.0f, {10, 100});
        Data b(64, 2.0f, {64});
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&raw));
        ValuePtr bundle(raw);
        TENSO_CHECK_OK(tenso_bundle_insert(bundle.get(), "a", 1, a.value.get()));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle.get(), "b", 1, b.value.get()));
        struct Case {
            const char *tag;
            const tenso_value *v;
            uint32_t flags;
        } cases[] = {{"dense", a.value.get(), 0},
                     {"bundle", bundle.get(), 0},
                     {"lz4", a.value.get(), TENSO_ENCODE_COMPRESS},
                     {"xxh", a.value.get(), TENSO_ENCODE_INTEGRITY},
                     {"bundle-xxh", bundle.get(), TENSO_ENCODE_INTEGRITY}};
        for (const Case &c : cases) {
            Unlink u{seg_name(c.tag)};
            tenso_encode_options o = enc(c.flags);
            Bytes want = dumps(c.v, o);
            tenso_shm *s = nullptr;
            uint64_t written = 0;
            TENSO_CHECK_OK(tenso_shm_create_for(&s, &written, u.name.c_str(), c.v, &o, 0));
            ShmPtr sp(s);
            CPPUNIT_ASSERT_EQUAL(uint64_t(want.size()), written);
            CPPUNIT_ASSERT_EQUAL(uint64_t(want.size()), tenso_shm_size(s));  // sized exactly
            CPPUNIT_ASSERT_MESSAGE(c.tag, std::memcmp(tenso_shm_data(s), want.data(), want.size()) == 0);
            // Another handle reads it back; equal to tenso_loads of the same bytes.
            tenso_shm *r = nullptr;
            TENSO_CHECK_OK(tenso_shm_open(&r, u.name.c_str(), 0));
            ShmPtr rp(r);
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_shm_get(&v, r, nullptr));
            ViewPtr vp(v);
            TENSO_CHECK_OK(tenso_loads(&v, want.data(), want.size(), nullptr));
            ViewPtr wp(v);
            CPPUNIT_ASSERT_EQUAL(std::string(), view_diff(vp.get(), wp.get()));
            CPPUNIT_ASSERT_EQUAL(uint64_t(want.size()), tenso_view_packet_size(vp.get()));
            if (std::string(c.tag) == "dense") {  // zero-copy: the data points into the mapping
                auto *base = static_cast<const uint8_t *>(tenso_shm_data(r));
                auto *d = static_cast<const uint8_t *>(tenso_view_data(vp.get()));
                CPPUNIT_ASSERT(d >= base && d < base + tenso_shm_size(r));
                CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(vp.get()));  // it keeps the mapping
            }
        }
    }

    void testPutAndSizes() {
        Unlink u{seg_name("put")};
        Data a(256, 3.0f, {256});
        tenso_shm *s = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_create(&s, u.name.c_str(), 0, 0));
        TENSO_CHECK_OK(tenso_shm_create(&s, u.name.c_str(), 4096, 0));
        ShmPtr sp(s);
        CPPUNIT_ASSERT_EQUAL(uint64_t(4096), tenso_shm_size(s));
        CPPUNIT_ASSERT_EQUAL(u.name, std::string(tenso_shm_name(s)));
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_shm_get(&v, s, nullptr));  // zeros: no packet
        CPPUNIT_ASSERT(!v);
        uint64_t written = 0;
        tenso_encode_options o = enc();
        TENSO_CHECK_OK(tenso_shm_put(&written, s, a.value.get(), &o));
        Bytes want = dumps(a.value.get(), o);
        CPPUNIT_ASSERT_EQUAL(uint64_t(want.size()), written);
        TENSO_CHECK_OK(tenso_shm_get(&v, s, nullptr));
        ViewPtr vp(v);
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), a.v.data(), 1024) == 0);
        // Too big: BUFFER_TOO_SMALL with the size needed, segment unchanged.
        Data big(2000, 4.0f, {2000});
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_shm_put(&written, s, big.value.get(), &o));
        CPPUNIT_ASSERT_EQUAL(uint64_t(dumps(big.value.get(), o).size()), written);
        CPPUNIT_ASSERT(std::memcmp(tenso_shm_data(s), want.data(), want.size()) == 0);
    }

    void testReadOnly() {
        Unlink u{seg_name("ro")};
        Data a(16, 1.0f, {16});
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create_for(&s, nullptr, u.name.c_str(), a.value.get(), nullptr, 0));
        ShmPtr sp(s);
        tenso_shm *r = nullptr;
        TENSO_CHECK_OK(tenso_shm_open(&r, u.name.c_str(), 0));
        ShmPtr rp(r);
        uint64_t w = 1;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_put(&w, r, a.value.get(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), w);
        // The mapping really is PROT_READ: a write faults (in a child).
        std::string msg = run_isolated([&] { static_cast<volatile uint8_t *>(tenso_shm_data(r))[0] = 1; });
        CPPUNIT_ASSERT_MESSAGE("a write through a read-only mapping did not fault", !msg.empty());
    }

    void testExistsReplaceNotFound() {
        Unlink u{seg_name("exists")};
        tenso_shm *s = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_shm_open(&s, u.name.c_str(), 1));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_shm_unlink(u.name.c_str()));
        TENSO_CHECK_OK(tenso_shm_create(&s, u.name.c_str(), 100, 0));
        ShmPtr first(s);
        static_cast<uint8_t *>(tenso_shm_data(s))[0] = 42;
        TENSO_CHECK_STATUS(TENSO_E_EXISTS, tenso_shm_create(&s, u.name.c_str(), 100, 0));
        CPPUNIT_ASSERT(!s);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_create(&s, u.name.c_str(), 100, 0x80));
        TENSO_CHECK_OK(tenso_shm_create(&s, u.name.c_str(), 200, TENSO_SHM_REPLACE));
        ShmPtr second(s);
        CPPUNIT_ASSERT_EQUAL(uint64_t(200), tenso_shm_size(s));
        CPPUNIT_ASSERT_EQUAL(uint8_t(0), static_cast<uint8_t *>(tenso_shm_data(s))[0]);             // fresh
        CPPUNIT_ASSERT_EQUAL(uint8_t(42), static_cast<uint8_t *>(tenso_shm_data(first.get()))[0]);  // old mapping kept
        TENSO_CHECK_OK(tenso_shm_unlink(u.name.c_str()));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_shm_open(&s, u.name.c_str(), 0));
        static_cast<uint8_t *>(tenso_shm_data(second.get()))[199] = 7;  // still mapped after unlink
    }

    void testViewOutlivesClose() {
        Unlink u{seg_name("outlive")};
        Data a(4096, 5.0f, {64, 64});
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create_for(&s, nullptr, u.name.c_str(), a.value.get(), nullptr, 0));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_shm_get(&v, s, nullptr));
        ViewPtr vp(v);
        tenso_shm_close(s);
        TENSO_CHECK_OK(tenso_shm_unlink(u.name.c_str()));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), a.v.data(), a.v.size() * 4) == 0);  // ASan: no use after unmap
    }

    void testTrailingBytes() {
        // Packets followed by zeros or garbage (a segment larger than the packet, or one that
        // held a longer packet before) read back exactly, compressed ones included.
        Data a(3000, 6.0f, {3000});
        for (uint32_t flags : {0u, uint32_t(TENSO_ENCODE_COMPRESS), uint32_t(TENSO_ENCODE_INTEGRITY)}) {
            for (uint8_t fill : {uint8_t(0), uint8_t(0xA5)}) {
                Unlink u{seg_name("tail")};
                Bytes pkt = dumps(a.value.get(), enc(flags));
                Bytes seg = pkt;
                seg.resize(pkt.size() + 4096 + 13, fill);
                raw_segment(u.name, seg);
                tenso_shm *s = nullptr;
                TENSO_CHECK_OK(tenso_shm_open(&s, u.name.c_str(), 0));
                ShmPtr sp(s);
                tenso_view *v = nullptr;
                TENSO_CHECK_OK(tenso_shm_get(&v, s, nullptr));
                ViewPtr vp(v);
                CPPUNIT_ASSERT_EQUAL(uint64_t(pkt.size()), tenso_view_packet_size(v));
                CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), a.v.data(), a.v.size() * 4) == 0);
            }
        }
        // A segment cut inside its packet: TRUNCATED, never an over-read.
        Unlink u{seg_name("cut")};
        Bytes pkt = dumps(a.value.get(), enc());
        pkt.resize(pkt.size() - 100);
        raw_segment(u.name, pkt);
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_open(&s, u.name.c_str(), 0));
        ShmPtr sp(s);
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&v, s, nullptr));
    }

    void testOtherProcess() {
        Unlink u{seg_name("proc")};
        Data a(1024, 7.0f, {1024});
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&s, u.name.c_str(), 8192, 0));
        ShmPtr sp(s);
        // The child writes, the parent reads: the same object, not a copy.
        std::string msg = run_isolated([&] {
            tenso_shm *c = nullptr;
            TENSO_CHECK_OK(tenso_shm_open(&c, u.name.c_str(), 1));
            TENSO_CHECK_OK(tenso_shm_put(nullptr, c, a.value.get(), nullptr));
            tenso_shm_close(c);
        });
        CPPUNIT_ASSERT_EQUAL(std::string(), msg);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_shm_get(&v, s, nullptr));
        ViewPtr vp(v);
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), a.v.data(), a.v.size() * 4) == 0);
    }

    void testNames() {
        // "x" and "/x" are one segment; bad names are refused.
        std::string n = seg_name("names");
        Unlink u{n};
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&s, n.c_str(), 64, 0));
        ShmPtr sp(s);
        tenso_shm *r = nullptr;
        TENSO_CHECK_OK(tenso_shm_open(&r, ("/" + n).c_str(), 0));
        tenso_shm_close(r);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(&r, "", 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(&r, "/", 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(&r, "a/b", 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(&r, std::string(300, 'x').c_str(), 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(nullptr, n.c_str(), 0));
        CPPUNIT_ASSERT(tenso_shm_data(nullptr) == nullptr);
        tenso_shm_close(nullptr);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiShmTest);
