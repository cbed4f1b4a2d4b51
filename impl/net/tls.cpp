// tls.cpp - OpenSSL contexts for nodes (see tls.hpp).
#include "net/tls.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <memory>
#include <new>

#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "error.hpp"
#include "tenso/tenso.h"

namespace tenso::net {

namespace {

[[noreturn]] void auth_fail(const std::string &what) {
    const unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    fail(TENSO_E_AUTH, what + (e ? std::string(": ") + buf : std::string()));
}

struct BioFree {
    void operator()(BIO *b) const { BIO_free(b); }
};
struct X509Free {
    void operator()(X509 *x) const { X509_free(x); }
};
struct KeyFree {
    void operator()(EVP_PKEY *k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio mem(const std::string &s) {
    Bio b(BIO_new_mem_buf(s.data(), int(s.size())));
    if (!b) fail(TENSO_E_NO_MEMORY, "BIO_new_mem_buf");
    return b;
}

std::vector<Cert> read_certs(const std::string &pem, const char *what) {
    Bio b = mem(pem);
    std::vector<Cert> out;
    while (X509 *x = PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
    ERR_clear_error();  // the end of the PEM text
    if (out.empty()) fail(TENSO_E_AUTH, std::string(what) + ": no certificate in the PEM text");
    return out;
}

// An ephemeral P-256 key and a self-signed certificate for it (valid a year from yesterday).
void ephemeral(Key *key, Cert *cert) {
    key->reset(EVP_EC_gen("P-256"));
    if (!*key) auth_fail("cannot make a P-256 key");
    cert->reset(X509_new());
    X509 *x = cert->get();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -86400);
    X509_gmtime_adj(X509_getm_notAfter(x), 365L * 86400);
    X509_set_pubkey(x, key->get());
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char *>("tenso node"), -1, -1, 0);
    X509_set_issuer_name(x, n);
    if (!X509_sign(x, key->get(), EVP_sha256())) auth_fail("cannot sign the node certificate");
}

// Chain verification is judged after the handshake (check_peer), so the callback accepts every
// chain and the result is read with SSL_get_verify_result. A dialer that knows the key it wants
// (pin_peer) checks the leaf here, during the handshake: an impostor is refused before it sees
// our certificate (TLS 1.3 sends the client's only after the server's is verified).
int pin_index() {
    static const int i = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return i;
}
int verify(int, X509_STORE_CTX *ctx) {
    if (X509_STORE_CTX_get_error_depth(ctx) != 0) return 1;
    SSL *ssl = static_cast<SSL *>(X509_STORE_CTX_get_ex_data(ctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
    const auto *want = ssl ? static_cast<const std::string *>(SSL_get_ex_data(ssl, pin_index())) : nullptr;
    if (!want || want->empty()) return 1;
    X509 *leaf = X509_STORE_CTX_get_current_cert(ctx);
    try {
        if (leaf && key_fingerprint(X509_get0_pubkey(leaf)) == *want) return 1;
    } catch (...) {
        // an unencodable key: refused below
    }
    X509_STORE_CTX_set_error(ctx, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
}

// OpenSSL's default asks the terminal for a passphrase (and blocks there): never.
int no_passphrase(char *, int, int, void *) { return -1; }

SSL_CTX *make_ctx(bool server, EVP_PKEY *key, const std::vector<Cert> &chain, bool has_ca, const std::string &ca_pem) {
    SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!c) auth_fail("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
    // AES-128-GCM first: AES-NI makes it the cheapest suite per byte (both sides list it first,
    // so it is the one negotiated).
    if (SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1)
        auth_fail("SSL_CTX_set_ciphersuites");
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), verify);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(c, 0);
    // Fewer, larger reads: OpenSSL reads what the socket has (up to 64 KiB) into its buffer.
    SSL_CTX_set_read_ahead(c, 1);
    SSL_CTX_set_default_read_buffer_len(c, 64 * 1024);
    if (SSL_CTX_use_certificate(c, chain[0].get()) != 1 || SSL_CTX_use_PrivateKey(c, key) != 1 ||
        SSL_CTX_check_private_key(c) != 1) {
        SSL_CTX_free(c);
        auth_fail("the certificate does not go with the key");
    }
    for (size_t i = 1; i < chain.size(); ++i) {
        X509_up_ref(chain[i].get());
        SSL_CTX_add1_chain_cert(c, chain[i].get());
        X509_free(chain[i].get());
    }
    if (has_ca) {
        std::vector<Cert> cas;
        try {
            cas = read_certs(ca_pem, "ca_pem");
        } catch (...) {
            SSL_CTX_free(c);  // an unparsable CA must not leak the context built so far
            throw;
        }
        X509_STORE *st = SSL_CTX_get_cert_store(c);
        for (const Cert &ca : cas) X509_STORE_add_cert(st, ca.get());
    }
    return c;
}

// The socket BIO: send(MSG_NOSIGNAL) and recv, so that a peer gone away is EPIPE, never a
// SIGPIPE (OpenSSL's own socket BIO writes with write(2)), with no signal-mask calls per record.
//
// OpenSSL hands the BIO one record (at most 16 KiB) at a time. Sent one by one, a large write
// costs a send syscall per record, and one segment and a wake-up of the reader per record;
// so records that more of the same write follows (set_send_more) are gathered here and sent
// kSendBuf at a time. The last record of a write is sent with what is gathered (one sendmsg)
// and accepted only once all of that has gone, so no byte stays behind in the BIO when a
// write has finished.
constexpr size_t kSendBuf = 128 * 1024;
struct BioSock {
    int fd;
    bool more = false;               // the record being written is not the last of the write
    std::unique_ptr<uint8_t[]> buf;  // gathered records, [at, len) not sent yet
    size_t at = 0, len = 0;
};
BioSock *bio_sock(BIO *b) { return static_cast<BioSock *>(BIO_get_data(b)); }

// sendmsg of up to two pieces; -1 with errno as send's.
ssize_t send2(int fd, const void *p0, size_t n0, const void *p1, size_t n1) {
    iovec v[2] = {{const_cast<void *>(p0), n0}, {const_cast<void *>(p1), n1}};
    msghdr m{};
    m.msg_iov = n0 ? v : v + 1;
    m.msg_iovlen = n0 ? 2 : 1;
    ssize_t r;
    do r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r;
}

int bio_write(BIO *b, const char *p, int n) {
    BioSock *s = bio_sock(b);
    BIO_clear_retry_flags(b);
    if (n <= 0) return 0;
    const size_t len = size_t(n);
    if (s->more && !s->buf) s->buf.reset(new (std::nothrow) uint8_t[kSendBuf]);  // none: unbuffered
    if (s->more && s->buf) {
        if (s->len + len > kSendBuf && s->at < s->len) {
            const ssize_t r = send2(s->fd, nullptr, 0, s->buf.get() + s->at, s->len - s->at);
            if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            if (r > 0) s->at += size_t(r);
        }
        if (s->at == s->len) s->at = s->len = 0;
        if (s->len + len > kSendBuf) {  // the socket takes no more now
            BIO_set_retry_write(b);
            return -1;
        }
        std::memcpy(s->buf.get() + s->len, p, len);
        s->len += len;
        return n;
    }
    for (;;) {
        const size_t gathered = s->len - s->at;
        const ssize_t r = send2(s->fd, s->buf.get() + s->at, gathered, p, len);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
            return -1;
        }
        if (size_t(r) < gathered) {
            s->at += size_t(r);
            continue;  // the next sendmsg says whether the socket is full (EAGAIN)
        }
        s->at = s->len = 0;
        if (size_t(r) > gathered) return int(size_t(r) - gathered);
    }
}
int bio_read(BIO *b, char *p, int n) {
    const int fd = bio_sock(b)->fd;
    BIO_clear_retry_flags(b);
    ssize_t r;
    do r = ::recv(fd, p, size_t(n), 0);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
    return int(r);
}
long bio_ctrl(BIO *, int cmd, long, void *) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
int bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}
int bio_destroy(BIO *b) {
    delete bio_sock(b);
    BIO_set_data(b, nullptr);
    return 1;
}

BIO_METHOD *socket_method() {
    static BIO_METHOD *m = [] {
        BIO_METHOD *bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tenso socket");
        if (bm) {
            BIO_meth_set_write(bm, bio_write);
            BIO_meth_set_read(bm, bio_read);
            BIO_meth_set_ctrl(bm, bio_ctrl);
            BIO_meth_set_create(bm, bio_create);
            BIO_meth_set_destroy(bm, bio_destroy);
        }
        return bm;
    }();
    return m;
}

}  // namespace

bool kernel_tls_available() {
    static const bool available = [] {
        // A connected loopback pair: the ULP attaches only to an established connection.
        const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int a = -1;
        bool ok = false;
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t sl = sizeof sa;
        if (l >= 0 && c >= 0 && ::bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0 && ::listen(l, 1) == 0 &&
            ::getsockname(l, reinterpret_cast<sockaddr *>(&sa), &sl) == 0 &&
            ::connect(c, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0 &&
            (a = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC)) >= 0)
            ok = ::setsockopt(c, SOL_TCP, TCP_ULP, "tls", sizeof "tls") == 0;
        for (int fd : {a, c, l})
            if (fd >= 0) ::close(fd);
        return ok;
    }();
    return available;
}

namespace {
thread_local bool t_sigpipe_blocked = false;
}

void NoSigpipe::block_sigpipe_for_good() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    t_sigpipe_blocked = true;
}

NoSigpipe::NoSigpipe(bool on) : on_(on && !t_sigpipe_blocked) {
    if (!on_) return;
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    pending_before_ = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
}

NoSigpipe::~NoSigpipe() {
    if (!on_) return;
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    if (!pending_before_ && sigismember(&pending, SIGPIPE)) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

SSL *new_ssl(SSL_CTX *ctx, int fd, bool *kernel) {
    *kernel = kernel_tls_available();
    if (*kernel) {
        SSL *ssl = SSL_new(ctx);
        BIO *b = ssl ? BIO_new_socket(fd, BIO_NOCLOSE) : nullptr;
        if (!b) {
            SSL_free(ssl);
            fail(TENSO_E_NO_MEMORY, "SSL_new");
        }
        SSL_set_bio(ssl, b, b);
        SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
        // Records OpenSSL read ahead past the handshake would keep the kernel from taking the
        // receiving side.
        SSL_set_read_ahead(ssl, 0);
        return ssl;
    }
    BIO_METHOD *m = socket_method();
    if (!m) fail(TENSO_E_NO_MEMORY, "BIO_meth_new");
    std::unique_ptr<BioSock> st(new (std::nothrow) BioSock);
    if (st) st->fd = fd;
    SSL *ssl = st ? SSL_new(ctx) : nullptr;
    BIO *b = ssl ? BIO_new(m) : nullptr;
    if (!b) {
        SSL_free(ssl);
        fail(TENSO_E_NO_MEMORY, "SSL_new");
    }
    BIO_set_data(b, st.release());  // freed by bio_destroy
    SSL_set_bio(ssl, b, b);         // one reference, owned by the SSL
    return ssl;
}

void set_send_more(SSL *ssl, bool more) { bio_sock(SSL_get_wbio(ssl))->more = more; }

std::string key_fingerprint(EVP_PKEY *key) {
    // One key, one fingerprint: an EC point is hashed uncompressed however it was encoded (a
    // certificate may carry it compressed, its key file not).
    Key canon;
    if (EVP_PKEY_base_id(key) == EVP_PKEY_EC) {
        canon.reset(EVP_PKEY_dup(key));
        if (!canon || EVP_PKEY_set_utf8_string_param(canon.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                                     OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED) != 1)
            auth_fail("cannot encode the public key");
        key = canon.get();
    }
    unsigned char *der = nullptr;
    const int n = i2d_PUBKEY(key, &der);
    if (n <= 0) auth_fail("cannot encode the public key");
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(der, size_t(n), md);
    OPENSSL_free(der);
    static const char hex[] = "0123456789abcdef";
    std::string s;
    for (unsigned char b : md) {
        s += hex[b >> 4];
        s += hex[b & 15];
    }
    return s;
}

void pin_peer(SSL *ssl, const std::string *fingerprint) {
    SSL_set_ex_data(ssl, pin_index(), const_cast<std::string *>(fingerprint));
}

Tls::Tls(const std::string &cert_pem, const std::string &key_pem, const std::string &ca_pem, bool ca_set,
         std::vector<std::string> pinned)
    : has_ca_(ca_set), pinned_(std::move(pinned)) {
    // Text given but empty (an empty or unread file) is a mistake, never "not set": an empty
    // ca_pem would otherwise turn peer authentication off.
    if (ca_set && ca_pem.find("-----BEGIN") == std::string::npos)
        fail(TENSO_E_AUTH, "ca_pem holds no certificate (empty or truncated PEM text); pass NULL for no CA");
    Key key;
    std::vector<Cert> chain;
    if (cert_pem.empty() != key_pem.empty()) fail(TENSO_E_AUTH, "cert_pem and key_pem go together");
    if (cert_pem.empty()) {
        Cert c;
        ephemeral(&key, &c);
        chain.push_back(std::move(c));
    } else {
        chain = read_certs(cert_pem, "cert_pem");
        Bio b = mem(key_pem);
        key.reset(PEM_read_bio_PrivateKey(b.get(), nullptr, no_passphrase, nullptr));
        if (!key && (key_pem.find("ENCRYPTED") != std::string::npos)) {
            ERR_clear_error();
            fail(TENSO_E_AUTH,
                 "key_pem is encrypted (passphrase-protected): give the key decrypted, e.g. "
                 "`openssl pkey -in key.pem -out key-plain.pem`, and keep that file private");
        }
        if (!key) auth_fail("key_pem: no private key");
        // The node's id is the certificate's key, the one peers see: it must be key_pem's.
        if (EVP_PKEY_eq(X509_get0_pubkey(chain[0].get()), key.get()) != 1) {
            ERR_clear_error();
            fail(TENSO_E_AUTH, "cert_pem's key is not key_pem's (the certificate is for another key)");
        }
    }
    id_ = key_fingerprint(X509_get0_pubkey(chain[0].get()));
    try {
        server_ = make_ctx(true, key.get(), chain, ca_set, ca_pem);
        client_ = make_ctx(false, key.get(), chain, ca_set, ca_pem);
    } catch (...) {
        SSL_CTX_free(server_);
        throw;
    }
}

Tls::~Tls() {
    SSL_CTX_free(server_);
    SSL_CTX_free(client_);
}

std::string Tls::check_peer(SSL *ssl, const std::string &expect, bool server_side) const {
    X509 *peer = SSL_get0_peer_certificate(ssl);
    if (!peer) fail(TENSO_E_AUTH, "the peer showed no certificate");
    const std::string fp = key_fingerprint(X509_get0_pubkey(peer));
    if (!expect.empty() && fp != expect) fail(TENSO_E_AUTH, "the peer's key " + fp + " is not the one in its address");
    const bool chain_ok = has_ca_ && SSL_get_verify_result(ssl) == X509_V_OK;
    if (has_ca_ && !chain_ok && (!server_side || pinned_.empty()))
        fail(TENSO_E_AUTH, std::string("the peer's certificate does not chain to ca_pem: ") +
                               X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
    if (server_side && !chain_ok && !pinned_.empty() && std::find(pinned_.begin(), pinned_.end(), fp) == pinned_.end())
        fail(TENSO_E_AUTH, "the peer's key " + fp + " is not pinned");
    return fp;
}

}  // namespace tenso::net
