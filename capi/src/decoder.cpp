// decoder.cpp - the C ABI of the stream decoder (tenso.h, "Stream decoder"): argument checks
// and conversions; the state machine is tenso::Decoder (impl/format/decoder.*), the fd loop
// tenso::read_packet (impl/io).
#include <cstring>
#include <new>

#include "convert.hpp"
#include "firewall.hpp"
#include "format/decoder.hpp"
#include "io/io.hpp"

struct tenso_decoder {
    tenso::Decoder d;
    explicit tenso_decoder(const tenso::DecoderConfig &cfg) : d(cfg) {}
};

using tenso::capi::release_view;
using tenso::capi::set_error;

extern "C" {

tenso_status tenso_decoder_new(tenso_decoder **out, const tenso_decoder_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    *out = new tenso_decoder(tenso::capi::decoder_config(opts));
    TENSO_API_END
}

void tenso_decoder_free(tenso_decoder *d) { delete d; }

void tenso_decoder_reset(tenso_decoder *d) {
    if (d) d->d.reset();
}

tenso_status tenso_decoder_feed(tenso_decoder *d, const void *src, size_t len, size_t *consumed_out, tenso_view **out) {
    CHECK_ARG(consumed_out);
    *consumed_out = 0;
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(d);
    CHECK_ARG(src || !len);
    TENSO_API_BEGIN
    std::unique_ptr<tenso::View> v;
    try {
        *consumed_out = d->d.feed(static_cast<const uint8_t *>(src), len, &v);
    } catch (...) {
        *consumed_out = d->d.fed();
        throw;
    }
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
