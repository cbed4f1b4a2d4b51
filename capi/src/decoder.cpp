// decoder.cpp - the C ABI of the stream decoder (tenso.h, "Stream decoder"): argument checks
// and conversions; the state machine is tenso::Decoder (impl/format/decoder.*), the fd loop
// tenso::read_packet (impl/io).
#include <cstring>
#include <new>

#include "firewall.hpp"
#include "format/decoder.hpp"
#include "io/io.hpp"

struct tenso_decoder {
    tenso::Decoder d;
    explicit tenso_decoder(const tenso::DecoderConfig &cfg) : d(cfg) {}
};

using tenso::capi::release_view;
using tenso::capi::set_error;

namespace {

// Copies the caller's options once, as far as their version reaches, and checks them.
tenso::DecoderConfig config_from(const tenso_decoder_options *opts) {
    tenso::DecoderConfig cfg;
    if (!opts) return cfg;
    tenso_decoder_options o;
    std::memcpy(&o, opts, sizeof o);
    if (o.version != TENSO_DECODER_OPTIONS_VERSION)
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_decoder_options version " + std::to_string(o.version));
    if (o.flags & ~uint32_t(TENSO_DECODER_READ_AHEAD)) tenso::fail(TENSO_E_INVALID_ARGUMENT, "unknown decoder flags");
    if (bool(o.alloc) != bool(o.release))
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "alloc and release must be given together");
    cfg.limits = tenso::Limits::from(o.decode);
    cfg.read_ahead = o.flags & TENSO_DECODER_READ_AHEAD;
    cfg.alloc = o.alloc;
    cfg.release = o.release;
    cfg.alloc_user = o.alloc_user;
    return cfg;
}

}  // namespace

extern "C" {

tenso_status tenso_decoder_new(tenso_decoder **out, const tenso_decoder_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    *out = new tenso_decoder(config_from(opts));
    TENSO_API_END
}

void tenso_decoder_free(tenso_decoder *d) { delete d; }

void tenso_decoder_reset(tenso_decoder *d) {
    if (d) d->d.reset();
}

tenso_status tenso_decoder_feed(tenso_decoder *d, const void *src, size_t len, size_t *consumed_out,
                                tenso_view **out) {
    CHECK_ARG(consumed_out);
    *consumed_out = 0;
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(d);
    CHECK_ARG(src || !len);
    TENSO_API_BEGIN
    std::unique_ptr<tenso::View> v;
    *consumed_out = d->d.feed(static_cast<const uint8_t *>(src), len, &v);
    *out = release_view(std::move(v));
    TENSO_API_END
}

tenso_status tenso_decoder_buffer(tenso_decoder *d, void **dst_out, size_t *len_out) {
    CHECK_ARG(dst_out);
    *dst_out = nullptr;
    CHECK_ARG(len_out);
    *len_out = 0;
    CHECK_ARG(d);
    TENSO_API_BEGIN
    *dst_out = d->d.buffer(len_out);
    TENSO_API_END
}

tenso_status tenso_decoder_commit(tenso_decoder *d, size_t n, tenso_view **out) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(d);
    TENSO_API_BEGIN
    *out = release_view(d->d.commit(n));
    TENSO_API_END
}

size_t tenso_decoder_needed(const tenso_decoder *d) { return d ? d->d.needed() : 0; }

int tenso_decoder_idle(const tenso_decoder *d) { return d && d->d.idle() ? 1 : 0; }

tenso_status tenso_decoder_finish(tenso_decoder *d) {
    CHECK_ARG(d);
    TENSO_API_BEGIN
    d->d.finish();
    TENSO_API_END
}

tenso_status tenso_decoder_read_fd(tenso_view **out, tenso_decoder *d, int fd) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(d);
    TENSO_API_BEGIN
    *out = release_view(tenso::read_packet(d->d, fd));
    TENSO_API_END
}

}  // extern "C"
