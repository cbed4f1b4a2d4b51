// CapiMiscTest - version functions, status names, the thread-local error message and the
// options initialisers: the small contracts every SDK builds its error handling on.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "tenso/tenso.h"

namespace {

// A truncated v4 header: fails tenso_loads with TENSO_E_TRUNCATED.
const uint8_t kShortPacket[6] = {'T', 'N', 'S', 'O', 4, 1};

// Any valid packet: f32 scalar, encoded by the library itself.
std::string valid_scalar_packet() {
    float x = 2.5f;
    tenso_tensor t = {&x, sizeof x, nullptr, 0, TENSO_DTYPE_FLOAT32};
    char buf[128];
    size_t n = 0;
    if (tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr) != TENSO_OK) return std::string();
    return std::string(buf, n);
}

}  // namespace

class CapiMiscTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiMiscTest);
    CPPUNIT_TEST(testVersionFunctionsMatchHeader);
    CPPUNIT_TEST(testStatusNames);
    CPPUNIT_TEST(testLastErrorSetAndCleared);
    CPPUNIT_TEST(testErrorClearedByEverySuccessfulCall);
    CPPUNIT_TEST(testLastErrorIsThreadLocal);
    CPPUNIT_TEST(testEncodeOptionsInit);
    CPPUNIT_TEST(testDecodeOptionsInit);
    CPPUNIT_TEST(testBufferDisposeAcceptsNullAndEmpty);
    CPPUNIT_TEST(testFreeFunctionsAcceptNull);
    CPPUNIT_TEST_SUITE_END();

public:
    void setUp() override { tenso_error_clear(); }

    void testVersionFunctionsMatchHeader() {
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_VERSION_NUMBER), tenso_version_number());
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_VERSION_MAJOR * 10000 + TENSO_VERSION_MINOR * 100 + TENSO_VERSION_PATCH),
                             tenso_version_number());
        CPPUNIT_ASSERT_EQUAL(std::string(TENSO_VERSION_STRING), std::string(tenso_version_string()));
        std::string expect = std::to_string(TENSO_VERSION_MAJOR) + "." + std::to_string(TENSO_VERSION_MINOR) + "." +
                             std::to_string(TENSO_VERSION_PATCH);
        CPPUNIT_ASSERT_EQUAL(expect, std::string(tenso_version_string()));
        // Static storage: the same pointer every time.
        CPPUNIT_ASSERT(tenso_version_string() == tenso_version_string());
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_PROTOCOL_VERSION), tenso_protocol_version());
        CPPUNIT_ASSERT_EQUAL(uint32_t(4), tenso_protocol_version());
    }

    void testStatusNames() {
        struct {
            tenso_status st;
            const char *name;
        } const table[] = {
            {TENSO_OK, "TENSO_OK"},
            {TENSO_E_INVALID_ARGUMENT, "TENSO_E_INVALID_ARGUMENT"},
            {TENSO_E_BUFFER_TOO_SMALL, "TENSO_E_BUFFER_TOO_SMALL"},
            {TENSO_E_TRUNCATED, "TENSO_E_TRUNCATED"},
            {TENSO_E_BAD_MAGIC, "TENSO_E_BAD_MAGIC"},
            {TENSO_E_UNSUPPORTED_VERSION, "TENSO_E_UNSUPPORTED_VERSION"},
            {TENSO_E_BAD_DTYPE, "TENSO_E_BAD_DTYPE"},
            {TENSO_E_TOO_MANY_DIMS, "TENSO_E_TOO_MANY_DIMS"},
            {TENSO_E_TOO_MANY_ELEMENTS, "TENSO_E_TOO_MANY_ELEMENTS"},
            {TENSO_E_CHECKSUM, "TENSO_E_CHECKSUM"},
            {TENSO_E_COMPRESSION, "TENSO_E_COMPRESSION"},
            {TENSO_E_BAD_BUNDLE, "TENSO_E_BAD_BUNDLE"},
            {TENSO_E_MALFORMED, "TENSO_E_MALFORMED"},
            {TENSO_E_LIMIT, "TENSO_E_LIMIT"},
            {TENSO_E_UNSUPPORTED_KIND, "TENSO_E_UNSUPPORTED_KIND"},
            {TENSO_E_NO_MEMORY, "TENSO_E_NO_MEMORY"},
            {TENSO_E_IO, "TENSO_E_IO"},
            {TENSO_E_END_OF_STREAM, "TENSO_E_END_OF_STREAM"},
            {TENSO_E_NOT_AVAILABLE, "TENSO_E_NOT_AVAILABLE"},
            {TENSO_E_USER, "TENSO_E_USER"},
            {TENSO_E_INTERNAL, "TENSO_E_INTERNAL"},
            {TENSO_E_NOT_FOUND, "TENSO_E_NOT_FOUND"},
            {TENSO_E_EXISTS, "TENSO_E_EXISTS"},
            {TENSO_E_FULL, "TENSO_E_FULL"},
            {TENSO_E_CORRUPT, "TENSO_E_CORRUPT"},
            {TENSO_E_TIMEOUT, "TENSO_E_TIMEOUT"},
            {TENSO_E_BAD_OFFSET, "TENSO_E_BAD_OFFSET"},
            {TENSO_E_DUPLICATE_KEY, "TENSO_E_DUPLICATE_KEY"},
            {TENSO_E_BAD_UTF8, "TENSO_E_BAD_UTF8"},
            {TENSO_E_GPU_UNAVAILABLE, "TENSO_E_GPU_UNAVAILABLE"},
            {TENSO_E_GPU, "TENSO_E_GPU"},
            {TENSO_E_SHUTDOWN, "TENSO_E_SHUTDOWN"},
            {TENSO_E_CONNECTION, "TENSO_E_CONNECTION"},
            {TENSO_E_AUTH, "TENSO_E_AUTH"},
            {TENSO_E_BAD_ADDRESS, "TENSO_E_BAD_ADDRESS"},
            {TENSO_E_CANCELLED, "TENSO_E_CANCELLED"},
        };
        // The codes are pinned ABI values: 0 and -1 to -35, contiguous.
        for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
            CPPUNIT_ASSERT_EQUAL(tenso_status(-int32_t(i)), table[i].st);
            CPPUNIT_ASSERT_EQUAL(std::string(table[i].name), std::string(tenso_status_name(table[i].st)));
        }
        for (tenso_status unknown : {1, -36, -100, 42, INT32_MIN, INT32_MAX})
            CPPUNIT_ASSERT_EQUAL(std::string("TENSO_E_UNKNOWN"), std::string(tenso_status_name(unknown)));
    }

    void testLastErrorSetAndCleared() {
        CPPUNIT_ASSERT(tenso_last_error() != nullptr);
        CPPUNIT_ASSERT_EQUAL(std::string(), std::string(tenso_last_error()));

        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, kShortPacket, sizeof kShortPacket, nullptr));
        CPPUNIT_ASSERT(v == nullptr);
        CPPUNIT_ASSERT(std::strlen(tenso_last_error()) > 0);

        // The next successful call clears it.
        std::string pkt = valid_scalar_packet();
        CPPUNIT_ASSERT(!pkt.empty());
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, kShortPacket, sizeof kShortPacket, nullptr));
        TENSO_CHECK_OK(tenso_loads(&v, pkt.data(), pkt.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string(), std::string(tenso_last_error()));
        tenso_view_free(v);

        // tenso_error_clear clears it too.
        tenso_dtype d = 0;
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_dtype_from_name(&d, "float31"));
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("float31") != std::string::npos);
        tenso_error_clear();
        CPPUNIT_ASSERT_EQUAL(std::string(), std::string(tenso_last_error()));

        // A new failure replaces the previous message.
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_dtype_from_name(&d, "float31"));
        std::string first = tenso_last_error();
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, kShortPacket, sizeof kShortPacket, nullptr));
        CPPUNIT_ASSERT(std::string(tenso_last_error()) != first);

        // NULL arguments are failures with a message, never crashes.
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads(nullptr, pkt.data(), pkt.size(), nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dtype_from_name(nullptr, "float32"));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dtype_from_name(&d, nullptr));
    }

    // "Cleared by the next successful call" must hold for every fallible entry point, not only
    // for the ones that go through the engine: an SDK that reads tenso_last_error() after a
    // success (to log a warning, say) must not see a stale message.
    void testErrorClearedByEverySuccessfulCall() {
        std::string pkt = valid_scalar_packet();
        tenso_view *v = nullptr;
        auto fail_first = [&] {
            tenso_status st = tenso_loads(&v, kShortPacket, sizeof kShortPacket, nullptr);
            CPPUNIT_ASSERT_EQUAL(TENSO_E_TRUNCATED, st);
            CPPUNIT_ASSERT(tenso_last_error()[0] != '\0');
        };

        tenso_encode_options eo;
        fail_first();
        TENSO_CHECK_OK(tenso_encode_options_init(&eo, TENSO_ENCODE_OPTIONS_VERSION));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("after tenso_encode_options_init", std::string(), std::string(tenso_last_error()));

        tenso_decode_options dopt;
        fail_first();
        TENSO_CHECK_OK(tenso_decode_options_init(&dopt, TENSO_DECODE_OPTIONS_VERSION));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("after tenso_decode_options_init", std::string(), std::string(tenso_last_error()));

        tenso_dtype d = 0;
        fail_first();
        TENSO_CHECK_OK(tenso_dtype_from_name(&d, "int8"));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("after tenso_dtype_from_name", std::string(), std::string(tenso_last_error()));

        // A bundle view for the accessor-like calls.
        tenso_value *b = nullptr, *c = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        TENSO_CHECK_OK(tenso_value_new_packet(&c, pkt.data(), pkt.size()));
        TENSO_CHECK_OK(tenso_bundle_insert(b, "k", 1, c));
        tenso_buffer buf = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_value_dumps(&buf, b, nullptr));
        tenso_value_free(c);
        tenso_value_free(b);
        tenso_view *bv = nullptr;
        TENSO_CHECK_OK(tenso_loads(&bv, buf.data, buf.size, nullptr));

        const char *key = nullptr;
        size_t key_len = 0;
        const tenso_view *child = nullptr;
        fail_first();
        TENSO_CHECK_OK(tenso_view_bundle_entry(&key, &key_len, &child, bv, 0));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("after tenso_view_bundle_entry", std::string(), std::string(tenso_last_error()));
        fail_first();
        TENSO_CHECK_OK(tenso_view_bundle_find(&child, bv, "k", 1));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("after tenso_view_bundle_find", std::string(), std::string(tenso_last_error()));
        tenso_view_free(bv);
        tenso_buffer_dispose(&buf);
    }

    void testLastErrorIsThreadLocal() {
        // Both threads fail, wait until the other has failed too, then read their own message.
        std::atomic<int> failed{0};
        std::string msg_a, msg_b;
        tenso_status st_a = TENSO_OK, st_b = TENSO_OK;
        auto wait_both = [&] {
            failed.fetch_add(1);
            while (failed.load() < 2) std::this_thread::yield();
        };
        std::thread ta([&] {
            tenso_dtype d = 0;
            st_a = tenso_dtype_from_name(&d, "no-such-dtype-a");
            wait_both();
            msg_a = tenso_last_error();
        });
        std::thread tb([&] {
            tenso_view *v = nullptr;
            st_b = tenso_loads(&v, kShortPacket, sizeof kShortPacket, nullptr);
            wait_both();
            msg_b = tenso_last_error();
        });
        ta.join();
        tb.join();
        CPPUNIT_ASSERT_EQUAL(TENSO_E_BAD_DTYPE, st_a);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_TRUNCATED, st_b);
        CPPUNIT_ASSERT_MESSAGE("thread A saw: " + msg_a, msg_a.find("no-such-dtype-a") != std::string::npos);
        CPPUNIT_ASSERT_MESSAGE("thread B saw: " + msg_b, !msg_b.empty());
        CPPUNIT_ASSERT_MESSAGE("thread B saw A's message", msg_b.find("no-such-dtype-a") == std::string::npos);
        CPPUNIT_ASSERT(msg_a != msg_b);
        // This thread failed nothing.
        CPPUNIT_ASSERT_EQUAL(std::string(), std::string(tenso_last_error()));

        // A thread's clear does not touch another thread's message.
        tenso_dtype d = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_BAD_DTYPE, tenso_dtype_from_name(&d, "main-thread-bad"));
        std::thread tc([] { tenso_error_clear(); });
        tc.join();
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("main-thread-bad") != std::string::npos);
    }

    void testEncodeOptionsInit() {
        tenso_encode_options o;
        std::memset(&o, 0xAB, sizeof o);
        TENSO_CHECK_OK(tenso_encode_options_init(&o, TENSO_ENCODE_OPTIONS_VERSION));
        const tenso_encode_options ref = TENSO_ENCODE_OPTIONS_INIT;
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_ENCODE_OPTIONS_VERSION), o.version);
        CPPUNIT_ASSERT_EQUAL(ref.version, o.version);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.flags);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.alignment);
        CPPUNIT_ASSERT_EQUAL(int32_t(0), o.compression_level);

        std::memset(&o, 0xAB, sizeof o);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_encode_options_init(&o, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_encode_options_init(&o, TENSO_ENCODE_OPTIONS_VERSION + 1));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_encode_options_init(nullptr, 1));

        // The initialised options encode exactly like NULL options.
        TENSO_CHECK_OK(tenso_encode_options_init(&o, TENSO_ENCODE_OPTIONS_VERSION));
        int32_t x[3] = {1, 2, 3};
        uint64_t shape[1] = {3};
        tenso_tensor t = {x, sizeof x, shape, 1, TENSO_DTYPE_INT32};
        uint8_t a[128], b[128];
        size_t na = 0, nb = 0;
        TENSO_CHECK_OK(tenso_dumps_into(a, sizeof a, &na, &t, &o));
        TENSO_CHECK_OK(tenso_dumps_into(b, sizeof b, &nb, &t, nullptr));
        CPPUNIT_ASSERT_EQUAL(na, nb);
        CPPUNIT_ASSERT(std::memcmp(a, b, na) == 0);
    }

    void testDecodeOptionsInit() {
        tenso_decode_options o;
        std::memset(&o, 0xCD, sizeof o);
        TENSO_CHECK_OK(tenso_decode_options_init(&o, TENSO_DECODE_OPTIONS_VERSION));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_DECODE_OPTIONS_VERSION), o.version);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.flags);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.max_ndim);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.max_depth);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.max_elements);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.max_packet_bytes);
        // Every field, not a memcmp against TENSO_DECODE_OPTIONS_INIT: the struct ends in 4
        // bytes of padding that neither side is obliged to write (clang-tidy).
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.max_decoded_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.max_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.timeout_ms);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), o.threads);

        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decode_options_init(&o, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decode_options_init(&o, 99));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decode_options_init(nullptr, 1));

        // Defaults decode a valid packet.
        TENSO_CHECK_OK(tenso_decode_options_init(&o, TENSO_DECODE_OPTIONS_VERSION));
        std::string pkt = valid_scalar_packet();
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, pkt.data(), pkt.size(), &o));
        CPPUNIT_ASSERT_EQUAL(2.5f, *static_cast<const float *>(tenso_view_data(v)));
        tenso_view_free(v);
    }

    void testBufferDisposeAcceptsNullAndEmpty() {
        tenso_buffer_dispose(nullptr);
        tenso_buffer b = TENSO_BUFFER_INIT;
        tenso_buffer_dispose(&b);
        CPPUNIT_ASSERT(b.data == nullptr);
        CPPUNIT_ASSERT_EQUAL(size_t(0), b.size);
        tenso_buffer_dispose(&b);  // twice is fine
    }

    void testFreeFunctionsAcceptNull() {
        tenso_value_free(nullptr);
        tenso_view_free(nullptr);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(nullptr));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiMiscTest);
