// tls.hpp - the node's TLS 1.3 identity and contexts (OpenSSL): a given certificate and key or
// an ephemeral P-256 key with a self-signed certificate, peer verification by CA or pinned key
// fingerprints (SHA-256 of the DER SubjectPublicKeyInfo, 64 lower-case hex).
#pragma once

#include <string>
#include <vector>

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

// An SSL for a non-blocking socket, reading and writing through send(MSG_NOSIGNAL)/recv.
SSL *new_ssl(SSL_CTX *ctx, int fd);

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
