// fuzz_net.cpp - hostile bytes from peers, over raw Unix connections to a plaintext node (once
// per process), which must parse their control frames (impl/net/control.cpp), values and
// passed descriptors, and answer. Two input forms:
//   - bytes not starting with 0xFD: written as they are on one connection;
//   - 0xFD, then records [u8 ctl][u16 LE len][len bytes], written in order on up to four
//     connections at once (interleaved): ctl bits 0-1 pick the connection; bit 2 passes a
//     descriptor with the record's first byte, of the kind in bits 3-4 (0: a sealed memfd holding
//     a 4-float packet, 1: an unsealed memfd holding the record's bytes, 2: a pipe, 3: a
//     directory); bit 5 passes two more of that kind; bit 6 ends the connection's writes after
//     the record.
// Invariants, on every connection:
//   - every byte the node answers is a sequence of control frames: Tenso string packets of
//     six strings whose op is ok, value, value-fd or error, with a status 0 or a known
//     negative TENSO_E_* (an error's non-zero), each value frame followed by its packet;
//   - a frame the node refused ends its answers (the node closes after an error, but for the
//     size and not-found statuses that keep the connection in step);
//   - the node keeps serving: after every input a pull of a published name returns its bytes;
//   - it keeps no descriptor: once the connections are closed, the process holds as many as
//     before the input.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_common.hpp"

namespace {

tenso_node *g_node = nullptr;
std::string g_addr;
const float g_pub[4] = {1, 2, 3, 4};

void setup() {
    if (g_node) return;
    g_addr = "unix:///tmp/tenso-fuzz-net." + std::to_string(getpid()) + ".sock";
    ::unlink(g_addr.c_str() + 7);
    tenso_node_options o;
    tenso_node_options_init(&o, TENSO_NODE_OPTIONS_VERSION);
    o.listen = g_addr.c_str();
    o.flags = TENSO_NODE_ALLOW_PLAINTEXT;
    o.max_name_bytes = 64;
    o.max_packet_bytes = 1 << 20;
    o.io_timeout_ms = 10000;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_node_new(&g_node, &o));
    uint64_t shape[1] = {4};
    tenso_tensor t{g_pub, sizeof g_pub, shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_tensor(&v, &t));
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_node_publish(g_node, "p", 1, v, nullptr, nullptr));
}

int open_fds() {
    int n = 0;
    DIR *d = ::opendir("/proc/self/fd");
    while (struct dirent *e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    return n;
}

int connect_node() {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    FUZZ_CHECK(fd >= 0, "socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, g_addr.c_str() + 7);
    FUZZ_CHECK(::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0, "connect");
    return fd;
}

// A descriptor of the kind a record asks for (closed by the caller once passed).
int make_fd(int kind, const uint8_t *data, size_t size) {
    if (kind == 0 || kind == 1) {
        const int fd = memfd_create("fuzz-net", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        FUZZ_CHECK(fd >= 0, "memfd_create");
        if (kind == 0) {
            uint8_t packet[128];
            size_t n = 0;
            uint64_t shape[1] = {4};
            tenso_tensor t{g_pub, sizeof g_pub, shape, 1, TENSO_DTYPE_FLOAT32};
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_dumps_into(packet, sizeof packet, &n, &t, nullptr));
            FUZZ_CHECK(::pwrite(fd, packet, n, 0) == ssize_t(n), "pwrite");
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
        } else if (size) {
            FUZZ_CHECK(::pwrite(fd, data, size, 0) == ssize_t(size), "pwrite");
        }
        return fd;
    }
    if (kind == 2) {
        int p[2];
        FUZZ_CHECK(::pipe2(p, O_CLOEXEC) == 0, "pipe");
        ::close(p[1]);
        return p[0];
    }
    return ::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

struct Conn {
    int fd = -1;
    std::vector<uint8_t> out;            // bytes still to write
    std::vector<std::vector<int>> pass;  // descriptors to pass, with out's first byte
    std::vector<size_t> pass_at;         // ... at these offsets of what is written in all
    size_t written = 0;
    bool end = false, shut = false, eof = false;
    std::vector<uint8_t> reply;
};

// Writes what the connection takes now, passing descriptors with the bytes they go with.
void pump(Conn &c) {
    while (!c.out.empty()) {
        size_t n = c.out.size();
        if (!c.pass_at.empty() && c.pass_at.front() > c.written) n = std::min(n, c.pass_at.front() - c.written);
        iovec iov{c.out.data(), n};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))];
        const bool with = !c.pass_at.empty() && c.pass_at.front() == c.written;
        if (with) {
            const std::vector<int> &fds = c.pass.front();
            m.msg_control = cbuf;
            m.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
            cmsghdr *h = CMSG_FIRSTHDR(&m);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
            std::memcpy(CMSG_DATA(h), fds.data(), fds.size() * sizeof(int));
        }
        const ssize_t w = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN) c.out.clear();  // the node closed after refusing
            return;
        }
        if (with) {
            for (int f : c.pass.front()) ::close(f);
            c.pass.erase(c.pass.begin());
            c.pass_at.erase(c.pass_at.begin());
        }
        c.out.erase(c.out.begin(), c.out.begin() + w);
        c.written += size_t(w);
    }
    if (c.end && !c.shut) {
        ::shutdown(c.fd, SHUT_WR);
        c.shut = true;
    }
}

void drain(Conn &c) {
    uint8_t buf[65536];
    for (;;) {
        const ssize_t r = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0) {
            c.reply.insert(c.reply.end(), buf, buf + r);
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.eof = true;
        return;
    }
}

// Runs the input against the node; the bytes each connection got back.
std::vector<std::vector<uint8_t>> exchange(const uint8_t *data, size_t size) {
    std::vector<Conn> conns(size && data[0] == 0xFD ? 4 : 1);
    if (conns.size() == 1) {
        conns[0].out.assign(data, data + size);
    } else {
        size_t at = 1;
        while (at + 3 <= size) {
            const uint8_t ctl = data[at];
            size_t len = size_t(data[at + 1]) | size_t(data[at + 2]) << 8;
            at += 3;
            len = std::min(len, size - at);
            Conn &c = conns[ctl & 3];
            if (ctl & 4) {
                std::vector<int> fds;
                for (int i = 0; i < ((ctl & 32) ? 3 : 1); ++i) fds.push_back(make_fd((ctl >> 3) & 3, data + at, len));
                c.pass_at.push_back(c.out.size());
                c.pass.push_back(fds);
                if (len == 0) c.out.push_back(0);  // descriptors travel with a byte
            }
            c.out.insert(c.out.end(), data + at, data + at + len);
            if (ctl & 64) c.end = true;
            at += len;
        }
    }
    for (Conn &c : conns) c.fd = connect_node();
    // Write and read together: a node answering early must not dead-lock against us.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
        bool busy = false;
        for (Conn &c : conns) {
            pump(c);
            drain(c);
            if (c.out.empty() && !c.shut) {
                ::shutdown(c.fd, SHUT_WR);
                c.shut = true;
            }
            busy |= !c.eof;
        }
        if (!busy) break;
        FUZZ_CHECK(std::chrono::steady_clock::now() < until, "the node did not answer or close");
        std::vector<pollfd> p;
        for (Conn &c : conns)
            if (!c.eof) p.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
        ::poll(p.data(), p.size(), 100);
    }
    std::vector<std::vector<uint8_t>> replies;
    for (Conn &c : conns) {
        for (auto &fds : c.pass)
            for (int f : fds) ::close(f);
        ::close(c.fd);
        replies.push_back(std::move(c.reply));
    }
    return replies;
}

// The answers on one connection, checked (see the top).
void check_reply(const std::vector<uint8_t> &reply) {
    size_t at = 0;
    bool ended = false;
    while (at < reply.size()) {
        FUZZ_CHECK(!ended, "the node answered after refusing");
        tenso_view *v = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_loads(&v, reply.data() + at, reply.size() - at, nullptr));
        at += tenso_view_packet_size(v);
        const uint64_t *offs;
        const char *p;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&offs, &p, v));
        FUZZ_CHECK(tenso_view_shape(v)[0] == 6, "a control frame of %llu strings",
                   (unsigned long long)tenso_view_shape(v)[0]);
        const std::string op(p + offs[0], offs[1] - offs[0]), status(p + offs[2], offs[3] - offs[2]);
        const std::string length(p + offs[3], offs[4] - offs[3]);
        tenso_view_free(v);
        FUZZ_CHECK(op == "ok" || op == "value" || op == "value-fd" || op == "error", "op '%s'", op.c_str());
        const long st = std::stol(status);
        FUZZ_CHECK(st <= 0 && std::string(tenso_status_name(tenso_status(st))) != "TENSO_E_UNKNOWN", "status %ld", st);
        FUZZ_CHECK((op == "error") == (st != 0), "op %s with status %ld", op.c_str(), st);
        if (op == "value") {
            tenso_view *val = nullptr;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_loads(&val, reply.data() + at, reply.size() - at, nullptr));
            FUZZ_CHECK(tenso_view_packet_size(val) == std::stoull(length), "value length");
            at += tenso_view_packet_size(val);
            tenso_view_free(val);
        }
        // Refusals that keep the connection in step: sizes, names not published, the access hook's.
        if (op == "error" && st != TENSO_E_NOT_FOUND && st != TENSO_E_LIMIT) ended = true;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    const int fds_before = open_fds();
    for (const std::vector<uint8_t> &reply : exchange(data, size)) check_reply(reply);
    // Drain what the input pushed, and check the node still serves.
    for (;;) {
        tenso_node_message *m = nullptr;
        if (tenso_node_receive(&m, g_node, 0, nullptr) != TENSO_OK) break;
        tenso_node_message_free(m);
    }
    tenso_view *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_node_request(&v, g_node, g_addr.c_str(), "p", 1, 0, nullptr));
    FUZZ_CHECK(tenso_view_nbytes(v) == sizeof g_pub && std::memcmp(tenso_view_data(v), g_pub, sizeof g_pub) == 0,
               "pull");
    tenso_view_free(v);
    // The node closes a connection just after its last answer: give it a moment. Its pool keeps
    // one connection to itself (the pull above), the first time only.
    int held = open_fds() - fds_before;
    for (int i = 0; i < 200 && held > 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        held = open_fds() - fds_before;
    }
    FUZZ_CHECK(held <= 2, "the node holds %d more descriptors after the input", held);
    return 0;
}
