// fuzz_net.cpp - hostile bytes from a peer: the input is written as it is, over a raw Unix
// connection, to a plaintext node (once per process), which must parse its control frames
// (impl/net/control.cpp) and values and answer. Invariants:
//   - every byte the node answers is a sequence of control frames: Tenso string packets of
//     six strings whose op is ok, value, value-fd or error, with a status 0 or a known
//     negative TENSO_E_* (an error's non-zero), each value frame followed by its packet;
//   - a frame the node refused ends its answers (the node closes after an error, but for the
//     size and not-found statuses that keep the connection in step);
//   - the node keeps serving: after every input a pull of a published name returns its bytes.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
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

std::vector<uint8_t> exchange(const uint8_t *data, size_t size) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0, "socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, g_addr.c_str() + 7);
    FUZZ_CHECK(::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0, "connect");
    timeval tv{20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::vector<uint8_t> reply;
    uint8_t buf[65536];
    // Write and read together: a node answering early must not dead-lock against us.
    size_t at = 0;
    while (at < size) {
        const ssize_t w = ::send(fd, data + at, size - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            at += size_t(w);
            continue;
        }
        if (w < 0 && errno != EAGAIN) break;  // the node closed after refusing
        const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0) reply.insert(reply.end(), buf, buf + r);
        else usleep(100);
    }
    ::shutdown(fd, SHUT_WR);
    for (;;) {
        const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
        FUZZ_CHECK(r >= 0, "the node did not answer or close (errno %d)", errno);
        if (r == 0) break;
        reply.insert(reply.end(), buf, buf + r);
    }
    ::close(fd);
    return reply;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    const std::vector<uint8_t> reply = exchange(data, size);
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
        FUZZ_CHECK(op == "ok" || op == "value" || op == "error", "op '%s'", op.c_str());
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
        if (op == "error" && st != TENSO_E_NOT_FOUND && st != TENSO_E_LIMIT) ended = true;
    }
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
    return 0;
}
