// CapiNetHostileTest - tenso nodes attacked as a hostile peer on loopback would attack them
// (issue 23), each attack against every transport it applies to (tcp, tls, unix), with the
// budget the node must hold stated next to it: resident memory (the peak, VmHWM), open
// descriptors, CPU while idle, and the time until a legitimate peer is served again. Limits are
// set small through options where that tests the same rule (the defaults' budgets where cheap).
//
// Raw peers: TCP and Unix sockets written by hand; TLS ones through `openssl s_client` (the
// suite links only libtenso).
#include <cppunit/extensions/HelperMacros.h>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "net_util.hpp"
#include "tenso/tenso.h"

extern char **environ;

// The asan build is ASan+UBSan (make asan).
#if defined(__SANITIZE_ADDRESS__)
#define NET_HOSTILE_UBSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NET_HOSTILE_UBSAN 1
#endif
#endif

using namespace nettest;

// ---- a name lookup that hangs (getaddrinfo interposed for one name) --------------------------
// libtenso's calls resolve to this definition (the executable's symbols come first); every
// other name goes to the C library's.
namespace {
std::atomic<bool> g_lookup_released{false};
constexpr char kSlowName[] = "slow.tenso.invalid";
}  // namespace

extern "C" int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    using Fn = int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
    if (node && std::strcmp(node, kSlowName) == 0 && !(hints && (hints->ai_flags & AI_NUMERICHOST))) {
        for (int i = 0; i < 500 && !g_lookup_released.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return EAI_NONAME;
    }
    return real(node, service, hints, res);
}

namespace {

using Clock = std::chrono::steady_clock;

// ---- budgets -------------------------------------------------------------------------------
// Peak RSS growth while a receiver with max_queued_bytes = 8 MiB is attacked: the queue's
// budget twice (one push may inflate past it) plus packet buffers and the allocator's slack.
constexpr uint64_t kAttackRss = 40ull << 20;
// CPU a node may burn while attacked but idle (seconds of CPU per second of wall time).
constexpr double kIdleCpu = 0.05;
// Time until a legitimate peer is served while an attack goes on, or after it ends.
constexpr int kRecoverMs = 3000;
// Extra descriptors a node may hold beyond its connections' sockets.
constexpr int kFdSlack = 8;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool eventually(const std::function<bool()> &ok, int ms) {
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < end) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ok();
}

int open_fds() {
    int n = 0;
    DIR *d = ::opendir("/proc/self/fd");
    while (struct dirent *e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    return n - 1;  // the directory's own
}

uint64_t status_kib(const char *field) {
    const std::string s = read_text("/proc/self/status");
    const size_t at = s.find(field);
    return at == std::string::npos ? 0 : std::stoull(s.substr(at + std::strlen(field)));
}
// The peak RSS from now on (VmHWM reset).
void reset_peak_rss() {
    const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!::write(fd, "5", 1);
        ::close(fd);
    }
}
uint64_t peak_rss() { return status_kib("VmHWM:") << 10; }
uint64_t rss() { return status_kib("VmRSS:") << 10; }
// Peak RSS over `before`, 0 when under it: the kernel's RSS counters are per-CPU estimates, so
// VmHWM can read a few pages below an earlier VmRSS when nothing grew.
uint64_t peak_over(uint64_t before) {
    const uint64_t p = peak_rss();
    return p > before ? p - before : 0;
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
// CPU the process used per second of wall time over `ms`.
double cpu_rate_over(int ms) {
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return (cpu_seconds() - c0) / (ms_since(t0) / 1000.0);
}

std::string load_average() { return read_text("/proc/loadavg").substr(0, 14); }

// ---- raw peers -----------------------------------------------------------------------------

// A Unix stream socket and the address of a unix:// ticket.
int unix_socket(const std::string &unix_addr, sockaddr_un *sa) {
    const std::string path = unix_addr.substr(7);
    *sa = sockaddr_un{};
    sa->sun_family = AF_UNIX;
    std::memcpy(sa->sun_path, path.data(), path.size());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CPPUNIT_ASSERT(fd >= 0);
    return fd;
}

// Answers within 5 s, or reads fail (a test never hangs on a silent node).
int with_read_timeout(int fd) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

int unix_connect(const std::string &unix_addr) {
    sockaddr_un sa;
    const int fd = unix_socket(unix_addr, &sa);
    CPPUNIT_ASSERT_EQUAL(0, ::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
    return with_read_timeout(fd);
}

// A raw connection to a tcp:// or unix:// node, or to a tls:// node's port without a handshake.
int raw_to(const std::string &addr) {
    if (addr.rfind("unix://", 0) == 0) return unix_connect(addr);
    if (addr.rfind("tls://", 0) == 0) return raw_connect("tcp://" + addr.substr(addr.find('@') + 1));
    return with_read_timeout(raw_connect(addr));
}

int unix_listen_raw(const std::string &unix_addr) {
    sockaddr_un sa;
    const int l = unix_socket(unix_addr, &sa);
    CPPUNIT_ASSERT_EQUAL(0, ::bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
    CPPUNIT_ASSERT_EQUAL(0, ::listen(l, 4));
    return l;
}

// Writes b with `fds` passed on its first byte.
void send_with_fds(int sock, const std::vector<uint8_t> &b, const std::vector<int> &fds) {
    iovec iov{const_cast<uint8_t *>(b.data()), b.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    std::vector<char> cbuf(CMSG_SPACE(sizeof(int) * fds.size()));
    if (!fds.empty()) {
        m.msg_control = cbuf.data();
        m.msg_controllen = cbuf.size();
        cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    CPPUNIT_ASSERT_EQUAL(ssize_t(b.size()), ::sendmsg(sock, &m, MSG_NOSIGNAL));
}

std::vector<uint8_t> control(const std::string &op, const std::string &name, uint64_t length, uint64_t offset = 0,
                             const std::string &message = "ok-count") {
    return strings_packet({op, name, "0", std::to_string(length), std::to_string(offset), message});
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// A packet of `bytes` float32 zeros, LZ4-compressed (some hundred times smaller).
std::vector<uint8_t> zeros_packet(uint64_t bytes, bool compress) {
    void *z = std::calloc(1, bytes);  // untouched: reading it maps the zero page
    uint64_t shape[1] = {bytes / 4};
    tenso_tensor t{};
    t.dtype = TENSO_DTYPE_FLOAT32;
    t.ndim = 1;
    t.shape = shape;
    t.data = z;
    t.nbytes = bytes;
    tenso_value *v = nullptr;
    TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
    tenso_encode_options eo;
    tenso_encode_options_init(&eo, TENSO_ENCODE_OPTIONS_VERSION);
    if (compress) eo.flags = TENSO_ENCODE_COMPRESS;
    tenso_buffer b{};
    TENSO_CHECK_OK(tenso_value_dumps(&b, v, &eo));
    std::vector<uint8_t> out(static_cast<const uint8_t *>(b.data), static_cast<const uint8_t *>(b.data) + b.size);
    tenso_buffer_dispose(&b);
    tenso_value_free(v);
    std::free(z);
    return out;
}

tenso_status send_packet(tenso_node *n, const std::string &addr, const std::string &name, const std::vector<uint8_t> &p,
                         uint64_t timeout_ms = 0, tenso_cancel *cancel = nullptr) {
    return tenso_node_send_packet(n, addr.c_str(), name.data(), name.size(), p.data(), p.size(), timeout_ms, cancel);
}

// The node's answer on a raw connection, or {} when it closed or said nothing within 5 s.
std::vector<std::string> reply_of(int fd) { return raw_reply(fd); }

// A TLS peer played by `openssl s_client`: what is written goes to the node as application
// data; read() gets what the node sends.
struct TlsRaw {
    pid_t pid = -1;
    int in = -1, out = -1;
    TlsRaw(const std::string &tls_addr, const std::string &cert, const std::string &key) {
        const std::string hp = tls_addr.substr(tls_addr.find('@') + 1);
        int to[2], from[2];
        CPPUNIT_ASSERT_EQUAL(0, ::pipe2(to, O_CLOEXEC));
        CPPUNIT_ASSERT_EQUAL(0, ::pipe2(from, O_CLOEXEC));
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, to[0], 0);
        posix_spawn_file_actions_adddup2(&fa, from[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        std::vector<std::string> args = {"openssl", "s_client", "-quiet", "-connect", hp, "-cert", cert, "-key", key};
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(&a[0]);
        argv.push_back(nullptr);
        CPPUNIT_ASSERT_EQUAL(0, posix_spawnp(&pid, "openssl", &fa, nullptr, argv.data(), environ));
        posix_spawn_file_actions_destroy(&fa);
        ::close(to[0]);
        ::close(from[1]);
        in = to[1];
        out = from[0];
    }
    ~TlsRaw() {
        ::close(in);
        ::close(out);
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    void write(const std::vector<uint8_t> &b) const { write_all_fd(in, b); }
    static void write_all_fd(int fd, const std::vector<uint8_t> &b) {
        size_t at = 0;
        while (at < b.size()) {
            const ssize_t r = ::write(fd, b.data() + at, b.size() - at);
            if (r <= 0) return;
            at += size_t(r);
        }
    }
    // The node's control frame, or {} when it closed or said nothing within 5 s.
    std::vector<std::string> reply() const {
        pollfd p{out, POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0) return {};
        return raw_reply(out);
    }
};

// A self-signed identity for raw TLS peers (openssl s_client).
struct Identity {
    std::string dir, cert, key;
    explicit Identity(const std::string &leaf) : dir(tmp_path(leaf)), cert(dir + "/id.pem"), key(dir + "/id.key") {
        const std::string cmd = "set -e; mkdir -p " + dir + "; cd " + dir +
                                "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout id.key "
                                "-out id.pem -days 2 -subj /CN=raw >/dev/null 2>&1";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
    }
};

// A TLS peer in this process, whose records the test sends by hand: after the handshake what
// SSL_write makes goes to a memory BIO and comes back as bytes, so a test can send records in one
// write with bytes no TLS peer would send (a forged record, close_notify).
struct TlsHand {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = nullptr;
    int fd = -1;
    BIO *out = nullptr;
    TlsHand(const std::string &tls_addr, const Identity &id) {
        CPPUNIT_ASSERT(ctx);
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
        CPPUNIT_ASSERT_EQUAL(1, SSL_CTX_use_certificate_file(ctx, id.cert.c_str(), SSL_FILETYPE_PEM));
        CPPUNIT_ASSERT_EQUAL(1, SSL_CTX_use_PrivateKey_file(ctx, id.key.c_str(), SSL_FILETYPE_PEM));
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);  // the node is not what is tested
        fd = raw_connect("tcp://" + tls_addr.substr(tls_addr.find('@') + 1));
        ssl = SSL_new(ctx);
        CPPUNIT_ASSERT(ssl && SSL_set_fd(ssl, fd) == 1);
        CPPUNIT_ASSERT_EQUAL_MESSAGE("handshake", 1, SSL_connect(ssl));
        out = BIO_new(BIO_s_mem());
        SSL_set0_wbio(ssl, out);  // owned by ssl; reads stay on the socket
    }
    ~TlsHand() {
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        ::close(fd);
    }
    std::vector<uint8_t> taken() const {
        char *p = nullptr;
        const long n = BIO_get_mem_data(out, &p);
        std::vector<uint8_t> b(p, p + n);
        (void)BIO_reset(out);
        return b;
    }
    std::vector<uint8_t> records(const std::vector<uint8_t> &plain) const {
        size_t n = 0;
        CPPUNIT_ASSERT_EQUAL(1, SSL_write_ex(ssl, plain.data(), plain.size(), &n));
        return taken();
    }
    std::vector<uint8_t> close_notify() const {
        SSL_shutdown(ssl);
        return taken();
    }
    // Pushes the node acknowledged (its `ok` frames, decrypted) until it closed.
    uint64_t acknowledged() const {
        std::vector<uint8_t> in;
        uint8_t buf[4096];
        size_t got = 0;
        while (SSL_read_ex(ssl, buf, sizeof buf, &got) == 1) in.insert(in.end(), buf, buf + got);
        ERR_clear_error();  // how it ended (an alert, a close) is not what is counted
        uint64_t acked = 0;
        for (size_t at = 0, len = 0; at < in.size(); at += len) {
            TENSO_CHECK_OK(tenso_packet_length(&len, in.data() + at, in.size() - at, nullptr));
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, in.data() + at, len, nullptr));
            ViewPtr hold(v);
            const std::vector<std::string> f = control_fields(v);
            CPPUNIT_ASSERT_EQUAL(std::string("ok"), f.at(0));
            acked += std::stoull(f.at(3));
        }
        return acked;
    }
};

// A peer played by a thread on listener l: joined (its accept or reads ended by shutting l and
// by the dialer going first) however the test ends.
struct FakePeer {
    int l;
    std::thread t;
    FakePeer(int listener, std::function<void(int)> serve)
        : l(listener), t([this, serve] {
              const int c = ::accept(l, nullptr, nullptr);
              if (c < 0) return;
              serve(c);
              ::close(c);
          }) {}
    ~FakePeer() {
        ::shutdown(l, SHUT_RDWR);
        t.join();
        ::close(l);
    }
};

// Reads until the dialer closes.
void drain_until_closed(int c) {
    uint8_t buf[4096];
    while (::read(c, buf, sizeof buf) > 0) {}
}

struct CancelFree {
    void operator()(tenso_cancel *c) const { tenso_cancel_free(c); }
};
using CancelPtr = std::unique_ptr<tenso_cancel, CancelFree>;

// A listener of each transport, with options `o` (its listen field replaced).
struct Listeners {
    std::vector<std::pair<std::string, NodePtr>> all;
    Listeners(const std::string &leaf, tenso_node_options o) {
        const std::string u = unix_listen(leaf);
        for (const char *l : {"tcp://127.0.0.1:0", "tls://127.0.0.1:0", u.c_str()}) {
            o.listen = l;
            o.flags |= TENSO_NODE_ALLOW_PLAINTEXT;
            NodePtr n = make_node(o);
            const std::string a = addr_of(n.get());
            all.emplace_back(a, std::move(n));
        }
    }
};

std::string transport(const std::string &addr) { return addr.substr(0, addr.find(':')); }

// A legitimate peer's send of a small value works within kRecoverMs.
void check_served(tenso_node *b, const std::string &addr, tenso_node *a = nullptr) {
    NodePtr own;
    if (!a) {
        own = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        a = own.get();
    }
    const Floats f(4, 4, 9.0f);
    const auto t0 = Clock::now();
    TENSO_CHECK_OK(send(a, addr, "legit", f, kRecoverMs));
    MsgPtr m = receive(b, kRecoverMs);
    CPPUNIT_ASSERT_EQUAL(std::string("legit"), name_of(m.get()));
    f.check(tenso_node_message_view(m.get()));
    CPPUNIT_ASSERT_MESSAGE(addr + ": served after " + std::to_string(ms_since(t0)) + " ms", ms_since(t0) < kRecoverMs);
}

}  // namespace

class CapiNetHostileTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiNetHostileTest);
    CPPUNIT_TEST(testShortDescriptorPushIsMalformed);
    CPPUNIT_TEST(testShortDescriptorAnswerIsMalformed);
    CPPUNIT_TEST(testInflationIsChargedAndBounded);
    CPPUNIT_TEST(testInflationDoesNotStallOthers);
    CPPUNIT_TEST(testUnauthenticatedCannotStarveDefaults);
    CPPUNIT_TEST(testPreAuthAndIdleDeadlines);
    CPPUNIT_TEST(testPassedDescriptorsBounded);
    CPPUNIT_TEST(testAcceptBacksOffWhenOutOfDescriptors);
    CPPUNIT_TEST(testAnnouncedLengthIsTheLimit);
    CPPUNIT_TEST(testForgedAcknowledgement);
    CPPUNIT_TEST(testShutdownWakesReceiveDescriptor);
    CPPUNIT_TEST(testStatisticsEveryTransport);
    CPPUNIT_TEST(testCancelledUnixSendIsNotDelivered);
    CPPUNIT_TEST(testPostDoesNotSpinOnUnaskedBytes);
    CPPUNIT_TEST(testShutdownDuringNameLookup);
    CPPUNIT_TEST(testIdlePostStreamsRetired);
    CPPUNIT_TEST(testTlsOverLimitGetsLimit);
    CPPUNIT_TEST(testTrickleIsCut);
    CPPUNIT_TEST(testBackpressureTimeoutSaysWhy);
    CPPUNIT_TEST(testEmptyPemTextRefused);
    CPPUNIT_TEST(testCompressedPointKeyHasOneFingerprint);
    CPPUNIT_TEST(testPinCheckedDuringHandshake);
    CPPUNIT_TEST(testEncryptedKeyRefused);
    CPPUNIT_TEST(testKeyTextNotKept);
    CPPUNIT_TEST(testAccessHook);
    CPPUNIT_TEST(testTlsRecordsBeforeTheirEndAreServed);
    CPPUNIT_TEST(testPartsWithinTheBudgetWholeOver);
    CPPUNIT_TEST_SUITE_END();

public:
    // Raw peers write to sockets and pipes the other end may have closed.
    void setUp() override { ::signal(SIGPIPE, SIG_IGN); }

    // Item 1: a push-fd announcing fewer bytes than the passed packet's header claims made
    // frame_length throw NeedMore through the event loop (std::terminate). Now MALFORMED, and
    // the node goes on.
    void testShortDescriptorPushIsMalformed() {
        const std::string u = unix_listen("hostile-shortfd");
        NodePtr b = make_node(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        const std::vector<uint8_t> p = zeros_packet(4096, false);
        const int mfd = memfd_create("short", MFD_CLOEXEC);
        CPPUNIT_ASSERT_EQUAL(ssize_t(p.size()), ::pwrite(mfd, p.data(), p.size(), 0));
        for (uint64_t announced : {uint64_t(100), uint64_t(9), uint64_t(p.size() + 64)}) {
            const int c = unix_connect(u);
            send_with_fds(c, control("push-fd", "x", announced), {mfd});
            const std::vector<std::string> r = reply_of(c);
            CPPUNIT_ASSERT_EQUAL(size_t(6), r.size());
            CPPUNIT_ASSERT_EQUAL(std::string("error"), r[0]);
            CPPUNIT_ASSERT_EQUAL(std::to_string(TENSO_E_MALFORMED), r[2]);  // shorter or longer than the packet
            ::close(c);
        }
        ::close(mfd);
        check_served(b.get(), u);
    }

    // Item 1, the dialer's side: a `value-fd` answer whose descriptor holds less than its
    // header claims is MALFORMED (was TENSO_E_INTERNAL "unknown internal error").
    void testShortDescriptorAnswerIsMalformed() {
        const std::string u = unix_listen("hostile-shortvalue");
        const std::vector<uint8_t> p = zeros_packet(4096, false);
        FakePeer fake(unix_listen_raw(u), [&](int c) {
            uint8_t buf[4096];
            if (::read(c, buf, sizeof buf) > 0) {
                const int mfd = memfd_create("short", MFD_CLOEXEC);
                (void)!::pwrite(mfd, p.data(), p.size(), 0);
                send_with_fds(c, strings_packet({"value-fd", "", "0", "100", "0", ""}), {mfd});
                ::close(mfd);
            }
            drain_until_closed(c);
        });
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_node_request(&v, a.get(), u.c_str(), "x", 1, 5000, nullptr));
        a.reset();
        ::unlink(u.c_str() + 7);
    }

    // Item 2: a queued push is charged what it holds decoded, not its wire bytes: LZ4 bodies
    // that inflate past max_queued_bytes are refused (LIMIT) before they are inflated; within
    // it, the queue holds at most its budget plus one push's inflation. Peak RSS stays within
    // kAttackRss (was 64 MiB per 250 KiB push), and a legitimate peer is served.
    void testInflationIsChargedAndBounded() {
        const uint64_t kBudget = 8 << 20;
        tenso_node_options o = opts_for(nullptr);
        o.max_queued_bytes = kBudget;
        Listeners ls("hostile-inflate", o);
        const std::vector<uint8_t> bomb = zeros_packet(64 << 20, true);  // ~250 KiB on the wire
        const std::vector<uint8_t> fits = zeros_packet(6 << 20, true);   // inflates within the budget
        CPPUNIT_ASSERT(bomb.size() < (1 << 20));
        for (auto &l : ls.all) {
            tenso_node *b = l.second.get();
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            reset_peak_rss();
            const uint64_t before = rss();
            for (int i = 0; i < 6; ++i)
                TENSO_CHECK_STATUS(TENSO_E_LIMIT, send_packet(a.get(), l.first, "bomb", bomb, 5000));
            // One within the budget, one past it (the one allowed overshoot), then backpressure.
            TENSO_CHECK_OK(send_packet(a.get(), l.first, "fits", fits, 5000));
            TENSO_CHECK_OK(send_packet(a.get(), l.first, "fits", fits, 5000));
            TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, send_packet(a.get(), l.first, "fits", fits, 300));
            const tenso_node_stats st = stats_of(b);
            CPPUNIT_ASSERT_EQUAL(2u, st.queued);
            CPPUNIT_ASSERT(st.queued_bytes >= 12u << 20 && st.queued_bytes <= 2 * kBudget);
            const uint64_t peak = peak_over(before);
            std::fprintf(stderr,
                         "  %s: 6 LZ4 bombs (64 MiB each) refused, 2 pushes held (%llu MiB): peak RSS +%llu MiB\n",
                         transport(l.first).c_str(), (unsigned long long)(st.queued_bytes >> 20),
                         (unsigned long long)(peak >> 20));
            CPPUNIT_ASSERT_MESSAGE(transport(l.first) + ": peak RSS grew by " + std::to_string(peak >> 20) + " MiB",
                                   peak <= kAttackRss + st.queued_bytes);
            for (int i = 0; i < 2; ++i) CPPUNIT_ASSERT_EQUAL(std::string("fits"), name_of(receive(b).get()));
            // The timed-out push reached the peer whole: it is queued once room is made.
            MsgPtr late = receive(b, 5000);
            CPPUNIT_ASSERT_EQUAL(std::string("fits"), name_of(late.get()));
            check_served(b, l.first, a.get());
        }
    }

    // Item 2: a push that inflates much is decoded off the event loop: another peer's push is
    // served while it decodes (the loop, one thread, used to stall for the whole inflation).
    void testInflationDoesNotStallOthers() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued_bytes = 512u << 20;
        NodePtr b = make_node(o);
        const std::string addr = addr_of(b.get());
        const std::vector<uint8_t> big = zeros_packet(256u << 20, true);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        NodePtr c = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        std::atomic<bool> a_done{false};
        std::thread big_push([&] {
            TENSO_CHECK_OK(send_packet(a.get(), addr, "big", big, 60000));
            a_done = true;
        });
        CPPUNIT_ASSERT(eventually([&] { return stats_of(b.get()).bytes_received >= big.size(); }, 10000));
        const bool started_while_pending = !a_done.load();
        const Floats f(2, 2, 1.0f);
        TENSO_CHECK_OK(send(c.get(), addr, "small", f, 60000));
        const bool small_first = !a_done.load();
        big_push.join();
        if (started_while_pending)
            CPPUNIT_ASSERT_MESSAGE("a small push waited for another connection's inflation", small_first);
        for (int i = 0; i < 2; ++i) receive(b.get());
    }

    // Item 3: 64 TCP connections that never start their TLS handshake (a client with no key)
    // used to fill the default max_connections and lock every legitimate, pinned peer out.
    // Now they share the pre-authentication slots (a quarter of max_connections; the oldest
    // goes when a newcomer needs one): the pinned peer is served at once, the node holds at
    // most those slots' sockets, and burns no CPU while they idle.
    void testUnauthenticatedCannotStarveDefaults() {
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const std::string pin = id_of(a.get());
        const char *pins[1] = {pin.c_str()};
        tenso_node_options o = opts_for(nullptr);
        o.pinned_keys = pins;
        o.pinned_key_count = 1;
        NodePtr b = make_node(o);
        const std::string addr = addr_of(b.get());
        // First, a burst of handshakes larger than the pre-auth slots, all trusted: none is
        // evicted by the others (newcomers wait in the backlog while the holders are recent).
        {
            const Floats f(2, 2, 3.0f);
            std::vector<std::thread> burst;
            std::atomic<int> ok{0};
            for (int i = 0; i < 32; ++i)
                burst.emplace_back([&] { ok += send(a.get(), addr, "burst", f, 20000) == TENSO_OK; });
            for (auto &t : burst) t.join();
            CPPUNIT_ASSERT_EQUAL(32, ok.load());
            for (int i = 0; i < 32; ++i) receive(b.get());
        }
        const int base = open_fds();
        const uint32_t pooled = stats_of(b.get()).inbound_connections;  // the burst's, kept by a's pool
        std::vector<int> idle;
        for (int i = 0; i < 64; ++i) idle.push_back(raw_to(addr));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        CPPUNIT_ASSERT(stats_of(b.get()).inbound_connections <= pooled + 16);
        const int held = open_fds() - base - 64;
        CPPUNIT_ASSERT_MESSAGE("the node holds " + std::to_string(held) + " descriptors for 64 idle peers",
                               held <= 16 + kFdSlack);
        const double cpu = cpu_rate_over(1000);
        std::fprintf(stderr, "  64 idle pre-auth peers: node holds %d descriptors, CPU %.3f (load %s)\n", held, cpu,
                     load_average().c_str());
        CPPUNIT_ASSERT_MESSAGE("CPU while idle under attack: " + std::to_string(cpu) + " (load " + load_average() + ")",
                               cpu < kIdleCpu);
        check_served(b.get(), addr, a.get());
        for (int fd : idle) ::close(fd);
    }

    // Item 3: deadlines. Unauthenticated connections (no TLS handshake; plaintext: no frame,
    // or half of one) are closed after min(io_timeout_ms, 10 s); an authenticated one with no
    // request after 2 * idle_timeout_ms. Their descriptors come back.
    void testPreAuthAndIdleDeadlines() {
        tenso_node_options o = opts_for(nullptr);
        o.io_timeout_ms = 300;
        o.idle_timeout_ms = 150;
        Listeners ls("hostile-deadline", o);
        for (auto &l : ls.all) {
            tenso_node *b = l.second.get();
            const int base = open_fds();
            std::vector<int> raw;
            for (int i = 0; i < 3; ++i) raw.push_back(raw_to(l.first));
            write_all(raw[0], {'T', 'N'});  // half a frame
            const auto t0 = Clock::now();
            CPPUNIT_ASSERT(eventually([&] { return stats_of(b).inbound_connections == 3; }, 2000));
            CPPUNIT_ASSERT_MESSAGE(transport(l.first) + ": unauthenticated connections not closed",
                                   eventually([&] { return stats_of(b).inbound_connections == 0; }, 3000));
            CPPUNIT_ASSERT(ms_since(t0) >= 250);
            for (int fd : raw) ::close(fd);
            CPPUNIT_ASSERT(eventually([&] { return open_fds() <= base; }, 2000));
            // Authenticated and idle: closed after 2 * idle_timeout_ms; the dialer's pool notices.
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            check_served(b, l.first, a.get());
            CPPUNIT_ASSERT(eventually([&] { return stats_of(b).inbound_connections == 0; }, 3000));
            check_served(b, l.first, a.get());
        }
    }

    // Item 4: descriptors passed with no frame to use them were parked, 16 per connection, for
    // ever: 64 connections held 1024 descriptors. Now at most 4 per connection and 64 per node
    // wait, and only while the frame they came with is incomplete (expiring with its
    // deadline); a peer passing more is refused (LIMIT) and closed.
    void testPassedDescriptorsBounded() {
        const std::string u = unix_listen("hostile-fds");
        tenso_node_options o = opts_for(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        o.io_timeout_ms = 400;
        NodePtr b = make_node(o);
        const int mfd = memfd_create("passed", MFD_CLOEXEC);
        const int base = open_fds();
        std::vector<int> conns;
        for (int i = 0; i < 40; ++i) {
            const int c = unix_connect(u);
            send_with_fds(c, {'T'}, std::vector<int>(i % 2 ? 8 : 4, mfd));
            conns.push_back(c);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const int held = open_fds() - base - 40;
        std::fprintf(stderr, "  40 Unix peers passing 4-8 descriptors each: node holds %d descriptors\n", held);
        CPPUNIT_ASSERT_MESSAGE("the node holds " + std::to_string(held) + " descriptors for 40 connections",
                               held <= 16 + 64 + kFdSlack);
        check_served(b.get(), u);
        CPPUNIT_ASSERT(eventually([&] { return open_fds() - base - 40 <= kFdSlack; }, 3000));
        for (int c : conns) ::close(c);
        // A descriptor with a whole frame that does not use it is out of step.
        const int c = unix_connect(u);
        send_with_fds(c, strings_packet({"get", "nothing", "0", "0", "0", ""}), {mfd});
        std::vector<std::string> r = reply_of(c);
        CPPUNIT_ASSERT(r.size() == 6 && r[0] == "error");
        ::close(c);
        ::close(mfd);
    }

    // Item 4: when accept fails with EMFILE the listener stays readable; re-arming at once spun a
    // core until a descriptor came free. Now it pauses (CPU within kIdleCpu) and accepts again
    // once descriptors are back.
    void testAcceptBacksOffWhenOutOfDescriptors() {
#ifdef NET_HOSTILE_UBSAN
        // UBSan's vptr check opens a pipe to probe memory on each new type it meets: with no
        // descriptor left it reports false errors. Runs in the plain and TSan builds.
        std::fprintf(stderr, "  testAcceptBacksOffWhenOutOfDescriptors: skipped under ASan+UBSan\n");
        return;
#endif
        NodePtr b = make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        const std::string addr = addr_of(b.get());
        check_served(b.get(), addr);              // its threads and paths started while descriptors are free
        const std::string load = load_average();  // (no descriptor to read it with later)
        rlimit old{};
        CPPUNIT_ASSERT_EQUAL(0, getrlimit(RLIMIT_NOFILE, &old));
        rlimit lim = old;
        lim.rlim_cur = rlim_t(open_fds()) + 32;
        CPPUNIT_ASSERT_EQUAL(0, setrlimit(RLIMIT_NOFILE, &lim));
        const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        std::vector<int> fill;
        for (int fd; (fd = ::dup(s)) >= 0;) fill.push_back(fd);
        const std::string hp = addr.substr(6);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(uint16_t(std::stoi(hp.substr(hp.rfind(':') + 1))));
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        CPPUNIT_ASSERT_EQUAL(0, ::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa));  // waits in the backlog
        const double cpu = cpu_rate_over(1000);
        std::fprintf(stderr, "  out of descriptors with a connection waiting: CPU %.3f (load %s)\n", cpu, load.c_str());
        for (int fd : fill) ::close(fd);
        setrlimit(RLIMIT_NOFILE, &old);
        CPPUNIT_ASSERT_MESSAGE("CPU while out of descriptors: " + std::to_string(cpu) + " (load " + load + ")",
                               cpu < kIdleCpu);
        CPPUNIT_ASSERT(eventually([&] { return stats_of(b.get()).inbound_connections >= 1; }, kRecoverMs));
        check_served(b.get(), addr);
        ::close(s);
    }

    // Item 5: the announced length is the value's limit. A push announcing 100 bytes whose
    // packet header claims 64 MiB is MALFORMED as soon as the header is read (it used to be
    // buffered up to the header's claim, max_packet_bytes, with max_queued_bytes at 1 MiB).
    void testAnnouncedLengthIsTheLimit() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued_bytes = 1 << 20;
        Listeners ls("hostile-announced", o);
        const Identity id("hostile-announced-id");
        std::vector<uint8_t> head = zeros_packet(16, false);
        head.resize(64);
        set64(head, 10, uint64_t(16) << 20);  // shape[0]: 16 Mi floats, 64 MiB
        const std::vector<uint8_t> attack =
            concat(concat(control("push", "x", 100), head), std::vector<uint8_t>(1 << 20));
        for (auto &l : ls.all) {
            reset_peak_rss();
            const uint64_t before = rss();
            std::vector<std::string> r;
            if (transport(l.first) == "tls") {
                TlsRaw t(l.first, id.cert, id.key);
                std::thread w([&] { t.write(attack); });
                r = t.reply();
                ::kill(t.pid, SIGKILL);  // the writer's next write fails (EPIPE)
                w.join();
            } else {
                const int c = raw_to(l.first);
                std::thread w([&] { write_all(c, attack); });
                r = reply_of(c);
                ::shutdown(c, SHUT_RDWR);
                w.join();
                ::close(c);
            }
            CPPUNIT_ASSERT_MESSAGE(transport(l.first) + ": no answer", r.size() == 6);
            CPPUNIT_ASSERT_EQUAL(std::string("error"), r[0]);
            CPPUNIT_ASSERT_EQUAL(std::to_string(TENSO_E_MALFORMED), r[2]);
            CPPUNIT_ASSERT(peak_over(before) < kAttackRss);
            check_served(l.second.get(), l.first);
        }
    }

    static void set64(std::vector<uint8_t> &b, size_t off, uint64_t v) {
        for (int i = 0; i < 8; ++i) b[off + i] = uint8_t(v >> (8 * i));
    }

    // Item 6: a listener answering a push with anything but `ok` (here `value`) made the send
    // return TENSO_OK and returned the out-of-step connection to the pool. Now MALFORMED, and
    // the connection is dropped.
    void testForgedAcknowledgement() {
        const std::string u = unix_listen("hostile-forged");
        std::string t;
        const int tl = raw_listen(&t);
        const int ul = unix_listen_raw(u);
        for (auto pr : {std::make_pair(t, tl), std::make_pair(u, ul)}) {
            FakePeer fake(pr.second, [](int c) {
                uint8_t buf[4096];
                if (::read(c, buf, sizeof buf) > 0) {
                    const std::vector<uint8_t> v = zeros_packet(16, false);
                    write_all(c, concat(strings_packet({"value", "", "0", std::to_string(v.size()), "0", ""}), v));
                }
                drain_until_closed(c);
            });
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            const Floats f(2, 2, 1.0f);
            TENSO_CHECK_STATUS(TENSO_E_MALFORMED, send(a.get(), pr.first, "x", f, 5000));
            CPPUNIT_ASSERT_EQUAL(0u, stats_of(a.get()).pool_size);
        }
        ::unlink(u.c_str() + 7);
    }

    // Item 10 (the engine's part): shutdown makes the receive descriptor readable, so a caller
    // waiting on it (asyncio's receive) wakes and gets TENSO_E_SHUTDOWN.
    void testShutdownWakesReceiveDescriptor() {
        NodePtr b = make_node();
        const int fd = tenso_node_receive_fd(b.get());
        std::thread stopper([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            tenso_node_shutdown(b.get());
        });
        pollfd p{fd, POLLIN, 0};
        const auto t0 = Clock::now();
        const int r = ::poll(&p, 1, 3000);
        stopper.join();
        CPPUNIT_ASSERT_MESSAGE("the receive descriptor did not wake", r == 1 && ms_since(t0) < 2000);
        tenso_node_message *m = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_SHUTDOWN, tenso_node_receive(&m, b.get(), 0, nullptr));
    }

    // Item 11: bytes_sent and bytes_received over every transport (a TLS node reported 0
    // received: the byte count was read before the read that set it ran).
    void testStatisticsEveryTransport() {
        const Floats f(64, 64, 2.0f);  // 16 KiB; published below: it outlives the nodes
        Listeners ls("hostile-stats", opts_for(nullptr));
        for (auto &l : ls.all) {
            tenso_node *b = l.second.get();
            NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            TENSO_CHECK_OK(send(a.get(), l.first, "s", f));
            receive(b);
            ValuePtr v = f.value();
            TENSO_CHECK_OK(tenso_node_publish(b, "p", 1, v.release(), nullptr, nullptr));
            tenso_view *got = nullptr;
            TENSO_CHECK_OK(tenso_node_request(&got, a.get(), l.first.c_str(), "p", 1, 0, nullptr));
            ViewPtr hold(got);
            // The server counts what it wrote once its write returns, maybe after the puller has it.
            eventually([&] { return stats_of(b).bytes_sent >= 16384; }, 2000);
            const tenso_node_stats sa = stats_of(a.get()), sb = stats_of(b);
            const std::string t = transport(l.first);
            CPPUNIT_ASSERT_MESSAGE(t + ": sender's bytes_sent " + std::to_string(sa.bytes_sent),
                                   sa.bytes_sent >= 16384);
            CPPUNIT_ASSERT_MESSAGE(t + ": receiver's bytes_received " + std::to_string(sb.bytes_received),
                                   sb.bytes_received >= 16384);
            CPPUNIT_ASSERT_MESSAGE(t + ": puller's bytes_received " + std::to_string(sa.bytes_received),
                                   sa.bytes_received >= 16384);
            CPPUNIT_ASSERT_MESSAGE(t + ": server's bytes_sent " + std::to_string(sb.bytes_sent),
                                   sb.bytes_sent >= 16384);
        }
    }

    // Item 12: a cancel that came while a large value was being copied into its memfd used to
    // be ignored over unix:// (the descriptor, handed over by the first write, carried it
    // whole). Now honoured before the hand-over: a send that returns TENSO_E_CANCELLED then
    // delivered nothing. The cancel is triggered as soon as the memfd exists.
    void testCancelledUnixSendIsNotDelivered() {
        const std::string u = unix_listen("hostile-cancel");
        NodePtr b = make_node(u.c_str(), TENSO_NODE_ALLOW_PLAINTEXT);
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats big(4096, 4096, 3.0f);  // 64 MiB
        int cancelled = 0;
        for (int i = 0; i < 4; ++i) {
            tenso_cancel *c = nullptr;
            TENSO_CHECK_OK(tenso_cancel_new(&c));
            CancelPtr hold(c);
            std::atomic<bool> done{false};
            std::thread trigger([&] {
                while (!done.load()) {
                    DIR *d = ::opendir("/proc/self/fd");
                    bool seen = false;
                    while (struct dirent *e = ::readdir(d)) {
                        char link[256] = "";
                        const std::string p = std::string("/proc/self/fd/") + e->d_name;
                        const ssize_t n = ::readlink(p.c_str(), link, sizeof link - 1);
                        if (n > 0 && std::strstr(link, "memfd:tenso-packet")) seen = true;
                    }
                    ::closedir(d);
                    if (seen) {
                        tenso_cancel_trigger(c);
                        return;
                    }
                }
            });
            ValuePtr v = big.value();
            const tenso_status st = tenso_node_send(a.get(), u.c_str(), "big", 3, v.get(), 20000, c);
            done = true;
            trigger.join();
            tenso_node_message *m = nullptr;
            const tenso_status got = tenso_node_receive(&m, b.get(), 300, nullptr);
            MsgPtr mh(m);
            if (st == TENSO_E_CANCELLED) {
                ++cancelled;
                CPPUNIT_ASSERT_MESSAGE("a cancelled send was delivered", got == TENSO_E_TIMEOUT);
            } else {
                TENSO_CHECK_OK(st);
                TENSO_CHECK_OK(got);
            }
        }
        CPPUNIT_ASSERT_MESSAGE("no send was cancelled in time (load " + load_average() + ")", cancelled > 0);
    }

    // Item 13: a post waiting for room on a full socket spun until its deadline when the peer
    // wrote bytes nobody asked for (they woke every wait, unread). Now they are read: MALFORMED.
    void testPostDoesNotSpinOnUnaskedBytes() {
        std::string addr;
        std::atomic<bool> done{false};
        FakePeer fake(raw_listen(&addr), [&](int c) {
            write_all(c, {'T', 'N'});
            // Never reads: the poster's socket fills (and its close waits behind the data).
            for (int i = 0; i < 200 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
        });
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats big(2048, 4096, 1.0f);  // 32 MiB
        ValuePtr v = big.value();
        const double c0 = cpu_seconds();
        const auto t0 = Clock::now();
        const tenso_status st = tenso_node_post(a.get(), addr.c_str(), "p", 1, v.get(), 3000, nullptr);
        const double cpu = cpu_seconds() - c0, wall = ms_since(t0);
        CPPUNIT_ASSERT_MESSAGE(std::string("post: ") + tenso_status_name(st), st == TENSO_E_MALFORMED);
        done = true;
        CPPUNIT_ASSERT_MESSAGE("post took " + std::to_string(wall) + " ms, " + std::to_string(cpu) + " s CPU",
                               wall < 2500 && cpu < 1.0);
    }

    // Item 13: a dial in getaddrinfo did not watch the stop descriptor, and shutdown waited for
    // the post that was dialling. Now both end promptly (the lookup here hangs for 5 s).
    void testShutdownDuringNameLookup() {
        g_lookup_released = false;
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const std::string addr = std::string("tcp://") + kSlowName + ":9";
        const Floats f(2, 2, 1.0f);
        std::atomic<tenso_status> post_st{TENSO_OK}, send_st{TENSO_OK};
        std::thread poster([&] {
            ValuePtr v = f.value();
            post_st = tenso_node_post(a.get(), addr.c_str(), "p", 1, v.get(), 60000, nullptr);
        });
        std::thread sender([&] { send_st = send(a.get(), addr, "s", f, 60000); });
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const auto t0 = Clock::now();
        tenso_node_shutdown(a.get());
        const double shut = ms_since(t0);
        poster.join();
        sender.join();
        const double calls = ms_since(t0);
        g_lookup_released = true;
        CPPUNIT_ASSERT_MESSAGE("shutdown took " + std::to_string(shut) + " ms", shut < 1000);
        CPPUNIT_ASSERT_MESSAGE("the calls ended " + std::to_string(calls) + " ms after shutdown", calls < 1000);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_SHUTDOWN, tenso_status(post_st));
        CPPUNIT_ASSERT_EQUAL(TENSO_E_SHUTDOWN, tenso_status(send_st));
    }

    // Item 13: the per-peer post streams kept an entry, and a busy connection, for every
    // address ever posted to. A stream idle for idle_timeout_ms with nothing owed now gives its
    // connection back (closed in turn by the pool) and leaves the node.
    void testIdlePostStreamsRetired() {
        tenso_node_options o = opts_for(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        o.idle_timeout_ms = 100;
        NodePtr a = make_node(o);
        std::vector<NodePtr> peers;
        const Floats f(2, 2, 1.0f);
        ValuePtr v = f.value();
        for (int i = 0; i < 3; ++i) {
            peers.push_back(make_node("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT));
            const std::string addr = addr_of(peers.back().get());
            TENSO_CHECK_OK(tenso_node_post(a.get(), addr.c_str(), "p", 1, v.get(), 0, nullptr));
        }
        CPPUNIT_ASSERT_EQUAL(3u, stats_of(a.get()).pool_size);
        CPPUNIT_ASSERT_MESSAGE("idle post streams keep their connections",
                               eventually([&] { return stats_of(a.get()).pool_size == 0; }, 3000));
        for (auto &p : peers) CPPUNIT_ASSERT_EQUAL(std::string("p"), name_of(receive(p.get()).get()));
        // Posting again works (a fresh stream).
        TENSO_CHECK_OK(tenso_node_post(a.get(), addr_of(peers[0].get()).c_str(), "q", 1, v.get(), 0, nullptr));
        TENSO_CHECK_OK(tenso_node_flush(a.get(), addr_of(peers[0].get()).c_str(), 0, nullptr));
    }

    // Item 13: a TLS listener over max_connections closed without a word; now the peer, once
    // trusted, is told TENSO_E_LIMIT.
    void testTlsOverLimitGetsLimit() {
        tenso_node_options o = opts_for(nullptr);
        o.max_connections = 1;
        NodePtr b = make_node(o);
        const std::string addr = addr_of(b.get());
        NodePtr h = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 4.0f);
        TENSO_CHECK_OK(send(h.get(), addr, "held", f));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, send(a.get(), addr, "over", f, 5000));
        TENSO_CHECK_OK(send(h.get(), addr, "again", f));
        CPPUNIT_ASSERT(stats_of(b.get()).refused >= 1);
    }

    // A TLS read takes every record OpenSSL has read ahead (socket.cpp, Sock::read): what ends
    // them in the same bytes (a forged record, close_notify) is the next read's answer. The pushes
    // before it are queued; before close_notify they are acknowledged, while a forged record
    // fails the connection at once (OpenSSL sends its alert: their `ok` is never written, as on
    // a connection cut before it) and is counted as refused. Nothing of it stays in the loop
    // thread's OpenSSL error queue, which every connection's SSL calls read: a legitimate peer
    // is served at once after it.
    void testTlsRecordsBeforeTheirEndAreServed() {
        NodePtr b = make_node("tls://127.0.0.1:0");
        const std::string addr = addr_of(b.get());
        const Identity id("hostile-tls-ends-id");
        const std::vector<uint8_t> p = zeros_packet(64, false);
        const std::vector<uint8_t> push = concat(control("push", "a", p.size()), p);
        std::vector<uint8_t> forged = {0x17, 0x03, 0x03, 0x00, 0x40};  // application data, 64 bytes
        forged.resize(5 + 64, 0x5a);                                   // that no key sealed
        for (const bool forge : {true, false}) {
            const uint64_t refused = stats_of(b.get()).refused;
            TlsHand t(addr, id);
            const std::vector<uint8_t> two = t.records(concat(push, push));
            write_all(t.fd, concat(two, forge ? forged : t.close_notify()));
            for (int i = 0; i < 2; ++i) {
                MsgPtr m = receive(b.get(), kRecoverMs);
                CPPUNIT_ASSERT_MESSAGE(forge ? "pushes before a forged record" : "pushes before close_notify", m);
                CPPUNIT_ASSERT_EQUAL(std::string("a"), name_of(m.get()));
            }
            CPPUNIT_ASSERT_EQUAL(uint64_t(forge ? 0 : 2), t.acknowledged());  // read until the node closed
            // Counted once the loop has failed the connection (OpenSSL sent its alert before).
            const uint64_t want = refused + (forge ? 1 : 0);
            CPPUNIT_ASSERT(eventually([&] { return stats_of(b.get()).refused == want; }, kRecoverMs));
            CPPUNIT_ASSERT_EQUAL(want, stats_of(b.get()).refused);
            check_served(b.get(), addr);
        }
    }

    // A pushed value whose parts each fit max_queued_bytes but whose whole (a 5 MiB body and
    // an LZ4 body inflating to 5 MiB, 8 MiB allowed) does not is LIMIT, and the node goes on
    // (the refusal read the size of what it had just dropped: a null dereference, SIGSEGV).
    void testPartsWithinTheBudgetWholeOver() {
        tenso_node_options o = opts_for(nullptr);
        o.max_queued_bytes = 8 << 20;
        Listeners ls("hostile-parts", o);
        const std::vector<uint8_t> raw = zeros_packet(5 << 20, false), lz = zeros_packet(5 << 20, true);
        tenso_value *bundle = nullptr, *a = nullptr, *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&bundle));
        ValuePtr hold(bundle);
        TENSO_CHECK_OK(tenso_value_new_packet(&a, raw.data(), raw.size()));
        ValuePtr hold_a(a);
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "a", 1, a));
        TENSO_CHECK_OK(tenso_value_new_packet(&b, lz.data(), lz.size()));
        ValuePtr hold_b(b);
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "b", 1, b));
        tenso_buffer buf{};
        TENSO_CHECK_OK(tenso_value_dumps(&buf, bundle, nullptr));
        const std::vector<uint8_t> p(static_cast<const uint8_t *>(buf.data),
                                     static_cast<const uint8_t *>(buf.data) + buf.size);
        tenso_buffer_dispose(&buf);
        for (auto &l : ls.all) {
            NodePtr s = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
            TENSO_CHECK_STATUS(TENSO_E_LIMIT, send_packet(s.get(), l.first, "parts", p, 5000));
            check_served(l.second.get(), l.first);
        }
    }

    // Item 13: a peer could announce a large push and trickle it in, holding its connection
    // (and the queue room reserved for it) for ever. A request must be done within
    // io_timeout_ms plus its bytes at 1 MiB/s.
    void testTrickleIsCut() {
        const Identity id("hostile-trickle-id");
        // The first KiB of a 64 KiB push: a valid packet, never finished.
        const std::vector<uint8_t> value = zeros_packet(65536 - 64, false);
        const std::vector<uint8_t> start = concat(control("push", "slow", value.size()), value);
        const std::vector<uint8_t> part(start.begin(), start.begin() + ptrdiff_t(start.size() - (value.size() - 1024)));
        const std::string u = unix_listen("hostile-trickle");
        for (const char *listen : {"tcp://127.0.0.1:0", "tls://127.0.0.1:0", u.c_str()}) {
            // TLS: long enough for openssl s_client's handshake (the pre-auth deadline is the same).
            const bool tls = std::string(listen).rfind("tls", 0) == 0;
            tenso_node_options o = opts_for(listen, TENSO_NODE_ALLOW_PLAINTEXT);
            o.io_timeout_ms = tls ? 3000 : 300;
            NodePtr b = make_node(o);
            const std::string addr = addr_of(b.get());
            std::unique_ptr<TlsRaw> t;
            int c = -1;
            if (tls) {
                t.reset(new TlsRaw(addr, id.cert, id.key));
                t->write(part);
            } else {
                c = raw_to(addr);
                write_all(c, part);
            }
            // The node has read the control frame and part of the value (so the peer is trusted).
            CPPUNIT_ASSERT(eventually([&] { return stats_of(b.get()).bytes_received >= part.size(); }, 10000));
            const auto t0 = Clock::now();
            CPPUNIT_ASSERT_MESSAGE(
                transport(addr) + ": a trickling push holds its connection",
                eventually([&] { return stats_of(b.get()).inbound_connections == 0; }, int(o.io_timeout_ms) + 3000));
            std::fprintf(stderr, "  %s: trickling push cut %.0f ms after it began (io_timeout_ms %llu)\n",
                         transport(addr).c_str(), ms_since(t0), (unsigned long long)o.io_timeout_ms);
            if (c >= 0) ::close(c);
            check_served(b.get(), addr);
        }
    }

    // Item 13: a push the peer holds un-acknowledged (its queue full) timed out saying only
    // "timed out"; the message now names the peer's full queue and the timeout.
    void testBackpressureTimeoutSaysWhy() {
        tenso_node_options o = opts_for("tcp://127.0.0.1:0", TENSO_NODE_ALLOW_PLAINTEXT);
        o.max_queued = 1;
        NodePtr b = make_node(o);
        const std::string addr = addr_of(b.get());
        NodePtr a = make_node(nullptr, TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 1.0f);
        TENSO_CHECK_OK(send(a.get(), addr, "1", f));
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, send(a.get(), addr, "2", f, 300));
        const std::string why = tenso_last_error();
        CPPUNIT_ASSERT_MESSAGE(why, why.find("receive queue is full") != std::string::npos &&
                                        why.find(addr) != std::string::npos && why.find("300 ms") != std::string::npos);
    }

    // Item 15: ca_pem given as empty text (an empty or unread CA file) silently turned peer
    // authentication off; now it is refused, as are empty cert_pem and key_pem.
    void testEmptyPemTextRefused() {
        for (int field = 0; field < 3; ++field) {
            tenso_node_options o = opts_for(nullptr);
            (field == 0 ? o.ca_pem : field == 1 ? o.cert_pem : o.key_pem) = "";
            tenso_node *n = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &o));
            CPPUNIT_ASSERT(n == nullptr);
        }
    }

    // Item 15: a node whose certificate carries its P-256 key compressed computed its id from
    // key_pem (uncompressed) while peers hashed the certificate's: its own ticket was refused.
    // Keys are hashed in one canonical form now; a certificate for another key is refused.
    void testCompressedPointKeyHasOneFingerprint() {
        const std::string dir = tmp_path("hostile-compressed");
        const std::string cmd = "set -e; mkdir -p " + dir + "; cd " + dir +
                                "; openssl ecparam -name prime256v1 -genkey -noout -out k.pem; "
                                "openssl ec -in k.pem -conv_form compressed -out kc.pem >/dev/null 2>&1; "
                                "openssl req -new -x509 -key kc.pem -out c.pem -days 2 -subj /CN=c >/dev/null 2>&1; "
                                "openssl ecparam -name prime256v1 -genkey -noout -out other.pem";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
        const std::string cert = read_text(dir + "/c.pem"), key = read_text(dir + "/k.pem");
        CPPUNIT_ASSERT(cert.size() > 100 && key.size() > 100);
        tenso_node_options o = opts_for(nullptr);
        o.cert_pem = cert.c_str();
        o.key_pem = key.c_str();
        NodePtr b = make_node(o);
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 1.0f);
        TENSO_CHECK_OK(send(a.get(), addr_of(b.get()), "x", f, 5000));
        CPPUNIT_ASSERT_EQUAL(std::string("x"), name_of(receive(b.get()).get()));
        const std::string other = read_text(dir + "/other.pem");
        o.key_pem = other.c_str();
        tenso_node *n = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &o));
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("key_pem") != std::string::npos);
    }

    // Item 15: the dialer checked the listener's key only after the handshake, so an impostor
    // at a ticket's address completed it (and saw the dialer's certificate). The pin is now
    // checked as the certificate arrives: the impostor's handshake fails (counted as refused).
    void testPinCheckedDuringHandshake() {
        NodePtr impostor = make_node();
        NodePtr real = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const std::string addr = addr_of(impostor.get());
        const std::string forged = "tls://" + id_of(real.get()) + addr.substr(addr.find('@'));
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        const Floats f(2, 2, 1.0f);
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(a.get(), forged, "x", f, 5000));
        CPPUNIT_ASSERT(eventually([&] { return stats_of(impostor.get()).refused >= 1; }, 3000));
        CPPUNIT_ASSERT_EQUAL(0u, stats_of(impostor.get()).queued);
    }

    // Item 15: an encrypted key_pem made OpenSSL ask the terminal for a passphrase (blocking for
    // ever); it is refused at once with a message that says what to do.
    void testEncryptedKeyRefused() {
        const std::string dir = tmp_path("hostile-encrypted");
        const std::string cmd = "set -e; mkdir -p " + dir + "; cd " + dir +
                                "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout k.pem "
                                "-passout pass:secret -out c.pem -days 2 -subj /CN=e >/dev/null 2>&1";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
        const std::string cert = read_text(dir + "/c.pem"), key = read_text(dir + "/k.pem");
        tenso_node_options o = opts_for(nullptr);
        o.cert_pem = cert.c_str();
        o.key_pem = key.c_str();
        tenso_node *n = nullptr;
        const auto t0 = Clock::now();
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_new(&n, &o));
        CPPUNIT_ASSERT(ms_since(t0) < 5000);
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("encrypted") != std::string::npos);
    }

    // Item 15: the node kept key_pem's text for its life (in three copies). Once it has started,
    // no copy of the key's base64 is left in the process's heap (searched as XOR-ed bytes, so
    // the needle itself does not match).
    void testKeyTextNotKept() {
        const std::string dir = tmp_path("hostile-keytext");
        const std::string cmd = "set -e; mkdir -p " + dir + "; cd " + dir +
                                "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout k.pem "
                                "-out c.pem -days 2 -subj /CN=k >/dev/null 2>&1";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
        const std::string cert = read_text(dir + "/c.pem");
        // The key read with read(2) into memory we wipe ourselves.
        const int kf = ::open((dir + "/k.pem").c_str(), O_RDONLY | O_CLOEXEC);
        std::vector<char> key(4096, 0);
        const ssize_t kn = ::read(kf, key.data(), key.size() - 1);
        ::close(kf);
        CPPUNIT_ASSERT(kn > 100);
        // The needle: 32 base64 characters from the key's second line, kept XOR-ed.
        const char *line = std::strchr(key.data(), '\n') + 1;
        std::vector<uint8_t> needle(line, line + 32);
        for (auto &c : needle) c ^= 0x5a;
        tenso_node_options o = opts_for(nullptr);
        o.cert_pem = cert.c_str();
        o.key_pem = key.data();
        NodePtr b = make_node(o);
        std::memset(key.data(), 0, key.size());
        CPPUNIT_ASSERT_MESSAGE("the key's text is still in memory", !memory_holds(needle));
    }

    // Whether a writable private mapping (heap, anonymous memory up to 256 MiB) holds the bytes
    // that XOR 0x5a with `x` gives. The plain needle exists only in a page of its own, which the
    // search skips.
    static bool memory_holds(const std::vector<uint8_t> &x) {
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        auto *needle =
            static_cast<uint8_t *>(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        CPPUNIT_ASSERT(needle != MAP_FAILED);
        for (size_t i = 0; i < x.size(); ++i) needle[i] = x[i] ^ 0x5a;
        std::ifstream maps("/proc/self/maps");
        const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        std::string ln;
        std::vector<uint8_t> buf;
        bool found = false;
        while (!found && std::getline(maps, ln)) {
            unsigned long lo, hi;
            char perms[5] = "";
            if (std::sscanf(ln.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
            const bool anon = ln.find('/') == std::string::npos || ln.find("[heap]") != std::string::npos;
            if (perms[0] != 'r' || perms[1] != 'w' || !anon || hi - lo > (256ul << 20)) continue;
            if (lo <= uintptr_t(needle) && uintptr_t(needle) < hi) continue;  // (its own mapping)
            buf.resize(hi - lo);
            const ssize_t n = ::pread(mem, buf.data(), buf.size(), off_t(lo));
            found = n > 0 && ::memmem(buf.data(), size_t(n), needle, x.size()) != nullptr;
        }
        std::fill(buf.begin(), buf.end(), 0);  // a copy of a match is not left behind either
        ::close(mem);
        munmap(needle, page);
        return found;
    }

    // Item 15: the application's access hook decides per peer and name; a refused get or
    // push is TENSO_E_AUTH and the connection stays usable.
    struct Hook {
        std::string allowed_peer;
        std::atomic<int> calls{0};
        static int decide(void *user, int op, const char *peer, const char *name, size_t name_len) {
            Hook *h = static_cast<Hook *>(user);
            ++h->calls;
            const std::string n(name, name_len);
            if (op == TENSO_NODE_ACCESS_GET) return n != "secret" || h->allowed_peer == peer;
            return n != "forbidden";
        }
    };
    void testAccessHook() {
        const Floats f(2, 2, 1.0f);  // published below, and the hook: they outlive the node
        Hook hook;
        NodePtr b = make_node();
        const std::string addr = addr_of(b.get());
        NodePtr a = make_node(nullptr, TENSO_NODE_NO_LISTEN), c = make_node(nullptr, TENSO_NODE_NO_LISTEN);
        hook.allowed_peer = id_of(c.get());
        TENSO_CHECK_OK(tenso_node_set_access(b.get(), &Hook::decide, &hook));
        ValuePtr v = f.value();
        TENSO_CHECK_OK(tenso_node_publish(b.get(), "secret", 6, v.release(), nullptr, nullptr));
        tenso_view *got = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_AUTH, tenso_node_request(&got, a.get(), addr.c_str(), "secret", 6, 5000, nullptr));
        TENSO_CHECK_OK(tenso_node_request(&got, c.get(), addr.c_str(), "secret", 6, 5000, nullptr));
        tenso_view_free(got);
        TENSO_CHECK_STATUS(TENSO_E_AUTH, send(a.get(), addr, "forbidden", f, 5000));
        TENSO_CHECK_OK(send(a.get(), addr, "fine", f, 5000));
        CPPUNIT_ASSERT_EQUAL(std::string("fine"), name_of(receive(b.get()).get()));
        CPPUNIT_ASSERT(hook.calls.load() >= 4);
        TENSO_CHECK_OK(tenso_node_set_access(b.get(), nullptr, nullptr));
        TENSO_CHECK_OK(send(a.get(), addr, "forbidden", f, 5000));
        CPPUNIT_ASSERT_EQUAL(std::string("forbidden"), name_of(receive(b.get()).get()));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiNetHostileTest);
