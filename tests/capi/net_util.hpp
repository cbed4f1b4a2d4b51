// net_util.hpp - what the node suites share (CapiNetTest, CapiNetHostileTest): RAII for
// nodes and their results, nodes made from options, a float tensor checked byte for byte, raw
// sockets playing a peer by hand, control frames, and a CA made with the openssl command line.
// Public tenso headers only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"
#include "tenso/tenso.h"

namespace nettest {

struct NodeFree {
    void operator()(tenso_node *n) const { tenso_node_free(n); }
};
using NodePtr = std::unique_ptr<tenso_node, NodeFree>;
struct MsgFree {
    void operator()(tenso_node_message *m) const { tenso_node_message_free(m); }
};
using MsgPtr = std::unique_ptr<tenso_node_message, MsgFree>;
struct ViewFree {
    void operator()(tenso_view *v) const { tenso_view_free(v); }
};
using ViewPtr = std::unique_ptr<tenso_view, ViewFree>;
struct ValueFree {
    void operator()(tenso_value *v) const { tenso_value_free(v); }
};
using ValuePtr = std::unique_ptr<tenso_value, ValueFree>;

inline tenso_node_options opts_for(const char *listen, uint32_t flags = 0) {
    tenso_node_options o;
    tenso_node_options_init(&o, TENSO_NODE_OPTIONS_VERSION);
    o.listen = listen;
    o.flags = flags;
    return o;
}

inline NodePtr make_node(const tenso_node_options &o) {
    tenso_node *n = nullptr;
    TENSO_CHECK_OK(tenso_node_new(&n, &o));
    return NodePtr(n);
}
inline NodePtr make_node(const char *listen = nullptr, uint32_t flags = 0) {
    return make_node(opts_for(listen, flags));
}

inline std::string addr_of(const tenso_node *n, uint32_t i = 0) {
    char buf[512];
    size_t len = 0;
    TENSO_CHECK_OK(tenso_node_addr(buf, sizeof buf, &len, n, i));
    return std::string(buf, len);
}

inline tenso_node_stats stats_of(const tenso_node *n) {
    tenso_node_stats s{};
    s.version = TENSO_NODE_STATS_VERSION;
    TENSO_CHECK_OK(tenso_node_stats_get(&s, n));
    return s;
}

// A float32 tensor whose element i is i * scale + seed (every byte checked on arrival).
struct Floats {
    std::vector<float> data;
    uint64_t shape[2];
    tenso_tensor t{};
    Floats(uint64_t rows, uint64_t cols, float seed) : data(rows * cols), shape{rows, cols} {
        for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 100003) * 0.5f + seed;
        t.dtype = TENSO_DTYPE_FLOAT32;
        t.ndim = 2;
        t.shape = shape;
        t.data = data.data();
        t.nbytes = data.size() * sizeof(float);
    }
    ValuePtr value() const {
        tenso_value *v = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
        return ValuePtr(v);
    }
    void check(const tenso_view *v) const {
        CPPUNIT_ASSERT(v != nullptr);
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, tenso_view_kind(v));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_FLOAT32, tenso_view_dtype(v));
        CPPUNIT_ASSERT_EQUAL(2u, tenso_view_ndim(v));
        CPPUNIT_ASSERT_EQUAL(shape[0], tenso_view_shape(v)[0]);
        CPPUNIT_ASSERT_EQUAL(shape[1], tenso_view_shape(v)[1]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(t.nbytes), tenso_view_nbytes(v));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), data.data(), t.nbytes) == 0);
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(tenso_view_data(v)) % 64);
    }
};

inline tenso_status send(tenso_node *n, const std::string &addr, const std::string &name, const Floats &f,
                         uint64_t timeout_ms = 0) {
    ValuePtr v = f.value();
    return tenso_node_send(n, addr.c_str(), name.data(), name.size(), v.get(), timeout_ms, nullptr);
}

inline MsgPtr receive(tenso_node *n, uint64_t timeout_ms = 20000) {
    tenso_node_message *m = nullptr;
    TENSO_CHECK_OK(tenso_node_receive(&m, n, timeout_ms, nullptr));
    return MsgPtr(m);
}

inline std::string name_of(const tenso_node_message *m) {
    size_t len = 0;
    const char *p = tenso_node_message_name(m, &len);
    return std::string(p, len);
}

inline std::string id_of(const tenso_node *n) {
    char buf[65];
    TENSO_CHECK_OK(tenso_node_id(buf, n));
    return buf;
}

inline std::string tmp_path(const std::string &leaf) {
    return std::string(TENSO_TEST_TMPDIR) + "/" + leaf + "." + std::to_string(getpid());
}
inline std::string unix_listen(const std::string &leaf) {
    const std::string p = "/tmp/tenso-net-" + leaf + "." + std::to_string(getpid()) + ".sock";
    ::unlink(p.c_str());
    return "unix://" + p;
}

inline std::string read_text(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A raw TCP connection to a plaintext node.
inline int raw_connect(const std::string &tcp_addr) {
    const std::string hp = tcp_addr.substr(6);
    const size_t colon = hp.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(std::stoi(hp.substr(colon + 1))));
    inet_pton(AF_INET, hp.substr(0, colon).c_str(), &sa.sin_addr);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CPPUNIT_ASSERT(fd >= 0);
    CPPUNIT_ASSERT_EQUAL(0, ::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
    timeval tv{20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

// A raw TCP listener on 127.0.0.1 (playing a peer by hand); *addr gets its tcp:// address.
inline int raw_listen(std::string *addr) {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CPPUNIT_ASSERT(l >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    CPPUNIT_ASSERT_EQUAL(0, ::bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
    CPPUNIT_ASSERT_EQUAL(0, ::listen(l, 4));
    CPPUNIT_ASSERT_EQUAL(0, ::getsockname(l, reinterpret_cast<sockaddr *>(&sa), &sl));
    *addr = "tcp://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    return l;
}

inline std::vector<uint8_t> strings_packet(const std::vector<std::string> &fields) {
    std::string payload;
    std::vector<uint64_t> offs{0};
    for (const auto &f : fields) {
        payload += f;
        offs.push_back(payload.size());
    }
    tenso_value *v = nullptr;
    TENSO_CHECK_OK(tenso_value_new_strings(&v, fields.size(), offs.data(), payload.data(), payload.size()));
    ValuePtr hold(v);
    tenso_buffer b{};
    TENSO_CHECK_OK(tenso_value_dumps(&b, v, nullptr));
    std::vector<uint8_t> out(static_cast<const uint8_t *>(b.data), static_cast<const uint8_t *>(b.data) + b.size);
    tenso_buffer_dispose(&b);
    return out;
}

// The strings of a control frame's view.
inline std::vector<std::string> control_fields(const tenso_view *v) {
    const uint64_t *offs;
    const char *payload;
    TENSO_CHECK_OK(tenso_view_string_offsets(&offs, &payload, v));
    std::vector<std::string> out;
    for (uint64_t i = 0; i < tenso_view_shape(v)[0]; ++i) out.emplace_back(payload + offs[i], offs[i + 1] - offs[i]);
    return out;
}

// The node's answer on a raw connection: the strings of its control frame (empty when it closed).
inline std::vector<std::string> raw_reply(int fd) {
    tenso_view *v = nullptr;
    if (tenso_read_fd(&v, fd, nullptr) != TENSO_OK) return {};
    ViewPtr hold(v);
    return control_fields(v);
}

inline void write_all(int fd, const std::vector<uint8_t> &b) {
    size_t at = 0;
    while (at < b.size()) {
        const ssize_t r = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
        if (r <= 0) return;
        at += size_t(r);
    }
}

// A CA and certificates signed by it, made with the openssl command line.
struct Pki {
    std::string dir;
    explicit Pki(const std::string &leaf) : dir(tmp_path(leaf)) {
        std::string cmd = "set -e; mkdir -p " + dir + "; cd " + dir +
                          "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
                          "-out ca.pem -days 2 -subj /CN=ca >/dev/null 2>&1";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
    }
    // name.pem / name.key signed by this CA.
    void issue(const std::string &name) {
        std::string cmd =
            "set -e; cd " + dir + "; openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name +
            ".key -out " + name + ".csr -subj /CN=" + name + " >/dev/null 2>&1; openssl x509 -req -in " + name +
            ".csr -CA ca.pem -CAkey ca.key "
            "-CAcreateserial -out " +
            name + ".pem -days 2 >/dev/null 2>&1";
        CPPUNIT_ASSERT_EQUAL(0, std::system(cmd.c_str()));
    }
    std::string cert(const std::string &n) const { return read_text(dir + "/" + n + ".pem"); }
    std::string key(const std::string &n) const { return read_text(dir + "/" + n + ".key"); }
    std::string ca() const { return read_text(dir + "/ca.pem"); }
};

}  // namespace nettest
