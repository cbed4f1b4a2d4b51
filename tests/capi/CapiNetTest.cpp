// CapiNetTest - tenso nodes (tenso/net.h) over real sockets on 127.0.0.1, ::1 and Unix sockets:
// the seed's scenarios (push, pull, concurrent senders, rapid fire, a >= 1 GiB tensor, several
// receivers, sending before the peer is ready, immediate shutdown, timeouts, a missing tensor,
// bad addresses, calls after shutdown, pool reuse), a peer killed mid-transfer, hostile frames
// from a raw socket, TLS refusals (wrong fingerprint, wrong CA, unpinned key), backpressure
// and descriptor passing.
#include <cppunit/extensions/HelperMacros.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "net_util.hpp"
#include "tenso/tenso.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NET_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NET_TEST_SANITIZED 1
#endif
#endif

using namespace nettest;

namespace {

void count_release(void *user) { ++*static_cast<std::atomic<int> *>(user); }
// A release comes once the send in progress has let go of the value, which may be just after
// the peer got it.
void wait_released(const std::atomic<int> &rel, int want) {
    while (rel.load() < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CPPUNIT_ASSERT_EQUAL(want, rel.load());
}

}  // namespace

class CapiNetTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiNetTest);
    CPPUNIT_TEST(testBasicPushTls);
    CPPUNIT_TEST(testPushIpv6AndUnix);
    CPPUNIT_TEST(testPull);
    CPPUNIT_TEST(testConcurrentSenders);
    CPPUNIT_TEST(testRapidFire);
    CPPUNIT_TEST(testLargeTensor);
    CPPUNIT_TEST(testMultipleReceivers);
    CPPUNIT_TEST(testSendBeforePeerReady);
    CPPUNIT_TEST(testImmediateShutdown);
    CPPUNIT_TEST(testTimeoutsAndCancel);
    CPPUNIT_TEST(testMissingTensor);
    CPPUNIT_TEST(testBadAddress);
    CPPUNIT_TEST(testCallsAfterShutdown);
    CPPUNIT_TEST(testPoolReuse);
    CPPUNIT_TEST(testPeerKilledMidTransfer);
    CPPUNIT_TEST(testHostileFrames);
    CPPUNIT_TEST(testSizeRefused);
    CPPUNIT_TEST(testTlsWrongFingerprint);
    CPPUNIT_TEST(testTlsCaAndPinning);
    CPPUNIT_TEST(testBackpressure);
    CPPUNIT_TEST(testTlsRecordsUnderBackpressure);
    CPPUNIT_TEST(testDescriptorPassing);
    CPPUNIT_TEST(testReceiveFdAndBundle);
    CPPUNIT_TEST(testPostOrderedAndBounded);
    CPPUNIT_TEST(testPostRefusalSurfacedByFlush);
    CPPUNIT_TEST(testShutdownFailsPendingFlush);
    CPPUNIT_TEST(testAcksAreCumulativeOnTheWire);
    CPPUNIT_TEST(testPostAckBatchingWithRefusals);
    CPPUNIT_TEST(testPostBufferIsBounded);
    CPPUNIT_TEST(testShutdownWritesBufferedPosts);
    CPPUNIT_TEST(testAckCountBeyondOutstandingIsMalformed);
    CPPUNIT_TEST(testOneOkPerPushForA140Dialer);
    CPPUNIT_TEST(testConcurrentPostsFlushesAndShutdown);
    CPPUNIT_TEST(testPostsToA140Listener);
    CPPUNIT_TEST(testShutdownWakesABlockedPost);
    CPPUNIT_TEST(testUnflushedPostsGoOut);
    CPPUNIT_TEST(testPostThenFreeOrShutdown);
    CPPUNIT_TEST(testOverConnectionLimitIsLimit);
    CPPUNIT_TEST_SUITE_END();

public:
    void testBasicPushTls() {
        NodePtr a = make_node(), b = make_node();
        const std::string addr = addr_of(b.get());
        CPPUNIT_ASSERT_EQUAL(std::string("tls://" + id_of(b.get()) + "@127.0.0.1:"), addr.substr(0, 6 + 64 + 11));
        Floats f(64, 33, 1.0f);
        TENSO_CHECK_OK(send(a.get(), addr, "weights", f));
        MsgPtr m = receive(b.get());
        CPPUNIT_ASSERT_EQUAL(std::string("weights"), name_of(m.get()));
        CPPUNIT_ASSERT_EQUAL(id_of(a.get()), std::string(tenso_node_message_sender(m.get())));
        f.check(tenso_node_message_view(m.get()));
        // The view outlives the message and the node.
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_node_message_take_view(&v, m.get()));
        ViewPtr hold(v);
        m.reset();
        b.reset();
        f.check(v);
    }

    void testPushIpv6AndUnix() {
        const std::string u = unix_listen("v6");
        const std::string listen = "tls://[::1]:0,tcp://127.0.0.1:0," + u;
        NodePtr b = make_node(listen.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        CPPUNIT_ASSERT_EQUAL(std::string("tls://"), addr_of(b.get(), 0).substr(0, 6));
        CPPUNIT_ASSERT(addr_of(b.get(), 0).find("@[::1]:") != std::string::npos);
        CPPUNIT_ASSERT_EQUAL(std::string("tcp://127.0.0.1:"), addr_of(b.get(), 1).substr(0, 16));
        CPPUNIT_ASSERT_EQUAL(u, addr_of(b.get(), 2));
        char buf[8];
        size_t len;
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_node_addr(buf, sizeof buf, &len, b.get(), 3));
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_node_addr(buf, sizeof buf, &len, b.get(), 0));
        CPPUNIT_ASSERT_EQUAL(addr_of(b.get(), 0).size(), len);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_node_addr(buf, sizeof buf, &len, a.get(), 0));
        for (uint32_t i = 0; i < 3; ++i) {
            Floats f(10, 10, float(i));
            TENSO_CHECK_OK(send(a.get(), addr_of(b.get(), i), "t" + std::to_string(i), f));
            MsgPtr m = receive(b.get());
            CPPUNIT_ASSERT_EQUAL("t" + std::to_string(i), name_of(m.get()));
            f.check(tenso_node_message_view(m.get()));
            const std::string sender = tenso_node_message_sender(m.get());
            if (i == 0) CPPUNIT_ASSERT_EQUAL(id_of(a.get()), sender);
            if (i == 1) CPPUNIT_ASSERT_EQUAL(std::string("tcp://127.0.0.1:"), sender.substr(0, 16));
            if (i == 2) CPPUNIT_ASSERT_EQUAL(std::string("unix:"), sender);
        }
    }

    void testPull() {
        NodePtr a = make_node(), b = make_node();
        Floats f(128, 7, 3.0f);
        std::atomic<int> rel{0};
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "w", 1, f.value().release(), count_release, &rel));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_node_request(&v, a.get(), addr_of(b.get()).c_str(), "w", 1, 0, nullptr));
        ViewPtr hold(v);
        f.check(v);
        // Replacing releases the old value; unpublishing the new one.
        Floats g(3, 3, 9.0f);
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "w", 1, g.value().release(), count_release, &rel));
        wait_released(rel, 1);
        TENSO_CHECK_OK(tenso_node_request(&v, a.get(), addr_of(b.get()).c_str(), "w", 1, 0, nullptr));
        hold.reset(v);
        g.check(v);
        TENSO_CHECK_OK(tenso_node_unpublish(b.get(), "w", 1));
        wait_released(rel, 2);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_node_unpublish(b.get(), "w", 1));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND,
                           tenso_node_request(&v, a.get(), addr_of(b.get()).c_str(), "w", 1, 0, nullptr));
        // Freeing the node releases what is still published.
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "x", 1, f.value().release(), count_release, &rel));
        b.reset();
        CPPUNIT_ASSERT_EQUAL(3, rel.load());
    }

    void testConcurrentSenders() {
        NodePtr b = make_node();
        const std::string addr = addr_of(b.get());
        const int kSenders = 4, kEach = 25;
        std::vector<std::thread> ts;
        std::atomic<int> failures{0};
        NodePtr shared = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        for (int s = 0; s < kSenders; ++s)
            ts.emplace_back([&, s] {
                for (int i = 0; i < kEach; ++i) {
                    Floats f(8, 8, float(s * 1000 + i));
                    if (send(shared.get(), addr, std::to_string(s) + "/" + std::to_string(i), f) != TENSO_OK)
                        ++failures;
                }
            });
        std::vector<int> next(kSenders, 0);
        for (int k = 0; k < kSenders * kEach; ++k) {
            MsgPtr m = receive(b.get());
            const std::string n = name_of(m.get());
            const int s = std::stoi(n.substr(0, n.find('/'))), i = std::stoi(n.substr(n.find('/') + 1));
            CPPUNIT_ASSERT_EQUAL(next[s], i);  // each sender's pushes arrive in order
            ++next[s];
            Floats(8, 8, float(s * 1000 + i)).check(tenso_node_message_view(m.get()));
        }
        for (auto &t : ts) t.join();
        CPPUNIT_ASSERT_EQUAL(0, failures.load());
        CPPUNIT_ASSERT(stats_of(shared.get()).pool_size <= uint32_t(kSenders));
    }

    // Receives count messages named "0", "1", ... in order, each value's first float its number.
    void receive_numbered(tenso_node *b, int count) {
        for (int i = 0; i < count; ++i) {
            MsgPtr m = receive(b);
            CPPUNIT_ASSERT_EQUAL(std::to_string(i), name_of(m.get()));
            CPPUNIT_ASSERT_EQUAL(float(i),
                                 static_cast<const float *>(tenso_view_data(tenso_node_message_view(m.get())))[0]);
        }
    }

    void testRapidFire() {
        NodePtr b = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
        const int kCount = 2000;
        std::thread rx([&] { receive_numbered(b.get(), kCount); });
        std::vector<float> x(256);
        for (int i = 0; i < kCount; ++i) {
            x[0] = float(i);
            uint64_t shape[1] = {256};
            tenso_tensor t{x.data(), 1024, shape, 1, TENSO_DTYPE_FLOAT32};
            tenso_value *v = nullptr;
            TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
            ValuePtr hold(v);
            const std::string n = std::to_string(i);
            TENSO_CHECK_OK(tenso_node_send(a.get(), addr.c_str(), n.data(), n.size(), v, 0, nullptr));
        }
        rx.join();
        const tenso_node_stats s = stats_of(a.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.connections_opened);
        CPPUNIT_ASSERT_EQUAL(uint64_t(kCount - 1), s.connections_reused);
    }

    void testLargeTensor() {
#ifdef NET_TEST_SANITIZED
        const uint64_t rows = 64 * 1024;  // 64 MiB under sanitizers (every byte is instrumented)
#else
        const uint64_t rows = 1024 * 1024 + 1;  // > 1 GiB of float32
#endif
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued_bytes = uint64_t(2) << 30;
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        Floats f(rows, 256, 0.25f);
        CPPUNIT_ASSERT(rows <= 64 * 1024 || f.t.nbytes > (uint64_t(1) << 30));
        TENSO_CHECK_OK(send(a.get(), addr_of(b.get()), "big", f));
        MsgPtr m = receive(b.get());
        f.check(tenso_node_message_view(m.get()));
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_sent > f.t.nbytes);
    }

    void testMultipleReceivers() {
        NodePtr a = make_node();
        std::vector<NodePtr> rs;
        for (int i = 0; i < 3; ++i) rs.push_back(make_node());
        for (int i = 0; i < 3; ++i) TENSO_CHECK_OK(send(a.get(), addr_of(rs[i].get()), "r", Floats(5, 5, float(i))));
        for (int i = 0; i < 3; ++i) {
            MsgPtr m = receive(rs[i].get());
            Floats(5, 5, float(i)).check(tenso_node_message_view(m.get()));
        }
        CPPUNIT_ASSERT_EQUAL(3u, stats_of(a.get()).pool_size);
    }

    void testSendBeforePeerReady() {
        const std::string u = unix_listen("early");
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        Floats f(4, 4, 2.0f);
        TENSO_CHECK_STATUS(TENSO_E_CONNECTION, send(a.get(), u, "early", f));
        CPPUNIT_ASSERT_EQUAL(0u, stats_of(a.get()).pool_size);
        // The peer comes up while the sender retries.
        std::thread late([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            NodePtr b = make_node(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
            MsgPtr m = receive(b.get());
            f.check(tenso_node_message_view(m.get()));
        });
        tenso_status st;
        while ((st = send(a.get(), u, "early", f)) == TENSO_E_CONNECTION)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        TENSO_CHECK_OK(st);
        late.join();
    }

    void testImmediateShutdown() {
        NodePtr b = make_node();
        std::atomic<tenso_status> got{TENSO_OK};
        std::thread waiter([&] {
            tenso_node_message *m = nullptr;
            got = tenso_node_receive(&m, b.get(), UINT64_MAX, nullptr);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        tenso_node_shutdown(b.get());
        waiter.join();
        CPPUNIT_ASSERT_EQUAL(TENSO_E_SHUTDOWN, got.load());
        tenso_node_shutdown(b.get());  // idempotent
        NodePtr c = make_node();
        tenso_node_shutdown(c.get());  // right after start
    }

    void testTimeoutsAndCancel() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued = 1;
        NodePtr b = make_node(o), a = make_node();
        tenso_node_message *m = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_node_receive(&m, b.get(), 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_node_receive(&m, b.get(), 30, nullptr));
        // A full queue holds the second push's acknowledgement back: the sender times out.
        Floats f(4, 4, 1.0f);
        TENSO_CHECK_OK(send(a.get(), addr_of(b.get()), "one", f));
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, send(a.get(), addr_of(b.get()), "two", f, 50));
        // Cancel tokens: a waiting receive, and a call given a triggered token.
        tenso_cancel *c = nullptr;
        TENSO_CHECK_OK(tenso_cancel_new(&c));
        NodePtr e = make_node();
        std::atomic<tenso_status> got{TENSO_OK};
        std::thread waiter([&] { got = tenso_node_receive(&m, e.get(), UINT64_MAX, c); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        CPPUNIT_ASSERT_EQUAL(0, tenso_cancel_triggered(c));
        tenso_cancel_trigger(c);
        waiter.join();
        CPPUNIT_ASSERT_EQUAL(TENSO_E_CANCELLED, got.load());
        CPPUNIT_ASSERT_EQUAL(1, tenso_cancel_triggered(c));
        ValuePtr v = f.value();
        TENSO_CHECK_STATUS(TENSO_E_CANCELLED,
                           tenso_node_send(a.get(), addr_of(e.get()).c_str(), "x", 1, v.get(), 0, c));
        tenso_cancel_free(c);
    }

    void testMissingTensor() {
        NodePtr a = make_node(), b = make_node();
        tenso_view *v = nullptr;
        for (int i = 0; i < 3; ++i)
            TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND,
                               tenso_node_request(&v, a.get(), addr_of(b.get()).c_str(), "nope", 4, 0, nullptr));
        CPPUNIT_ASSERT(v == nullptr);
        const tenso_node_stats s = stats_of(a.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.connections_opened);  // "not found" keeps the connection
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.connections_reused);
    }

    void testBadAddress() {
        NodePtr a = make_node();
        Floats f(2, 2, 0.0f);
        const std::string fp(64, 'a');
        const char *bad[] = {"",
                             "127.0.0.1:5",
                             "http://x:1",
                             "tls://127.0.0.1:5",
                             "tls://abc@127.0.0.1:5",
                             "tcp://127.0.0.1",
                             "tcp://:5",
                             "tcp://[::1:5",
                             "tcp://127.0.0.1:99999",
                             "tcp://127.0.0.1:0",
                             "unix://"};
        for (const char *b : bad) TENSO_CHECK_STATUS(TENSO_E_BAD_ADDRESS, send(a.get(), b, "x", f));
        TENSO_CHECK_STATUS(TENSO_E_BAD_ADDRESS, send(a.get(), "tls://" + fp + "@no-such-host.invalid:5", "x", f));
        // Plaintext peers need the flag; nothing listening is a connection error.
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, send(a.get(), "tcp://127.0.0.1:5", "x", f));
        TENSO_CHECK_STATUS(TENSO_E_CONNECTION, send(a.get(), "tls://" + fp + "@127.0.0.1:1", "x", f));
        // Listen addresses.
        tenso_node *n = nullptr;
        tenso_node_options o = opts_for("tls://127.0.0.1");
        TENSO_CHECK_STATUS(TENSO_E_BAD_ADDRESS, tenso_node_new(&n, &o));
        const std::string with_fp = "tls://" + fp + "@127.0.0.1:0";
        o = opts_for(with_fp.c_str());
        TENSO_CHECK_STATUS(TENSO_E_BAD_ADDRESS, tenso_node_new(&n, &o));
        o = opts_for("tcp://127.0.0.1:0");
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_node_new(&n, &o));
        o = opts_for("tcp://192.0.2.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_node_new(&n, &o));
        CPPUNIT_ASSERT(n == nullptr);
        // Names.
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, send(a.get(), addr_of(a.get()), "", f));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, send(a.get(), addr_of(a.get()), std::string(5000, 'n'), f));
    }

    void testCallsAfterShutdown() {
        NodePtr a = make_node(), b = make_node();
        const std::string addr = addr_of(b.get());
        tenso_node_shutdown(a.get());
        Floats f(2, 2, 0.0f);
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, send(a.get(), addr, "x", f));
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_request(&v, a.get(), addr.c_str(), "x", 1, 0, nullptr));
        tenso_node_message *m = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_receive(&m, a.get(), 0, nullptr));
        std::atomic<int> rel{0};
        // A failed publish does not take the value: the caller still owns it, release is not called.
        ValuePtr pv = f.value();
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_publish(a.get(), "x", 1, pv.get(), count_release, &rel));
        NodePtr live = make_node();
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_node_publish(live.get(), "", 0, pv.get(), count_release, &rel));
        CPPUNIT_ASSERT_EQUAL(0, rel.load());
        TENSO_CHECK_OK(tenso_node_publish(live.get(), "x", 1, pv.release(), count_release, &rel));
        tenso_view *got_v = nullptr;
        NodePtr puller = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const std::string live_addr = addr_of(live.get());
        TENSO_CHECK_OK(tenso_node_request(&got_v, puller.get(), live_addr.c_str(), "x", 1, 0, nullptr));
        ViewPtr got_hold(got_v);
        f.check(got_v);
        live.reset();
        CPPUNIT_ASSERT_EQUAL(1, rel.load());
        // A node shut down mid-call: the peer's queue is full, the pending send fails.
        tenso_node_options o = opts_for(nullptr);
        o.max_queued = 1;
        NodePtr c = make_node(o), d = make_node();
        TENSO_CHECK_OK(send(d.get(), addr_of(c.get()), "1", f));
        std::atomic<tenso_status> got{TENSO_OK};
        std::thread t([&] { got = send(d.get(), addr_of(c.get()), "2", f, UINT64_MAX); });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        tenso_node_shutdown(d.get());
        t.join();
        CPPUNIT_ASSERT_EQUAL(TENSO_E_SHUTDOWN, got.load());
    }

    void testPoolReuse() {
        tenso_node_options o = opts_for(nullptr, TENSO_NODE_NO_LISTEN);
        o.idle_timeout_ms = 100;
        o.max_pool_per_peer = 2;
        NodePtr a = make_node(o), b = make_node();
        const std::string addr = addr_of(b.get());
        for (int i = 0; i < 10; ++i) {
            TENSO_CHECK_OK(send(a.get(), addr, "p", Floats(2, 2, float(i))));
            receive(b.get());
        }
        tenso_node_stats s = stats_of(a.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.connections_opened);
        CPPUNIT_ASSERT_EQUAL(uint64_t(9), s.connections_reused);
        CPPUNIT_ASSERT_EQUAL(1u, s.pool_size);
        CPPUNIT_ASSERT_EQUAL(1u, stats_of(b.get()).inbound_connections);
        // The idle timeout closes it.
        while (stats_of(a.get()).pool_size != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        // Four concurrent senders open four connections; two stay pooled (max_pool_per_peer).
        tenso_node_options o2 = opts_for(nullptr, TENSO_NODE_NO_LISTEN);
        o2.max_pool_per_peer = 2;
        NodePtr a2 = make_node(o2);
        std::vector<std::thread> ts;
        tenso_node_options ob = opts_for(nullptr);
        ob.max_queued = 1;  // holds every ack until the receiver drains, so all four are open at once
        NodePtr c = make_node(ob);
        TENSO_CHECK_OK(send(a2.get(), addr_of(c.get()), "fill", Floats(1, 1, 0.0f)));
        for (int i = 0; i < 4; ++i)
            ts.emplace_back([&] { TENSO_CHECK_OK(send(a2.get(), addr_of(c.get()), "q", Floats(1, 1, 0.0f))); });
        while (stats_of(c.get()).inbound_connections < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        CPPUNIT_ASSERT_EQUAL(4u, stats_of(a2.get()).pool_size);  // four busy (the first one's reused)
        for (int i = 0; i < 5; ++i) receive(c.get());
        for (auto &t : ts) t.join();
        CPPUNIT_ASSERT_EQUAL(2u, stats_of(a2.get()).pool_size);  // two kept
        // max_connections caps the connections to one peer: a second call waits for the first.
        tenso_node_options om = opts_for(nullptr, TENSO_NODE_NO_LISTEN);
        om.max_connections = 1;
        NodePtr d = make_node(om);
        NodePtr e = make_node(ob);
        TENSO_CHECK_OK(send(d.get(), addr_of(e.get()), "fill", Floats(1, 1, 0.0f)));
        std::thread held([&] { TENSO_CHECK_OK(send(d.get(), addr_of(e.get()), "held", Floats(1, 1, 0.0f))); });
        while (stats_of(e.get()).queued_bytes == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, send(d.get(), addr_of(e.get()), "third", Floats(1, 1, 0.0f), 50));
        CPPUNIT_ASSERT_EQUAL(1u, stats_of(d.get()).pool_size);
        // A caller waiting for the connection: a cancel ends the wait; one with no deadline gets
        // the connection when it comes back; a shutdown ends the wait.
        tenso_cancel *cc = nullptr;
        TENSO_CHECK_OK(tenso_cancel_new(&cc));
        const Floats onef(1, 1, 0.0f);  // the value points into it
        const ValuePtr one = onef.value();
        std::thread cancelled([&] {
            TENSO_CHECK_STATUS(TENSO_E_CANCELLED,
                               tenso_node_send(d.get(), addr_of(e.get()).c_str(), "c", 1, one.get(), UINT64_MAX, cc));
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        tenso_cancel_trigger(cc);
        cancelled.join();
        tenso_cancel_free(cc);
        std::thread waiter([&] {
            TENSO_CHECK_OK(tenso_node_send(d.get(), addr_of(e.get()).c_str(), "w", 1, one.get(), UINT64_MAX, nullptr));
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        CPPUNIT_ASSERT_EQUAL(std::string("fill"), name_of(receive(e.get()).get()));
        held.join();
        CPPUNIT_ASSERT_EQUAL(std::string("held"), name_of(receive(e.get()).get()));
        waiter.join();
        // e's queue holds "w": the next send holds the connection; one more waits for it.
        std::thread held2([&] {
            TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_send(d.get(), addr_of(e.get()).c_str(), "h", 1, one.get(),
                                                                 UINT64_MAX, nullptr));
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::thread stopped([&] {
            TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_send(d.get(), addr_of(e.get()).c_str(), "s", 1, one.get(),
                                                                 UINT64_MAX, nullptr));
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        tenso_node_shutdown(d.get());
        stopped.join();
        held2.join();
    }

    void testPeerKilledMidTransfer() {
        int pfd[2];
        CPPUNIT_ASSERT_EQUAL(0, ::pipe(pfd));
        const pid_t child = fork();
        CPPUNIT_ASSERT(child >= 0);
        if (child == 0) {
            // The child: a node that takes one large push and never reads its queue.
            ::close(pfd[0]);
            tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
            tenso_node *n = nullptr;
            if (tenso_node_new(&n, &o) != TENSO_OK) _exit(1);
            char buf[256];
            size_t len = 0;
            tenso_node_addr(buf, sizeof buf, &len, n, 0);
            (void)!::write(pfd[1], buf, len);
            ::close(pfd[1]);
            for (;;) pause();
        }
        ::close(pfd[1]);
        char buf[256];
        const ssize_t r = ::read(pfd[0], buf, sizeof buf);
        ::close(pfd[0]);
        CPPUNIT_ASSERT(r > 0);
        const std::string addr(buf, size_t(r));
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        Floats f(64 * 1024, 1024, 0.0f);  // 256 MiB
        std::atomic<tenso_status> got{TENSO_OK};
        TENSO_CHECK_OK(send(a.get(), addr, "small", Floats(2, 2, 0.0f)));  // the child serves
        // Stopped, the child reads nothing more: the transfer stalls once the socket buffers are
        // full, so the kill lands in its middle whatever the machine's speed.
        ::kill(child, SIGSTOP);
        const uint64_t before = stats_of(a.get()).bytes_sent;
        std::thread t([&] { got = send(a.get(), addr, "big", f); });
        while (stats_of(a.get()).bytes_sent < before + (1u << 20))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        t.join();
        CPPUNIT_ASSERT_EQUAL(TENSO_E_CONNECTION, got.load());
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_sent < f.t.nbytes);
        CPPUNIT_ASSERT_EQUAL(0u, stats_of(a.get()).pool_size);  // the broken connection is gone
    }

    void testHostileFrames() {
        NodePtr b = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        const std::string addr = addr_of(b.get());
        Floats f(2, 2, 1.0f);
        tenso_buffer vb{};
        TENSO_CHECK_OK(tenso_value_dumps(&vb, f.value().get(), nullptr));
        const std::vector<uint8_t> value(static_cast<const uint8_t *>(vb.data),
                                         static_cast<const uint8_t *>(vb.data) + vb.size);
        tenso_buffer_dispose(&vb);
        auto cat = [](std::vector<uint8_t> a, const std::vector<uint8_t> &b2) {
            a.insert(a.end(), b2.begin(), b2.end());
            return a;
        };
        const std::string len = std::to_string(value.size());
        struct Case {
            std::vector<uint8_t> bytes;
            tenso_status want;
        };
        std::vector<uint8_t> garbage(64, 0x41);
        std::vector<uint8_t> badver = strings_packet({"get", "x", "0", "0", "0", ""});
        badver[4] = 99;
        const std::vector<Case> cases = {
            {garbage, TENSO_E_BAD_MAGIC},
            {badver, TENSO_E_UNSUPPORTED_VERSION},
            {value, TENSO_E_MALFORMED},  // a value where a control frame belongs
            {strings_packet({"fly", "x", "0", "0", "0", ""}), TENSO_E_MALFORMED},
            {strings_packet({"push", "x", "0"}), TENSO_E_MALFORMED},
            {strings_packet({"push", "", "0", len, "0", ""}), TENSO_E_MALFORMED},
            {strings_packet({"push", std::string(5000, 'n'), "0", len, "0", ""}), TENSO_E_LIMIT},
            {strings_packet({"push", "x", "0", "12x", "0", ""}), TENSO_E_MALFORMED},
            {strings_packet({"push", "x", "0", "99999999999999999999999", "0", ""}), TENSO_E_MALFORMED},
            {strings_packet({"push-fd", "x", "0", len, "0", ""}), TENSO_E_MALFORMED},  // no descriptor over TCP
            {strings_packet({"ok", "", "0", "0", "0", ""}), TENSO_E_MALFORMED},        // a reply from a dialer
            {cat(strings_packet({"push", "x", "0", std::to_string(value.size() + 64), "0", ""}), cat(value, value)),
             TENSO_E_MALFORMED},  // the value is not the length announced
            {cat(strings_packet({"push", "x", "0", len, "0", ""}), garbage), TENSO_E_BAD_MAGIC},
            {std::vector<uint8_t>(control_frame_huge()), TENSO_E_LIMIT},
        };
        uint64_t refused = 0;
        for (const Case &c : cases) {
            const int fd = raw_connect(addr);
            write_all(fd, c.bytes);
            const std::vector<std::string> reply = raw_reply(fd);
            CPPUNIT_ASSERT_EQUAL(size_t(6), reply.size());
            CPPUNIT_ASSERT_EQUAL(std::string("error"), reply[0]);
            CPPUNIT_ASSERT_EQUAL(std::to_string(c.want), reply[2]);
            CPPUNIT_ASSERT(!reply[5].empty());
            // The node closes the connection after the refusal.
            uint8_t byte;
            CPPUNIT_ASSERT_EQUAL(ssize_t(0), ::read(fd, &byte, 1));
            ::close(fd);
            CPPUNIT_ASSERT_EQUAL(++refused, stats_of(b.get()).refused);
        }
        // A valid push on a raw connection is acknowledged, and the node keeps serving.
        const int fd = raw_connect(addr);
        write_all(fd, cat(strings_packet({"push", "raw", "0", len, "0", ""}), value));
        const std::vector<std::string> ok = raw_reply(fd);
        CPPUNIT_ASSERT_EQUAL(std::string("ok"), ok.at(0));
        ::close(fd);
        MsgPtr m = receive(b.get());
        CPPUNIT_ASSERT_EQUAL(std::string("raw"), name_of(m.get()));
        f.check(tenso_node_message_view(m.get()));
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        TENSO_CHECK_OK(send(a.get(), addr, "after", f));
        receive(b.get());
    }

    // A control frame header that announces more bytes than a control frame may have.
    static std::vector<uint8_t> control_frame_huge() {
        return strings_packet({"push", "x", "0", "1", "0", std::string(8000, 'm')});
    }

    void testSizeRefused() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_packet_bytes = 4096;
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, send(a.get(), addr_of(b.get()), "big", Floats(64, 64, 0.0f)));
        TENSO_CHECK_OK(send(a.get(), addr_of(b.get()), "small", Floats(4, 4, 0.0f)));
        CPPUNIT_ASSERT_EQUAL(std::string("small"), name_of(receive(b.get()).get()));
    }

    // Pipelined posts over TLS arrive in order; the receiver's queue never holds more than its
    // bound; the caller reuses its buffer right after each post.
    void testPostOrderedAndBounded() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued = 8;
        NodePtr b = make_node(o);
        tenso_node_options ao = opts_for(nullptr, TENSO_NODE_NO_LISTEN);
        ao.max_queued = 16;
        NodePtr a = make_node(ao);
        const std::string addr = addr_of(b.get());
        const int kCount = 3000;
        uint32_t most = 0;
        std::thread rx([&] {
            for (int i = 0; i < kCount; ++i) {
                most = std::max(most, stats_of(b.get()).queued);
                MsgPtr m = receive(b.get());
                CPPUNIT_ASSERT_EQUAL(std::to_string(i), name_of(m.get()));
                CPPUNIT_ASSERT_EQUAL(float(i),
                                     static_cast<const float *>(tenso_view_data(tenso_node_message_view(m.get())))[0]);
            }
        });
        std::vector<float> x(256);
        uint64_t shape[1] = {256};
        for (int i = 0; i < kCount; ++i) {
            x[0] = float(i);
            tenso_tensor t{x.data(), 1024, shape, 1, TENSO_DTYPE_FLOAT32};
            tenso_value *v = nullptr;
            TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
            ValuePtr hold(v);
            const std::string n = std::to_string(i);
            TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), n.data(), n.size(), v, 0, nullptr));
            x[0] = -1.0f;  // the post no longer reads it
        }
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        rx.join();
        CPPUNIT_ASSERT(most <= 8u);
        const tenso_node_stats s = stats_of(a.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.connections_opened);
        CPPUNIT_ASSERT_EQUAL(1u, s.pool_size);  // checked back in by the flush
    }

    // A refused post does not stop the ones after it; flush returns the refusal once.
    void testPostRefusalSurfacedByFlush() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_packet_bytes = 4096;
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
        const Floats small(4, 4, 1.0f), big(64, 64, 2.0f);
        ValuePtr vs = small.value(), vb = big.value();
        TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "s1", 2, vs.get(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "big", 3, vb.get(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "s2", 2, vs.get(), 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        MsgPtr m1 = receive(b.get()), m2 = receive(b.get());
        CPPUNIT_ASSERT_EQUAL(std::string("s1"), name_of(m1.get()));
        CPPUNIT_ASSERT_EQUAL(std::string("s2"), name_of(m2.get()));
        small.check(tenso_node_message_view(m2.get()));
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), stats_of(a.get()).connections_opened);
        TENSO_CHECK_STATUS(TENSO_E_BAD_ADDRESS, tenso_node_flush(a.get(), "nope://x", 0, nullptr));
    }

    // Posts the peer does not acknowledge (its queue is full) are failed by shutdown: the
    // waiting flush returns TENSO_E_SHUTDOWN, as do later posts.
    void testShutdownFailsPendingFlush() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued = 1;
        NodePtr b = make_node(o), a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
        const Floats f(4, 4, 0.0f);
        ValuePtr v = f.value();
        for (const char *name : {"1", "2", "3"})
            TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), name, 1, v.get(), 0, nullptr));
        tenso_status flushed = TENSO_OK;
        std::thread t([&] { flushed = tenso_node_flush(a.get(), addr.c_str(), UINT64_MAX, nullptr); });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        tenso_node_shutdown(a.get());
        t.join();
        CPPUNIT_ASSERT_EQUAL(tenso_status(TENSO_E_SHUTDOWN), flushed);  // its message is on the other thread
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_post(a.get(), addr.c_str(), "4", 1, v.get(), 0, nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string("1"), name_of(receive(b.get()).get()));
    }

    // One `ok` answers every push the listener read at once; a refusal in the middle is answered
    // in its place (the pushes before it acknowledged first), and the connection goes on.
    void testAcksAreCumulativeOnTheWire() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_packet_bytes = 4096;
        NodePtr b = make_node(o);
        const Floats small(2, 2, 1.0f), big(32, 32, 2.0f);
        auto packet = [](const Floats &f) {
            tenso_buffer vb{};
            TENSO_CHECK_OK(tenso_value_dumps(&vb, f.value().get(), nullptr));
            std::vector<uint8_t> out(static_cast<const uint8_t *>(vb.data),
                                     static_cast<const uint8_t *>(vb.data) + vb.size);
            tenso_buffer_dispose(&vb);
            return out;
        };
        const std::vector<uint8_t> ps = packet(small), pb = packet(big);
        std::vector<uint8_t> wire;
        auto push = [&](const std::string &name, const std::vector<uint8_t> &value) {
            const std::vector<uint8_t> c =
                strings_packet({"push", name, "0", std::to_string(value.size()), "0", "ok-count"});
            wire.insert(wire.end(), c.begin(), c.end());
            wire.insert(wire.end(), value.begin(), value.end());
        };
        for (int i = 0; i < 20; ++i) push("a" + std::to_string(i), ps);
        push("big", pb);  // over max_packet_bytes: refused, its bytes skipped
        for (int i = 0; i < 20; ++i) push("b" + std::to_string(i), ps);
        const int fd = raw_connect(addr_of(b.get()));
        write_all(fd, wire);  // all at once: the listener reads many pushes per read
        // Answers in request order: oks for the 20 before (how many frames depends on how the
        // bytes arrived), the refusal, oks for the 20 after.
        uint64_t before = 0, after = 0, oks = 0;
        bool refused = false;
        while (before + after < 40) {
            const std::vector<std::string> r = raw_reply(fd);
            CPPUNIT_ASSERT_EQUAL(size_t(6), r.size());
            if (r[0] == "error") {
                CPPUNIT_ASSERT(!refused);
                CPPUNIT_ASSERT_EQUAL(uint64_t(20), before);
                CPPUNIT_ASSERT_EQUAL(std::to_string(TENSO_E_LIMIT), r[2]);
                refused = true;
                continue;
            }
            CPPUNIT_ASSERT_EQUAL(std::string("ok"), r[0]);
            const uint64_t n = std::stoull(r[3]);
            CPPUNIT_ASSERT(n >= 1);
            (refused ? after : before) += n;
            ++oks;
        }
        CPPUNIT_ASSERT(refused);
        CPPUNIT_ASSERT_EQUAL(uint64_t(20), after);
        CPPUNIT_ASSERT(oks < 40);  // batched: fewer answers than pushes
        ::close(fd);
        for (const char *prefix : {"a", "b"})
            for (int i = 0; i < 20; ++i) {
                MsgPtr m = receive(b.get());
                CPPUNIT_ASSERT_EQUAL(prefix + std::to_string(i), name_of(m.get()));
                small.check(tenso_node_message_view(m.get()));
            }
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), stats_of(b.get()).refused);
    }

    // Posts buffered together and acknowledged in batches, refusals (small ones, buffered, and
    // large ones, written on their own) in the middle: every accepted one arrives, in order, and
    // flush reports the refusal once.
    void testPostAckBatchingWithRefusals() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_packet_bytes = 4096;
        NodePtr b = make_node(o);
        tenso_node_options ao = opts_for(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        ao.max_queued = 64;  // the sender's bound on unacknowledged posts: reached many times
        NodePtr a = make_node(ao);
        const std::string addr = addr_of(b.get());
        const Floats refused_small(32, 32, 3.0f), refused_large(128, 128, 4.0f);
        const ValuePtr rs = refused_small.value(), rl = refused_large.value();
        const int kCount = 2000;
        std::thread rx([&] { receive_numbered(b.get(), kCount); });
        std::vector<float> x(64);
        uint64_t shape[1] = {64};
        uint64_t refusals = 0;
        for (int i = 0; i < kCount; ++i) {
            x[0] = float(i);
            tenso_tensor t{x.data(), x.size() * sizeof(float), shape, 1, TENSO_DTYPE_FLOAT32};
            tenso_value *v = nullptr;
            TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
            ValuePtr hold(v);
            const std::string n = std::to_string(i);
            TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), n.data(), n.size(), v, 0, nullptr));
            if (i % 97 == 5) {
                TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "rs", 2, rs.get(), 0, nullptr));
                ++refusals;
            }
            if (i % 331 == 7) {
                TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "rl", 2, rl.get(), 0, nullptr));
                ++refusals;
            }
        }
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        rx.join();
        CPPUNIT_ASSERT_EQUAL(refusals, stats_of(b.get()).refused);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), stats_of(a.get()).connections_opened);
        tenso_node_message *m = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_node_receive(&m, b.get(), 0, nullptr));
    }

    // What posts leave in the node's buffer is bounded (128 KiB + one small post): the rest is
    // on the wire before flush; flush writes the remainder.
    void testPostBufferIsBounded() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued = 4096;
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
        const Floats f(16, 16, 5.0f);  // 1 KiB
        const ValuePtr v = f.value();
        const int kCount = 1000;
        for (int i = 0; i < kCount; ++i)
            TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "k", 1, v.get(), 0, nullptr));
        const uint64_t before = stats_of(a.get()).bytes_sent;
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        const uint64_t after = stats_of(a.get()).bytes_sent;
        CPPUNIT_ASSERT(after > uint64_t(kCount) * 1024);
        CPPUNIT_ASSERT(before > 0);
        CPPUNIT_ASSERT(after - before <= (128u + 16u) << 10);
        for (int i = 0; i < kCount; ++i) f.check(tenso_node_message_view(receive(b.get()).get()));
    }

    // Shutdown writes the posts still in the node's buffer (as far as the socket takes them at
    // once) and fails what was not acknowledged: flush and later posts return TENSO_E_SHUTDOWN.
    void testShutdownWritesBufferedPosts() {
        const std::string u = unix_listen("buffered");
        NodePtr b = make_node(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats f(4, 4, 6.0f);
        const ValuePtr v = f.value();
        for (int i = 0; i < 5; ++i) {
            const std::string n = std::to_string(i);
            TENSO_CHECK_OK(tenso_node_post(a.get(), u.c_str(), n.data(), n.size(), v.get(), 0, nullptr));
        }
        // At once: the posts are still buffered unless the idle flush came first (either writes them).
        tenso_node_shutdown(a.get());
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_flush(a.get(), u.c_str(), 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_post(a.get(), u.c_str(), "x", 1, v.get(), 0, nullptr));
        for (int i = 0; i < 5; ++i) {
            MsgPtr m = receive(b.get());
            CPPUNIT_ASSERT_EQUAL(std::to_string(i), name_of(m.get()));
            f.check(tenso_node_message_view(m.get()));
        }
    }

    // Posts never flushed still go out (the idle flush), burst after burst, on TCP, Unix and TLS;
    // flush then finds them acknowledged.
    void testUnflushedPostsGoOut() {
        const std::string u = unix_listen("idle");
        for (const char *listen : {"tcp://127.0.0.1:0", u.c_str(), "tls://127.0.0.1:0"}) {
            const bool tls = std::string(listen).compare(0, 6, "tls://") == 0;
            NodePtr b = make_node(listen, tls ? 0 : TENSO_NODE_ALLOW_PLAINTEXT);
            NodePtr a = tls ? make_node() : make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            const std::string addr = addr_of(b.get());
            const Floats f(2, 3, 5.0f);
            const ValuePtr v = f.value();
            int sent = 0;
            for (int burst = 0; burst < 3; ++burst) {
                for (int i = 0; i < 1 + burst * 7; ++i, ++sent) {
                    const std::string n = std::to_string(sent);
                    TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), n.data(), n.size(), v.get(), 0, nullptr));
                }
                for (int k = sent - (1 + burst * 7); k < sent; ++k) {
                    MsgPtr m = receive(b.get(), 5000);
                    CPPUNIT_ASSERT_EQUAL(std::to_string(k), name_of(m.get()));
                    f.check(tenso_node_message_view(m.get()));
                }
            }
            TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 5000, nullptr));
        }
    }

    // Posts left buffered, then the node shut down or freed at once or while the idle flush is
    // due: nothing is used after it goes (ASan/TSan), and what was posted before a shutdown
    // arrives whole and in order.
    void testPostThenFreeOrShutdown() {
        NodePtr b = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        const std::string addr = addr_of(b.get());
        const Floats f(2, 2, 3.0f);
        const ValuePtr v = f.value();
        for (int round = 0; round < 40; ++round) {
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            for (int i = 0; i < 3; ++i)
                TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "r", 1, v.get(), 0, nullptr));
            if (round % 4 >= 2) std::this_thread::sleep_for(std::chrono::microseconds(500 * (round % 3)));
            if (round % 2 == 0) {
                a.reset();  // freed: the posts may or may not have left; receive what came
                continue;
            }
            tenso_node_shutdown(a.get());
            a.reset();
            for (int i = 0; i < 3; ++i) {
                MsgPtr m = receive(b.get(), 5000);
                f.check(tenso_node_message_view(m.get()));
            }
        }
        tenso_node_message *m = nullptr;
        while (tenso_node_receive(&m, b.get(), 200, nullptr) == TENSO_OK) tenso_node_message_free(m);
    }

    // A dialer over the listener's max_connections is told why: TENSO_E_LIMIT, not a bare close
    // (a connection error), on TCP and Unix; the connection the listener holds still works.
    void testOverConnectionLimitIsLimit() {
        const std::string u = unix_listen("limit");
        for (const char *listen : {"tcp://127.0.0.1:0", u.c_str()}) {
            tenso_node_options o = opts_for(listen, TENSO_NODE_ALLOW_PLAINTEXT);
            o.max_connections = 1;
            NodePtr b = make_node(o);
            const std::string addr = addr_of(b.get());
            NodePtr h = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            const Floats f(2, 2, 4.0f);
            // h's pooled connection is the one b serves (answered, so accepted and counted).
            TENSO_CHECK_OK(send(h.get(), addr, "held", f));
            for (int i = 0; i < 3; ++i) TENSO_CHECK_STATUS(TENSO_E_LIMIT, send(a.get(), addr, "over", f));
            const tenso_node_stats st = stats_of(b.get());
            CPPUNIT_ASSERT(st.refused >= 3);
            TENSO_CHECK_OK(send(h.get(), addr, "again", f));
            CPPUNIT_ASSERT_EQUAL(std::string("held"), name_of(receive(b.get()).get()));
            CPPUNIT_ASSERT_EQUAL(std::string("again"), name_of(receive(b.get()).get()));
        }
    }

    // A listener acknowledging more pushes than were sent is out of step: TENSO_E_MALFORMED, for
    // posts (reported by flush) and for an acknowledged send.
    void testAckCountBeyondOutstandingIsMalformed() {
        std::string addr;
        const int l = raw_listen(&addr);
        // Each connection: read what comes, answer `ok` for 5, hold on until the dialer closes.
        std::thread fake([&] {
            for (int k = 0; k < 2; ++k) {
                const int c = ::accept(l, nullptr, nullptr);
                if (c < 0) return;
                uint8_t buf[4096];
                if (::read(c, buf, sizeof buf) > 0) write_all(c, strings_packet({"ok", "", "0", "5", "0", ""}));
                while (::read(c, buf, sizeof buf) > 0) {}
                ::close(c);
            }
        });
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 7.0f);
        const ValuePtr v = f.value();
        TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "p", 1, v.get(), 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_node_flush(a.get(), addr.c_str(), 5000, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_node_send(a.get(), addr.c_str(), "s", 1, v.get(), 5000, nullptr));
        a.reset();  // closes its connections: the fake listener's reads end
        fake.join();
        ::close(l);
    }

    // A dialer that does not ask for counted acknowledgements (1.4.0's: one `ok` read per push)
    // gets one `ok` per push, however many the listener read at once; its pipelined posts
    // would otherwise wait for acknowledgements that never come.
    void testOneOkPerPushForA140Dialer() {
        NodePtr b = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        const Floats small(2, 2, 1.0f);
        tenso_buffer vb{};
        TENSO_CHECK_OK(tenso_value_dumps(&vb, small.value().get(), nullptr));
        const std::vector<uint8_t> ps(static_cast<const uint8_t *>(vb.data),
                                      static_cast<const uint8_t *>(vb.data) + vb.size);
        tenso_buffer_dispose(&vb);
        std::vector<uint8_t> wire;
        const int kCount = 50;
        for (int i = 0; i < kCount; ++i) {
            const std::vector<uint8_t> c =
                strings_packet({"push", "p" + std::to_string(i), "0", std::to_string(ps.size()), "0", ""});
            wire.insert(wire.end(), c.begin(), c.end());
            wire.insert(wire.end(), ps.begin(), ps.end());
        }
        const int fd = raw_connect(addr_of(b.get()));
        write_all(fd, wire);  // all at once: the listener reads many pushes per read
        for (int i = 0; i < kCount; ++i) {
            const std::vector<std::string> r = raw_reply(fd);
            CPPUNIT_ASSERT_EQUAL(size_t(6), r.size());
            CPPUNIT_ASSERT_EQUAL(std::string("ok"), r[0]);
            CPPUNIT_ASSERT(r[3] == "0" || r[3] == "1");
        }
        for (int i = 0; i < kCount; ++i) CPPUNIT_ASSERT_EQUAL("p" + std::to_string(i), name_of(receive(b.get()).get()));
        // Nothing more: the connection is idle, not owing or over-answering.
        pollfd pf{fd, POLLIN, 0};
        CPPUNIT_ASSERT_EQUAL(0, ::poll(&pf, 1, 100));
        ::close(fd);
    }

    // Threads posting to one peer, each flushing now and then, then a shutdown in the middle of
    // their posts: every post a flush answered arrives, each thread's in its order, and after
    // the shutdown posts and flushes fail with TENSO_E_SHUTDOWN (for TSan and ASan as much as
    // for the asserts).
    void testConcurrentPostsFlushesAndShutdown() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued = 100000;
        NodePtr b = make_node(o);
        tenso_node_options ao = opts_for(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        ao.max_queued = 32;
        NodePtr a = make_node(ao);
        const std::string addr = addr_of(b.get());
        const int kThreads = 4, kEach = 400;
        auto poster = [&](int k, int count, std::atomic<int> *done, bool until_shutdown) {
            std::vector<float> x(k == 0 ? 8 : 1024 * k);  // thread 0 small, the others larger
            uint64_t shape[1] = {x.size()};
            for (int i = 0; i < count || until_shutdown; ++i) {
                x[0] = float(i);
                tenso_tensor t{x.data(), x.size() * sizeof(float), shape, 1, TENSO_DTYPE_FLOAT32};
                tenso_value *v = nullptr;
                TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
                ValuePtr hold(v);
                const std::string n = std::to_string(k) + "-" + std::to_string(i);
                tenso_status st = tenso_node_post(a.get(), addr.c_str(), n.data(), n.size(), v, 0, nullptr);
                if (st == TENSO_OK && i % 50 == 49) st = tenso_node_flush(a.get(), addr.c_str(), 0, nullptr);
                if (until_shutdown && st != TENSO_OK) {
                    CPPUNIT_ASSERT_EQUAL(tenso_status(TENSO_E_SHUTDOWN), st);
                    return;
                }
                TENSO_CHECK_OK(st);
                if (done) done->store(i + 1);
            }
            TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        };
        // Each thread's posts arrive in its order; `got[k]` counts them.
        std::vector<int> got(kThreads, 0);
        auto take = [&](uint64_t timeout_ms) {
            tenso_node_message *m = nullptr;
            const tenso_status st = tenso_node_receive(&m, b.get(), timeout_ms, nullptr);
            if (st == TENSO_E_TIMEOUT) return false;
            TENSO_CHECK_OK(st);
            MsgPtr hold(m);
            const std::string n = name_of(m);
            const int k = std::stoi(n.substr(0, n.find('-')));
            CPPUNIT_ASSERT_EQUAL(std::to_string(k) + "-" + std::to_string(got[k]), n);
            CPPUNIT_ASSERT_EQUAL(float(got[k]),
                                 static_cast<const float *>(tenso_view_data(tenso_node_message_view(m)))[0]);
            ++got[k];
            return true;
        };
        {
            std::vector<std::thread> ts;
            for (int k = 0; k < kThreads; ++k) ts.emplace_back(poster, k, kEach, nullptr, false);
            for (int i = 0; i < kThreads * kEach; ++i) CPPUNIT_ASSERT(take(20000));
            for (auto &t : ts) t.join();
            for (int k = 0; k < kThreads; ++k) CPPUNIT_ASSERT_EQUAL(kEach, got[k]);
        }
        std::fill(got.begin(), got.end(), 0);
        std::vector<std::atomic<int>> done(kThreads);
        std::vector<std::thread> ts;
        for (int k = 0; k < kThreads; ++k) ts.emplace_back(poster, k, 0, &done[k], true);
        while (done[0].load() < 200) CPPUNIT_ASSERT(take(20000));
        tenso_node_shutdown(a.get());
        for (auto &t : ts) t.join();
        while (take(300)) {}
        // What a flush answered arrived (posts after the last flush may have or not).
        for (int k = 0; k < kThreads; ++k) CPPUNIT_ASSERT(got[k] >= done[k].load() / 50 * 50);
    }

    // A 1.4.0 listener (played by a raw socket) answers each push with its own `ok` of length 0
    // and ignores the pushes' message: posts and sends work with it, and every push asks for
    // counted acknowledgements.
    void testPostsToA140Listener() {
        std::string addr;
        const int l = raw_listen(&addr);
        const int kPosts = 300;
        std::atomic<int> pushes{0}, marked{0};
        std::thread fake([&] {
            const int c = ::accept(l, nullptr, nullptr);
            if (c < 0) return;
            const std::vector<uint8_t> ok = strings_packet({"ok", "", "0", "0", "0", ""});
            for (;;) {
                const std::vector<std::string> r = raw_reply(c);  // the push's control frame
                if (r.size() != 6 || r[0] != "push") break;
                tenso_view *v = nullptr;  // its value
                if (tenso_read_fd(&v, c, nullptr) != TENSO_OK) break;
                tenso_view_free(v);
                ++pushes;
                if (r[5] == "ok-count") ++marked;
                write_all(c, ok);
            }
            ::close(c);
        });
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 7.0f), g(256, 256, 1.0f);  // small (buffered) and large (written at once)
        const ValuePtr v = f.value(), w = g.value();
        for (int i = 0; i < kPosts; ++i)
            TENSO_CHECK_OK(
                tenso_node_post(a.get(), addr.c_str(), "p", 1, i % 100 == 50 ? w.get() : v.get(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr.c_str(), 20000, nullptr));
        TENSO_CHECK_OK(tenso_node_send(a.get(), addr.c_str(), "s", 1, v.get(), 20000, nullptr));
        CPPUNIT_ASSERT_EQUAL(kPosts + 1, pushes.load());
        CPPUNIT_ASSERT_EQUAL(kPosts + 1, marked.load());
        a.reset();  // closes its connection: the fake listener's reads end
        fake.join();
        ::close(l);
    }

    // A post blocked on a peer that reads nothing (its socket full, the post stream's lock held)
    // is woken by a shutdown, which then drains and drops the stream without waiting for the
    // timeout: the post and a flush return TENSO_E_SHUTDOWN.
    void testShutdownWakesABlockedPost() {
        std::string addr;
        const int l = raw_listen(&addr);
        tenso_node_options ao = opts_for(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        ao.max_queued = 1000000;  // only the socket makes posts wait
        NodePtr a = make_node(ao);
        const Floats f(32, 32, 1.0f);  // 4 KiB: buffered
        const ValuePtr v = f.value();
        std::atomic<int> posted{0};
        tenso_status last = TENSO_OK;
        std::thread poster([&] {
            for (;;) {
                last = tenso_node_post(a.get(), addr.c_str(), "p", 1, v.get(), 60000, nullptr);
                if (last != TENSO_OK) return;
                ++posted;
            }
        });
        // Nobody accepts: the kernel's buffers fill, then the post waits on the socket.
        int seen = -1;
        while (posted.load() != seen) {
            seen = posted.load();
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        const auto t0 = std::chrono::steady_clock::now();
        tenso_node_shutdown(a.get());
        poster.join();
        const auto waited = std::chrono::steady_clock::now() - t0;
        CPPUNIT_ASSERT(waited < std::chrono::seconds(10));
        CPPUNIT_ASSERT_EQUAL(tenso_status(TENSO_E_SHUTDOWN), last);
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_flush(a.get(), addr.c_str(), 0, nullptr));
        a.reset();
        ::close(l);
    }

    void testTlsWrongFingerprint() {
        NodePtr a = make_node(), b = make_node();
        std::string addr = addr_of(b.get());
        addr[6] = addr[6] == '0' ? '1' : '0';
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(a.get(), addr, "x", Floats(2, 2, 0.0f)));
        CPPUNIT_ASSERT_EQUAL(0u, stats_of(a.get()).pool_size);
        tenso_node_message *m = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_node_receive(&m, b.get(), 0, nullptr));
        // Plaintext to a TLS listener: no protocol in common.
        NodePtr p = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string tcp = "tcp://" + addr.substr(addr.find('@') + 1);
        const tenso_status st = send(p.get(), tcp, "x", Floats(2, 2, 0.0f), 2000);
        CPPUNIT_ASSERT(st == TENSO_E_CONNECTION || st == TENSO_E_BAD_MAGIC || st == TENSO_E_MALFORMED);
    }

    void testTlsCaAndPinning() {
        Pki pki("pki1"), other("pki2");
        pki.issue("srv");
        pki.issue("cli");
        other.issue("rogue");
        const std::string ca = pki.ca(), srv_cert = pki.cert("srv"), srv_key = pki.key("srv");
        const std::string cli_cert = pki.cert("cli"), cli_key = pki.key("cli");
        const std::string rogue_cert = other.cert("rogue"), rogue_key = other.key("rogue");
        auto with = [&](const std::string &cert, const std::string &key, const std::string *ca_pem, uint32_t flags) {
            tenso_node_options o = opts_for(nullptr, flags);
            o.cert_pem = cert.c_str();
            o.key_pem = key.c_str();
            o.ca_pem = ca_pem ? ca_pem->c_str() : nullptr;
            return make_node(o);
        };
        NodePtr srv = with(srv_cert, srv_key, &ca, 0);
        NodePtr cli = with(cli_cert, cli_key, &ca, TENSO_NODE_NO_LISTEN);
        NodePtr rogue = with(rogue_cert, rogue_key, nullptr, TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(srv.get());
        TENSO_CHECK_OK(send(cli.get(), addr, "ok", Floats(2, 2, 0.0f)));
        CPPUNIT_ASSERT_EQUAL(id_of(cli.get()), std::string(tenso_node_message_sender(receive(srv.get()).get())));
        // Signed by another CA: the listener refuses it.
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(rogue.get(), addr, "no", Floats(2, 2, 0.0f)));
        // A dialer that trusts only its CA refuses a listener from another.
        NodePtr rogue_srv = with(rogue_cert, rogue_key, nullptr, 0);
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(cli.get(), addr_of(rogue_srv.get()), "no", Floats(2, 2, 0.0f)));
        // Pinned keys: only the pinned dialer gets in.
        NodePtr friendly = make_node(), stranger = make_node();
        const std::string pin = id_of(friendly.get());
        const char *pins[] = {pin.c_str()};
        tenso_node_options o = opts_for(nullptr);
        o.pinned_keys = pins;
        o.pinned_key_count = 1;
        NodePtr guarded = make_node(o);
        TENSO_CHECK_OK(send(friendly.get(), addr_of(guarded.get()), "in", Floats(2, 2, 0.0f)));
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(stranger.get(), addr_of(guarded.get()), "out", Floats(2, 2, 0.0f)));
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_AUTH,
                           tenso_node_request(&v, stranger.get(), addr_of(guarded.get()).c_str(), "in", 2, 0, nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string("in"), name_of(receive(guarded.get()).get()));
        CPPUNIT_ASSERT(stats_of(guarded.get()).refused >= 2);
        // Unusable identities.
        tenso_node *n = nullptr;
        tenso_node_options bad = opts_for(nullptr);
        bad.cert_pem = srv_cert.c_str();
        bad.key_pem = cli_key.c_str();
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &bad));
        bad.key_pem = "not a key";
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &bad));
        bad = opts_for(nullptr);
        bad.ca_pem = "not a certificate";
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &bad));
    }

    void testBackpressure() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued = 1000;
        o.max_queued_bytes = 4u << 20;  // four 1 MiB pushes
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
        const int kPushes = 32;
        std::thread tx([&] {
            for (int i = 0; i < kPushes; ++i)
                TENSO_CHECK_OK(send(a.get(), addr, std::to_string(i), Floats(256, 1024, float(i)), UINT64_MAX));
        });
        // Until the receiver takes anything, what it holds stays within the queue's bytes, one
        // packet waiting for room and the socket buffers; the sender is held back.
        uint64_t last = 0;
        for (int spins = 0; spins < 200; ++spins) {
            const tenso_node_stats s = stats_of(b.get());
            CPPUNIT_ASSERT(s.queued_bytes <= o.max_queued_bytes);
            CPPUNIT_ASSERT(s.bytes_received <= o.max_queued_bytes + (2u << 20) + (16u << 20));
            last = s.bytes_received;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        CPPUNIT_ASSERT(last < uint64_t(kPushes) << 20);
        for (int i = 0; i < kPushes; ++i) {
            MsgPtr m = receive(b.get());
            CPPUNIT_ASSERT_EQUAL(std::to_string(i), name_of(m.get()));
            Floats(256, 1024, float(i)).check(tenso_node_message_view(m.get()));
        }
        tx.join();
    }

    // TLS writes pack small segments into records and gather records into larger sends
    // (impl/net/tls.cpp); the last record of a write must send everything gathered, or the
    // write's tail stays behind and the stream stalls until the deadline (TENSO_E_TIMEOUT).
    // Rounds of posts to a slow receiver, each ended by a flush (its last post must have left
    // nothing behind); every value is 9 records, so (with a 128 KiB buffer) gathered records
    // go out just before the last one, where a full socket (WANT_WRITE) tests the retry. The
    // loopback buffers grow to tens of MiB, so a full socket there is left to chance. Values
    // of other sizes (a few bytes, around a 16 KiB record, 64 MiB) are posted and pushed, and
    // a 9-record value is pulled (the listener's side writes).
    void testTlsRecordsUnderBackpressure() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued = 2;
        o.max_queued_bytes = 256u << 20;
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(b.get());
#ifdef NET_TEST_SANITIZED
        const int kRounds = 1;
#else
        const int kRounds = 3;
#endif
        const int kPerRound = 60;  // 8 MiB
        const int kSmall = 28;
        auto floats = [&](int i) {
            if (i < kRounds * kPerRound) return Floats(1, 33281, float(i));  // 133124 bytes
            return Floats(1, uint64_t(1) << (i % 14), float(i));             // 4 bytes to 32 KiB
        };
        const int kPosts = kRounds * kPerRound + kSmall;
        std::atomic<int> wrong{0};
        std::thread rx([&] {
            for (int i = 0; i < kPosts; ++i) {
                if (i < kRounds * kPerRound) std::this_thread::sleep_for(std::chrono::microseconds(500));
                tenso_node_message *m = nullptr;
                if (tenso_node_receive(&m, b.get(), 20000, nullptr) != TENSO_OK) return (void)++wrong;
                MsgPtr hold(m);
                const tenso_view *v = tenso_node_message_view(m);
                const Floats f = floats(i);
                if (name_of(m) != std::to_string(i) || tenso_view_nbytes(v) != f.t.nbytes ||
                    std::memcmp(tenso_view_data(v), f.data.data(), f.t.nbytes) != 0)
                    ++wrong;
            }
        });
        tenso_status posted = TENSO_OK, flushed = TENSO_OK;
        for (int i = 0; i < kPosts && posted == TENSO_OK && flushed == TENSO_OK; ++i) {
            const Floats f = floats(i);
            ValuePtr v = f.value();
            const std::string name = std::to_string(i);
            posted = tenso_node_post(a.get(), addr.c_str(), name.data(), name.size(), v.get(), 20000, nullptr);
            if (i % kPerRound == kPerRound - 1 || i == kPosts - 1)
                flushed = tenso_node_flush(a.get(), addr.c_str(), 20000, nullptr);
        }
        if (posted != TENSO_OK || flushed != TENSO_OK) tenso_node_shutdown(b.get());  // rx stops
        rx.join();
        TENSO_CHECK_OK(posted);
        TENSO_CHECK_OK(flushed);
        CPPUNIT_ASSERT_EQUAL(0, wrong.load());
        // Pushed one at a time: the small sizes, and 64 MiB + 7900 bytes (4097 records).
        for (int i = kRounds * kPerRound; i < kPosts; ++i) {
            TENSO_CHECK_OK(send(a.get(), addr, "s", floats(i), 20000));
            floats(i).check(tenso_node_message_view(receive(b.get()).get()));
        }
        const Floats big(1, (4096 * 16384 + 8000 - 100) / 4, 1.5f);
        TENSO_CHECK_OK(send(a.get(), addr, "big", big, 20000));
        big.check(tenso_node_message_view(receive(b.get()).get()));
        const Floats nine = floats(0);
        std::atomic<int> rel{0};
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "w", 1, nine.value().release(), count_release, &rel));
        for (int i = 0; i < 3; ++i) {
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_node_request(&v, a.get(), addr.c_str(), "w", 1, 20000, nullptr));
            ViewPtr hold(v);
            nine.check(v);
        }
        // The published value borrows `nine` and its release counts into `rel`: the node goes
        // first (they were declared after it, and would be destroyed before it).
        b.reset();
        CPPUNIT_ASSERT_EQUAL(1, rel.load());
    }

    void testDescriptorPassing() {
        const std::string u = unix_listen("fd");
        NodePtr b = make_node(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        // A value over fd_passing_min_bytes travels as a sealed memfd: a few hundred bytes of socket traffic.
        Floats f(1024, 1024, 5.0f);  // 4 MiB
        TENSO_CHECK_OK(send(a.get(), u, "big", f));
        MsgPtr m = receive(b.get());
        f.check(tenso_node_message_view(m.get()));
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_sent < 4096);
        // tenso_node_send_fd: the caller's own descriptor (here an unsealed file: the receiver reads it).
        tenso_buffer pb{};
        TENSO_CHECK_OK(tenso_value_dumps(&pb, f.value().get(), nullptr));
        const int fd = memfd_create("pkt", MFD_CLOEXEC);
        CPPUNIT_ASSERT(fd >= 0);
        CPPUNIT_ASSERT_EQUAL(ssize_t(100), ::pwrite(fd, std::string(100, 'z').data(), 100, 0));
        CPPUNIT_ASSERT_EQUAL(ssize_t(pb.size), ::pwrite(fd, pb.data, pb.size, 100));
        TENSO_CHECK_OK(tenso_node_send_fd(a.get(), u.c_str(), "fd", 2, fd, 100, pb.size, 0, nullptr));
        m = receive(b.get());
        f.check(tenso_node_message_view(m.get()));
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_sent < 8192);
        // The same descriptor to a TCP peer: its bytes travel.
        NodePtr t = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        TENSO_CHECK_OK(tenso_node_send_fd(a.get(), addr_of(t.get()).c_str(), "fd", 2, fd, 100, pb.size, 0, nullptr));
        f.check(tenso_node_message_view(receive(t.get()).get()));
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_sent > pb.size);
        // A descriptor shorter than announced is refused.
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED,
                           tenso_node_send_fd(a.get(), u.c_str(), "fd", 2, fd, 200, pb.size, 0, nullptr));
        ::close(fd);
        // Pull over the Unix socket: the published value's memfd is passed.
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "pub", 3, f.value().release(), nullptr, nullptr));
        const uint64_t before = stats_of(a.get()).bytes_received;
        for (int i = 0; i < 2; ++i) {
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_node_request(&v, a.get(), u.c_str(), "pub", 3, 0, nullptr));
            ViewPtr hold(v);
            f.check(v);
        }
        CPPUNIT_ASSERT(stats_of(a.get()).bytes_received - before < 4096);
        // TENSO_NODE_NO_FD_PASSING: bytes over the socket.
        NodePtr c = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN | TENSO_NODE_NO_FD_PASSING);
        TENSO_CHECK_OK(send(c.get(), u, "bytes", f));
        f.check(tenso_node_message_view(receive(b.get()).get()));
        CPPUNIT_ASSERT(stats_of(c.get()).bytes_sent > f.t.nbytes);
        tenso_buffer_dispose(&pb);
    }

    void testReceiveFdAndBundle() {
        NodePtr a = make_node(), b = make_node();
        const int rfd = tenso_node_receive_fd(b.get());
        CPPUNIT_ASSERT(rfd >= 0);
        pollfd p{rfd, POLLIN, 0};
        CPPUNIT_ASSERT_EQUAL(0, ::poll(&p, 1, 0));
        // A bundle of a tensor and strings, sent as a packet the caller encoded.
        Floats f(3, 3, 1.0f);
        tenso_value *bundle = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&bundle));
        ValuePtr hold(bundle);
        ValuePtr t = f.value();
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "w", 1, t.get()));
        tenso_buffer pb{};
        TENSO_CHECK_OK(tenso_value_dumps(&pb, bundle, nullptr));
        TENSO_CHECK_OK(
            tenso_node_send_packet(a.get(), addr_of(b.get()).c_str(), "bundle", 6, pb.data, pb.size, 0, nullptr));
        CPPUNIT_ASSERT_EQUAL(1, ::poll(&p, 1, 20000));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_node_send_packet(a.get(), addr_of(b.get()).c_str(), "bundle",
                                                                            6, pb.data, pb.size - 1, 0, nullptr));
        MsgPtr m = receive(b.get(), 0);
        const tenso_view *v = tenso_node_message_view(m.get());
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_BUNDLE, tenso_view_kind(v));
        CPPUNIT_ASSERT_EQUAL(0, ::poll(&p, 1, 0));  // kept in step: nothing waits
        tenso_buffer_dispose(&pb);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiNetTest);
