// tls.hpp - the node's TLS 1.3 identity and contexts (OpenSSL): a given certificate and key or
// an ephemeral P-256 key with a self-signed certificate, peer verification by CA or pinned key
// fingerprints (SHA-256 of the DER SubjectPublicKeyInfo, 64 lower-case hex).
#pragma once

#include <string>
#include <vector>

#include <signal.h>

#include <openssl/ssl.h>

namespace tenso::net {

class Tls {
public:
    // Throws TENSO_E_AUTH for an unusable certificate, key (encrypted, or not the certificate's)
    // or CA (ca_set with no certificate in ca_pem).
    Tls(const std::string &cert_pem, const std::string &key_pem, const std::string &ca_pem, bool ca_set,
        std::vector<std::string> pinned);
    ~Tls();
    Tls(const Tls &) = delete;
    Tls &operator=(const Tls &) = delete;

    SSL_CTX *server() const { return server_; }
    SSL_CTX *client() const { return client_; }
    const std::string &id() const { return id_; }
    // After a handshake: the peer's fingerprint, or throws TENSO_E_AUTH when the peer is not
    // trusted. `expect` (a dialer's ticket) must match when not empty.
    std::string check_peer(SSL *ssl, const std::string &expect, bool server_side) const;

private:
    SSL_CTX *server_ = nullptr, *client_ = nullptr;
    std::string id_;
    bool has_ca_ = false;
    std::vector<std::string> pinned_;
};

// Whether this kernel takes TLS records (the `tls` TCP upper-layer protocol, kTLS): probed once
// per process, on a loopback connection of its own. False where the module is absent.
bool kernel_tls_available();

// An SSL for a non-blocking socket. Without kernel TLS it reads and writes through
// send(MSG_NOSIGNAL)/recv (the BIO below); with it, through OpenSSL's own socket BIO with
// SSL_OP_ENABLE_KTLS, so that OpenSSL hands the traffic keys to the kernel after the handshake
// (*kernel set). OpenSSL's socket BIO writes with write(2): calls into such an SSL run under
// NoSigpipe.
SSL *new_ssl(SSL_CTX *ctx, int fd, bool *kernel);

// Blocks SIGPIPE on this thread for its life (when `on`) and discards one raised meanwhile, so a
// peer gone away is EPIPE, never the signal. Free on the node's own threads, which block
// SIGPIPE for good (block_sigpipe_for_good).
class NoSigpipe {
public:
    explicit NoSigpipe(bool on);
    static void block_sigpipe_for_good();
    ~NoSigpipe();
    NoSigpipe(const NoSigpipe &) = delete;
    NoSigpipe &operator=(const NoSigpipe &) = delete;

private:
    bool on_, pending_before_ = false;
    sigset_t old_;
};

// Whether application data follows the record the next SSL_write_ex writes: the record is then
// gathered with the next ones and sent with them (one send per 128 KiB instead of one per 16 KiB
// record); the first record written without it sends everything gathered. Set it around a
// write only: other records (alerts, handshake) go out at once.
void set_send_more(SSL *ssl, bool more);

// The SHA-256 fingerprint of a key: of its DER SubjectPublicKeyInfo, an EC point uncompressed.
std::string key_fingerprint(EVP_PKEY *key);

// A dialer's SSL: the handshake fails unless the peer's key has this fingerprint (checked as the
// peer's certificate arrives, before ours is sent). The string must outlive the handshake.
void pin_peer(SSL *ssl, const std::string *fingerprint);

}  // namespace tenso::net
