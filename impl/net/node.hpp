// node.hpp - tenso nodes (tenso_node_*): listeners, dialing, TLS 1.3, push with acknowledgement
// into a bounded queue, publish/request, a per-peer connection pool and the Unix descriptor fast
// path. The event loop is standalone Asio; inbound connections are served on it, outbound calls
// run on the caller's thread with non-blocking sockets and poll() (so timeouts, cancel tokens and
// shutdown all wake the same wait). Protocol: docs/net-protocol.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/codec.hpp"

namespace tenso::net {

// A cancel token: a flag and an eventfd that every wait polls.
class Cancel {
public:
    Cancel();
    ~Cancel();
    Cancel(const Cancel &) = delete;
    Cancel &operator=(const Cancel &) = delete;
    void trigger();
    bool triggered() const { return flag_.load(std::memory_order_acquire); }
    int fd() const { return fd_; }

private:
    std::atomic<bool> flag_{false};
    int fd_ = -1;
};

struct NodeOptions {
    bool plaintext = false, no_fd_passing = false, no_listen = false, no_busy_poll = false;
    std::string listen = "tls://127.0.0.1:0";
    std::string cert_pem, key_pem, ca_pem;
    bool ca_set = false;                   // ca_pem was given (empty text is then an error, not "no CA")
    std::vector<std::string> pinned_keys;  // lower-case hex
    uint32_t threads = 1;
    uint64_t max_packet_bytes = uint64_t(16) << 30;
    uint32_t max_name_bytes = 4096;
    uint32_t max_queued = 1024;
    uint64_t max_queued_bytes = uint64_t(1) << 30;
    uint32_t max_connections = 64;
    uint32_t max_pool_per_peer = 4;
    uint64_t idle_timeout_ms = 300000;
    uint64_t io_timeout_ms = 60000;
    uint64_t fd_passing_min_bytes = uint64_t(1) << 20;
};

struct NodeStats {
    uint32_t pool_size = 0, inbound_connections = 0, queued = 0;
    uint64_t queued_bytes = 0, bytes_sent = 0, bytes_received = 0;
    uint64_t connections_opened = 0, connections_reused = 0, refused = 0;
    uint64_t tls_kernel = 0, tls_user = 0;
    uint64_t busy_polls = 0, busy_poll_hits = 0;
};

struct Message {
    std::string name;
    std::shared_ptr<const std::string> sender;  // never null; one per connection, not per push
    std::unique_ptr<View> view;
    uint64_t bytes = 0;      // bytes it holds (packet and inflated bodies), charged to the queue
    bool overshoot = false;  // its inflation was let past max_queued_bytes (one push at a time)
};

// The application's access hook (tenso_node_set_access): op is kAccessGet or kAccessPush, peer
// the sender name (key fingerprint over TLS); nonzero allows.
using AccessFn = int (*)(void *user, int op, const char *peer, const char *name, size_t name_len);
inline constexpr int kAccessGet = 1, kAccessPush = 2;

// What a caller hands to send: an encoded plan of a value, a packet in memory, or a descriptor.
struct Payload {
    std::shared_ptr<const Value> value;  // encoded on send
    const uint8_t *packet = nullptr;     // or these bytes
    size_t len = 0;
    int fd = -1;  // or this descriptor's [offset, offset + len)
    uint64_t offset = 0;
};

// Overwrites a secret's bytes (a private key's PEM text) and empties it.
void wipe(std::string &secret);

class Node {
public:
    explicit Node(const NodeOptions &opts);  // binds and starts the loop; throws Error
    ~Node();
    Node(const Node &) = delete;
    Node &operator=(const Node &) = delete;

    void shutdown();
    // The index-th dialable address; false past the last.
    bool addr(uint32_t index, std::string *out) const;
    std::string id() const;

    // timeout_ms as in net.h (0 = io_timeout_ms, UINT64_MAX = none).
    void send(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms, Cancel *cancel);
    // A pipelined push: returns once the packet is written to the peer's connection (the
    // payload's memory is no longer used), without waiting for the acknowledgement.
    void post(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms, Cancel *cancel);
    // Waits for every post to addr to be acknowledged; throws the first failure among them.
    void flush(const std::string &addr, uint64_t timeout_ms, Cancel *cancel);
    std::unique_ptr<View> request(const std::string &addr, const std::string &name, uint64_t timeout_ms,
                                  Cancel *cancel);
    // timeout_ms 0 = do not wait.
    std::unique_ptr<Message> receive(uint64_t timeout_ms, Cancel *cancel);
    int receive_fd() const;

    // Takes v (moves it out) only on success; on any failure v is left with the caller.
    void publish(const std::string &name, std::unique_ptr<Value> &v, void (*release)(void *), void *user);
    bool unpublish(const std::string &name);
    // Replaces the access hook (fn null: everything allowed); returns once no call of the old
    // one is running.
    void set_access(AccessFn fn, void *user);

    NodeStats stats() const;

    struct Impl;
    // The engine, for the completion queues (impl/net/completion.hpp), which share it.
    const std::shared_ptr<Impl> &impl() const { return impl_; }

private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace tenso::net
